"""Retrieval configuration: every knob that changes what a query returns, and the named configs.

Split from ``retrieval.py`` so the knobs, their validation and the measured defaults read in
one place; ``retrieval`` re-exports everything here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal, TypedDict

from ..index.lexical_store import DEFAULT_BOOSTS
from .fusion import FusionSettings


@dataclass(frozen=True)
class RetrievalSettings:
    """Every knob that changes what a query returns; ``config_hash`` pins it in traces/evals."""

    name: str = "hybrid-weighted"
    mode: Literal["dense", "lexical", "hybrid"] = "hybrid"
    fusion: Literal["rrf", "weighted", "learned"] = "weighted"
    rrf_k: int = 60
    alpha: float = 0.5
    depth: int = 50
    floor: float | None = None
    rerank: bool = False
    rerank_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    rerank_depth: int = 20
    boosts: tuple[tuple[str, float], ...] = ()
    page_weight: float = 0.0  # page-level BM25 term (see fusion); needs the page index
    page_dense_weight: float = 0.0  # best dense cosine of the chunk's page among candidates
    page_depth: int = 100  # pages asked of the page index
    max_per_page: int = 0  # cap on chunks per page in the returned order (0 = none)
    # Abstention (rag/search/calibration.py, answerability.py): use the served version's
    # calibrated floor instead of ``floor`` when it has one; refuse questions naming a word the
    # corpus lacks. Left out of config_hash at False, like the page knobs at their defaults.
    calibrated_floor: bool = False
    answerability: bool = False
    # fusion="learned": JSON weights of a ranker (rag/search/ranking/ranker.py) over candidate pages; a
    # relative path is resolved against this package's rankers/ directory.
    ranker: str = ""

    def __post_init__(self) -> None:
        # Normalised so equal configs hash equally (boost order, 1 vs 1.0, "60" from a CLI flag).
        normal = {
            "alpha": float(self.alpha),
            "rrf_k": int(self.rrf_k),
            "depth": int(self.depth),
            "rerank_depth": int(self.rerank_depth),
            "rerank": bool(self.rerank),
            "floor": None if self.floor is None else float(self.floor),
            "page_weight": float(self.page_weight),
            "page_dense_weight": float(self.page_dense_weight),
            "page_depth": int(self.page_depth),
            "max_per_page": int(self.max_per_page),
            "calibrated_floor": bool(self.calibrated_floor),
            "answerability": bool(self.answerability),
            "boosts": tuple(sorted((str(f), float(w)) for f, w in self.boosts)),
        }
        for name, value in normal.items():
            object.__setattr__(self, name, value)
        problems = [
            self.mode not in ("dense", "lexical", "hybrid") and f"mode {self.mode!r}",
            self.fusion not in ("rrf", "weighted", "learned") and f"fusion {self.fusion!r}",
            (self.fusion == "learned") != bool(self.ranker) and "fusion 'learned' needs a ranker (and only it)",
            not 0.0 <= self.alpha <= 1.0 and f"alpha {self.alpha} outside [0, 1]",
            min(self.rrf_k, self.depth, self.rerank_depth, self.page_depth) < 1
            and "rrf_k/depth/rerank_depth/page_depth must be >= 1",
            min(self.page_weight, self.page_dense_weight, self.max_per_page) < 0
            and "page_weight/page_dense_weight/max_per_page must be >= 0",
            self.answerability and self.mode == "dense" and "answerability needs the lexical index (not mode dense)",
            any(f not in DEFAULT_BOOSTS for f, _ in self.boosts) and f"boost fields must be in {list(DEFAULT_BOOSTS)}",
        ]
        if any(problems):
            raise ValueError("invalid RetrievalSettings: " + "; ".join(p for p in problems if p))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["boosts"] = [list(b) for b in self.boosts]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalSettings:
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown RetrievalSettings keys {sorted(unknown)}")
        values = dict(data)
        boosts = values.get("boosts", ())
        values["boosts"] = tuple(boosts.items() if isinstance(boosts, Mapping) else map(tuple, boosts))
        return cls(**values)

    @property
    def fusion_settings(self) -> FusionSettings:
        """This config's weights for ``fusion.hybrid_page_scores``."""
        return FusionSettings(self.alpha, self.page_weight, self.page_dense_weight)

    @property
    def uses_page_index(self) -> bool:
        return (self.page_weight > 0 or self.fusion == "learned") and self.mode != "dense"

    def config_hash(self) -> str:
        """sha256 (16 hex) of every knob except ``name``: renaming a config keeps its results.
        Page knobs at their defaults are left out, so configs from before they existed keep
        their hash (and their recorded eval results stay comparable)."""
        knobs = {
            k: v
            for k, v in self.to_dict().items()
            if k != "name" and not (k in _PAGE_DEFAULTS and v == _PAGE_DEFAULTS[k])
        }
        return hashlib.sha256(json.dumps(knobs, sort_keys=True).encode()).hexdigest()[:16]


_PAGE_DEFAULTS = {
    "page_weight": 0.0,
    "page_dense_weight": 0.0,
    "page_depth": 100,
    "max_per_page": 0,
    "calibrated_floor": False,
    "answerability": False,
    "ranker": "",
}


# Defaults measured on the eval sets (k8s-docs-rag-bench eval split, 557 covered questions, plus
# our own labelled set), full corpus, all-MiniLM-L6-v2 — see README "Tuning log":
# - lexical field boosts: title 2.0 / section 1.5 (the store's defaults) gave k8s MRR@10 0.748;
#   every chunk of a page shares its title, so a strong title boost drowns the body. Title 0.3,
#   section 0.3, body 1.0, ident 0.5 gave 0.812 (ident off: 0.80; ident 1.0: 0.808).
# - weighted fusion alpha 0.3 on the dense side with those boosts: k8s 0.803 / own 0.838 MRR@10,
#   hit@5 0.903 / 0.945 (alpha 0.1: 0.811 / 0.839, hit@5 0.901 / 0.927; 0.5: 0.794 / 0.823).
#   Summing a page's chunk scores into each chunk did not help (base model, measured, not kept).
# - hybrid-page (domain-adapted model): + 0.5 x page-index BM25 + 0.1 x page-best cosine, at most
#   2 chunks per page: k8s 0.818 -> 0.828 MRR@10, hit@5 0.907 -> 0.916 on the same version;
#   own set 0.866 -> 0.876 (rag/search/fusion.py, eval/sweep_fusion.py). The serving default.
# - floor 0.35: no answerable eval question has a best dense cosine under it (1st percentile
#   0.43), while clearly off-topic questions score 0.04-0.15. Near-miss questions in the domain
#   overlap answerable ones completely (0.31-0.69), so the floor only catches the off-topic.
#   Now the fallback: configs with calibrated_floor use the served version's calibrated floor
#   (calibration.py); answerability refuses questions naming a word the corpus lacks
#   (answerability.py), which is what catches the near misses.
DEFAULT_FLOOR = 0.35


class _FloorKnobs(TypedDict):
    """The calibrated configs' floor knobs, typed so ``RetrievalSettings(**CALIBRATED)`` is checked."""

    floor: float
    calibrated_floor: bool


CALIBRATED: _FloorKnobs = {"floor": DEFAULT_FLOOR, "calibrated_floor": True}
LEARNED_RANKER = "k8s-train-minilm-base.json"  # in rag/search/ranking/rankers/ (eval/train_ranker.py; base model only)
VERSION_RANKER = "version"  # the served version's own ranker, fitted by the page_ranker asset
TUNED_BOOSTS = (("title", 0.3), ("section", 0.3), ("body", 1.0), ("ident", 0.5))
# hybrid-page is the one home of serving's depths and weights: the learned and reranked configs are
# hybrid-page plus one change each, and the ranker features, ranker training and the fusion sweep read
# them from here (HYBRID_PAGE) instead of restating them.
_HYBRID_PAGE = RetrievalSettings(
    name="hybrid-page",
    fusion="weighted",
    alpha=0.3,
    boosts=TUNED_BOOSTS,
    page_weight=0.5,
    page_dense_weight=0.1,
    max_per_page=2,
    answerability=True,
    **CALIBRATED,
)
NAMED_CONFIGS: dict[str, RetrievalSettings] = {
    c.name: c
    for c in (
        RetrievalSettings(name="dense", mode="dense", **CALIBRATED),
        RetrievalSettings(name="lexical", mode="lexical", boosts=TUNED_BOOSTS),
        RetrievalSettings(name="hybrid-rrf", fusion="rrf", boosts=TUNED_BOOSTS, **CALIBRATED),
        RetrievalSettings(name="hybrid-weighted", fusion="weighted", alpha=0.3, boosts=TUNED_BOOSTS, **CALIBRATED),
        _HYBRID_PAGE,
        # hybrid-page's candidates and scores as features of a learned page ranker (ranker.py),
        # fitted per version on the k8s train split (page_ranker asset); one chunk per page
        # before the next page. A version without its ranker serves hybrid-page's order (without_ranker).
        replace(_HYBRID_PAGE, name="hybrid-learned", fusion="learned", max_per_page=1, ranker=VERSION_RANKER),
        # hybrid-page + a cross-encoder over its top 20 (the per-page cap applies after reranking).
        replace(_HYBRID_PAGE, name="hybrid-rerank", rerank=True),
    )
}
HYBRID_PAGE = NAMED_CONFIGS["hybrid-page"]
DEFAULT_CONFIG = "hybrid-learned"  # what serves: each version's own page ranker; hybrid-page order without one


def without_ranker(config: RetrievalSettings) -> RetrievalSettings:
    """What a learned config serves when its ranker cannot rank (``ranker.fallback_reason``):
    hybrid-page's fusion and per-page cap, every other knob (name, floor, answerability) its own.
    The one place that says what "no ranker" falls back to."""
    return replace(config, fusion=HYBRID_PAGE.fusion, ranker=HYBRID_PAGE.ranker, max_per_page=HYBRID_PAGE.max_per_page)
