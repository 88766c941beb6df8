"""Public labelled answers (``../shared/judge-data``) as support pairs, split by source.

Three files of real LLM answers with human labels (README beside them): RAGTruth train (QA and
summaries, word-level spans of unsupported text), AttributionBench dev claims, HaluEval QA.
Each row becomes pairs the judge trains or is measured on:

* RAGTruth: one pair per answer sentence, labelled unsupported when a human span overlaps it
  (the product judges answers sentence by sentence), with the span offsets inside the
  sentence kept for the token loss; the whole-answer label stays with the row for
  response-level numbers (a response is as supported as its weakest sentence).
* AttributionBench: the claim against the union of its evidence passages.
* HaluEval: right answers are short spans, hallucinated ones mostly full sentences, so length
  alone separates them. Only questions whose hallucinated answer is short too (at most
  ``HALUEVAL_MAX_WORDS`` words) are kept, both answers, capped: no length shortcut left.

Every pair's ``doc_id`` is its source (a RAGTruth source id, a question), and ``split_of``
puts a source in train, dev or report by a hash: no source is in two splits.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ...answer.extractive import sentence_spans
from .claim_edits import coverage
from .judge_pairs import SUPPORT, JudgePair, split_for_calibration

FILES = ("ragtruth_train.jsonl", "attributionbench_dev.jsonl", "halueval_qa.jsonl")
SPLIT_SHARES = (("dev", 0.2), ("report", 0.2))  # the rest is train
SPLIT_SALT = "judge-split-1"
HALUEVAL_MAX_WORDS = 8
HALUEVAL_CAP = 300  # questions; both answers of each
EVIDENCE_CHARS = 1800  # the passages' union, cut to its sentences most like the claim
_RAGTRUTH_ID = re.compile(r"^ragtruth-(\w+)-(\d+)-")


def split_of(source: str) -> str:
    """'train', 'dev' or 'report' for a source, by a salted hash (stable across runs)."""
    x = int(hashlib.sha256(f"{SPLIT_SALT}:{source}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    for name, share in SPLIT_SHARES:
        if x < share:
            return name
        x -= share
    return "train"


def source_of(row: Mapping) -> str:
    """The unit a split keeps whole: RAGTruth's source (all six models' answers to it), else
    the question (AttributionBench has several claims per question; HaluEval two answers)."""
    if m := _RAGTRUTH_ID.match(row["id"]):
        return f"ragtruth:{m[1]}:{m[2]}"
    return f"{row['id'].split('-', 1)[0]}:{' '.join(str(row['question']).lower().split())}"


def dataset_of(row: Mapping) -> str:
    if m := _RAGTRUTH_ID.match(row["id"]):
        return f"ragtruth_{m[1]}"
    return row["id"].split("-", 1)[0]


def load_rows(folder: str | Path) -> list[dict]:
    """Rows of the files present in ``folder`` (a missing file contributes nothing)."""
    out = []
    for name in FILES:
        path = Path(folder) / name
        if path.is_file():
            out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out


def data_hash(folder: str | Path | None) -> str:
    """sha256 over the files' bytes (the judge's content address includes it); '' without data."""
    if not folder:
        return ""
    digest = hashlib.sha256()
    found = False
    for name in FILES:
        path = Path(folder) / name
        if path.is_file():
            found = True
            digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16] if found else ""


def evidence(claim: str, passages: Sequence[str], limit: int = EVIDENCE_CHARS) -> str:
    """The union of ``passages`` (blank-line separated); when longer than ``limit``, only the
    sentences that share most terms with the claim, in their original order, so the part that
    supports a claim is not cut off by truncation at the end."""
    texts = [" ".join(p.split()) for p in passages if p and p.strip()]
    joined = "\n\n".join(texts)
    if len(joined) <= limit:
        return joined
    units = [(i, t[s:e]) for i, t in enumerate(texts) for s, e in (sentence_spans(t) or [(0, len(t))])]
    ranked = sorted(range(len(units)), key=lambda k: (-coverage(claim, units[k][1]), k))
    keep: set[int] = set()
    used = 0
    for k in ranked:
        size = min(len(units[k][1]), limit) + 1
        if used + size > limit and keep:
            continue
        keep.add(k)
        used += size
    parts: list[list[str]] = [[] for _ in texts]
    for k in sorted(keep):
        parts[units[k][0]].append(units[k][1][:limit])
    return "\n\n".join(" ".join(p) for p in parts if p)


def row_pairs(row: Mapping) -> list[JudgePair]:
    """The pairs of one row (``JudgePair.kind`` names the dataset and unit)."""
    source, dataset = source_of(row), dataset_of(row)
    passages = [p["text"] for p in row["passages"]]
    answer = row["answer"]
    if dataset.startswith("ragtruth"):
        return _sentence_pairs(answer, passages, row["label"].get("spans", []), dataset, source)
    if not answer.strip():
        return []
    label = int(bool(row["label"]["adherent"]))
    return [JudgePair(SUPPORT, dataset, " ".join(answer.split()), evidence(answer, passages), label, source)]


def _sentence_pairs(answer: str, passages: Sequence[str], spans: Sequence[Mapping], dataset: str, source: str):
    out = []
    for s, e in sentence_spans(answer) or [(0, len(answer))]:
        text = answer[s:e]
        inside = [(max(s, sp["start"]) - s, min(e, sp["end"]) - s) for sp in spans if sp["start"] < e and sp["end"] > s]
        if len(text.split()) < 3:
            continue
        out.append(
            JudgePair(
                SUPPORT, f"{dataset}_sentence", text, evidence(text, passages), int(not inside), source, tuple(inside)
            )  # fmt: skip
        )
    return out


def _halueval(rows: Sequence[Mapping]) -> list[Mapping]:
    by_question: dict[str, list[Mapping]] = {}
    for r in rows:
        by_question.setdefault(str(r["question"]), []).append(r)
    kept: list[Mapping] = []
    for question in sorted(by_question, key=lambda q: hashlib.sha256(q.encode()).hexdigest()):
        group = by_question[question]
        wrong = [r for r in group if not r["label"]["adherent"]]
        if wrong and all(len(r["answer"].split()) <= HALUEVAL_MAX_WORDS for r in wrong):
            kept += group
            if len(kept) >= 2 * HALUEVAL_CAP:
                break
    return kept


def public_pairs(folder: str | Path | None) -> list[JudgePair]:
    """All pairs of the public data in ``folder`` (HaluEval length-matched and capped)."""
    if not folder:
        return []
    rows = load_rows(folder)
    halu = [r for r in rows if dataset_of(r) == "halueval"]
    kept: list[Mapping] = [r for r in rows if dataset_of(r) != "halueval"]
    return [p for r in [*kept, *_halueval(halu)] for p in row_pairs(r)]


def response_rows(folder: str | Path, split: str) -> list[dict]:
    """RAGTruth rows of one split with their sentence pairs: response-level reporting."""
    out = []
    for r in load_rows(folder):
        if dataset_of(r).startswith("ragtruth") and split_of(source_of(r)) == split:
            out.append({"row": r, "pairs": row_pairs(r)})
    return out


def by_split(pairs: Iterable[JudgePair]) -> dict[str, list[JudgePair]]:
    out: dict[str, list[JudgePair]] = {"train": [], "dev": [], "report": []}
    for p in pairs:
        out[split_of(p.doc_id)].append(p)
    return out


def source_split(pairs: Sequence[JudgePair], share: float, seed: int):
    """(train, dev, report) by ``split_of`` the pair's source; a corpus too small for every task
    to have both labels among its DEV sources (a test fixture) falls back to
    ``judge_pairs.split_for_calibration`` (dev = its calibration share, no report split)."""
    parts = by_split(pairs)
    tasks = {p.task for p in pairs}
    if parts["train"] and all({p.label for p in parts["dev"] if p.task == t} == {0, 1} for t in tasks):
        return parts["train"], parts["dev"], parts["report"]
    train, calibration, _ = split_for_calibration(pairs, share, seed)
    return train, calibration, []


def best_threshold(
    probs: Sequence[float] | np.ndarray,
    labels: Sequence[int],
    groups: Sequence[str] = (),
    keep: tuple[Sequence[str], float] | None = None,
) -> float:
    """The probability cut that maximizes balanced accuracy (mean of the true-positive and
    true-negative rates), each label's rate weighting every ``group`` (pair kind) equally so the
    most numerous kind does not set the threshold alone. ``keep`` = (kinds, share): only cuts
    that still pass at least that share of the positives of *each* of those kinds are considered
    (pooled, an easy kind such as quotes would let a hard one such as reworded answers fall
    short). Fitted on DEV pairs only."""
    p, y = np.asarray(probs, dtype=np.float64), np.asarray(labels) > 0
    g = np.asarray(list(groups) if len(groups) else [""] * len(p))
    weights = np.zeros(len(p))
    for label in (True, False):
        mask = y == label
        kinds = sorted(set(g[mask]))
        for k in kinds:
            sel = mask & (g == k)
            weights[sel] = 1.0 / (sel.sum() * len(kinds))
    kept_kinds, share = keep or ((), 0.0)
    kept = [p[y & (g == k)] for k in kept_kinds if (y & (g == k)).any()]
    best, best_at = -1.0, 0.5
    for t in np.unique(np.round(p, 4)):
        if any((scores >= t).mean() < share for scores in kept):
            continue
        score = weights[y & (p >= t)].sum() + weights[~y & (p < t)].sum()
        if score > best:
            best, best_at = score, float(t)
    return round(best_at, 4)
