"""QueryEngine: one opened index version, ready to search and answer.

Shared by the CLI (interactive and batch), the HTTP service, the eval_run asset and the
canary, so they all resolve versions, load models and record traces the same way. Models and
searchers load once per engine; every query embeds its question (as served, so latencies are
honest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import releases
from .config import BuildConfig
from .home import DataHome
from .packing import PackedContext, pack_passages
from .retrieval import NAMED_CONFIGS, RetrievalConfig, RetrievalResult, Retriever, catalog_from_rows

DEFAULT_CONFIG = "hybrid-page"
MODE_CONFIGS = {"dense": "dense", "lexical": "lexical", "hybrid": DEFAULT_CONFIG}


class VersionNotFound(ValueError):
    """No usable index version (unknown name, or nothing built yet)."""


def resolve_version(home: DataHome, requested: str | None = None) -> str:
    """The requested version, else the current release, else the newest fully indexed one."""
    warehouse = home.warehouse()
    if requested:
        if not warehouse.rows("SELECT 1 FROM chunks WHERE index_version = ? LIMIT 1", [requested]):
            raise VersionNotFound(f"index version {requested!r} has no chunks (see `infra-rag versions`)")
        return requested
    current = releases.current_release(warehouse)
    if current:
        return current
    for (version,) in warehouse.rows("SELECT index_version FROM index_versions ORDER BY created_at DESC"):
        if (home.tantivy_root() / version).is_dir() and _has_vectors(home, version) and warehouse.rows(
                "SELECT 1 FROM chunks WHERE index_version = ? LIMIT 1", [version]):
            return version
    raise VersionNotFound("no built index version yet: run `infra-rag build`")


def _has_vectors(home: DataHome, version: str) -> bool:
    """A build killed while embedding can leave a version with chunks and a Tantivy index
    (lexical_index may finish first) but no LanceDB table: not servable, so skipped."""
    import lancedb

    from .vector_store import table_name

    return table_name(version) in lancedb.connect(home.vectors_uri())


@dataclass
class AnswerOutcome:
    result: RetrievalResult
    packed: PackedContext
    answer: Any


class QueryEngine:
    def __init__(self, home: DataHome, version: str):
        from .chunking import HFTokenCounter
        from .embedding import resolve_model_path, shared_embedder

        self.home, self.version = home, version
        warehouse = home.warehouse()
        self.build_config = BuildConfig.from_dict(warehouse.version_config(version) or {})
        self.catalog = catalog_from_rows(warehouse.frame(
            "SELECT * EXCLUDE (index_version) FROM chunks WHERE index_version = ?", [version]).iter_rows(named=True))
        self.embedder = shared_embedder(self.build_config.model_id)
        self._counter = HFTokenCounter.from_model_path(resolve_model_path(self.build_config.model_id))
        self._vector = self._lexical = self._pages = None
        self._retrievers: dict[str, Retriever] = {}
        self._searchers("hybrid")  # open both now: a model mismatch is refused before any query

    @classmethod
    def open(cls, home: DataHome | None = None, version: str | None = None) -> "QueryEngine":
        home = home or DataHome.at()
        return cls(home, resolve_version(home, version))

    def _searchers(self, mode: str) -> tuple[Any, Any]:
        from .lexical_store import LexicalSearcher
        from .vector_store import VectorSearcher

        if mode != "lexical" and self._vector is None:
            self._vector = VectorSearcher.open(self.home.vectors_uri(), self.version, self.embedder)
        if mode != "dense" and self._lexical is None:
            self._lexical = LexicalSearcher.open(self.home.tantivy_root() / self.version)
        return self._vector, self._lexical

    def _page_searcher(self, config: RetrievalConfig) -> Any:
        """Opened once, and only for configs with a page term (older versions have none: None)."""
        from .lexical_store import open_page_searcher

        if config.uses_page_index and self._pages is None:
            self._pages = open_page_searcher(self.home.tantivy_root() / self.version) or False
        return self._pages or None

    def retriever(self, config: RetrievalConfig | str = DEFAULT_CONFIG) -> Retriever:
        config = named_config(config) if isinstance(config, str) else config
        key = config.config_hash()
        if key not in self._retrievers:
            vector, lexical = self._searchers(config.mode)
            self._retrievers[key] = Retriever(catalog=self.catalog, config=config, vector_searcher=vector,
                                              lexical_searcher=lexical, page_searcher=self._page_searcher(config))
        return self._retrievers[key]

    def search(self, question: str, *, config: RetrievalConfig | str = DEFAULT_CONFIG, k: int = 10,
               filters: dict | None = None) -> RetrievalResult:
        return self.retriever(config).search(question, k=k, filters=filters)

    def answer(self, question: str, *, config: RetrievalConfig | str = DEFAULT_CONFIG, k: int = 6,
               filters: dict | None = None, budget_tokens: int = 1800, use_claude: bool | None = None,
               client: Any = None) -> AnswerOutcome:
        from .answer import answer as make_answer

        result = self.search(question, config=config, k=k, filters=filters)
        packed = pack_passages(result.hits, budget_tokens=budget_tokens, count_tokens=self._counter.count)
        hits = [p.hit for p in packed.passages]
        reply = make_answer(question, hits, abstained=result.abstained or not hits, client=client,
                            use_claude=use_claude)
        return AnswerOutcome(result, packed, reply)


def single_thread_queries() -> None:
    """One torch thread for query embedding: a one-sentence forward pass gains nothing from
    more, and on a shared 2-core box two threads made p90 latency 10-30x worse under load."""
    import torch

    torch.set_num_threads(1)


def hit_record(hit) -> dict:
    """A hit as the batch contract and the HTTP service return it."""
    return {"chunk_id": hit.chunk_id, "doc_id": hit.doc_id, "project": hit.project, "page_id": hit.page_id,
            "url": hit.url, "section": hit.section, "score": round(float(hit.score), 6), "text": hit.text}


def named_config(name: str) -> RetrievalConfig:
    if name not in NAMED_CONFIGS:
        raise ValueError(f"unknown retrieval config {name!r}; choose one of {', '.join(NAMED_CONFIGS)}")
    return NAMED_CONFIGS[name]
