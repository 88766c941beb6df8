"""The support judge's labelled pairs: corpus sentences and their edits, answer-shaped
product pairs, public labelled answers."""
