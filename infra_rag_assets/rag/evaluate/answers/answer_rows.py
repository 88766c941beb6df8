"""One warehouse row per answer, and the answer metrics of a group of rows (no model calls).

Metric names are prefixed ``answer_`` where a retrieval metric has the same idea, so one
metric table (regime × slice × metric) holds both and gates name either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...answer.overlap import token_f1_recall
from ...answer.pricing import cost_usd
from ...answer.records import Answer
from ...common import percentile
from ...judge.sentences import AnswerSentence, ContextSentence
from ...judge.trace import (
    RELEVANT_AT,
    SUPPORTED_AT,
    cohen_kappa,
    judged_relevant,
    silver_relevant,
    trace_scores,
    utilized_sentences,
)
from ..benchmarks import BenchRecord
from ..evaluation import project_of
from .answer_metrics import ChunkRecord, citations_valid, cited_page_precision

ANSWER_METRICS = (
    "answer_adherence",  # mean probability that every sentence of an answer is supported
    "answer_adherent",  # share of answers whose every sentence is judged supported
    "answer_relevance",
    "answer_utilization",
    "answer_completeness",
    "answer_relevance_silver",
    "answer_completeness_silver",
    "judge_silver_kappa",  # sentence-level agreement of judge and silver relevance labels
    "correctness_f1",
    "correctness_recall",
    "citation_validity",
    "cited_page_precision",
    "gap_named_recall",  # questions that must be refused whose answer names the gap
    "gap_named_false_rate",  # answerable questions whose answer names a gap anyway
    "answer_error_rate",
    "safety_pass_rate",  # adversarial cases that behave as their expectation says
    "safety_harm_rate",  # adversarial cases whose answer says what it must not (safety.HARMFUL)
    "generation_p95_ms",
    "cost_usd_per_answer",
    "n_answers",
)


def answer_row(
    record: BenchRecord,
    answer: Answer,
    context: Sequence[ContextSentence],
    sentences: Sequence[AnswerSentence],
    scores: Mapping | None,
    timings: Mapping[str, float],
    judge_ms: float,
    *,
    chunks: Mapping[str, ChunkRecord],
    docs: Mapping[str, str],
    judged: bool,
    case: Any = None,
) -> dict:
    """Everything the scorecard, the worst-answers table and the lineage need of one answer."""
    answered = answer.outcome == "answered"
    utilized = utilized_sentences(context, answer.citations)
    at = scores.get("supported_at", SUPPORTED_AT) if scores else SUPPORTED_AT
    # relevance None: a whole-answer judge without the trained judge to label context sentences
    relevant = (
        None
        if scores is None or scores["relevance"] is None
        else judged_relevant(scores["relevance"], scores.get("relevant_at", RELEVANT_AT))
    )
    silver = silver_relevant(context, record.reference_answer) if record.reference_answer else None
    trace = trace_scores(context, relevant or [], utilized, sentences, scores["support"] if scores else None, at)
    silver_trace = trace_scores(context, silver, utilized, sentences, None) if silver is not None else None
    valid, problems = citations_valid(answer.citations, chunks, docs) if answered else (None, [])
    # the reader states its span first, then quotes evidence: the span is the answer scored
    correctness = token_f1_recall(answer.short_answer or answer.text, record.reference_answer) if answered else None
    full = token_f1_recall(answer.text, record.reference_answer) if answered and answer.short_answer else correctness
    cited = list(dict.fromkeys(c.doc_id for c in answer.citations))
    safety = _safety(case, answer, cited, trace.adherence)
    return {
        "question_id": record.id,
        "question": record.question,
        "category": record.category,
        "project": project_of(record),
        "relevant": list(record.relevant),
        "should_abstain": record.should_abstain,
        "outcome": answer.outcome,
        "gap_named": answer.outcome == "abstained",
        "method": answer.method,
        "model": answer.model,
        "prompt_hash": answer.prompt_hash,
        "answer": answer.text,
        "short_answer": answer.short_answer,
        "error": answer.error,
        "cited_chunk_ids": list(dict.fromkeys(c.chunk_id for c in answer.citations)),
        "cited_doc_ids": cited,
        "citations_json": json.dumps([c.__dict__ for c in answer.citations]),
        "context_sentences": len(context),
        "relevance": trace.relevance if relevant is not None else None,
        "utilization": trace.utilization,
        "completeness": trace.completeness if relevant is not None else None,
        "adherence": trace.adherence,
        "adherent": trace.adherent,
        "unsupported_json": json.dumps(trace.unsupported()) if judged else None,
        "sentences_json": json.dumps([s.to_dict() for s in trace.sentences]),
        "relevant_sentences_json": json.dumps(trace.relevant if relevant is not None else []),
        "utilized_sentences_json": json.dumps(trace.utilized),
        "relevance_silver": silver_trace.relevance if silver_trace else None,
        "completeness_silver": silver_trace.completeness if silver_trace else None,
        "judge_silver_kappa": _kappa(relevant, silver, len(context)),
        "correctness_f1": correctness[0] if correctness else None,
        "correctness_recall": correctness[1] if correctness else None,
        "correctness_f1_full_text": full[0] if full else None,
        "citation_valid": valid,
        "citation_problems_json": json.dumps(problems),
        "cited_page_precision": cited_page_precision(answer.citations, record.relevant) if answered else None,
        "safety_passed": None if safety is None else safety[0],
        "safety_harmful": None if safety is None else safety[2],
        "safety_reasons_json": json.dumps(safety[1] if safety else []),
        "retrieval_ms": timings.get("total"),
        "generation_ms": timings.get("generation"),
        "judge_ms": judge_ms if judged else None,
        "tokens_in": int(answer.usage.get("input_tokens") or 0),
        "tokens_out": int(answer.usage.get("output_tokens") or 0),
        "cost_usd": cost_usd(answer.model, answer.usage) if answer.method == "claude" else 0.0,
    }


def _safety(case: Any, answer: Answer, cited: list[str], adherence: float | None):
    if case is None:
        return None
    from ..safety import check_answer

    verdict = check_answer(case, answer.text, answer.outcome, cited, adherence)
    return verdict.passed, list(verdict.reasons), verdict.harmful


def _kappa(judge: list[int] | None, silver: list[int] | None, n: int) -> float | None:
    if judge is None or silver is None or n == 0:
        return None
    j, s = set(judge), set(silver)
    return cohen_kappa([i in j for i in range(n)], [i in s for i in range(n)])


def _mean(rows: Sequence[dict], column: str) -> float | None:
    values = [float(r[column]) for r in rows if r.get(column) is not None]
    return sum(values) / len(values) if values else None


def summarize_answers(rows: Sequence[dict]) -> dict[str, float | None]:
    """Every name of ``ANSWER_METRICS`` for one group of answer rows (None when undefined)."""
    answerable = [r for r in rows if not r["should_abstain"]]
    refuse = [r for r in rows if r["should_abstain"]]
    answered = [r for r in rows if r["outcome"] == "answered"]
    costs = [r["cost_usd"] for r in rows if r.get("cost_usd") is not None]
    safety = [r["safety_passed"] for r in rows if r.get("safety_passed") is not None]
    harm = [r["safety_harmful"] for r in rows if r.get("safety_harmful") is not None]
    generation = [float(r["generation_ms"]) for r in rows if r.get("generation_ms") is not None]
    return {
        "answer_adherence": _mean(answered, "adherence"),
        "answer_adherent": _mean(answered, "adherent"),
        "answer_relevance": _mean(rows, "relevance"),
        "answer_utilization": _mean(rows, "utilization"),
        "answer_completeness": _mean(answerable, "completeness"),
        "answer_relevance_silver": _mean(rows, "relevance_silver"),
        "answer_completeness_silver": _mean(answerable, "completeness_silver"),
        "judge_silver_kappa": _mean(rows, "judge_silver_kappa"),
        "correctness_f1": _mean(answerable, "correctness_f1"),
        "correctness_recall": _mean(answerable, "correctness_recall"),
        "citation_validity": _mean(answered, "citation_valid"),
        "cited_page_precision": _mean(answerable, "cited_page_precision"),
        "gap_named_recall": _mean(refuse, "gap_named"),
        "gap_named_false_rate": _mean(answerable, "gap_named"),
        "answer_error_rate": sum(r["outcome"] == "error" for r in rows) / len(rows) if rows else None,
        "safety_pass_rate": sum(safety) / len(safety) if safety else None,
        "safety_harm_rate": sum(harm) / len(harm) if harm else None,
        "generation_p95_ms": percentile(generation, 95),
        "cost_usd_per_answer": sum(costs) / len(costs) if costs else None,
        "n_answers": float(len(rows)),
    }


def answer_summaries(rows: Sequence[dict], slices: Sequence[str] = ("category", "project")) -> list[dict]:
    """Overall, then one summary per value of each slice column (``slice`` named as gates name it)."""
    out = [{"slice": "overall", "n": len(rows), **summarize_answers(rows)}]
    for by in slices:
        groups: dict[str, list[dict]] = {}
        for r in rows:
            groups.setdefault(str(r.get(by)), []).append(r)
        out += [{"slice": f"{by}={v}", "n": len(g), **summarize_answers(g)} for v, g in sorted(groups.items())]
    return out
