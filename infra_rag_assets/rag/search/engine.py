"""QueryEngine: one opened index version, ready to search and answer.

Shared by the CLI (interactive and batch), the HTTP service, the eval_run asset and the
canary, so they all resolve versions, load models and record traces the same way. Models and
searchers load once per engine; every query embeds its question (as served, so latencies are
honest).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..index.config import BuildSettings
from ..operate import releases
from ..operate.home import DataHome
from .answerability import DEFAULT_RULE
from .calibration import Calibration
from .packing import PackedContext, pack_passages
from .page_vectors import version_page_vectors
from .ranking.ranker import Ranker, fallback_reason, version_ranker
from .retrieval import NAMED_CONFIGS, RetrievalResult, RetrievalSettings, Retriever
from .retrieval_settings import DEFAULT_CONFIG, VERSION_RANKER, without_ranker

if TYPE_CHECKING:  # opened lazily at run time (Tantivy, LanceDB)
    from ..index.lexical_store import LexicalSearcher
    from .vector_search import VectorSearcher

MODE_CONFIGS = {"dense": "dense", "lexical": "lexical", "hybrid": DEFAULT_CONFIG}


class VersionNotFound(ValueError):
    """No usable index version (unknown name, or nothing built yet)."""


def resolve_version(home: DataHome, requested: str | None = None) -> str:
    """The requested version, else the current release, else the newest servable one.

    Reads only the serving files (release pointer, snapshot manifests, index directories):
    never the build warehouse, so it works while a build holds it."""
    from ..index.serving_snapshot import SnapshotMissing, list_manifests, read_manifest

    if requested:
        try:
            read_manifest(home.serving_root(), requested)
        except SnapshotMissing as exc:
            built = (home.tantivy_root() / requested).is_dir()  # built before snapshots: say how to fix
            raise VersionNotFound(
                str(exc) if built else f"index version {requested!r} is not servable (see `infra-rag versions`)"
            ) from None
        except ValueError as exc:
            raise VersionNotFound(str(exc)) from None
        return requested
    current = releases.read_pointer(home.release_pointer()).get("current")
    if current:
        return current
    for manifest in reversed(list_manifests(home.serving_root())):
        if home.version(manifest.version).tantivy.is_dir() and _has_vectors(home, manifest.version):
            return manifest.version
    raise VersionNotFound("no built index version yet: run `infra-rag build`")


def _has_vectors(home: DataHome, version: str) -> bool:
    """A build killed while embedding can leave a version with chunks and a Tantivy index
    (lexical_index may finish first) but no LanceDB table: not servable, so skipped."""
    from ..index.vector_store import table_exists

    return table_exists(home.vectors_uri(), version)


def served_model(home: DataHome, version: str, configured: str) -> str:
    """The model the version's vectors were made with, as their table records it (an adapted
    model is only known once its build trained it), else the configured one. A recorded directory
    under another home's ``models/`` is taken from this home's when it has it (a copied or
    re-mounted home loads its own files, not the original's, which may change or go).
    Opening the vector searcher then refuses any model whose weights differ from the recorded ones."""
    from pathlib import Path

    from ..index.vector_store import read_model_info, table_exists

    if not table_exists(home.vectors_uri(), version):
        return configured
    recorded = read_model_info(home.vectors_uri(), version).get("model_id") or configured
    path = Path(recorded)
    if path.is_absolute() and "models" in path.parts:  # this home's copy first, even if the original exists
        parts = path.parts[len(path.parts) - 1 - path.parts[::-1].index("models") :]
        if home.root.joinpath(*parts).is_dir():
            return str(home.root.joinpath(*parts))
    return recorded


ANSWER_K = 6  # passages retrieved for an answer (CLI, service and the answer eval)
ANSWER_BUDGET_TOKENS = 1800  # packed context budget of an answer


@dataclass
class AnswerOutcome:
    result: RetrievalResult
    packed: PackedContext
    answer: Any


class QueryEngine:
    """Opened once per version from its immutable serving snapshot, then shared by threads:
    searchers and retrievers are created under a lock, the embedder serializes its encodes."""

    def __init__(self, home: DataHome, version: str):
        from ..devices import for_queries
        from ..index.embedding import resolve_model_path, shared_embedder
        from ..index.serving_snapshot import read_catalog, read_manifest
        from ..index.tokens import HFTokenCounter
        from .calibration import read_calibration

        self.home, self.version = home, version
        self.manifest = read_manifest(home.serving_root(), version)
        # None for versions built before calibration: their configs keep the fixed DEFAULT_FLOOR.
        self.calibration: Calibration | None = read_calibration(home.version(version).snapshot)
        # None when the version's ranker cannot rank (built before page_ranker, or fitted with page
        # vectors the snapshot no longer has): "version"-ranker configs then serve without_ranker's order.
        ranker = version_ranker(home.version(version).snapshot)
        self.page_vectors = version_page_vectors(home.version(version).snapshot)
        self.ranker: Ranker | None = None if fallback_reason(ranker, self.page_vectors) else ranker
        self.build_config = BuildSettings.from_dict(self.manifest.build_config)
        self.catalog = read_catalog(home.serving_root(), version)
        self.model_id = served_model(home, version, self.build_config.model_id)
        self.embedder = shared_embedder(self.model_id, device=for_queries())
        self._counter = HFTokenCounter.from_model_path(resolve_model_path(self.model_id))
        self._vector: VectorSearcher | None = None
        self._lexical: LexicalSearcher | None = None
        self._reader: Any = None  # False: the version has no trained reader
        self.reader_note = ""
        self._pages: LexicalSearcher | Literal[False] | None = None  # False: the version has no page index
        self._retrievers: dict[str, Retriever] = {}
        self._lock = threading.RLock()
        self._searchers("hybrid")  # open both now: a model mismatch is refused before any query

    @classmethod
    def open(cls, home: DataHome | None = None, version: str | None = None) -> QueryEngine:
        home = home or DataHome.at()
        return cls(home, resolve_version(home, version))

    def warm(self, config: RetrievalSettings | str = DEFAULT_CONFIG) -> None:
        """Run one query so the first user request pays no lazy loading (model, page index)."""
        self.search("warm up: how does a deployment roll out?", config=config, k=1)

    def _searchers(self, mode: str) -> tuple[VectorSearcher | None, LexicalSearcher | None]:
        from ..index.lexical_store import LexicalSearcher
        from .vector_search import VectorSearcher

        with self._lock:
            if mode != "lexical" and self._vector is None:
                self._vector = VectorSearcher.open(self.home.vectors_uri(), self.version, self.embedder)
            if mode != "dense" and self._lexical is None:
                self._lexical = LexicalSearcher.open(self.home.version(self.version).tantivy, private_copy=True)
            return self._vector, self._lexical

    def vocabulary(self) -> Any:
        """The version's chunk-level lexical index: term document frequencies for answerability."""
        return self._searchers("lexical")[1]

    def _page_searcher(self, config: RetrievalSettings) -> LexicalSearcher | None:
        """Opened once, and only for configs with a page term (older versions have none: None)."""
        from ..index.page_index import open_page_searcher

        if config.uses_page_index and self._pages is None:
            self._pages = open_page_searcher(self.home.version(self.version).tantivy, private_copy=True) or False
        return self._pages or None

    def resolve(self, config: RetrievalSettings | str = DEFAULT_CONFIG) -> RetrievalSettings:
        """The config as this version runs it: a ``calibrated_floor`` config gets the version's
        calibrated floor (its own ``floor`` when the version has no calibration), so the floor
        a result was judged at is in its config hash; a ``ranker="version"`` config gets the
        version's own ranker (named by its weights hash), or ``without_ranker``'s config without one."""
        config = named_config(config) if isinstance(config, str) else config
        if config.calibrated_floor and config.floor is not None and self.calibration is not None:
            config = dataclasses.replace(config, floor=self.calibration.floor)
        if config.fusion == "learned" and config.ranker == VERSION_RANKER:
            # The weights' hash goes into the config (and so into every trace and eval row).
            config = (
                dataclasses.replace(config, ranker=f"{VERSION_RANKER}:{self.ranker.hash}")
                if self.ranker
                else without_ranker(config)
            )
        return config

    def retriever(self, config: RetrievalSettings | str = DEFAULT_CONFIG) -> Retriever:
        config = self.resolve(config)
        key = config.config_hash()
        rule = self.calibration.rule if self.calibration else DEFAULT_RULE
        with self._lock:
            if key not in self._retrievers:
                vector, lexical = self._searchers(config.mode)
                self._retrievers[key] = Retriever(
                    catalog=self.catalog,
                    config=config,
                    vector_searcher=vector,
                    lexical_searcher=lexical,
                    page_searcher=self._page_searcher(config),
                    answerability_rule=rule,
                    ranker=self.ranker if config.ranker.startswith(VERSION_RANKER) else None,
                    page_vectors=self.page_vectors,
                )
            return self._retrievers[key]

    def search(
        self,
        question: str,
        *,
        config: RetrievalSettings | str = DEFAULT_CONFIG,
        k: int = 10,
        filters: dict | None = None,
    ) -> RetrievalResult:
        return self.retriever(config).search(question, k=k, filters=filters)

    def context(
        self,
        question: str,
        *,
        config: RetrievalSettings | str = DEFAULT_CONFIG,
        k: int = ANSWER_K,
        filters: dict | None = None,
        budget_tokens: int = ANSWER_BUDGET_TOKENS,
    ) -> tuple[RetrievalResult, PackedContext]:
        """What an answer is built from: the ranked hits and the passages packed into the budget."""
        result = self.search(question, config=config, k=k, filters=filters)
        return result, pack_passages(result.hits, budget_tokens=budget_tokens, count_tokens=self._counter.count)

    def answer(
        self,
        question: str,
        *,
        config: RetrievalSettings | str = DEFAULT_CONFIG,
        k: int = ANSWER_K,
        filters: dict | None = None,
        budget_tokens: int = ANSWER_BUDGET_TOKENS,
        use_claude: bool | None = None,
        client: Any = None,
        answerer: str | None = None,
    ) -> AnswerOutcome:
        from ..answer.generate import answer as make_answer

        result, packed = self.context(question, config=config, k=k, filters=filters, budget_tokens=budget_tokens)
        hits = [p.hit for p in packed.passages]
        how = self.answerer_args(answerer, use_claude)
        reply = make_answer(question, hits, abstained=result.abstained or not hits, client=client, **how)
        return AnswerOutcome(result, packed, reply)

    def answer_stream(self, question: str, *, config: RetrievalSettings | str = DEFAULT_CONFIG, k: int = ANSWER_K,
                      filters: dict | None = None, use_claude: bool | None = None, client: Any = None,
                      answerer: str | None = None):  # fmt: skip
        """``answer`` with the reply as text deltas then the Answer (``stream_answer``); the
        retrieval runs before this returns, so its failures are not mid-stream."""
        from ..answer.generate import stream_answer

        result, packed = self.context(question, config=config, k=k, filters=filters)
        hits = [p.hit for p in packed.passages]
        how = self.answerer_args(answerer, use_claude)
        events = stream_answer(question, hits, abstained=result.abstained or not hits, client=client, **how)
        return result, packed, events

    def answerer_args(self, answerer: str | None = None, use_claude: bool | None = None) -> dict[str, Any]:
        """``answerer`` resolved by the registry, with the version's reader when it is the reader."""
        from ..answer.answerers import resolve_answerer

        name = resolve_answerer(answerer, use_claude)
        reader = self.reader() if name == "reader" else None
        if reader is not None and answerer is None and not reader.usable:
            reader = None  # by default only a reader that learnt (dev F1, AUROC) answers
        return {"answerer": name, "reader": reader}

    def reader(self) -> Any:
        """The version's trained answer reader (loaded once), or None: offline answers are then extractive."""
        if self._reader is None:
            from ..answer.answerers import version_reader_folder
            from ..answer.reader import load_reader_folder

            folder, self.reader_note = version_reader_folder(self.home, self.version)
            self._reader = load_reader_folder(str(folder)) if folder is not None else False
        return self._reader or None


def single_thread_queries() -> None:
    """One torch thread for query embedding: a one-sentence forward pass gains nothing from
    more, and on a shared 2-core box two threads made p90 latency 10-30x worse under load."""
    import torch

    torch.set_num_threads(1)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """``single_thread_queries`` for a block (eval_run, calibration), then the process's threads
    again (e.g. an in-process build goes on embedding with all of them)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def hit_record(hit) -> dict:
    """A hit as the batch contract and the HTTP service return it."""
    return {
        "chunk_id": hit.chunk_id,
        "doc_id": hit.doc_id,
        "project": hit.project,
        "page_id": hit.page_id,
        "url": hit.url,
        "section": hit.section,
        "score": round(float(hit.score), 6),
        "text": hit.text,
    }


def named_config(name: str) -> RetrievalSettings:
    if name not in NAMED_CONFIGS:
        raise ValueError(f"unknown retrieval config {name!r}; choose one of {', '.join(NAMED_CONFIGS)}")
    return NAMED_CONFIGS[name]
