"""Judge answers that did not come from this product: ``infra-rag judge --batch`` and
``POST /judge`` read ``{"id", "question", "passages": [{"id", "text"}], "answer"}`` and return,
per id, TRACe and a verdict per answer sentence.

Such answers carry no citation spans, so each answer sentence is judged against the union of
the passages it cites by ``[n]`` marker (1-based positions in ``passages``) or, without
markers, against each of the passages most like it and against those together (a lexical
prefilter keeps ``CANDIDATES``, so 10,000 passages cost what 5 do; the judge is trained and
measured on the union of an answer's passages); ``passage`` names the (first) supporting
passage's id.
``adherent`` applies the judge's DEV-fitted threshold to every sentence. A context sentence counts as
used when most of its content terms appear in one answer sentence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..answer.records import PlainPassage
from ..common import jsonl_objects
from ..index.analysis import prose_terms
from .sentences import ContextSentence, answer_sentences, context_sentences
from .trace import judged_relevant, thresholds_of, trace_scores

CANDIDATES = 5  # passages per answer sentence that reach the cross-encoder
MAX_PASSAGES = 200  # context sentences are judged for relevance only up to this many passages
MAX_FIELD_CHARS = 100_000
USED_SHARE = 0.5  # a context sentence is "used" when this share of its terms is in an answer sentence


class JudgeInputError(ValueError):
    """A batch item is malformed (message is one line, naming the line)."""


@dataclass(frozen=True)
class Item:
    id: str
    question: str
    passages: tuple[tuple[str, str], ...]  # (id, text)
    answer: str


def parse_item(data: object, where: str) -> Item:
    """One validated item; ``where`` (``file:line``) prefixes every error."""
    if not isinstance(data, dict):
        raise JudgeInputError(f"{where}: expected a JSON object")
    for name in ("id", "question", "answer"):
        if not isinstance(data.get(name), str) or len(data[name]) > MAX_FIELD_CHARS:
            raise JudgeInputError(f"{where}: {name!r} must be a string of at most {MAX_FIELD_CHARS} characters")
    passages = data.get("passages")
    if not isinstance(passages, list):
        raise JudgeInputError(f"{where}: 'passages' must be a list of {{'id', 'text'}}")
    out = []
    for i, p in enumerate(passages):
        if not isinstance(p, dict) or not isinstance(p.get("text"), str) or not isinstance(p.get("id"), (str, int)):
            raise JudgeInputError(f"{where}: passages[{i}] must be an object with string 'id' and 'text'")
        out.append((str(p["id"]), p["text"][:MAX_FIELD_CHARS]))
    return Item(data["id"], data["question"], tuple(out), data["answer"])


def read_items(lines: Iterable[str], name: str) -> list[Item]:
    return [parse_item(data, where) for where, data in jsonl_objects(lines, name, JudgeInputError)]


def judge_items(judge, items: Sequence[Item]) -> list[dict]:
    """Every item judged; support and relevance pairs of all items go in two batched calls."""
    plans = [_plan(item) for item in items]
    claims = [pair for plan in plans for pair in plan["claims"]]
    questions = [pair for plan in plans for pair in plan["questions"]]
    support = judge.support([c for c, _ in claims], [p for _, p in claims]) if claims else []
    relevance = judge.relevance([q for q, _ in questions], [s for _, s in questions]) if questions else []
    out, s_at, r_at = [], 0, 0
    thresholds = thresholds_of(judge)
    for plan in plans:
        n_s, n_r = len(plan["claims"]), len(plan["questions"])
        out.append(_result(plan, support[s_at : s_at + n_s], relevance[r_at : r_at + n_r], thresholds))
        _point_at(judge, plan, out[-1], thresholds[0])
        s_at, r_at = s_at + n_s, r_at + n_r
    return out


def _plan(item: Item) -> dict:
    passages = [PlainPassage(pid, text) for pid, text in item.passages]
    sentences = [s for s in answer_sentences(item.answer) if s.is_claim]
    claims, owners = [], []
    for k, s in enumerate(sentences):
        marked = [n - 1 for n in s.passages if 0 < n <= len(passages)]
        if marked:  # what it cites, together: a sentence may rest on two passages
            claims.append((s.text, "\n\n".join(passages[i].text for i in marked)))
            owners.append((k, marked[0]))
            continue
        found = _candidates(s.text, passages)
        for index in found:
            claims.append((s.text, passages[index].text))
            owners.append((k, index))
        if len(found) > 1:  # and all of them together: an answer sentence often joins two
            claims.append((s.text, "\n\n".join(passages[i].text for i in found)))
            owners.append((k, found[0]))
    judged_context = passages[:MAX_PASSAGES]
    context = context_sentences(judged_context)
    return {
        "item": item,
        "passages": passages,
        "sentences": sentences,
        "claims": claims,
        "owners": owners,
        "context": context,
        "questions": [(item.question, c.text) for c in context],
        "truncated": len(passages) > MAX_PASSAGES,
    }


def _point_at(judge, plan: dict, result: dict, at: float) -> None:
    """Each unsupported sentence's unsupported words (``unsupported_spans``), when the judge
    can point at them, against the passages it was judged on."""
    spans = getattr(judge, "unsupported_spans", None)
    if spans is None:
        return
    evidence: dict[int, str] = {}
    for (k, _), (_, passage) in zip(plan["owners"], plan["claims"], strict=True):
        evidence.setdefault(k, passage)
    for k, verdict in enumerate(result["sentences"]):
        if verdict["supported"] < at:
            verdict["unsupported_spans"] = spans(verdict["text"], evidence.get(k, "")) if k in evidence else []


def _candidates(sentence: str, passages: Sequence[PlainPassage]) -> list[int]:
    """The ``CANDIDATES`` passages most lexically similar to an uncited sentence."""
    terms = set(prose_terms(sentence))
    scored = sorted(
        ((len(terms & set(prose_terms(p.text))), -i) for i, p in enumerate(passages) if p.text.strip()), reverse=True
    )
    return [-i for _, i in scored[:CANDIDATES]]


def _result(plan: dict, support: Sequence[float], relevance: Sequence[float], thresholds: tuple[float, float]) -> dict:
    item, passages, sentences = plan["item"], plan["passages"], plan["sentences"]
    best: dict[int, tuple[float, int]] = {}
    for (k, index), p in zip(plan["owners"], support, strict=True):
        if k not in best or p > best[k][0]:
            best[k] = (float(p), index)
    verdicts = [
        {
            "text": s.text,
            "supported": round(best[k][0], 4) if k in best else 0.0,
            "passage": passages[best[k][1]].chunk_id if k in best else None,
        }
        for k, s in enumerate(sentences)
    ]
    context: list[ContextSentence] = plan["context"]
    used = _used(context, [s.text for s in sentences])
    trace = trace_scores(context, judged_relevant(relevance, thresholds[1]), used, [], None)
    probs = [v["supported"] for v in verdicts]
    result = {
        "id": item.id,
        "adherence": round(math.prod(probs), 4) if probs else None,
        "adherent": all(p >= thresholds[0] for p in probs) if probs else None,
        "supported_at": thresholds[0],
        "relevance": _round(trace.relevance),
        "utilization": _round(trace.utilization),
        "completeness": _round(trace.completeness),
        "sentences": verdicts,
    }
    if not sentences:
        result["note"] = "the answer has no sentence to judge"
    elif not passages:
        result["note"] = "no passages: nothing can support the answer"
    if plan["truncated"]:
        result["note"] = f"relevance judged on the first {MAX_PASSAGES} of {len(passages)} passages"
    return result


def _used(context: Sequence[ContextSentence], answer: Sequence[str]) -> list[int]:
    said = [set(prose_terms(a)) for a in answer]
    out = []
    for i, c in enumerate(context):
        own = set(prose_terms(c.text))
        if own and any(len(own & s) >= USED_SHARE * len(own) for s in said):
            out.append(i)
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
