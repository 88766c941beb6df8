"""Contrastive fine-tuning of the bi-encoder on (question, positive passage, hard negative).

Why: on this corpus, tuning all-MiniLM-L6-v2 with MultipleNegativesRankingLoss on train-split
questions lifted dense MRR@10 on the eval split from 0.665 to 0.731 in an earlier trial.

Pairs (``load_train_pairs``): the positive is the chunk of the question's own page that best
matches question + reference answer (BM25); the hard negative is the best BM25 chunk for the
question alone on any *other* page, i.e. what a lexical retriever would wrongly rank first.
Passages are ``embed_input(context, text)``: exactly what the vectors asset embeds.

Training (``train_bi_encoder``) is a plain PyTorch loop around sentence-transformers'
``MultipleNegativesRankingLoss``. ``SentenceTransformerTrainer`` and the legacy ``model.fit``
both need the ``accelerate`` and ``datasets`` packages, which this project does not install;
the loop below does what they would (AdamW, linear warmup/decay, grad clipping at 1.0,
batches without duplicate passages) in ~40 lines and no extra dependency.

Layout of ``out_dir`` (built in a staging dir, then renamed into place)::

    out_dir/model/          loadable sentence-transformers directory (point BuildResource.model here)
    out_dir/training.json   data hashes, counts, hyper-parameters, timings, base and trained weights hash

``training.json`` sits beside the model, not inside it, because ``weights_hash`` hashes every
``.json`` file of a model directory: inside, the file could never record the very hash that
the vectors asset will pin.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..devices import Device, for_stage
from ..training import TrainProgress

if TYPE_CHECKING:
    from ..index.bm25 import BM25

MODEL_SUBDIR = "model"
TRAINING_JSON = "training.json"
WARMUP_FRACTION = 0.1
MAX_GRAD_NORM = 1.0


@dataclass(frozen=True)
class TrainExample:
    question_id: str
    question: str
    doc_id: str
    positive: str
    negative: str
    positive_chunk_id: str
    negative_chunk_id: str


class TrainPairs(list):
    """``list[TrainExample]`` that also says what was read and skipped, and from which bytes."""

    composition: dict[str, int]  # example counts (labelled, per doc kind, per project); set by training_set()

    def __init__(self, examples: Iterable[TrainExample], *, questions: int, skipped: int, train_data_hash: str):
        super().__init__(examples)
        self.questions = questions
        self.skipped = skipped
        self.train_data_hash = train_data_hash


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def examples_hash(examples: Sequence[TrainExample]) -> str:
    """Identifies the exact training triplets (order included): the data the weights saw."""
    digest = hashlib.sha256()
    for ex in examples:
        digest.update(json.dumps(asdict(ex), sort_keys=True).encode() + b"\n")
    return digest.hexdigest()


def load_train_pairs(
    train_jsonl: str | Path,
    chunks: Iterable[Mapping],
    *,
    max_questions: int | None = None,
    seed: int = 0,
    dense_miner: DenseMiner | None = None,
    bm25: BM25 | None = None,
) -> TrainPairs:
    """One (question, positive, hard negative) per train question whose page has chunks.

    Questions whose ``kubernetes:<source_page>`` has no chunk (page missing from this corpus
    snapshot) are skipped and counted. ``max_questions`` keeps a seeded random sample of the
    usable questions (in file order), which bounds training time. With ``dense_miner`` the
    negative is the other-page chunk an existing dense model ranks highest (its own mistakes,
    ANCE-style) instead of the BM25 one. ``bm25`` (over the same chunks' embedded texts, in
    order) saves building it again when the caller already has one. (Index imports are local:
    the training loop below runs where only torch and sentence-transformers are installed.)
    """
    from ..index.bm25 import BM25
    from ..index.corpus_chunks import embed_input

    rows = [json.loads(line) for line in Path(train_jsonl).read_text().splitlines() if line.strip()]
    chunks = list(chunks)
    texts = [embed_input(c.get("context") or "", c["text"]) for c in chunks]
    by_doc: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        by_doc.setdefault(c["doc_id"], []).append(i)
    usable = [r for r in rows if f"kubernetes:{r['source_page']}" in by_doc]
    skipped = len(rows) - len(usable)
    usable = _sample(usable, max_questions, seed)
    bm25 = bm25 or BM25(texts)
    dense = dense_miner.scores([r["question"] for r in usable]) if dense_miner else None
    examples = [
        _example(r, bm25, by_doc[f"kubernetes:{r['source_page']}"], chunks, texts, None if dense is None else dense[i])
        for i, r in enumerate(usable)
    ]
    return TrainPairs(examples, questions=len(rows), skipped=skipped, train_data_hash=file_sha256(train_jsonl))


def _sample(rows: list[dict], max_questions: int | None, seed: int) -> list[dict]:
    """A seeded random subset of ``rows`` kept in file order (all rows when no cap applies)."""
    if max_questions is None or max_questions >= len(rows):
        return rows
    keep = set(random.Random(seed).sample(range(len(rows)), max_questions))
    return [r for i, r in enumerate(rows) if i in keep]


def _example(
    row: dict,
    bm25: BM25,
    page_rows: list[int],
    chunks: Sequence[Mapping],
    texts: list[str],
    dense_scores: np.ndarray | None = None,
) -> TrainExample:
    """Positive: best page chunk for question + answer (the chunk that holds the answer).
    Negative: best chunk of any other page for the question alone (what BM25 would wrongly
    rank first, or with ``dense_scores`` what the dense model would)."""
    page_scores = bm25.scores(f"{row['question']}\n{row.get('answer', '')}")[page_rows]
    pos = page_rows[int(page_scores.argmax())]
    scores = bm25.scores(row["question"]) if dense_scores is None else np.array(dense_scores, dtype=np.float32)
    neg = best_elsewhere(scores, page_rows)
    return TrainExample(
        question_id=row["id"],
        question=row["question"],
        doc_id=chunks[pos]["doc_id"],
        positive=texts[pos],
        negative=texts[neg],
        positive_chunk_id=chunks[pos]["chunk_id"],
        negative_chunk_id=chunks[neg]["chunk_id"],
    )


def best_elsewhere(scores: np.ndarray, page_rows: list[int]) -> int:
    """The highest-scoring row outside ``page_rows``: the hard negative (another page's chunk)."""
    scores = np.array(scores, dtype=np.float32)
    scores[page_rows] = -np.inf
    return int(scores.argmax())


@dataclass(frozen=True)
class DenseMiner:
    """Chunk vectors (rows aligned with the chunks given to ``load_train_pairs``, L2-normalised)
    and the encoder of the model that made them; cosine = dot product."""

    vectors: np.ndarray
    encode: Callable[[list[str]], np.ndarray]

    def scores(self, questions: list[str]) -> np.ndarray:
        return np.asarray(self.encode(questions), dtype=np.float32) @ self.vectors.T


def no_duplicate_batches(examples: Sequence[TrainExample], batch_size: int, seed: int) -> list[list[TrainExample]]:
    """Shuffled batches in which no passage text appears twice.

    MultipleNegativesRankingLoss treats every other passage of the batch as a negative, so two
    questions sharing a positive chunk in one batch would teach the model that its own positive
    is wrong. Clashing examples wait for a later batch (the last batches may be smaller).
    """
    pending = list(examples)
    random.Random(seed).shuffle(pending)
    batches = []
    while pending:
        batch: list[TrainExample] = []
        seen: set[str] = set()
        rest: list[TrainExample] = []
        for ex in pending:
            if len(batch) < batch_size and not {ex.positive, ex.negative} & seen:
                batch.append(ex)
                seen |= {ex.positive, ex.negative}
            else:
                rest.append(ex)
        batches.append(batch)
        pending = rest
    return batches


def train_bi_encoder(
    base_model_path: str | Path,
    examples: Sequence[TrainExample],
    out_dir: str | Path,
    *,
    epochs: int = 1,
    batch_size: int = 32,
    max_seq_length: int = 192,
    lr: float = 2e-5,
    seed: int = 0,
    progress: TrainProgress | None = None,
    extra: dict[str, Any] | None = None,
    device: str | Device | None = None,
) -> dict:
    """Fine-tune ``base_model_path`` on ``examples``; write ``out_dir/model`` + ``out_dir/training.json``.

    On ``device`` (a setting or ``devices.Device``; None: ``INFRA_RAG_DEVICE``), under its
    autocast precision; the batch and every hyper-parameter are the recipe's whatever the
    device, and the device is recorded, never hashed. Offline, no checkpoints: the only thing
    written is the final model, assembled in ``<parent>/.staging-<name>-<pid>-<uuid>`` and
    renamed to ``out_dir`` so a crash never leaves a half-written model where the
    content-addressed lookup would trust it. ``extra`` (e.g. the
    chunks version the pairs came from) is recorded in ``training.json`` as is.
    """
    from ..index.embedding import resolve_model_path, weights_hash

    out_dir = Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} exists: models are content-addressed and never overwritten")
    if not examples:
        raise ValueError("no training examples")
    base_path = resolve_model_path(str(base_model_path))
    hparams = {
        "epochs": epochs,
        "batch_size": batch_size,
        "max_seq_length": max_seq_length,
        "lr": lr,
        "seed": seed,
        "loss": "MultipleNegativesRankingLoss(scale=20, cos_sim)",
        "warmup_fraction": WARMUP_FRACTION,
        "max_grad_norm": MAX_GRAD_NORM,
        "optimizer": "AdamW",
    }
    staging = out_dir.parent / f".staging-{out_dir.name}-{os.getpid()}-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    try:
        model, stats = _fit(base_path, examples, hparams, progress, for_stage(device))
        model.save(str(staging / MODEL_SUBDIR), create_model_card=False)
        record = {
            "base_model": str(base_model_path),
            "base_model_path": str(base_path),
            "base_weights_hash": weights_hash(base_path),
            "trained_weights_hash": weights_hash(staging / MODEL_SUBDIR),
            "examples": len(examples),
            "examples_hash": examples_hash(examples),
            "train_data_hash": getattr(examples, "train_data_hash", ""),
            "questions": getattr(examples, "questions", None),
            "skipped_questions": getattr(examples, "skipped", None),
            "hyper_parameters": hparams,
            "saved_max_seq_length": int(model.max_seq_length),
            **stats,
            **(extra or {}),
        }
        (staging / TRAINING_JSON).write_text(json.dumps(record, indent=2, sort_keys=True))
        record = _publish(staging, out_dir, record)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {**record, "path": str(out_dir), "model_path": str(out_dir / MODEL_SUBDIR)}


def _publish(staging: Path, out_dir: Path, record: dict) -> dict:
    """Rename the finished staging dir into place. When a concurrent trainer of the same inputs
    published first, keep theirs (same content address) and return its record."""
    try:
        os.rename(staging, out_dir)
        return record
    except OSError:
        if not (out_dir / TRAINING_JSON).is_file():
            raise
        return json.loads((out_dir / TRAINING_JSON).read_text())


def _fit(base_path: Path, examples: Sequence[TrainExample], hp: dict, progress: TrainProgress | None, hw: Device):
    """The training loop; returns the trained model (max_seq_length restored) and timing stats.

    Training truncates passages to ``hp['max_seq_length']`` for speed, but the saved model keeps
    the base model's inference length so index builds embed chunks exactly as before.
    """
    import torch
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers >= 6 moved the losses; the GPU bench machine may carry an older one
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    except ImportError:
        from sentence_transformers.losses import MultipleNegativesRankingLoss  # type: ignore[no-redef]

    random.seed(hp["seed"])
    torch.manual_seed(hp["seed"])
    model = SentenceTransformer(str(base_path), device=hw.torch_device, local_files_only=True)
    inference_length = model.max_seq_length
    model.max_seq_length = hp["max_seq_length"]
    loss_fn = MultipleNegativesRankingLoss(model)
    epochs = [no_duplicate_batches(examples, hp["batch_size"], hp["seed"] + e) for e in range(hp["epochs"])]
    total = sum(len(b) for b in epochs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=hp["lr"], weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _linear_warmup(total, hp["warmup_fraction"]))
    # fp16 gradients underflow without loss scaling; bf16 and fp32 need none
    scaler = torch.amp.GradScaler(hw.kind) if hw.precision == "fp16" else None
    model.train()
    started, cpu_started, step, losses = time.perf_counter(), time.process_time(), 0, []
    for batches in epochs:
        for batch in batches:
            losses.append(_train_step(model, loss_fn, optimizer, scheduler, batch, hp["max_grad_norm"], hw, scaler))
            step += 1
            if progress is not None:
                progress(step, total, _recent_mean(losses))
    seconds = time.perf_counter() - started
    model.eval()
    model.max_seq_length = inference_length
    return model, {
        "seconds_training": round(seconds, 1),
        "steps": total,
        "cpu_seconds_training": round(time.process_time() - cpu_started, 1),
        "torch_threads": torch.get_num_threads(),
        **hw.metadata(),
        "pairs_per_second": round(len(examples) * hp["epochs"] / seconds, 3) if seconds else 0.0,
        "loss_first": round(losses[0], 4),
        "loss_last_20": round(_recent_mean(losses), 4),
    }


def _train_step(model, loss_fn, optimizer, scheduler, batch: list[TrainExample], max_grad_norm: float, hw, scaler):
    """One optimizer step on (questions, positives, hard negatives); every other passage of the
    batch is an extra in-batch negative for each question."""
    import torch

    columns = ([e.question for e in batch], [e.positive for e in batch], [e.negative for e in batch])
    tokenize = getattr(model, "preprocess", None) or model.tokenize  # sentence-transformers < 6: tokenize
    features = [_to(tokenize(list(col)), hw.torch_device) for col in columns]
    with hw.autocast():
        loss = loss_fn(features, None)
    if scaler is None:
        loss.backward()
    else:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    if scaler is None:
        optimizer.step()
    else:
        scaler.step(optimizer)
        scaler.update()
    scheduler.step()
    optimizer.zero_grad()
    return float(loss.detach())


def _to(features: dict, device: str) -> dict:
    """Tokenized features onto the model's device (``preprocess`` returns CPU tensors)."""
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in features.items()}


def _recent_mean(losses: list[float], window: int = 20) -> float:
    recent = losses[-window:]
    return sum(recent) / len(recent)


def _linear_warmup(total_steps: int, warmup_fraction: float) -> Callable[[int], float]:
    """LR multiplier: linear ramp over the first ``warmup_fraction`` of steps, then linear decay to 0."""
    warmup = max(1, math.ceil(total_steps * warmup_fraction))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return factor
