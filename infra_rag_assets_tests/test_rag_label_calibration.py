"""Hand-label calibration (rag/judge/label_calibration.py): the labels file's checks, the split
into a tuning and a report half by question, thresholds from the tuning half only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra_rag_assets.package_data import benchmarks_dir
from infra_rag_assets.rag.judge.label_calibration import (
    LabelError,
    calibration_report,
    in_tuning_half,
    load_labels,
)

pytestmark = pytest.mark.unit

LABELS = {"grounded": True, "fabricated": False, "gap_named": False, "correct": True, "citations": "valid"}


def _line(i: int, qid: str, **extra) -> dict:
    return {"id": f"a{i}", "question_id": qid, "question": "Q?", "answer": "The kubelet runs pods. [1]",
            "origin": "product", "labels": dict(LABELS), "passages": [{"id": "1", "text": "The kubelet runs pods."}],
            **extra}  # fmt: skip


def _write(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_packaged_labels_load_and_split_by_question():
    items = load_labels(benchmarks_dir() / "answer_labels.jsonl")
    assert len(items) >= 150 and len({i.id for i in items}) == len(items)
    halves: dict[str, set[bool]] = {}
    for item in items:
        halves.setdefault(item.root(), set()).add(in_tuning_half(item))
    assert all(len(h) == 1 for h in halves.values())  # a question's answers never straddle the halves
    tuning = sum(in_tuning_half(i) for i in items)
    assert 0.3 < tuning / len(items) < 0.7


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"labels": {**LABELS, "grounded": "yes"}}, "must be true or false"),
        ({"answer": "Runs pods. [3]"}, "cites passage 3"),
        ({"derived_from": "nope"}, "derived_from 'nope'"),
        ({"unsupported": ["x"]}, "'unsupported'"),
        ({"question": ""}, "'question'"),
    ],
)
def test_bad_label_lines_are_one_line_errors(tmp_path: Path, change: dict, message: str):
    with pytest.raises(LabelError, match=message) as caught:
        load_labels(_write(tmp_path, [_line(1, "q1", **change)]))
    assert "\n" not in str(caught.value) and "labels.jsonl:1" in str(caught.value)


def test_thresholds_come_from_the_tuning_half_and_agreement_from_the_report_half(tmp_path: Path):
    rows = []
    for i in range(40):
        grounded = i % 2 == 0
        rows.append(_line(i, f"q{i}", labels={**LABELS, "grounded": grounded, "fabricated": not grounded}))
    items = load_labels(_write(tmp_path, rows))
    # adherence separates perfectly at 0.6 on every answer, so any tuning-half cut in (0.3, 0.9] agrees fully
    scored = [
        {"id": it.id, "tuning": in_tuning_half(it), "adherence": 0.9 if it.labels["grounded"] else 0.3,
         "support_any": 0.2 if it.labels["fabricated"] else 0.8, "gap_named": False, "token_recall": None,
         "sentences": [("The kubelet runs pods.", 0.5)]}
        for it in items
    ]  # fmt: skip
    report = calibration_report(items, scored)
    check = report["checks"]["adherence~grounded"]
    held = sum(not s["tuning"] for s in scored)
    assert check["auroc"] == 1.0 and check["report_answers"] == held and check["agreement"] == 1.0
    assert 0.3 < check["threshold_from_tuning_half"] <= 0.9 and check["disagreements"] == []
    assert report["checks"]["support_any~fabricated"]["kappa"] == 1.0
    # flip one report-half answer's score: it is listed as a disagreement, the threshold stays
    victim = next(s for s in scored if not s["tuning"])
    victim["adherence"] = 0.3 if victim["adherence"] == 0.9 else 0.9
    again = calibration_report(items, scored)["checks"]["adherence~grounded"]
    assert again["threshold_from_tuning_half"] == check["threshold_from_tuning_half"]
    assert [d["id"] for d in again["disagreements"]] == [victim["id"]] and again["agreement"] < 1.0
