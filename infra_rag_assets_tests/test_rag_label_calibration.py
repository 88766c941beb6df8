"""The hand-label agreement behind the judge's headline numbers (rag/judge/label_calibration.py),
on tiny label files and signal rows: loading refuses bad lines, the halves split by question,
and the report tunes its threshold on one half and measures agreement on the other."""

from __future__ import annotations

import json

import pytest

from infra_rag_assets.rag.judge.label_calibration import (
    LabelError,
    Labelled,
    calibration_report,
    in_tuning_half,
    load_labels,
)

pytestmark = pytest.mark.unit

GROUNDED = {"grounded": True, "fabricated": False, "gap_named": False, "correct": True, "citations": "valid"}


def _line(ident: str, question_id: str, **changes) -> dict:
    line = {
        "id": ident,
        "question_id": question_id,
        "question": "What is maxSurge?",
        "reference_answer": "The most Pods created over the desired count.",
        "passages": [{"id": "1", "text": "maxSurge is the most Pods created over the desired number of Pods."}],
        "answer": "maxSurge is the most Pods created over the desired number. [1]",
        "origin": "extractive",
        "labels": dict(GROUNDED),
    }
    return {**line, **changes}


def _write(tmp_path, *lines: dict):
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_load_labels_reads_each_answer_with_its_passages(tmp_path):
    [item] = load_labels(_write(tmp_path, _line("a1", "q1")))
    assert item.id == "a1" and item.passages == ("maxSurge is the most Pods created over the desired number of Pods.",)
    assert item.labels["grounded"] is True and item.unsupported == ()


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([_line("a1", "q1"), _line("a1", "q2")], "duplicate id 'a1'"),
        ([_line("a1", "q1", derived_from="a9")], "derived_from 'a9'"),
        ([_line("a1", "q1", answer="Pods surge. [2]")], "cites passage 2"),
        ([_line("a1", "q1", labels={**GROUNDED, "citations": "maybe"})], "'citations' must be one of"),
        ([_line("a1", "q1", unsupported=["Pods surge."])], "'unsupported' must list"),
    ],
)
def test_load_labels_refuses_a_bad_line_naming_it(tmp_path, lines, message):
    with pytest.raises(LabelError, match=message) as raised:
        load_labels(_write(tmp_path, *lines))
    assert "labels.jsonl:" in str(raised.value)


def _item(ident: str, question_id: str, grounded: bool) -> Labelled:
    labels = {**GROUNDED, "grounded": grounded, "fabricated": not grounded}
    return Labelled(ident, question_id, "q?", "", ("p",), "a. [1]", "test", labels, ())


def test_tuning_half_is_chosen_by_question_not_by_label():
    items = [_item(f"a{i}", f"question-{i}", grounded=True) for i in range(40)]
    halves = [in_tuning_half(item) for item in items]
    assert 5 < sum(halves) < 35  # both halves are populated
    assert halves == [in_tuning_half(_item(f"b{i}", f"question-{i}", grounded=False)) for i in range(40)]


def test_report_tunes_the_threshold_on_one_half_and_scores_the_other():
    items = [_item(f"a{i}", f"question-{i}", grounded=i % 2 == 0) for i in range(40)]
    # adherence separates the labels perfectly: 0.9 for grounded answers, 0.2 for the others
    scored = [
        {"id": it.id, "tuning": in_tuning_half(it), "adherence": 0.9 if it.labels["grounded"] else 0.2,
         "support_any": 0.5, "gap_named": False, "token_recall": None, "sentences": [("a.", 0.5)]}
        for it in items
    ]  # fmt: skip
    report = calibration_report(items, scored)
    check = report["checks"]["adherence~grounded"]
    assert report["answers"] == 40 and report["tuning_answers"] == sum(s["tuning"] for s in scored)
    assert check["auroc"] == 1.0 and check["auroc_report_half"] == 1.0
    assert check["threshold_from_tuning_half"] == 0.9  # the lowest cut with every class right
    assert check["report_answers"] == 40 - report["tuning_answers"]
    assert check["agreement"] == 1.0 and check["kappa"] == 1.0 and check["disagreements"] == []
    assert report["checks"]["token_recall~correct"]["answers"] == 0  # no reference: not scored
    assert report["checks"]["gap_named~gap_named"]["agreement"] == 1.0
