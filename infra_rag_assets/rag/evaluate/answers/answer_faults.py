"""Deliberate answer damage for gate fire drills: an eval run with ``answer_fault`` set scores
a broken answerer, and the critical answer gates must refuse its release (tested).

* ``unsupported-sentence``: a fluent sentence the passages do not say, cited as passage 1,
  appended to every answer (citations alone cannot catch it; the judge must).
* ``no-citations``: the same answer with its ``[n]`` markers and citations dropped.

And the opposite drill, ``reference-answers``: every question the benchmark has a reference
answer for is answered with that human-written (often reworded) answer, citing every
packed passage of its page (``reference_answer``); a judge that only recognises quotes fails
it. Questions whose page is not in the context keep the serving answer.
"""

from __future__ import annotations

import dataclasses
import re

from ...answer.records import Answer, Citation

REFERENCE = "reference-answers"
FAULTS = ("", "unsupported-sentence", "no-citations", REFERENCE)
UNSUPPORTED = (
    "This behaviour was removed in release 1.12 and is now handled by the cluster-wide "
    "fabricator controller, which retries every failed step 17 times. [1]"
)
_MARKER = re.compile(r"\s*\[\d+\]")


def damage(answer: Answer, fault: str) -> Answer:
    """``answer`` with ``fault`` applied (unchanged for '' and for answers that abstained)."""
    if fault not in FAULTS:
        raise ValueError(f"unknown answer fault {fault!r}; one of {', '.join(repr(f) for f in FAULTS)}")
    if not fault or fault == REFERENCE or answer.outcome != "answered":
        return answer
    if fault == "no-citations":
        return dataclasses.replace(answer, text=_MARKER.sub("", answer.text), citations=[])
    return dataclasses.replace(answer, text=f"{answer.text} {UNSUPPORTED}")


def reference_answer(answer: Answer, reference: str, relevant, hits) -> Answer:
    """``answer`` replaced by ``reference`` citing every one of ``hits`` from a ``relevant`` page
    (the page as the context holds it: a human answer draws on the page, not on one chunk of it);
    unchanged when there is no reference or no such hit."""
    pages = set(relevant)
    numbers = [n for n, h in enumerate(hits, 1) if h.doc_id in pages]
    if not reference.strip() or not numbers:
        return answer
    cited = [
        Citation(n, h.chunk_id, h.doc_id, h.url, h.text, 0, len(h.text), h.start_char, h.start_char + len(h.text))
        for n, h in ((n, hits[n - 1]) for n in numbers)
    ]
    text = f"{' '.join(reference.split())} {''.join(f'[{n}]' for n in numbers)}"
    return dataclasses.replace(answer, text=text, citations=cited, outcome="answered", error="")
