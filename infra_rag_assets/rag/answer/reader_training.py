"""Train and calibrate the reader: a recipe, a content key, one training loop, a dev report.

Training passages are character windows around the answer (``train_chars``), so sequences stay
short on 2 cores; reading uses whole chunks. The dev split (pages never trained on) gives the
reported span F1 and fits the Platt scaler that turns a span's margin over the null answer into
P(the span is the answer); the abstention floor applies to that probability.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..adapt.finetune import MAX_GRAD_NORM, WARMUP_FRACTION, _linear_warmup
from ..index.config import stable_hash
from ..probabilities import auroc, expected_calibration_error, fit_platt
from ..training import TrainProgress, length_batches
from .reader_data import DATA_VERSION, SpanExample, split_by_page, token_f1
from .reader_model import Span, SpanReader, decode, encode_pairs, load_reader, save_reader

READER_JSON = "reader.json"


@dataclass(frozen=True)
class ReaderRecipe:
    # r2, chosen on the dev pages (docs/answers.md): all six layers, every example twice, short
    # windows and a higher rate: ~7 min of training on 2 quiet cores, dev span F1 0.38 (r1: 0.19)
    layers: int = 6
    train_chars: int = 300  # passage window around the answer while training
    max_length: int = 384  # tokens read per (question, passage) at answer time
    max_span_tokens: int = 48
    batch_size: int = 16
    epochs: int = 2
    lr: float = 3e-4
    head_lr: float = 1e-3
    max_examples: int = 0  # train + dev, sampled; 0 = all
    negatives_per_positive: float = 0.5
    dev_share: float = 0.15
    good_f1: float = 0.5  # a dev span this close to the reference counts as a right answer
    seed: int = 13

    def to_dict(self) -> dict:
        return {**asdict(self), "data_version": DATA_VERSION}


def reader_key(recipe: ReaderRecipe, **lineage: str) -> str:
    """Directory name of the reader these inputs train: every input by content."""
    return stable_hash({"recipe": recipe.to_dict(), **lineage}, 16)


def _window(e: SpanExample, chars: int, rng: random.Random) -> tuple[str, int, int]:
    """The passage cut to ``chars`` around the answer (a negative: a random cut)."""
    if len(e.passage) <= chars:
        return e.passage, e.start, e.end
    if e.start < 0:
        a = rng.randint(0, len(e.passage) - chars)
        return e.passage[a : a + chars], -1, -1
    lo, hi = max(0, e.end - chars), min(e.start, len(e.passage) - chars)
    a = rng.randint(lo, max(lo, hi))
    return e.passage[a : a + chars], e.start - a, min(e.end - a, chars)


def _token_targets(enc: Any, spans: Sequence[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    starts, ends = [], []
    for row, (a, b) in enumerate(spans):
        offsets, segs = enc["offset_mapping"][row].tolist(), enc["segments"][row]
        ids = [i for i, s in enumerate(segs) if s == 1]
        si = next((i for i in ids if offsets[i][1] > a), None) if a >= 0 else None
        ei = next((i for i in reversed(ids) if offsets[i][0] < b), None) if a >= 0 else None
        ok = si is not None and ei is not None and si <= ei
        starts.append(si if ok else 0)
        ends.append(ei if ok else 0)
    return torch.tensor(starts), torch.tensor(ends)


def fit(model: SpanReader, tokenizer: Any, examples: Sequence[SpanExample], recipe: ReaderRecipe,
        device: torch.device, progress: TrainProgress | None) -> dict:  # fmt: skip
    rng = random.Random(recipe.seed)
    torch.manual_seed(recipe.seed)
    windows = [_window(e, recipe.train_chars, rng) for e in examples]
    lengths = [len(e.question) + len(w[0]) for e, w in zip(examples, windows)]
    model.encoder.embeddings.word_embeddings.weight.requires_grad_(False)
    head = set(model.head.parameters())
    body = [p for p in model.parameters() if p.requires_grad and p not in head]
    optimizer = torch.optim.AdamW([{"params": body, "lr": recipe.lr},
                                   {"params": list(head), "lr": recipe.head_lr}], weight_decay=0.01)  # fmt: skip
    batches = [b for e in range(recipe.epochs) for b in length_batches(lengths, recipe.batch_size, recipe.seed + e)]
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _linear_warmup(len(batches), WARMUP_FRACTION))
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    started, losses = time.perf_counter(), []
    for step, batch in enumerate(batches):
        enc = encode_pairs(tokenizer, [examples[i].question for i in batch], [windows[i][0] for i in batch],
                           recipe.max_length)  # fmt: skip
        ts, te = _token_targets(enc, [(windows[i][1], windows[i][2]) for i in batch])
        s, e = model(**{k: enc[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids")})
        loss = (loss_fn(s, ts.to(device)) + loss_fn(e, te.to(device))) / 2
        loss.backward()
        torch.nn.utils.clip_grad_norm_(body + list(head), MAX_GRAD_NORM)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
        if progress is not None:
            progress(step + 1, len(batches), float(np.mean(losses[-20:])))
    model.eval()
    seconds = time.perf_counter() - started
    return {"seconds_training": round(seconds, 1), "steps": len(batches), "torch_threads": torch.get_num_threads(),
            "loss_first": round(losses[0], 4) if losses else None,
            "loss_last_20": round(float(np.mean(losses[-20:])), 4) if losses else None}  # fmt: skip


def read_spans(model: SpanReader, tokenizer: Any, question: str, passages: Sequence[str], max_length: int,
               max_span_tokens: int, device: Any, batch_size: int = 16, top: int = 5) -> list[Span]:  # fmt: skip
    """Every passage's best spans against its null answer, best margin first."""
    out: list[Span] = []
    with torch.inference_mode():
        for a in range(0, len(passages), batch_size):
            chunk = list(passages[a : a + batch_size])
            enc = encode_pairs(tokenizer, [question] * len(chunk), chunk, max_length)
            s, e = model(**{k: enc[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids")})
            s, e = s.float().cpu().numpy(), e.float().cpu().numpy()
            for r in range(len(chunk)):
                out += decode(s[r], e[r], enc["offset_mapping"][r].tolist(), enc["segments"][r], a + r,
                              max_span_tokens, top)  # fmt: skip
    return sorted(out, key=lambda x: -x.margin)


def dev_report(model: SpanReader, tokenizer: Any, dev: Sequence[SpanExample], recipe: ReaderRecipe,
               device: torch.device) -> tuple[dict, dict]:  # fmt: skip
    """Span F1 on dev positives, and the Platt scaler fitted on (margin, right answer?) over dev."""
    margins, labels, f1s = [], [], []
    for e in dev:
        spans = read_spans(model, tokenizer, e.question, [e.passage], recipe.max_length, recipe.max_span_tokens,
                           device, top=1)  # fmt: skip
        best = spans[0] if spans else None
        f1 = token_f1(e.passage[best.start : best.end], e.passage[e.start : e.end]) if best and e.start >= 0 else 0.0
        margins.append(best.margin if best else -50.0)
        labels.append(int(e.start >= 0 and f1 >= recipe.good_f1))
        if e.start >= 0:
            f1s.append(f1)
    platt = fit_platt(np.array(margins)[:, None], labels, ["margin"]) if 0 < sum(labels) < len(labels) else None
    probs = platt.apply(np.array(margins)[:, None]) if platt else np.zeros(len(margins))
    report = {
        "dev_examples": len(dev),
        "dev_positives": len(f1s),
        "dev_span_f1": round(float(np.mean(f1s)), 4) if f1s else None,
        "dev_span_exact": round(float(np.mean([f == 1.0 for f in f1s])), 4) if f1s else None,
        "dev_margin_auroc": auroc(margins, labels),
        "dev_calibration_ece": round(expected_calibration_error(probs, labels), 4),
    }
    return report, (platt.to_dict() if platt else {"inputs": ["margin"], "weights": [1.0], "bias": 0.0})


def train_reader(base: Path, examples: Sequence[SpanExample], target: Path, recipe: ReaderRecipe, *,
                 device: str | torch.device = "cpu", progress: TrainProgress | None = None,
                 extra: dict | None = None) -> dict:  # fmt: skip
    """Fine-tune, report on dev pages, save under ``target`` (written whole, then renamed)."""
    dev_ = torch.device(device)
    pool = list(examples)
    if recipe.max_examples and len(pool) > recipe.max_examples:
        pool = random.Random(recipe.seed).sample(pool, recipe.max_examples)
    train, dev = split_by_page(pool, recipe.dev_share, recipe.seed)
    tokenizer, model = load_reader(base, layers=recipe.layers, device=dev_)
    stats = fit(model, tokenizer, train, recipe, dev_, progress)
    started = time.perf_counter()
    report, platt = dev_report(model, tokenizer, dev, recipe, dev_)
    report["seconds_dev"] = round(time.perf_counter() - started, 1)
    tmp = target.with_name(target.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    save_reader(model, tokenizer, tmp)
    from ..index.embedding import weights_hash

    record = {"recipe": recipe.to_dict(), "training": stats, "dev": report, "calibration": platt,
              "train_examples": len(train), "device": str(dev_), "trained_weights_hash": weights_hash(tmp),
              **(extra or {})}  # fmt: skip
    (tmp / READER_JSON).write_text(json.dumps(record, indent=2, sort_keys=True))
    if target.exists():
        import shutil

        shutil.rmtree(target)
    tmp.rename(target)
    return record
