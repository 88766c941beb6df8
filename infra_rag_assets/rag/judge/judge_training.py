"""The cross-encoder under the support judge: loading, pair encoding, training loop, scoring.

A plain PyTorch loop over MiniLM's BERT encoder with a new one-logit head on token alignment
(``alignment.AlignmentScorer``), binary cross-entropy: sentence-transformers' ``CrossEncoder.fit`` needs
``accelerate`` and ``datasets``, which this project does not install (as ``adapt/finetune.py``
found for the bi-encoder, whose warmup schedule and clipping this loop reuses).

Both tasks share the weights; a prefix on the first segment says which is asked. The first
segment (claim or question) is never truncated unless it alone would leave the passage fewer
than ``MIN_SECOND_TOKENS``; the passage is cut to fit ``max_length``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..adapt.finetune import MAX_GRAD_NORM, WARMUP_FRACTION, _linear_warmup, _recent_mean
from ..index.embedding import offline_models
from ..training import TrainProgress, length_batches
from .alignment import AlignmentScorer
from .pairs.judge_pairs import RELEVANCE, SUPPORT, JudgePair

TASKS = (SUPPORT, RELEVANCE)  # head rows, in this order
PREFIX = {SUPPORT: "support: ", RELEVANCE: "relevance: "}
HEAD_FILE = "head.safetensors"
MIN_SECOND_TOKENS = 32
CHARS_PER_TOKEN = 4  # only to sort by length before tokenizing


def load_cross_encoder(path: str | Path, *, layers: int = 0) -> tuple[Any, AlignmentScorer]:
    """(tokenizer, model) from a local directory only: the MiniLM base (new head) or a saved
    judge model (its ``HEAD_FILE``). ``layers`` keeps only the first encoder layers: each one
    dropped cuts training and scoring time by a sixth, and the judge scores thousands of pairs
    per eval run on 2 cores. transformers' load report (the base's unused pooler) is silenced."""
    offline_models()
    from safetensors.torch import load_file
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        encoder = AutoModel.from_pretrained(str(path), local_files_only=True, add_pooling_layer=False)
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()
    if layers and layers < encoder.config.num_hidden_layers:
        encoder.encoder.layer = encoder.encoder.layer[:layers]
        encoder.config.num_hidden_layers = layers
    prefix_tokens = {len(tokenizer.tokenize(p)) for p in PREFIX.values()}
    if len(prefix_tokens) != 1:
        raise ValueError(f"task prefixes must tokenize to the same length: {PREFIX}")
    tasks = [tokenizer(PREFIX[t], add_special_tokens=False)["input_ids"][0] for t in TASKS]
    model = AlignmentScorer(encoder, 1 + prefix_tokens.pop(), tokenizer.sep_token_id, tasks)
    if (Path(path) / HEAD_FILE).is_file():
        saved = load_file(str(Path(path) / HEAD_FILE))
        model.head.load_state_dict({k: v for k, v in saved.items() if not k.startswith("token.")})
        if "token.scale" in saved:  # judges before the token head have none: it keeps its start
            model.token_head.load_state_dict({k[6:]: v for k, v in saved.items() if k.startswith("token.")})
    model.eval()
    return tokenizer, model


def save_cross_encoder(model: AlignmentScorer, tokenizer: Any, directory: Path) -> None:
    """Encoder + tokenizer as a transformers directory, the head beside them (all hashed by
    ``weights_hash``: it reads every .safetensors file)."""
    from safetensors.torch import save_file
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # "Writing model shards" would spam asset logs
    try:
        model.encoder.save_pretrained(str(directory))
        tokenizer.save_pretrained(str(directory))
    finally:
        if bar:
            hf_logging.enable_progress_bar()
    heads = {**model.head.state_dict(), **{f"token.{k}": v for k, v in model.token_head.state_dict().items()}}
    save_file({k: v.contiguous() for k, v in heads.items()}, str(directory / HEAD_FILE))


def encode(
    tokenizer: Any, firsts: Sequence[str], seconds: Sequence[str], max_length: int, offsets: bool = False
) -> Any:
    """Padded tensors for (first, second) pairs, the second segment truncated to fit (and the
    tokens' character offsets when ``offsets``)."""
    limit = max(8, max_length - MIN_SECOND_TOKENS - 3)
    spans = tokenizer(list(firsts), add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    firsts = [f if len(o) <= limit else f[: o[limit - 1][1]] for f, o in zip(firsts, spans)]
    return tokenizer(
        list(firsts), list(seconds), truncation="only_second", max_length=max_length, padding=True,
        return_tensors="pt", return_offsets_mapping=offsets,
    )  # fmt: skip


def model_inputs(pairs: Sequence[JudgePair]) -> tuple[list[str], list[str]]:
    return [PREFIX[p.task] + p.first for p in pairs], [p.second for p in pairs]


def device_of(model: Any) -> Any:
    """The torch device a model's (first) parameters live on; CPU for one without any."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def fit(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[JudgePair],
    hp: dict,
    progress: TrainProgress | None,
    device: str = "cpu",
) -> dict:
    """Train ``model`` in place on the labelled pairs; returns timing and loss stats.

    The word embeddings (half of MiniLM's parameters) stay frozen when ``hp['freeze_embeddings']``:
    AdamW over 11.7M rows the few thousand pairs barely touch costs time and buys nothing.
    """
    random.seed(hp["seed"])
    torch.manual_seed(hp["seed"])
    firsts, seconds = model_inputs(pairs)
    where = torch.device(device)
    model.to(where)
    labels = torch.tensor([float(p.label) for p in pairs], device=where)
    cap = hp["train_seq_length"] * CHARS_PER_TOKEN
    lengths = [len(f) + min(len(s), cap) for f, s in zip(firsts, seconds)]
    if hp["freeze_embeddings"]:
        model.encoder.embeddings.word_embeddings.weight.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    head = {id(p) for p in model.head.parameters()}
    groups = [
        {"params": [p for p in params if id(p) not in head], "lr": hp["lr"]},
        {"params": list(model.head.parameters()), "lr": hp["head_lr"]},  # new weights: a far larger step
    ]
    epochs = [length_batches(lengths, hp["batch_size"], hp["seed"] + e) for e in range(hp["epochs"])]
    total = sum(len(b) for b in epochs)
    optimizer = torch.optim.AdamW(groups, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _linear_warmup(total, WARMUP_FRACTION))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    started, cpu_started, losses = time.perf_counter(), time.process_time(), []
    token_weight = float(hp.get("token_loss", 0.0))
    for batch in (b for batches in epochs for b in batches):
        enc = encode(tokenizer, [firsts[i] for i in batch], [seconds[i] for i in batch], hp["train_seq_length"], True)
        target, known = token_targets(enc, [pairs[i] for i in batch])
        enc, target, known = enc.to(where), target.to(where), known.to(where)
        logit, token_logits, claim = model(**enc, tokens=True)
        loss = loss_fn(logit, labels[batch])
        known = known * claim
        if token_weight and known.any():
            token_loss = torch.nn.functional.binary_cross_entropy_with_logits(token_logits, target, reduction="none")
            loss = loss + token_weight * (token_loss * known).sum() / known.sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
        if progress is not None:
            progress(len(losses), total, _recent_mean(losses))
    model.eval()
    seconds_training = time.perf_counter() - started
    return {
        "seconds_training": round(seconds_training, 1),
        "cpu_seconds_training": round(time.process_time() - cpu_started, 1),
        "steps": total,
        "torch_threads": torch.get_num_threads(),
        "device": str(where),
        "train_pairs_per_second": round(len(pairs) * hp["epochs"] / seconds_training, 2) if seconds_training else 0.0,
        "loss_first": round(losses[0], 4),
        "loss_last_20": round(_recent_mean(losses), 4),
    }


def token_targets(enc: Any, pairs: Sequence[JudgePair]) -> tuple[Any, Any]:
    """(targets, known) per token of a batch (``encode(..., offsets=True)``, whose offsets this
    pops): 1 where a span label marks the claim token unsupported, 0 where it is supported;
    known only for claim tokens of support pairs whose token labels are known: a supported
    claim (every token supported) or a pair with span labels (RAGTruth)."""
    offsets = enc.pop("offset_mapping")
    target = torch.zeros(offsets.shape[:2])
    known = torch.zeros(offsets.shape[:2])
    shift = len(PREFIX[SUPPORT])
    for i, p in enumerate(pairs):
        if p.task != SUPPORT or not (p.label == 1 or p.spans):
            continue
        sequence = enc.sequence_ids(i)
        for t, (s, e) in enumerate(offsets[i].tolist()):
            if sequence[t] != 0 or e <= shift:
                continue
            known[i, t] = 1.0
            target[i, t] = float(any(s - shift < b and e - shift > a for a, b in p.spans))
    return target, known


def token_probabilities(
    model: Any, tokenizer: Any, first: str, second: str, max_length: int
) -> list[tuple[int, int, float]]:
    """(start, end, P(unsupported)) per token of ``first`` (offsets into it, after the prefix)."""
    enc = encode(tokenizer, [PREFIX[SUPPORT] + first], [second], max_length, True)
    offsets = enc.pop("offset_mapping")[0].tolist()
    sequence = enc.sequence_ids(0)
    with torch.inference_mode():
        _, token_logits, claim = model(**enc.to(device_of(model)), tokens=True)
    probs = torch.sigmoid(token_logits[0]).cpu().tolist()
    shift = len(PREFIX[SUPPORT])
    mask = claim[0].tolist()
    return [
        (s - shift, e - shift, float(p))
        for (s, e), p, seq, m in zip(offsets, probs, sequence, mask)
        if seq == 0 and m and e > shift
    ]


def logits(
    model: Any, tokenizer: Any, firsts: Sequence[str], seconds: Sequence[str], max_length: int, batch_size: int = 64
) -> np.ndarray:
    """Raw logits in input order; pairs are scored shortest first so each batch pads little."""
    cap = max_length * CHARS_PER_TOKEN
    order = sorted(range(len(firsts)), key=lambda i: len(firsts[i]) + min(len(seconds[i]), cap))
    out = np.zeros(len(firsts), dtype=np.float64)
    where = device_of(model)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            enc = encode(tokenizer, [firsts[i] for i in batch], [seconds[i] for i in batch], max_length)
            out[batch] = model(**enc.to(where)).double().cpu().numpy()
    return out
