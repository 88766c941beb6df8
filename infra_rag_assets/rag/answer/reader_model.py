"""The reader network: MiniLM over (question, passage) with a start/end head, and span decoding.

Position 0 ([CLS]) stands for "no answer in this passage": a negative's start and end both point
at it, so ``null = start[0] + end[0]`` competes with every span's ``start[i] + end[j]``. Their
difference (the margin) is what the calibrator turns into the probability that the span is the
answer. Device is a parameter everywhere (``torch.device``), CPU by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..index.embedding import offline_models

HEAD_FILE = "span_head.safetensors"
MAX_QUESTION_TOKENS = 64  # a 2,000-character question is cut here, never the passage's budget


class SpanReader(torch.nn.Module):
    def __init__(self, encoder: Any) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = torch.nn.Linear(encoder.config.hidden_size, 2)

    def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> tuple[Any, Any]:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        logits = self.head(hidden.last_hidden_state)
        passage = (token_type_ids == 1) & (attention_mask == 1)
        passage[:, 0] = True  # [CLS]: the null answer
        masked = logits.masked_fill(~passage.unsqueeze(-1), -1e4)
        return masked[..., 0], masked[..., 1]


def load_reader(path: str | Path, *, layers: int = 0, device: str | torch.device = "cpu") -> tuple[Any, SpanReader]:
    """(tokenizer, model) from a local directory: the MiniLM base (new head) or a trained reader."""
    offline_models()
    from safetensors.torch import load_file
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        encoder = AutoModel.from_pretrained(str(path), local_files_only=True, add_pooling_layer=False)
    finally:
        hf_logging.set_verbosity(verbosity)
    if layers and layers < encoder.config.num_hidden_layers:
        encoder.encoder.layer = encoder.encoder.layer[:layers]
        encoder.config.num_hidden_layers = layers
    model = SpanReader(encoder)
    if (Path(path) / HEAD_FILE).is_file():
        model.head.load_state_dict(load_file(str(Path(path) / HEAD_FILE)))
    model.to(torch.device(device)).eval()
    return tokenizer, model


def save_reader(model: SpanReader, tokenizer: Any, directory: Path) -> None:
    from safetensors.torch import save_file

    model.encoder.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    save_file({k: v.detach().cpu().contiguous() for k, v in model.head.state_dict().items()},
              str(directory / HEAD_FILE))  # fmt: skip


def clip_question(tokenizer: Any, question: str) -> str:
    offsets = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    return question if len(offsets) <= MAX_QUESTION_TOKENS else question[: offsets[MAX_QUESTION_TOKENS - 1][1]]


def encode_pairs(tokenizer: Any, questions: Sequence[str], passages: Sequence[str], max_length: int) -> Any:
    """Padded tensors plus ``offset_mapping`` and ``sequence_ids`` (passage tokens are segment 1)."""
    enc = tokenizer([clip_question(tokenizer, q) for q in questions], list(passages), truncation="only_second",
                    max_length=max_length, padding=True, return_offsets_mapping=True,
                    return_tensors="pt")  # fmt: skip
    enc["segments"] = [enc.sequence_ids(i) for i in range(len(questions))]
    return enc


@dataclass(frozen=True)
class Span:
    passage: int  # index into the passages scored
    start: int  # character offsets into that passage's text
    end: int
    margin: float  # span score minus the passage's null score


def decode(start: np.ndarray, end: np.ndarray, offsets: Any, segments: Sequence, passage: int, max_tokens: int,
           top: int = 5) -> list[Span]:  # fmt: skip
    """The ``top`` best non-nested spans of one encoded pair, best first, as character spans."""
    ids = [i for i, s in enumerate(segments) if s == 1]
    if not ids:
        return []
    first, last = ids[0], ids[-1] + 1
    s, e = start[first:last], end[first:last]
    n = len(s)
    scores = s[:, None] + e[None, :]
    band = np.triu(np.ones((n, n), dtype=bool)) & ~np.triu(np.ones((n, n), dtype=bool), k=max_tokens)
    scores = np.where(band, scores, -np.inf)
    null = float(start[0] + end[0])
    out: list[Span] = []
    taken: list[tuple[int, int]] = []
    for flat in np.argsort(scores, axis=None)[::-1][: top * 20]:
        i, j = divmod(int(flat), n)
        if not np.isfinite(scores[i, j]):
            break
        if any(i <= b and j >= a for a, b in taken):
            continue
        taken.append((i, j))
        a, b = int(offsets[first + i][0]), int(offsets[first + j][1])
        out.append(Span(passage, a, b, float(scores[i, j]) - null))
        if len(out) == top:
            break
    return out
