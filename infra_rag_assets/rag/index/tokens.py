"""The embedding model's tokens as the chunker sees them: counting, offsets, and the one
place a chunk is cut inside a word (a whitespace-free run longer than the token budget)."""

from __future__ import annotations

from typing import Any, Protocol


class TokenCounter(Protocol):
    """Counts the embedding model's tokens; special tokens ([CLS], [SEP]) are never included."""

    def count(self, text: str) -> int: ...

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """``[start, end)`` character offsets into ``text`` of each token."""
        ...


class HFTokenCounter:
    """:class:`TokenCounter` over a HuggingFace *fast* tokenizer (or a ``tokenizers.Tokenizer``).

    Uses a private copy of the Rust tokenizer with truncation and padding switched off: the
    MiniLM ``tokenizer.json`` ships with both set to 128, which would silently cap counts.
    """

    def __init__(self, tokenizer: Any) -> None:
        from tokenizers import Tokenizer

        backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        self._tok = Tokenizer.from_str(backend.to_str())
        self._tok.no_truncation()
        self._tok.no_padding()

    @classmethod
    def from_model_path(cls, path: Any) -> HFTokenCounter:
        """Load only the tokenizer files of a model directory; no weights are read."""
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(str(path)))

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return list(self._tok.encode(text, add_special_tokens=False).offsets)


def trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` past leading/trailing whitespace (``str.isspace`` semantics)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def hard_cut(text: str, start: int, end: int, counter: TokenCounter, limit: int) -> list[tuple[int, int, int]]:
    """Cut ``[start, end)`` between tokens into verified pieces of at most ``limit`` tokens.

    A piece re-tokenized on its own may count differently than in context (a trailing
    ``##suffix`` word piece becomes a fresh word), so each candidate is re-counted and
    shortened one token boundary at a time until it fits. Only a single token boundary step
    that alone exceeds ``limit`` (impossible for WordPiece with limit >= 1) is emitted as is.
    """
    cuts = sorted({start + a for a, _ in counter.offsets(text[start:end]) if a > 0} | {end})
    out: list[tuple[int, int, int]] = []
    pos, j = start, 0
    while pos < end:
        g = min(j + limit - 1, len(cuts) - 1)
        while True:
            s, e = trim(text, pos, cuts[g])
            n = counter.count(text[s:e]) if s < e else 0
            if n <= limit or g == j:
                break
            g -= 1
        if s < e:
            out.append((s, e, n))
        pos, j = cuts[g], g + 1
    return out
