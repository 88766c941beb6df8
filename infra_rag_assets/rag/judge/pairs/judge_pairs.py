"""Labelled pairs for the support judge, made from the corpus and the benchmark's TRAIN split.

Support (claim, passage): a chunk sentence against a window of its chunk (positive), also lightly
reworded (lead-in, dropped parenthetical, swapped conjuncts or clauses), and a train reference
answer against the chunk of its page that covers it. Negatives are the same sentence changed (a
number, a negation or antonym, an identifier of the page or its neighbours, a sibling component) against
the window with the original sentence removed (or, for ``contradict_share`` of them, kept: then
the passage contradicts the claim), a sentence of a neighbouring page against this window, and
the unchanged sentence against the best BM25 chunk of another page. Without such near misses a
cross-encoder learns topic match, not support.

Relevance (question, sentence): a train question against the sentence of its page's best chunk
that holds the reference answer (positive), and low-overlap sentences of the same or a
neighbouring page (negatives); a version holding none of the train questions' pages (one
non-k8s source) asks its section headings instead. Deterministic for a seed; no model, no I/O but the train split.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...answer.extractive import sentence_spans
from ...index.analysis import prose_terms
from ...index.bm25 import BM25
from ...ingest.parse.sections import iter_headings
from .claim_edits import (  # noqa: F401 - re-exported: the pair rules' public names
    COMPONENT_GROUPS,
    IDENTIFIER,
    LEXICAL_FEATURES,
    MUTATIONS,
    NEGATION_CUES,
    NUMBER,
    claim_text,
    coverage,
    lexical_features,
    mutate,
    paraphrase,
    polarity_mismatch,
    window,
)

PAIRS_VERSION = "2"  # bump when the rules below change: trained judges are addressed by it (2: antonyms)
SUPPORT, RELEVANCE = "support", "relevance"
# fmt: off
KINDS = {  # kind -> (task, label, weight within its task and label)
    "sentence": (SUPPORT, 1, 0.45), "paraphrase": (SUPPORT, 1, 0.35), "answer": (SUPPORT, 1, 0.20),
    "number": (SUPPORT, 0, 0.15), "negation": (SUPPORT, 0, 0.20), "identifier": (SUPPORT, 0, 0.15),
    "component": (SUPPORT, 0, 0.15), "neighbour": (SUPPORT, 0, 0.15), "other_page": (SUPPORT, 0, 0.20),
    "relevant": (RELEVANCE, 1, 1.0), "irrelevant_page": (RELEVANCE, 0, 0.5),
    "irrelevant_neighbour": (RELEVANCE, 0, 0.5),
}
@dataclass(frozen=True)
class JudgePair:
    task: str  # SUPPORT: (claim, passage); RELEVANCE: (question, sentence)
    kind: str
    first: str
    second: str
    label: int
    doc_id: str  # the page (or public source) the pair was made from: hold-outs split by it
    spans: tuple[tuple[int, int], ...] = ()  # unsupported [start, end) in ``first``, where labelled


class JudgePairs(list):
    """``list[JudgePair]`` with ``composition``: counts per kind, label and page, for reports."""

    composition: dict[str, int]


def load_train_rows(path: str | Path) -> list[dict]:
    """The labelled TRAIN split; refuses eval/test files so they can never leak into training."""
    name = Path(path).name.lower()
    if "eval" in name or "test" in name:
        raise ValueError(f"{name}: the judge trains on the train split only")
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def page_split(doc_ids: Iterable[str], share: float, seed: int) -> set[str]:
    """The seeded ``share`` of pages held out (a page's passages are all in or all out)."""
    pages = sorted(set(doc_ids))
    return set(random.Random(seed).sample(pages, round(len(pages) * share)))


def split_for_calibration(
    pairs: Sequence[JudgePair], share: float, seed: int
) -> tuple[list[JudgePair], list[JudgePair], set[str]]:
    """(train, calibration, held-out pages). By page (``page_split``), so the calibrators and
    their metrics see passages the model never trained on. A small corpus (a test fixture)
    whose held-out pages lack a label of a task, or leave nothing to train on, is split by
    pair instead (no held-out page): its calibration is then in-corpus, and says so."""
    held = page_split([p.doc_id for p in pairs], share, seed)
    train = [p for p in pairs if p.doc_id not in held]
    calibration = [p for p in pairs if p.doc_id in held]
    tasks = {p.task for p in pairs}
    if train and all({p.label for p in calibration if p.task == t} == {0, 1} for t in tasks):
        return train, calibration, held
    shuffled = list(pairs)
    random.Random(seed).shuffle(shuffled)
    cut = max(2, round(len(shuffled) * share))
    calibration, train = shuffled[:cut], shuffled[cut:]
    if not train or not all({p.label for p in calibration if p.task == t} == {0, 1} for t in tasks):
        raise ValueError(f"too few pairs to train and calibrate a judge: {len(pairs)}")
    return train, calibration, set()


class _Corpus:
    """Chunks indexed for pair making: pages in order, neighbouring pages, claim sentences, BM25."""

    def __init__(self, chunks: Iterable[Mapping]) -> None:
        self.chunks = sorted(chunks, key=lambda c: (c["doc_id"], c["chunk_id"]))
        self.texts = [c["text"] for c in self.chunks]
        self.by_doc: dict[str, list[int]] = {}
        for i, c in enumerate(self.chunks):
            self.by_doc.setdefault(c["doc_id"], []).append(i)
        docs = sorted(self.by_doc)
        self.neighbours = {
            d: [o for o in docs[max(0, n - 2) : n + 3] if o != d and o.split(":")[0] == d.split(":")[0]]
            for n, d in enumerate(docs)
        }
        self.spans = [sentence_spans(t) for t in self.texts]
        self.bm25 = BM25(self.texts)
        self._identifiers: dict[str, list[str]] = {}

    def claims(self, i: int, min_words: int = 6) -> list[tuple[int, int, str]]:
        text = self.texts[i]
        return [(s, e, c) for s, e in self.spans[i] if (c := claim_text(text[s:e], min_words))]

    def identifiers(self, doc: str) -> list[str]:
        """Identifiers of the page and its neighbours: the plausible wrong ones for a swap."""
        if doc not in self._identifiers:
            rows = [i for d in [doc, *self.neighbours[doc]] for i in self.by_doc[d]]
            self._identifiers[doc] = sorted({m for i in rows for m in IDENTIFIER.findall(self.texts[i])})
        return self._identifiers[doc]

    def neighbour_claim(self, doc: str, rng: random.Random, min_words: int = 6) -> str | None:
        for _ in range(3):
            if not self.neighbours[doc]:
                return None
            claims = self.claims(rng.choice(self.by_doc[rng.choice(self.neighbours[doc])]), min_words)
            if claims:
                return rng.choice(claims)[2]
        return None

    def other_page_window(self, claim: str, doc: str, limit: int) -> str:
        """The best BM25 chunk of another page, windowed at its sentence most like the claim."""
        scores = np.array(self.bm25.scores(claim), dtype=np.float32)
        scores[self.by_doc[doc]] = -np.inf
        i = int(scores.argmax())
        text = self.texts[i]
        s, e = max(self.spans[i] or [(0, 0)], key=lambda sp: coverage(claim, text[sp[0] : sp[1]]))
        lo, hi = window(text, s, e, limit)
        return text[lo:hi].strip()


class _Pools:
    """Candidate pairs per kind, each capped, so generation stops once every kind has enough."""

    def __init__(self, quotas: Mapping[str, int]) -> None:
        self.quotas = dict(quotas)
        self.pairs: dict[str, list[JudgePair]] = {k: [] for k in KINDS}
        self.contradicted: set[JudgePair] = set()

    def open(self, kind: str) -> bool:
        return len(self.pairs[kind]) < 2 * self.quotas[kind] + 8

    def behind(self, kinds: Iterable[str]) -> list[str]:
        """Open kinds, the one furthest below its weighted share first."""
        return sorted((k for k in kinds if self.open(k)), key=lambda k: (len(self.pairs[k]) / KINDS[k][2], k))

    def add(self, kind: str, first: str, second: str, doc: str, contradicted: bool = False) -> None:
        pair = JudgePair(KINDS[kind][0], kind, first, second, KINDS[kind][1], doc)
        self.pairs[kind].append(pair)
        if contradicted:
            self.contradicted.add(pair)


def build_judge_pairs(
    chunks: Iterable[Mapping],
    train_rows: Sequence[Mapping] = (),
    *,
    max_pairs: int = 4000,
    seed: int = 0,
    window_chars: int = 600,
    relevance_share: float = 0.3,
    contradict_share: float = 0.3,
) -> JudgePairs:
    """At most ``max_pairs`` pairs: ``relevance_share`` relevance, the rest support, each half
    positive, kinds mixed by ``KINDS`` weights (a kind short of candidates leaves its share to
    the others of its task and label). ``chunks`` need ``chunk_id``, ``doc_id`` and ``text``."""
    rng = random.Random(seed)
    corpus = _Corpus(chunks)
    targets = {(SUPPORT, 1): max_pairs * (1 - relevance_share) / 2, (RELEVANCE, 1): max_pairs * relevance_share / 2}
    targets[(SUPPORT, 0)], targets[(RELEVANCE, 0)] = targets[(SUPPORT, 1)], targets[(RELEVANCE, 1)]
    groups = {g: [k for k, (t, lab, _) in KINDS.items() if (t, lab) == g] for g in targets}
    quotas = {k: round(targets[g] * KINDS[k][2]) for g, kinds in groups.items() for k in kinds}
    pools = _Pools(quotas)
    _train_row_pairs(corpus, train_rows, pools, rng, window_chars, contradict_share)
    if not pools.pairs["relevant"]:  # no train question's page is here (a one-source version)
        _heading_pairs(corpus, pools, rng)
    _sentence_pairs(corpus, pools, rng, window_chars, contradict_share)
    chosen = JudgePairs()
    for g, kinds in groups.items():
        # as many of this label as the other label of the task can match: the mix stays 50/50
        both = [sum(len(pools.pairs[k]) for k in groups[(g[0], lab)]) for lab in (0, 1)]
        have = {k: len(pools.pairs[k]) for k in kinds}
        for k, n in _allocate(min(round(targets[g]), *both), {k: KINDS[k][2] for k in kinds}, have).items():
            chosen.extend(pools.pairs[k][:n])
    rng.shuffle(chosen)
    chosen.composition = {
        **{f"kind_{k}": n for k, n in sorted(Counter(p.kind for p in chosen).items())},
        **{
            f"{t}_{'pos' if lab else 'neg'}": n
            for (t, lab), n in sorted(Counter((p.task, p.label) for p in chosen).items())
        },
        "contradicted": sum(p in pools.contradicted for p in chosen),
        "pages": len({p.doc_id for p in chosen}),
        "pairs": len(chosen),
    }
    return chosen


def _allocate(target: int, weights: Mapping[str, float], available: Mapping[str, int]) -> dict[str, int]:
    """Water-filling: one pair at a time to the kind furthest below its weight that has one left."""
    alloc = dict.fromkeys(weights, 0)
    for _ in range(target):
        open_kinds = [k for k in weights if alloc[k] < available[k]]
        if not open_kinds:
            break
        alloc[min(open_kinds, key=lambda k: (alloc[k] / weights[k], k))] += 1
    return alloc


def _negative(kind, corpus, claim, doc, kept, removed, rng, limit, contradict_share):
    """(claim, passage, contradicted) of one negative kind for a sentence or answer, or None."""
    if kind in MUTATIONS:
        changed = mutate(kind, claim, rng, corpus.identifiers(doc))
        if not changed or changed == claim or not removed:
            return None
        contradicted = rng.random() < contradict_share
        return changed, kept if contradicted else removed, contradicted
    if kind == "neighbour":
        other = corpus.neighbour_claim(doc, rng)
        return (other, kept, False) if other and coverage(other, kept) < 0.5 else None
    passage = corpus.other_page_window(claim, doc, limit)
    return (claim, passage, False) if passage and coverage(claim, passage) < 0.8 else None


def _add_negative(corpus, pools, kinds, claim, doc, kept, removed, rng, limit, share) -> None:
    for kind in pools.behind(kinds):
        if found := _negative(kind, corpus, claim, doc, kept, removed, rng, limit, share):
            pools.add(kind, found[0], found[1], doc, found[2])
            return


def _sentence_pairs(corpus: _Corpus, pools: _Pools, rng, limit: int, share: float) -> None:
    """Per chunk (seeded order) one claim sentence: one positive and the negative most needed."""
    negatives = [*MUTATIONS, "neighbour", "other_page"]
    order = list(range(len(corpus.texts)))
    rng.shuffle(order)
    for i in order:
        if not pools.behind(["sentence", "paraphrase", *negatives]):
            return
        claims = corpus.claims(i)
        if not claims:
            continue
        s, e, claim = rng.choice(claims)
        text, doc = corpus.texts[i], corpus.chunks[i]["doc_id"]
        lo, hi = window(text, s, e, limit)
        kept, removed = text[lo:hi].strip(), (text[lo:s] + text[e:hi]).strip()
        if claim in " ".join(removed.split()):
            removed = ""  # the sentence occurs twice: removing one copy proves nothing
        for kind in pools.behind(["sentence", "paraphrase"])[:1]:
            pools.add(kind, claim if kind == "sentence" else paraphrase(claim, rng), kept, doc)
        _add_negative(corpus, pools, negatives, claim, doc, kept, removed, rng, limit, share)


def _train_row_pairs(corpus: _Corpus, rows: Sequence[Mapping], pools: _Pools, rng, limit: int, share: float) -> None:
    """Per train question whose page is here: the answer as a support positive (and changed, a
    negative), and relevance pairs from the page's best chunk for question + answer."""
    rows = [r for r in rows if f"kubernetes:{r['source_page']}" in corpus.by_doc]
    rng.shuffle(rows)
    for row in rows:
        if not pools.behind(["answer", "relevant"]):
            return
        doc = f"kubernetes:{row['source_page']}"
        page = corpus.by_doc[doc]
        question, answer = " ".join(row["question"].split()), " ".join(row["answer"].split())
        best = page[int(np.argmax(corpus.bm25.scores(f"{question}\n{answer}")[page]))]
        text, spans = corpus.texts[best], corpus.spans[best]
        if not spans:
            continue
        s, e = max(spans, key=lambda sp: coverage(answer, text[sp[0] : sp[1]]))
        lo, hi = window(text, s, e, limit)
        kept, removed = text[lo:hi].strip(), (text[lo:s] + text[e:hi]).strip()
        if pools.open("answer") and len(set(prose_terms(answer))) >= 3 and coverage(answer, kept) >= 0.8:
            pools.add("answer", answer, kept, doc)
            _add_negative(corpus, pools, MUTATIONS, answer, doc, kept, removed, rng, limit, share)
        sentence = " ".join(text[s:e].split())
        if pools.open("relevant") and coverage(answer, sentence) >= 0.5:
            pools.add("relevant", question, sentence, doc)
            _relevance_negatives(corpus, pools, question, answer, doc, rng)


def _heading_pairs(corpus: _Corpus, pools: _Pools, rng) -> None:
    """Relevance pairs for a version holding no train question's page: a section heading asked as
    a question against the first claim sentence under it (positive) and low-overlap sentences of
    the page and a neighbour (negatives). Weaker than human questions; only the fallback."""
    order = list(range(len(corpus.texts)))
    rng.shuffle(order)
    for i in order:
        if not pools.open("relevant"):
            return
        first = next(iter_headings(corpus.texts[i].lstrip()), None)
        title = first.heading.strip(" `*") if first is not None and first.line_start == 0 else ""
        if len(set(prose_terms(title))) < 2:
            continue
        claims = [c for *_, c in corpus.claims(i) if coverage(title, c) > 0]
        if claims:
            doc = corpus.chunks[i]["doc_id"]
            question = f"What about {title}?"
            pools.add("relevant", question, claims[0], doc)
            _relevance_negatives(corpus, pools, question, claims[0], doc, rng)


def _relevance_negatives(corpus: _Corpus, pools: _Pools, question: str, answer: str, doc: str, rng) -> None:
    """A sentence of the same page, and one of a neighbouring page, sharing little with the answer."""
    page = corpus.by_doc[doc]
    same = [c for i in rng.sample(page, min(len(page), 8)) for *_, c in corpus.claims(i, 4)]
    same = [c for c in same if coverage(answer, c) <= 0.2]
    if same and pools.open("irrelevant_page"):
        pools.add("irrelevant_page", question, rng.choice(same), doc)
    other = corpus.neighbour_claim(doc, rng, 4)
    if other and coverage(answer, other) <= 0.2 and pools.open("irrelevant_neighbour"):
        pools.add("irrelevant_neighbour", question, other, doc)
