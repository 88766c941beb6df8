"""How far the automatic answer signals agree with hand labels (data/benchmarks/answer_labels.jsonl).

Each labelled answer carries its question, its passages and the answer text, so the judge can
score it again at any time without an index. Signals checked against the labels:

* ``adherence`` (judge: probability every sentence is supported by the passages it cites) vs
  ``grounded``;
* ``support_any`` (judge: the weakest sentence's best support over ALL passages) vs
  ``fabricated`` — a sentence true of another passage is a wrong citation, not a fabrication;
* ``gap_named`` (the answer states the docs do not cover the question) vs ``gap_named``;
* ``token_recall`` (against the reference answer, no model) vs ``correct``.

Thresholds are chosen on one half of the questions (all answers derived from one question stay
in one half: a paraphrase and its damaged copy are never split) and reported on the other, so
the reported precision, recall and κ are not fitted to the labels they are measured on. AUROC
needs no threshold and is reported on both halves and overall.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..answer.overlap import token_f1_recall
from ..common import jsonl_objects
from ..probabilities import auroc
from .sentences import answer_sentences, names_gap
from .trace import cohen_kappa

LABELS = ("grounded", "fabricated", "gap_named", "correct", "citations")
CITATION_LABELS = ("valid", "wrong", "none")


class LabelError(ValueError):
    """A label line is malformed or refers to something that is not there (one line, file:line)."""


@dataclass(frozen=True)
class Labelled:
    id: str
    question_id: str
    question: str
    reference: str
    passages: tuple[str, ...]  # passage n = passages[n - 1]
    answer: str
    origin: str
    labels: dict
    unsupported: tuple[str, ...]

    def root(self) -> str:
        return self.question_id


def load_labels(path: Path | str) -> list[Labelled]:
    path = Path(path)
    rows, seen = [], set()
    for where, data in jsonl_objects(path.read_text(encoding="utf-8").splitlines(), path, LabelError):
        item = _labelled(data, where)
        if item.id in seen:
            raise LabelError(f"{where}: duplicate id {item.id!r}")
        seen.add(item.id)
        rows.append((item, data.get("derived_from"), where))
    for _item, parent, where in rows:
        if parent and parent not in seen:
            raise LabelError(f"{where}: derived_from {parent!r} names no labelled answer in this file")
    return [item for item, _, _ in rows]


def _labelled(data: object, where: str) -> Labelled:
    if not isinstance(data, dict):
        raise LabelError(f"{where}: expected a JSON object")
    for name in ("id", "question_id", "question", "answer", "origin"):
        if not isinstance(data.get(name), str) or not data[name]:
            raise LabelError(f"{where}: missing or empty string field {name!r}")
    labels = data.get("labels")
    if not isinstance(labels, dict) or set(labels) != set(LABELS):
        raise LabelError(f"{where}: 'labels' must have exactly {', '.join(LABELS)}")
    for name in ("grounded", "fabricated", "gap_named"):
        if not isinstance(labels[name], bool):
            raise LabelError(f"{where}: label {name!r} must be true or false")
    if labels["correct"] is not None and not isinstance(labels["correct"], bool):
        raise LabelError(f"{where}: label 'correct' must be true, false or null")
    if labels["citations"] not in CITATION_LABELS:
        raise LabelError(f"{where}: label 'citations' must be one of {', '.join(CITATION_LABELS)}")
    passages = data.get("passages")
    if not isinstance(passages, list) or not all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in passages
    ):
        raise LabelError(f"{where}: 'passages' must be a list of {{'id', 'text'}}")
    by_id = {str(p.get("id")): p["text"] for p in passages}
    texts = tuple(by_id.get(str(n), "") for n in range(1, max((int(k) for k in by_id if k.isdigit()), default=0) + 1))
    for s in answer_sentences(data["answer"]):
        missing = [n for n in s.passages if not 0 < n <= len(texts) or not texts[n - 1]]
        if missing:
            raise LabelError(f"{where}: the answer cites passage {missing[0]}, which the line does not hold")
    unsupported = data.get("unsupported", [])
    if not isinstance(unsupported, list) or (labels["grounded"] and unsupported):
        raise LabelError(f"{where}: 'unsupported' must list the unsupported sentences (empty when grounded)")
    return Labelled(data["id"], data["question_id"], data["question"], data.get("reference_answer") or "",
                    texts, data["answer"], data["origin"], labels, tuple(unsupported))  # fmt: skip


def _is_passage(p: object) -> bool:
    return isinstance(p, dict) and isinstance(p.get("text"), str)


def in_tuning_half(item: Labelled) -> bool:
    """Half of the questions, by a hash of the question id (stable, label-blind)."""
    return hashlib.sha256(item.root().encode()).digest()[0] % 2 == 0


def signals(judge, items: Sequence[Labelled]) -> list[dict]:
    """Every automatic signal of every labelled answer (the judge scores all pairs in 2 calls)."""
    cited, anywhere = [], []
    plans = []
    for item in items:
        sentences = [s for s in answer_sentences(item.answer) if s.is_claim]
        plans.append((item, sentences))
        for s in sentences:
            evidence = "\n\n".join(item.passages[n - 1] for n in s.passages if 0 < n <= len(item.passages))
            cited.append((s.text, evidence))
            anywhere += [(s.text, p) for p in item.passages if p]
    cited_p = judge.support([c for c, _ in cited], [e for _, e in cited]) if cited else []
    any_p = judge.support([c for c, _ in anywhere], [e for _, e in anywhere]) if anywhere else []
    out, at_c, at_a = [], 0, 0
    for item, sentences in plans:
        per_sentence, best_any = [], []
        for s in sentences:
            p = float(cited_p[at_c]) if s.passages else 0.0
            at_c += 1
            n = sum(1 for x in item.passages if x)
            best_any.append(max((float(x) for x in any_p[at_a : at_a + n]), default=0.0))
            at_a += n
            per_sentence.append((s.text, p))
        correctness = token_f1_recall(item.answer, item.reference) if item.reference else None
        out.append(
            {
                "id": item.id,
                "tuning": in_tuning_half(item),
                "adherence": math.prod(p for _, p in per_sentence) if per_sentence else 1.0,
                "support_any": min(best_any) if best_any else 1.0,
                "gap_named": _names_gap(item.answer),
                "token_recall": correctness[1] if correctness else None,
                "sentences": per_sentence,
            }
        )
    return out


def _names_gap(answer: str) -> bool:
    return any(names_gap(s.text) for s in answer_sentences(answer))


# (signal, label, the label value the signal's HIGH side predicts)
CHECKS = (
    ("adherence", "grounded", True),
    ("support_any", "fabricated", False),
    ("token_recall", "correct", True),
)


def calibration_report(items: Sequence[Labelled], scored: Sequence[dict], checks: Sequence[tuple] = CHECKS) -> dict:
    """AUROC, threshold (tuning half) and agreement, κ, precision and recall (report half) of
    every signal against its label, and every disagreement on the report half. ``checks``:
    (signal, label, value the signal's high side predicts); the Claude judge passes its own."""
    by_id = {i.id: i for i in items}
    report: dict = {"answers": len(items), "tuning_answers": sum(s["tuning"] for s in scored), "checks": {}}
    for signal, label, high_means in checks:
        rows = [(s[signal], by_id[s["id"]].labels[label] == high_means, s) for s in scored
                if s[signal] is not None and by_id[s["id"]].labels[label] is not None]  # fmt: skip
        tune = [(v, y) for v, y, s in rows if s["tuning"]]
        held = [(v, y, s) for v, y, s in rows if not s["tuning"]]
        threshold = _best_threshold(tune)
        report["checks"][f"{signal}~{label}"] = {
            "answers": len(rows),
            "auroc": _round(auroc([v for v, _, _ in rows], [int(y) for _, y, _ in rows])),
            "auroc_report_half": _round(auroc([v for v, _, _ in held], [int(y) for _, y, _ in held])),
            "threshold_from_tuning_half": _round(threshold),
            **_agreement([(v >= threshold, y) for v, y, _ in held]),
            "disagreements": [
                {
                    "id": s["id"],
                    signal: _round(v),
                    label: by_id[s["id"]].labels[label],
                    "weakest": min(s["sentences"], key=lambda x: x[1])[0][:160] if s["sentences"] else "",
                }  # fmt: skip
                for v, y, s in held
                if (v >= threshold) != y
            ],
        }
    gap = [(s["gap_named"], by_id[s["id"]].labels["gap_named"]) for s in scored]
    report["checks"]["gap_named~gap_named"] = {"answers": len(gap), **_agreement(gap)}
    return report


def _best_threshold(rows: Sequence[tuple[float, bool]]) -> float:
    """The cut that maximises balanced accuracy on the tuning half (0.5 if it has one class)."""
    positives = sum(y for _, y in rows)
    negatives = len(rows) - positives
    if not positives or not negatives:
        return 0.5
    best, cut = -1.0, 0.5
    for t in sorted({v for v, _ in rows}):
        tpr = sum(v >= t and y for v, y in rows) / positives
        tnr = sum(v < t and not y for v, y in rows) / negatives
        if (tpr + tnr) / 2 > best:
            best, cut = (tpr + tnr) / 2, t
    return cut


def _agreement(pairs: Sequence[tuple[bool, bool]]) -> dict:
    """Agreement, Cohen's κ, precision and recall of the signal's positive side on ``pairs``."""
    n = len(pairs)
    tp = sum(p and y for p, y in pairs)
    predicted, actual = sum(p for p, _ in pairs), sum(y for _, y in pairs)
    return {
        "report_answers": n,
        "agreement": _round(sum(p == y for p, y in pairs) / n) if n else None,
        "kappa": _round(cohen_kappa([p for p, _ in pairs], [y for _, y in pairs])),
        "precision": _round(tp / predicted) if predicted else None,
        "recall": _round(tp / actual) if actual else None,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def cached_report(judge, labels_path: Path | str, cache) -> tuple[dict, bool]:
    """(report, found in cache): the report of ``judge`` on the labels file, computed once per
    (judge, labels content) in ``cache`` (a ``ContentCache``), so an unchanged rebuild re-scores
    nothing."""
    from ..index.config import stable_hash

    data = Path(labels_path).read_bytes()
    key = stable_hash({"judge": judge.identity, "labels": hashlib.sha256(data).hexdigest()}, 32)
    stored = cache.get(key)
    if stored is not None:
        return json.loads(stored.read_text()), True
    items = load_labels(labels_path)
    report = {"labels_file": Path(labels_path).name, "judge": judge.identity,
              **calibration_report(items, signals(judge, items))}  # fmt: skip
    cache.put(key, lambda path: path.write_text(json.dumps(report, indent=1)))
    return report, False
