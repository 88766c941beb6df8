"""Pack retrieved hits into a numbered, token-budgeted context for the answering model.

Why it works this way:

* Whole passages only: a chunk cut mid-sentence can drop the very qualifier ("not", "only
  when") that the answer hinges on, and a citation must point at text the model really saw.
* Passages are taken in rank order and packing stops at the first one that does not fit, so
  the context is always a prefix of the ranking and ``[n]`` equals the n-th best hit. Skipping a
  long passage to squeeze in a shorter, lower-ranked one would trade relevance for fill.
* The budget is checked by counting the *whole* packed text with the caller's tokenizer, not by
  adding per-passage counts: sub-word tokenizers are not always additive across joins.
* Sources are de-duplicated by URL (two chunks of one section share an anchor) so the
  reference list shows each link once, listing every passage number that cites it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .hits import Hit

SEP = " › "
PASSAGE_SEP = "\n\n"


@dataclass(frozen=True)
class Passage:
    number: int  # 1-based; what the model cites as [number]
    hit: Hit


@dataclass(frozen=True)
class Source:
    """One reference line; ``numbers`` lists every passage that shares this URL."""

    number: int
    title: str
    url: str
    numbers: tuple[int, ...] = ()

    def render(self) -> str:
        label = "".join(f"[{n}]" for n in (self.numbers or (self.number,)))
        return f"{label} {self.title} — {self.url}"


@dataclass
class PackedContext:
    text: str
    passages: list[Passage]
    sources: list[Source]
    tokens: int  # count_tokens(text)
    budget_tokens: int
    dropped: int = 0  # hits that did not fit the budget

    def render_sources(self) -> str:
        return render_sources(self.sources)


def render_sources(sources: Sequence[Source]) -> str:
    return "\n".join(s.render() for s in sources)


def passage_header(hit: Hit) -> str:
    """``project › title › section``, without repeating the title that starts most section paths."""
    section = hit.section
    if section == hit.title:
        section = ""
    elif section.startswith(hit.title + SEP):
        section = section[len(hit.title) + len(SEP) :]
    return SEP.join(part for part in (hit.project, hit.title, section) if part)


def format_passage(number: int, hit: Hit) -> str:
    return f"[{number}] {passage_header(hit)}\n{hit.url}\n{hit.text}"


def pack_passages(hits: Sequence[Hit], *, budget_tokens: int, count_tokens: Callable[[str], int]) -> PackedContext:
    """As many whole passages, best first, as fit ``budget_tokens`` (possibly none)."""
    if budget_tokens < 0:
        raise ValueError(f"budget_tokens must be >= 0, got {budget_tokens}")
    blocks: list[str] = []
    passages: list[Passage] = []
    text, tokens = "", 0
    for hit in hits:
        number = len(passages) + 1
        candidate = PASSAGE_SEP.join([*blocks, format_passage(number, hit)])
        used = count_tokens(candidate)
        if used > budget_tokens:
            break
        blocks.append(format_passage(number, hit))
        passages.append(Passage(number, hit))
        text, tokens = candidate, used
    return PackedContext(
        text=text,
        passages=passages,
        sources=_sources(passages),
        tokens=tokens,
        budget_tokens=budget_tokens,
        dropped=len(hits) - len(passages),
    )


def _sources(passages: Sequence[Passage]) -> list[Source]:
    by_url: dict[str, list[Passage]] = {}
    for passage in passages:
        by_url.setdefault(passage.hit.url, []).append(passage)
    return [
        Source(number=group[0].number, title=group[0].hit.title, url=url, numbers=tuple(p.number for p in group))
        for url, group in by_url.items()
    ]
