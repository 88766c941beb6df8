"""The Claude judge where it is chosen: `infra-rag judge --batch --backend claude`, the
INFRA_RAG_JUDGE_BACKEND setting, and the calibration against hand labels by the trained judge's
split rule. Only the Anthropic HTTP boundary is faked (an ``httpx2.MockTransport`` under a real
client, which ``claude_judge.new_client`` hands out)."""

from __future__ import annotations

import hashlib
import json
import re

import anthropic
import httpx2
import pytest
from click.testing import CliRunner

from infra_rag_assets.cli import main
from infra_rag_assets.rag.judge.claude import claude_judge
from infra_rag_assets.rag.judge.claude.claude_calibration import NOT_RUN, run_claude_calibration
from infra_rag_assets.rag.judge.claude.judge_prompts import TOOL_NAME
from infra_rag_assets.rag.judge.label_calibration import in_tuning_half, load_labels

pytestmark = pytest.mark.unit

PASSAGE = "The default value of maxSurge is 25%. maxSurge is an optional field of a Deployment's rolling update."


def grader(request: httpx2.Request) -> httpx2.Response:
    """A stand-in for Claude that marks every sentence holding "WRONG" unsupported and fabricated."""
    user = json.loads(request.content)["messages"][0]["content"]
    listed = re.search(r"<answer_sentences>\n(.*?)\n</answer_sentences>", user, re.S)
    sentences = listed.group(1).splitlines() if listed else []
    bad = [i for i, s in enumerate(sentences, 1) if "WRONG" in s]
    verdict = {
        "grounded": not bad, "fabricated": bool(bad), "gap_named": False,
        "correct": (not bad) if "<reference_answer>" in user else None,
        "citations": "wrong" if bad else "valid",
        "sentences": [{"n": i, "support": 0.1 if i in bad else 0.9, "passage": "1"}
                      for i in range(1, len(sentences) + 1)],
        "unsupported_spans": ["WRONG"] if bad else [],
    }  # fmt: skip
    return httpx2.Response(200, json={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "tool_use", "id": "t", "name": TOOL_NAME, "input": verdict}],
        "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 1000, "output_tokens": 100},
    })  # fmt: skip


def fake_client(handler):
    def make() -> anthropic.Anthropic:
        http = httpx2.Client(transport=httpx2.MockTransport(handler))
        return anthropic.Anthropic(api_key="test", http_client=http, max_retries=0)

    return make


def never_called(request: httpx2.Request) -> httpx2.Response:
    raise AssertionError(f"unexpected HTTP call to {request.url}")


@pytest.fixture
def cli(tmp_path, monkeypatch):
    monkeypatch.setenv("INFRA_RAG_HOME", str(tmp_path / "no-home"))  # the claude backend needs no home
    monkeypatch.delenv("INFRA_RAG_JUDGE_BACKEND", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def batch(tmp_path):
    items = [
        {"id": "good", "question": "Default maxSurge?", "passages": [{"id": "1", "text": PASSAGE}],
         "answer": "The default value of maxSurge is 25% [1]."},
        {"id": "bad", "question": "Default maxSurge?", "passages": [{"id": "1", "text": PASSAGE}],
         "answer": "The default value of maxSurge is 25% [1]. It is WRONG since release 1.12 [1]."},
    ]  # fmt: skip
    path = tmp_path / "batch.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path


def test_judge_batch_with_the_claude_backend_records_backend_axes_and_cost(cli, batch, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setattr(claude_judge, "new_client", fake_client(grader))
    result = cli("judge", "--batch", str(batch), "--backend", "claude", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert rows["good"]["adherence"] == 0.9 and rows["good"]["axes"]["grounded"] is True
    assert rows["bad"]["adherence"] == pytest.approx(0.09) and rows["bad"]["axes"]["fabricated"] is True
    assert rows["bad"]["unsupported_spans"][0]["text"] == "WRONG"
    for row in rows.values():
        assert row["backend"] == "claude" and row["judge"].startswith("claude:claude-sonnet-4-6:claude-judge@1:")
        assert row["cost_usd"] == pytest.approx((1000 * 3.0 + 100 * 15.0) / 1e6)
    table = cli("judge", "--batch", str(batch), "--backend", "claude")
    assert table.exit_code == 0 and "grounded" in table.output and "0.0045" in table.output


def test_the_setting_chooses_claude_and_without_a_key_nothing_starts(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr(claude_judge, "new_client", fake_client(never_called))
    missing = str(tmp_path / "not-there.jsonl")  # the key is checked before the input is read
    for args, env in ((["--backend", "claude"], None), ([], "claude")):
        if env:
            monkeypatch.setenv("INFRA_RAG_JUDGE_BACKEND", env)
        result = cli("judge", "--batch", missing, *args)
        assert result.exit_code == 1
        assert result.output.strip() == (
            "error: judge backend 'claude' (--backend / INFRA_RAG_JUDGE_BACKEND) needs ANTHROPIC_API_KEY, "
            "which is not set"
        )
    monkeypatch.setenv("INFRA_RAG_JUDGE_BACKEND", "gpt")
    bad = cli("judge", "--batch", missing)
    assert bad.exit_code == 2 and "INFRA_RAG_JUDGE_BACKEND / --backend must be one of trained, claude" in bad.output


def test_the_trained_backend_stays_the_default_and_needs_a_home(cli, batch):
    result = cli("judge", "--batch", str(batch))
    assert result.exit_code == 1 and "no data home at" in result.output


def labelled_line(i: int, question_id: str, wrong: bool) -> dict:
    answer = "The default value of maxSurge is 25% [1]." + (" It is WRONG since release 1.12 [1]." if wrong else "")
    return {
        "id": f"al-{i:03d}", "question_id": question_id, "question": "What is the default maxSurge?",
        "reference_answer": "The default is 25%.", "category": "kubernetes",
        "passages": [{"id": "1", "text": PASSAGE}], "answer": answer, "origin": "damaged" if wrong else "product",
        "labels": {"grounded": not wrong, "fabricated": wrong, "gap_named": False, "correct": not wrong,
                   "citations": "wrong" if wrong else "valid"},
        "unsupported": ["It is WRONG since release 1.12"] if wrong else [],
    }  # fmt: skip


@pytest.fixture
def labels(tmp_path):
    """Twelve labelled answers over six questions, both halves of the split holding both classes."""
    ids = [f"q-{n}" for n in range(40)]
    tuning = [q for q in ids if hashlib.sha256(q.encode()).digest()[0] % 2 == 0][:3]
    report = [q for q in ids if hashlib.sha256(q.encode()).digest()[0] % 2 == 1][:3]
    rows = [labelled_line(2 * k + w, q, bool(w)) for k, q in enumerate(tuning + report) for w in (0, 1)]
    path = tmp_path / "answer_labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_calibration_without_a_key_is_not_run(labels, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr(claude_judge, "new_client", fake_client(never_called))
    assert run_claude_calibration(labels) == {"status": NOT_RUN, "labels_file": "answer_labels.jsonl"}
    assert NOT_RUN == "not run: no ANTHROPIC_API_KEY"


def test_calibration_uses_the_label_split_and_reports_auroc_threshold_and_cost(labels, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    failing = [True]

    def handler(request: httpx2.Request) -> httpx2.Response:
        if "(cites: 1)\n2." in json.loads(request.content)["messages"][0]["content"] and failing:
            failing.pop()  # one answer meets an overloaded API: counted, left out of the checks
            return httpx2.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
        return grader(request)

    monkeypatch.setattr(claude_judge, "new_client", fake_client(handler))
    report = run_claude_calibration(labels)
    items = load_labels(labels)
    assert report["status"] == "run" and report["labelled_answers"] == 12 and report["errors"] == 1
    assert report["error_examples"] == ["al-001: OverloadedError: HTTP 529: x"]  # the first two-sentence answer
    assert report["answers"] == 11
    assert report["tuning_answers"] == sum(in_tuning_half(i) for i in items if i.id != "al-001")
    for check in ("adherence~grounded", "grounded_axis~grounded", "not_fabricated~fabricated", "correct_axis~correct",
                  "citations_valid~citations"):  # fmt: skip
        c = report["checks"][check]
        assert c["auroc"] == 1.0 and c["auroc_report_half"] == 1.0 and c["kappa"] == 1.0 and c["disagreements"] == []
    assert report["checks"]["adherence~grounded"]["threshold_from_tuning_half"] == 0.9
    assert report["checks"]["gap_named~gap_named"]["agreement"] == 1.0
    assert report["tokens_in"] == 11 * 1000 and report["cost_usd"] == pytest.approx(11 * 0.0045, abs=1e-4)
    assert report["cost_usd_per_answer"] == pytest.approx(11 * 0.0045 / 12, abs=1e-6)


def test_judge_labels_cli_says_not_run_without_a_key(cli, labels, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = cli("judge-labels", "--backend", "claude", "--labels", str(labels))
    assert result.exit_code == 0 and json.loads(result.stdout)["status"] == NOT_RUN


class _Hit:
    def __init__(self, text: str) -> None:
        self.text, self.chunk_id = text, "c1"


def eval_pending(answer_text: str, record_id: str):
    from infra_rag_assets.rag.answer.records import Answer
    from infra_rag_assets.rag.evaluate.answers.answer_eval import _Pending
    from infra_rag_assets.rag.evaluate.benchmarks import BenchRecord
    from infra_rag_assets.rag.judge.sentences import answer_sentences, context_sentences

    record = BenchRecord(record_id, "What is the default maxSurge?", ("k8s:deploy",), "The default is 25%.", "k")
    reply = Answer("q", answer_text, [], "answered", "claude", "claude-sonnet-4-6", "p@1", "h")
    hits = [_Hit(PASSAGE)]
    return _Pending(record, reply, context_sentences(hits), answer_sentences(answer_text), hits, {}, "k")


def test_the_eval_run_judges_whole_answers_caches_them_and_leaves_failures_unmeasured(tmp_path, monkeypatch):
    from infra_rag_assets.rag.evaluate.answers.answer_eval import AnswerRun, _judge
    from infra_rag_assets.rag.judge.trace import trace_scores
    from infra_rag_assets.rag.operate.home import ContentCache

    failing = [True]

    def handler(request: httpx2.Request) -> httpx2.Response:
        if "ERRS" in json.loads(request.content)["messages"][0]["content"] and failing:
            failing.pop()
            return httpx2.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
        return grader(request)

    judge = claude_judge.ClaudeJudge(client=fake_client(handler)())
    cache = ContentCache(tmp_path / "judging")
    answers = {
        "good": "The default value of maxSurge is 25% [1].",
        "bad": "The default value of maxSurge is 25% [1]. It is WRONG in 1.12 [1]. Uncited and also WRONG.",
        "fails": "The default value of maxSurge ERRS 25% [1].",
    }
    pending = [eval_pending(text, rid) for rid, text in answers.items()]
    run = AnswerRun("b", "h")
    _judge(pending, judge, cache, run)
    good, bad, fails = pending
    assert good.scores["support"] == [0.9] and good.scores["relevance"] is None  # no trained judge: unmeasured
    # support per sentence that cites a passage (trace.judged_sentences), the uncited one is 0 by definition
    assert bad.scores["support"] == [0.9, 0.1] and bad.scores["axes"]["fabricated"] is True
    trace = trace_scores(bad.context, [], [], bad.sentences, bad.scores["support"])
    assert [s.supported for s in trace.sentences] == [0.9, 0.1, 0.0] and trace.adherent is False
    assert fails.scores is None and run.judge_errors == 1 and run.judging_hits == 0
    assert run.judge_cost_usd == pytest.approx(2 * 0.0045)
    again = [eval_pending(text, rid) for rid, text in answers.items()]
    rerun = AnswerRun("b", "h")
    _judge(again, judge, cache, rerun)  # the failed answer is asked again, the judged two are cached
    assert rerun.judging_hits == 2 and rerun.judge_errors == 0 and again[2].scores["support"] == [0.9]


def test_the_eval_run_checks_the_backend_before_any_work(monkeypatch):
    from infra_rag_assets.rag.judge.judge_backends import chosen_backend

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("INFRA_RAG_JUDGE_BACKEND", raising=False)
    assert chosen_backend() == "trained" and chosen_backend("TRAINED") == "trained"
    with pytest.raises(claude_judge.ClaudeJudgeUnavailable, match="INFRA_RAG_JUDGE_BACKEND.*ANTHROPIC_API_KEY"):
        chosen_backend("claude")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("INFRA_RAG_JUDGE_BACKEND", "claude")
    assert chosen_backend() == "claude"
