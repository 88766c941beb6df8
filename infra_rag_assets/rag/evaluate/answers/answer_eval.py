"""Answers in the eval run: every benchmark question answered as the service would answer it,
judged sentence by sentence, and scored (TRACe, correctness, citations, abstention, cost).

The answer is the serving answerer's (extractive offline, Claude when ``ANTHROPIC_API_KEY`` is
set) over the serving config's packed context, so the scores describe what users are told.
Two content-addressed caches make re-runs free of model calls: answers by (generator, model,
prompt hash, passage texts, question) and judgements by (judge, question, answer sentences,
evidence, context sentences); their hits are counted in the run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ...answer.generate import answer as make_answer
from ...answer.generate import generator_identity
from ...answer.records import Answer
from ...index.config import stable_hash
from ...judge.sentences import AnswerSentence, ContextSentence, answer_sentences, context_sentences
from ...judge.trace import Trace, judged_relevant, judged_sentences, thresholds_of, trace_scores, utilized_sentences
from ...operate.home import ContentCache
from ..benchmarks import BenchRecord
from .answer_faults import REFERENCE, damage, reference_answer
from .answer_metrics import ChunkRecord
from .answer_rows import answer_row
from .whole_answer_judging import judge_whole_answers, scores_from_cache


class Judge(Protocol):
    """What scoring needs from the support judge (``rag/judge/support_judge.SupportJudge``)."""

    identity: str

    def support(self, claims: Sequence[str], passages: Sequence[str]) -> list[float]: ...

    def relevance(self, questions: Sequence[str], sentences: Sequence[str]) -> list[float]: ...


@dataclass
class AnswerRun:
    benchmark: str
    benchmark_hash: str
    rows: list[dict] = field(default_factory=list)
    generation_hits: int = 0
    judging_hits: int = 0
    judge_seconds: float = 0.0
    judge_errors: int = 0  # answers a whole-answer judge (claude) failed on: adherence unmeasured
    judge_cost_usd: float = 0.0  # what a whole-answer judge's calls cost (the trained judge: 0)


@dataclass
class _Pending:
    record: BenchRecord
    answer: Answer
    context: list[ContextSentence]
    sentences: list[AnswerSentence]
    passages: list  # the packed hits, [n] = passages[n - 1]
    timings: dict
    cache_key: str
    scores: dict | None = None  # {"support": [...], "relevance": [...] or None (unmeasured)}


def answer_benchmark(
    engine,
    name: str,
    benchmark_hash: str,
    records: Sequence[BenchRecord],
    *,
    judge: Judge | None,
    chunks: Mapping[str, ChunkRecord],
    docs: Mapping[str, str],
    serving_config: str,
    generations: ContentCache,
    judgings: ContentCache,
    fault: str = "",
    safety: Mapping[str, object] | None = None,
    progress: Callable[[int, int], None] | None = None,
    client=None,
    answerer: str | None = None,
) -> AnswerRun:
    """Answer, judge and score ``records``; ``safety`` maps question ids to safety cases;
    ``client`` is the Anthropic client of the Claude path (default: one from the environment);
    ``answerer`` names who answers (``answerers.resolve_answerer``; default: the serving one)."""
    run = AnswerRun(name, benchmark_hash)
    pending = []
    how = engine.answerer_args(answerer)
    for i, record in enumerate(records, 1):
        pending.append(_answered(engine, record, serving_config, generations, run, fault, client, how))
        if progress:
            progress(i, len(records))
    if judge is not None:
        started = time.perf_counter()
        _judge(pending, judge, judgings, run)
        run.judge_seconds = round(time.perf_counter() - started, 2)
    per_question_ms = 1000 * run.judge_seconds / max(1, len(pending))
    for p in pending:
        case = (safety or {}).get(p.record.id)
        run.rows.append(
            answer_row(
                p.record,
                p.answer,
                p.context,
                p.sentences,
                p.scores,
                p.timings,
                per_question_ms,
                chunks=chunks,
                docs=docs,
                judged=judge is not None,
                case=case,
            )  # fmt: skip
        )
    return run


def _answered(
    engine, record: BenchRecord, config: str, cache: ContentCache, run: AnswerRun, fault: str, client, how: dict
) -> _Pending:
    result, packed = engine.context(record.question, config=config)
    hits = [p.hit for p in packed.passages]
    abstained = result.abstained or not hits
    key = stable_hash(
        {
            "generator": generator_identity(**how),
            "question": record.question,
            "abstained": abstained,
            "passages": [(h.chunk_id, h.start_char, h.text) for h in hits],
        },
        32,
    )
    stored = cache.get(key)
    if stored is not None:
        reply = Answer.from_dict(json.loads(stored.read_text()))
        run.generation_hits += 1
    else:
        reply = make_answer(record.question, hits, abstained=abstained, client=client, **how)
        if reply.outcome != "error":  # an error is retried next run, not remembered
            cache.put(key, lambda path: path.write_text(json.dumps(reply.to_dict())))
    reply = damage(reply, fault)
    if fault == REFERENCE:
        reply = reference_answer(reply, record.reference_answer, record.relevant, hits)
    timings = {**result.timings_ms, "generation": reply.latency_ms}
    context = context_sentences(hits)
    sentences = answer_sentences(reply.text) if reply.outcome == "answered" else []
    return _Pending(record, reply, context, sentences, hits, timings, key)


def _judge(pending: list[_Pending], judge: Judge, cache: ContentCache, run: AnswerRun) -> None:
    """Every uncached answer's support and relevance pairs scored in two batched calls (a judge
    of whole answers, the claude backend: one call per answer, whole_answer_judging.py)."""
    if getattr(judge, "judges_answers", False):
        judge_whole_answers(pending, judge, cache, run)
        return
    claims: list[tuple[str, str]] = []
    questions: list[tuple[str, str]] = []
    todo = []
    for p in pending:
        judged = judged_sentences(p.sentences)
        evidence = [_evidence(s, p.passages) for s in judged]
        key = stable_hash(
            {
                "judge": judge.identity,
                "question": p.record.question,
                "claims": [(s.text, e) for s, e in zip(judged, evidence, strict=True)],
                "context": [c.text for c in p.context],
            },
            32,
        )
        if scores_from_cache(p, cache, key, run):
            continue
        todo.append((p, key, len(claims), len(judged), len(questions)))
        claims += [(s.text, e) for s, e in zip(judged, evidence, strict=True)]
        questions += [(p.record.question, c.text) for c in p.context]
    support = judge.support([c for c, _ in claims], [e for _, e in claims]) if claims else []
    relevance = judge.relevance([q for q, _ in questions], [s for _, s in questions]) if questions else []
    supported_at, relevant_at = thresholds_of(judge)
    for p, key, first, count, q_first in todo:
        scores = {
            "support": [float(x) for x in support[first : first + count]],
            "relevance": [float(x) for x in relevance[q_first : q_first + len(p.context)]],
            "supported_at": supported_at,  # the judge's DEV-fitted thresholds (its identity keys the cache)
            "relevant_at": relevant_at,
        }
        p.scores = scores
        cache.put(key, _writer(json.dumps(scores)))


def _writer(text: str) -> Callable[[Path], object]:
    return lambda path: path.write_text(text)


def _evidence(sentence: AnswerSentence, passages: Sequence) -> str:
    """The text of the passages a sentence cites (a number no passage has contributes nothing)."""
    return "\n\n".join(passages[n - 1].text for n in sentence.passages if 0 < n <= len(passages))


def judge_answer(
    judge: Judge, question: str, answer: Answer, passages: Sequence
) -> tuple[list[ContextSentence], Trace]:
    """One answer's context sentences and TRACe (``infra-rag answer --explain``, live traces)."""
    context = context_sentences(passages)
    sentences = answer_sentences(answer.text) if answer.outcome == "answered" else []
    judged = judged_sentences(sentences)
    support = judge.support([s.text for s in judged], [_evidence(s, passages) for s in judged]) if judged else []
    relevance = judge.relevance([question] * len(context), [c.text for c in context]) if context else []
    utilized = utilized_sentences(context, answer.citations)
    supported_at, relevant_at = thresholds_of(judge)
    return context, trace_scores(
        context, judged_relevant(relevance, relevant_at), utilized, sentences, support, supported_at
    )
