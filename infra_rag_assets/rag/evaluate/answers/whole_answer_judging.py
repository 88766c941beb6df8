"""The eval run's judging by a judge that reads whole answers (the ``claude`` backend) instead
of scoring (claim, passage) pairs: one call per uncached answer, its per-sentence support put
where the trained judge's goes (``scores["support"]``: one value per sentence that cites a
passage, as ``trace.judged_sentences`` orders them), so rows, TRACe and gates read either.

Relevance of the context sentences is the trained judge's work; the whole-answer judge passes
its ``relevance_judge`` (the version's trained judge, when there is one) and relevance is None
(unmeasured) without it. An answer the judge failed on gets no scores (adherence unmeasured),
is counted in ``judge_errors`` and is not cached, so the next run asks again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from ...index.config import stable_hash
from ...judge.batch import Item
from ...judge.trace import SUPPORTED_AT, thresholds_of
from ...operate.home import ContentCache


def scores_from_cache(p, cache: ContentCache, key: str, run) -> bool:
    """Whether ``p``'s judgement was cached under ``key`` (then set on ``p`` and counted)."""
    stored = cache.get(key)
    if stored is None:
        return False
    p.scores = json.loads(stored.read_text())
    run.judging_hits += 1
    return True


def judge_whole_answers(pending: Sequence, judge, cache: ContentCache, run) -> None:
    """Fill ``p.scores`` of every pending answer; count cache hits, errors and cost on ``run``."""
    helper = getattr(judge, "relevance_judge", None)
    relevant_at = thresholds_of(helper)[1]  # the trained judge's DEV-fitted relevance threshold
    for p in pending:
        key = stable_hash(
            {
                "judge": judge.identity,
                "relevance_judge": helper.identity if helper is not None else None,
                "question": p.record.question,
                "reference": p.record.reference_answer,
                "answer": p.answer.text if p.sentences else "",
                "passages": [h.text for h in p.passages],
            },
            32,
        )
        if scores_from_cache(p, cache, key, run):
            continue
        claims = [s for s in p.sentences if s.is_claim]
        result = _judged(judge, p, claims)
        run.judge_cost_usd = round(run.judge_cost_usd + (result["cost_usd"] or 0.0), 6)
        if result["error"] or len(result["sentences"]) != len(claims):
            run.judge_errors += 1
            continue
        support = [v["supported"] for s, v in zip(claims, result["sentences"], strict=True) if s.passages]
        relevance = None
        if helper is not None:
            texts = [c.text for c in p.context]
            relevance = [float(x) for x in helper.relevance([p.record.question] * len(texts), texts)] if texts else []
        p.scores = {
            "support": support,
            "relevance": relevance,
            "supported_at": SUPPORTED_AT,
            "relevant_at": relevant_at,
            "axes": result["axes"],
            "unsupported_spans": result["unsupported_spans"],
            "cost_usd": result["cost_usd"],
        }
        cache.put(key, partial(Path.write_text, data=json.dumps(p.scores)))


def _judged(judge, p, claims: list) -> dict:
    if not claims:  # an abstention or an empty answer: nothing to send
        return {"error": None, "sentences": [], "cost_usd": 0.0, "axes": {}, "unsupported_spans": []}
    passages = tuple((str(n), h.text) for n, h in enumerate(p.passages, 1))
    return judge.judge(Item(p.record.id, p.record.question, passages, p.answer.text), p.record.reference_answer)
