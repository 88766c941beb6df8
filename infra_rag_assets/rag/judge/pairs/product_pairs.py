"""Answer-shaped support pairs the product makes itself, from its chunks and the k8s TRAIN split.

``judge_pairs`` makes sentence-level pairs (a chunk sentence and near-verbatim rewordings);
answers are written differently, so this adds the shapes people and LLMs write:

* ``reference``: a train question's human-written reference answer (often reworded, any
  overlap) against its page's best chunk, plus the second best when the first covers less
  than half of the answer's terms (a reference may draw on two chunks);
* ``lead_in``: the reference behind "The documentation says that ..."-style lead-ins;
* ``quote``: a chunk sentence quoted with a lead-in ("The guide says: \"...\"");
* ``two_passage``: two supported sentences from two chunks, judged against their union;
* negatives: the reference with one fact changed (``number``, ``negation``, ``identifier`` swap,
  ``component`` = wrong entity), with an unsupported sentence of a neighbouring page appended
  (``addition``), a two-passage answer shown only one of its passages (``half_supported``),
  and the reference against the best chunk of another page (``other_page``).

``doc_id`` is the page, so ``judge_data.split_of`` keeps a page's pairs in one split.
Deterministic for a seed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from .claim_edits import MUTATIONS, coverage, mutate, window
from .judge_data import evidence
from .judge_pairs import SUPPORT, JudgePair, JudgePairs, _Corpus

LEAD_INS = ("The documentation says that ", "According to the docs, ", "As the guide explains, ", "In short, ")
QUOTE_LEADS = ('The guide says: "{}"', 'According to the documentation, "{}"', 'The docs put it this way: "{}"')
POSITIVE_KINDS = ("reference", "lead_in", "quote", "two_passage")
NEGATIVE_KINDS = (*MUTATIONS, "addition", "half_supported", "other_page")


def product_pairs(
    chunks: Iterable[Mapping], train_rows: Sequence[Mapping], *, max_rows: int = 1200, seed: int = 0,
    window_chars: int = 900,
) -> JudgePairs:  # fmt: skip
    """Pairs from at most ``max_rows`` train questions whose page is among ``chunks``."""
    rng = random.Random(seed)
    corpus = chunks if isinstance(chunks, _Corpus) else _Corpus(chunks)
    out = JudgePairs()
    rows = [r for r in train_rows if f"kubernetes:{r['source_page']}" in corpus.by_doc]
    rng.shuffle(rows)
    for row in rows[:max_rows]:
        out += _row_pairs(corpus, row, rng, window_chars)
    out.composition = {f"kind_{k}": n for k, n in sorted(Counter(p.kind for p in out).items())}
    return out


def reference_evidence(corpus: _Corpus, question: str, answer: str, doc: str, limit: int) -> tuple[str, int]:
    """(evidence, best chunk index) for a reference answer: its page's best chunk by BM25 of
    question + answer, windowed at the sentence most like the answer, with the second best
    chunk's window added when the first covers under half of the answer's terms."""
    page = corpus.by_doc[doc]
    scores = np.asarray(corpus.bm25.scores(f"{question}\n{answer}"))[page]
    ranked = [page[k] for k in np.argsort(-scores)[:2]]
    windows = [_window_at(corpus, i, answer, limit) for i in ranked]
    if coverage(answer, windows[0]) >= 0.5 or len(windows) == 1:
        return windows[0], ranked[0]
    return evidence(answer, windows, 2 * limit), ranked[0]


def _window_at(corpus: _Corpus, i: int, claim: str, limit: int) -> str:
    text = corpus.texts[i]
    s, e = max(corpus.spans[i] or [(0, len(text))], key=lambda sp: coverage(claim, text[sp[0] : sp[1]]))
    lo, hi = window(text, s, e, limit)
    return text[lo:hi].strip()


def _row_pairs(corpus: _Corpus, row: Mapping, rng: random.Random, limit: int) -> list[JudgePair]:
    doc = f"kubernetes:{row['source_page']}"
    question, answer = " ".join(row["question"].split()), " ".join(row["answer"].split())
    if len(answer.split()) < 3:
        return []
    passage, best = reference_evidence(corpus, question, answer, doc, limit)

    def pair(kind: str, claim: str, second: str, label: int) -> JudgePair:
        return JudgePair(SUPPORT, kind, claim, second, label, doc)

    out = [pair("reference", answer, passage, 1)]
    lowered = answer[0].lower() + answer[1:] if answer[:2].istitle() else answer
    out.append(pair("lead_in", rng.choice(LEAD_INS) + lowered, passage, 1))
    kinds = list(MUTATIONS)
    rng.shuffle(kinds)
    for kind in kinds:  # one near-miss edit per reference, the first kind that applies
        changed = mutate(kind, answer, rng, corpus.identifiers(doc))
        if changed and changed != answer:
            out.append(pair(kind, changed, passage, 0))
            break
    extra = corpus.neighbour_claim(doc, rng)
    if extra and coverage(extra, passage) < 0.5:
        out.append(pair("addition", f"{answer} {extra}", passage, 0))
    other = corpus.other_page_window(answer, doc, limit)
    if other and coverage(answer, other) < 0.8:
        out.append(pair("other_page", answer, other, 0))
    out += _quote_and_two_passage(corpus, best, doc, rng, limit, pair)
    return out


def _quote_and_two_passage(corpus: _Corpus, best: int, doc: str, rng: random.Random, limit: int, pair) -> list:
    """A lead-in quote of a sentence of the page's best chunk; that sentence with one of another
    chunk (same page when it has one, else a neighbour) against both windows (positive) and
    against the first window and a distractor (negative)."""
    claims = corpus.claims(best)
    if not claims:
        return []
    s, e, first = rng.choice(claims)
    text = corpus.texts[best]
    lo, hi = window(text, s, e, limit // 2)
    own = text[lo:hi].strip()
    out = [pair("quote", rng.choice(QUOTE_LEADS).format(first), own, 1)]
    pages = [d for d in [doc, *corpus.neighbours[doc]] if d in corpus.by_doc]
    others = [i for d in pages for i in corpus.by_doc[d] if i != best and corpus.claims(i)]
    if not others:
        return out
    j = rng.choice(others)
    s2, e2, second = rng.choice(corpus.claims(j))
    if coverage(second, own) >= 0.5 or coverage(first, corpus.texts[j]) >= 0.5:
        return out
    lo2, hi2 = window(corpus.texts[j], s2, e2, limit // 2)
    theirs = corpus.texts[j][lo2:hi2].strip()
    both = [own, theirs]
    rng.shuffle(both)
    claim = f"{first} {second}"
    out.append(pair("two_passage", claim, "\n\n".join(both), 1))
    distractor = corpus.other_page_window(second, doc, limit // 2)
    if distractor and coverage(second, distractor) < 0.6:
        out.append(pair("half_supported", claim, f"{own}\n\n{distractor}", 0))
    return out
