"""The Claude judge against the hand labels (data/benchmarks/answer_labels.jsonl), by the same
code and split rule as the trained judge's label calibration (``label_calibration.py``:
thresholds chosen on the tuning half of the questions, precision, recall and κ reported on the
other half, AUROC on both).

Claude's signals: ``adherence`` (product of its per-sentence support, as the trained judge's)
and its own axes as 0/1 scores — grounded, not fabricated, correct, citations valid — each
checked against the label of the same name; its ``gap_named`` axis is checked by agreement.
Answers the API failed on are left out of every check and counted in ``errors``. Without a key
nothing is sent: the report says ``not run: no ANTHROPIC_API_KEY``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..batch import Item
from ..label_calibration import Labelled, calibration_report, in_tuning_half, load_labels
from .claude_judge import ClaudeJudge

NOT_RUN = "not run: no ANTHROPIC_API_KEY"
CLAUDE_CHECKS = (
    ("adherence", "grounded", True),
    ("grounded_axis", "grounded", True),
    ("not_fabricated", "fabricated", False),
    ("correct_axis", "correct", True),
    ("citations_valid", "citations", "valid"),
)


def as_item(labelled: Labelled) -> Item:
    """A labelled answer as a batch item: passage ids are the 1-based numbers its markers cite."""
    passages = tuple((str(n), text) for n, text in enumerate(labelled.passages, 1))
    return Item(labelled.id, labelled.question, passages, labelled.answer)


def claude_signals(labelled: Labelled, result: dict) -> dict:
    """One judged answer's signals in the shape ``calibration_report`` reads."""
    axes = result["axes"]

    def score(value: object) -> float | None:
        return None if value is None else float(bool(value))

    sentences = [(s["text"], s["supported"]) for s in result["sentences"]]
    return {
        "id": labelled.id,
        "tuning": in_tuning_half(labelled),
        "adherence": result["adherence"] if sentences else 1.0,  # nothing claimed: nothing unsupported
        "grounded_axis": score(axes["grounded"]),
        "not_fabricated": None if axes["fabricated"] is None else float(not axes["fabricated"]),
        "correct_axis": score(axes["correct"]),
        "citations_valid": None if axes["citations"] is None else float(axes["citations"] == "valid"),
        "gap_named": bool(axes["gap_named"]),
        "sentences": sentences,
    }


def claude_report(items: Sequence[Labelled], results: Sequence[dict]) -> dict:
    """The calibration report of judged ``results`` (one per item, same order), with cost."""
    judged = [
        (i, r) for i, r in zip(items, results, strict=True) if not r["error"] and r["axes"]["grounded"] is not None
    ]
    errors = [f"{r['id']}: {r['error'] or r.get('note', '')}" for i, r in zip(items, results, strict=True)
              if (i, r) not in judged]  # fmt: skip
    report = calibration_report([i for i, _ in judged], [claude_signals(i, r) for i, r in judged], CLAUDE_CHECKS)
    tokens_in = sum(r["usage"]["input_tokens"] for r in results)
    tokens_out = sum(r["usage"]["output_tokens"] for r in results)
    cost = sum(r["cost_usd"] or 0.0 for r in results)
    return {
        "status": "run",
        "judge": results[0]["judge"] if results else None,
        "labelled_answers": len(items),
        "errors": len(errors),
        "error_examples": errors[:5],
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "cost_usd": round(cost, 4),
        "cost_usd_per_answer": round(cost / len(results), 6) if results else None,
        **report,
    }


def run_claude_calibration(labels_path: Path | str, judge: ClaudeJudge | None = None) -> dict:
    """Judge every labelled answer with Claude and report; without a judge and a key, say so."""
    if judge is None:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            return {"status": NOT_RUN, "labels_file": Path(labels_path).name}
        judge = ClaudeJudge()
    items = load_labels(labels_path)
    results = [judge.judge(as_item(i), i.reference) for i in items]
    return {"labels_file": Path(labels_path).name, **claude_report(items, results)}
