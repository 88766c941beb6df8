"""The adaptation training set of one index version: labelled + label-free triplets.

``training_set`` mixes (a) a seeded sample of the labelled Kubernetes train questions
(``finetune.load_train_pairs``: positive = best chunk of the question's page, hard negative =
best BM25 chunk of another page) with (b) label-free pairs from the docs of every project
(``pairs.doc_pairs``: titles, headings, descriptions, identifiers → the chunk they name),
shared evenly between projects, each with the same kind of hard negative: the best BM25 chunk
of another page for the query. One BM25 over the version's embedded texts serves both.

``model_key`` is the content address of the weights such a set trains: it hashes every input
(train data bytes, chunk texts, descriptions, base weights, recipe) and not the version name,
so an unchanged rebuild finds the model it trained before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from ..index.bm25 import BM25
from ..index.config import AdaptRecipe, stable_hash
from ..index.corpus_chunks import embed_input
from .finetune import TrainExample, TrainPairs, best_elsewhere, file_sha256, load_train_pairs
from .pairs import DocPair, balanced_sample, doc_pairs

CHUNK_FIELDS = ("chunk_id", "doc_id", "project", "title", "section_path", "page_kind", "ordinal", "text", "context")


def model_key(
    recipe: AdaptRecipe, *, chunks_version: str, base_weights_hash: str, train_data_hash: str, descriptions_hash: str
) -> str:
    """Directory name under ``<home>/models/``: a hash of what determines the weights, by content
    (the train split's *path* is left out: its bytes are in ``train_data_hash``)."""
    params = {k: v for k, v in asdict(recipe).items() if k != "train_split"}
    return stable_hash(
        {
            "chunks_version": chunks_version,
            "base_weights_hash": base_weights_hash,
            "train_data_hash": train_data_hash,
            "descriptions_hash": descriptions_hash,
            "recipe": params,
        },
        12,
    )


def descriptions_hash(descriptions: Mapping[str, str]) -> str:
    return stable_hash(sorted(descriptions.items()), 16)


def train_data_hash(path: str) -> str:
    """sha256 of the labelled train split, or "" when there is none (label-free only)."""
    return file_sha256(path) if path and Path(path).is_file() else ""


def training_set(recipe: AdaptRecipe, chunks: Sequence[Mapping], descriptions: Mapping[str, str]) -> TrainPairs:
    """Labelled + label-free triplets over ``chunks`` (rows with ``CHUNK_FIELDS``)."""
    chunks = list(chunks)
    texts = [embed_input(c.get("context") or "", c["text"]) for c in chunks]
    bm25 = BM25(texts)
    labelled: list[TrainExample] = []
    questions = skipped = 0
    if recipe.labelled_examples > 0 and train_data_hash(recipe.train_split):
        found = load_train_pairs(
            recipe.train_split, chunks, max_questions=recipe.labelled_examples, seed=recipe.seed, bm25=bm25
        )
        labelled, questions, skipped = list(found), found.questions, found.skipped
    sampled = balanced_sample(doc_pairs(chunks, descriptions, seed=recipe.seed), recipe.doc_examples, recipe.seed)
    examples = labelled + doc_examples(sampled, chunks, texts, bm25)
    pairs = TrainPairs(
        examples, questions=questions, skipped=skipped, train_data_hash=train_data_hash(recipe.train_split)
    )
    pairs.composition = {
        "labelled": len(labelled),
        **{f"doc_{k}": n for k, n in sorted(Counter(p.kind for p in sampled).items())},
        **{f"project_{k}": n for k, n in sorted(Counter(p.project for p in sampled).items())},
    }
    return pairs


def doc_examples(
    pairs: Sequence[DocPair], chunks: Sequence[Mapping], texts: Sequence[str], bm25: BM25
) -> list[TrainExample]:
    """Each label-free pair as a triplet: its chunk, and the best BM25 chunk of another page."""
    row_of = {c["chunk_id"]: i for i, c in enumerate(chunks)}
    page_rows: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        page_rows.setdefault(c["doc_id"], []).append(i)
    out = []
    for n, p in enumerate(pairs):
        pos = row_of[p.chunk_id]
        neg = best_elsewhere(bm25.scores(p.query), page_rows[p.doc_id])
        out.append(
            TrainExample(
                question_id=f"doc:{p.kind}:{n}",
                question=p.query,
                doc_id=p.doc_id,
                positive=texts[pos],
                negative=texts[neg],
                positive_chunk_id=p.chunk_id,
                negative_chunk_id=chunks[neg]["chunk_id"],
            )
        )
    return out
