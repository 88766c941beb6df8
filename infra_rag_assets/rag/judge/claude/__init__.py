"""The Claude judge backend: prompt, reply parsing, the judge, its calibration on the hand labels."""
