"""Token overlap of an answer with a reference answer: SQuAD-style F1 and recall.

Normalisation as the k8s-docs-rag-bench paper reports it: lower case, punctuation and articles
removed; the extractive prefix and the ``[n]`` markers are not part of the answer. It lives
beside the answer code because the prefix is the answer's, and both answer evaluation and the
judge's label calibration score with it.
"""

from __future__ import annotations

import re
import string
from collections import Counter

from .extractive import EXTRACTIVE_PREFIX

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_MARKER = re.compile(r"\[\d+\]")
_PUNCT = str.maketrans("", "", string.punctuation)


def answer_tokens(text: str) -> list[str]:
    body = text[len(EXTRACTIVE_PREFIX) :] if text.startswith(EXTRACTIVE_PREFIX) else text
    body = _MARKER.sub(" ", body).lower().translate(_PUNCT)
    return _ARTICLES.sub(" ", body).split()


def token_f1_recall(answer: str, reference: str) -> tuple[float, float] | None:
    """(F1, recall) of answer tokens against the reference's; None without a reference."""
    ref = Counter(answer_tokens(reference))
    if not ref:
        return None
    got = Counter(answer_tokens(answer))
    shared = sum((got & ref).values())
    if not shared:
        return 0.0, 0.0
    precision, recall = shared / sum(got.values()), shared / sum(ref.values())
    return 2 * precision * recall / (precision + recall), recall
