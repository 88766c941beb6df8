"""Deliberate answer damage for gate fire drills: an eval run with ``answer_fault`` set scores
a broken answerer, and the critical answer gates must refuse its release (tested).

* ``unsupported-sentence``: a fluent sentence the passages do not say, cited as passage 1,
  appended to every answer (citations alone cannot catch it; the judge must).
* ``no-citations``: the same answer with its ``[n]`` markers and citations dropped.
"""

from __future__ import annotations

import dataclasses
import re

from ...answer.records import Answer

FAULTS = ("", "unsupported-sentence", "no-citations")
UNSUPPORTED = (
    "This behaviour was removed in release 1.12 and is now handled by the cluster-wide "
    "fabricator controller, which retries every failed step 17 times. [1]"
)
_MARKER = re.compile(r"\s*\[\d+\]")


def damage(answer: Answer, fault: str) -> Answer:
    """``answer`` with ``fault`` applied (unchanged for '' and for answers that abstained)."""
    if fault not in FAULTS:
        raise ValueError(f"unknown answer fault {fault!r}; one of {', '.join(repr(f) for f in FAULTS)}")
    if not fault or answer.outcome != "answered":
        return answer
    if fault == "no-citations":
        return dataclasses.replace(answer, text=_MARKER.sub("", answer.text), citations=[])
    return dataclasses.replace(answer, text=f"{answer.text} {UNSUPPORTED}")
