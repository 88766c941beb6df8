"""BM25 lexical index over chunks, built atomically with tantivy.

Analysis lives in ``analysis.py``: text is turned into terms in Python and stored in fields
using tantivy's identity-like ``whitespace`` tokenizer, and queries are exact term queries
built by the same functions, so index and query analysis cannot drift apart.

Publishing is crash-safe: an index is built in ``.staging-<name>-<pid>-<uuid>`` next to the
final directory, committed, fsynced and renamed into place; an existing index is renamed
aside first and removed only after the new one is in place. Readers therefore see the old
index, the new index or (for the instant between two renames) nothing, never a partial
one. Builders of one parent directory serialize on an ``flock``; leftovers of crashed builds
are recognised by their dead pid and removed by ``cleanup_stale_staging``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import tantivy

from ..operate.files import fsync_tree, swap_into_place
from ..operate.processes import pid_alive
from .analysis import ANALYZER_VERSION, analyze_for_index, analyze_query

PRIVATE_COPY_PREFIX = "infra-rag-tantivy-"  # + pid: see rag/operate/temp_dirs
MANIFEST_NAME = "lexical_manifest.json"
LOCK_NAME = ".lexical.lock"
STAGING_PREFIX = ".staging-"
ASIDE_PREFIX = ".old-"
# Analyzed text fields and the analyzer that feeds each of them.
TEXT_FIELDS = {"title": "prose", "section": "prose", "body": "prose", "ident": "ident"}
DEFAULT_BOOSTS = {"title": 2.0, "section": 1.5, "body": 1.0, "ident": 1.0}
# Untokenized fields: the chunk id to return, plus exact-match filter fields.
KEYWORD_FIELDS = ("chunk_id", "doc_id", "project", "source", "page_kind", "section_path")
KEYWORD_FILTERS = ("project", "source", "page_kind", "doc_id")
PAGE_INDEX_SUFFIX = ".pages"
_TEMP_DIR = re.compile(r"^\.(?:staging|old)-(?P<name>.+)-(?P<pid>\d+)-[0-9a-f]{32}$")


@dataclass
class LexicalDoc:
    """One chunk to index; ``text`` may already carry a caller-prepended context line."""

    chunk_id: str
    doc_id: str
    project: str
    source: str
    page_kind: str
    section_path: str
    title: str
    text: str
    pages: list[int] = field(default_factory=list)


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    for name in KEYWORD_FIELDS:
        sb.add_text_field(name, stored=True, tokenizer_name="raw")
    sb.add_integer_field("pages", stored=True, indexed=True)
    for name in TEXT_FIELDS:  # BM25 needs term frequencies, not positions
        sb.add_text_field(name, tokenizer_name="whitespace", index_option="freq")
    return sb.build()


def _to_document(doc: LexicalDoc, schema: tantivy.Schema) -> tantivy.Document:
    ident_source = "\n".join((doc.title, doc.section_path, doc.text))
    return tantivy.Document.from_dict(
        {
            **{name: getattr(doc, name) for name in KEYWORD_FIELDS},
            "pages": [int(p) for p in doc.pages],
            "title": analyze_for_index(doc.title, "prose"),
            "section": analyze_for_index(doc.section_path, "prose"),
            "body": analyze_for_index(doc.text, "prose"),
            "ident": analyze_for_index(ident_source, "ident"),
        },
        schema,
    )


# --- building -----------------------------------------------------------------------------


def build_index(final_dir: Path, docs: Iterable[LexicalDoc], *, heap_bytes: int = 128_000_000) -> int:
    """Build an index of ``docs`` and atomically publish it at ``final_dir``; returns the count."""
    final_dir = Path(final_dir)
    root = final_dir.parent
    root.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(root / LOCK_NAME):
        _cleanup_unlocked(root)
        staging = _temp_dir(STAGING_PREFIX, final_dir)
        try:
            count = _write_index(staging, docs, heap_bytes)
            _write_manifest(staging, count)
            fsync_tree(staging)
            swap_into_place(staging, final_dir, _temp_dir(ASIDE_PREFIX, final_dir))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)  # a hard crash leaves it for cleanup
            raise
    return count


def _temp_dir(prefix: str, final_dir: Path) -> Path:
    """Sibling of ``final_dir`` named so cleanup can tell its owner's pid and target."""
    return final_dir.parent / f"{prefix}{final_dir.name}-{os.getpid()}-{uuid.uuid4().hex}"


def _write_index(path: Path, docs: Iterable[LexicalDoc], heap_bytes: int) -> int:
    path.mkdir()
    schema = _schema()
    index = tantivy.Index(schema, path=str(path), reuse=False)
    # One indexing thread: documents then get addresses in the order they are added, so tantivy
    # breaks equal BM25 scores the same way in every build of the same chunks. With two threads
    # the split between segments varied, and two cold builds of identical content ordered the
    # lexical top 100 differently for 146 of 300 eval questions (and changed the set for 14).
    # Shown for an index that fits one segment in ``heap_bytes`` (the default corpus: one, ~4 s).
    writer = index.writer(heap_size=heap_bytes, num_threads=1)
    count = 0
    try:
        for doc in docs:
            writer.add_document(_to_document(doc, schema))
            count += 1
        writer.commit()
    except BaseException:
        writer.rollback()
        raise
    writer.wait_merging_threads()  # consumes the writer and releases its lock
    return count


def _write_manifest(path: Path, count: int) -> None:
    manifest = {
        "doc_count": count,
        "fields": [*KEYWORD_FIELDS, "pages", *TEXT_FIELDS],
        "text_fields": TEXT_FIELDS,
        "analyzer_version": ANALYZER_VERSION,
        "tantivy_version": getattr(tantivy, "__version__", ""),
    }
    (path / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True))


@contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    """flock conflicts across processes and across separate opens within one process."""
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cleanup_stale_staging(root: Path) -> list[Path]:
    """Remove staging dirs of dead builders; restore an index a dead builder left aside."""
    root = Path(root)
    if not root.is_dir():
        return []
    with _exclusive_lock(root / LOCK_NAME):
        return _cleanup_unlocked(root)


def _cleanup_unlocked(root: Path) -> list[Path]:
    handled = []
    for path in sorted(root.iterdir()):
        match = _TEMP_DIR.match(path.name)
        if not match or not path.is_dir() or pid_alive(int(match["pid"])):
            continue
        final_dir = root / match["name"]
        if path.name.startswith(ASIDE_PREFIX) and not final_dir.exists():
            os.rename(path, final_dir)  # crashed between the two renames of a swap
        else:
            shutil.rmtree(path, ignore_errors=True)
        handled.append(path)
    return handled


# --- searching ----------------------------------------------------------------------------


class LexicalSearcher:
    """Read-only BM25 search over one published index (keeps serving it after a rebuild)."""

    def __init__(self, index: tantivy.Index, manifest: dict[str, Any]) -> None:
        self._schema = index.schema
        self._searcher = index.searcher()
        self.manifest = manifest

    @classmethod
    def open(cls, final_dir: Path, *, private_copy: bool = False) -> LexicalSearcher:
        """``private_copy``: search a process-private copy of the (small, immutable) index, as
        serving does. Tantivy takes a lock file in the index directory even to open it for
        reading, which fails on a read-only mount and is shared state between replicas."""
        final_dir = Path(final_dir)
        if private_copy:
            return cls._open_private(final_dir)
        manifest = json.loads((final_dir / MANIFEST_NAME).read_text())
        if manifest.get("analyzer_version") != ANALYZER_VERSION:
            raise ValueError(
                f"{final_dir} was analyzed with version {manifest.get('analyzer_version')!r},"
                f" queries use {ANALYZER_VERSION!r}: rebuild the index"
            )
        index = tantivy.Index.open(str(final_dir))
        index.config_reader(reload_policy="manual")  # the directory never changes in place
        return cls(index, manifest)

    @classmethod
    def _open_private(cls, final_dir: Path) -> LexicalSearcher:
        import weakref

        from ..operate import temp_dirs

        copy = temp_dirs.make(PRIVATE_COPY_PREFIX) / final_dir.name  # removed at shutdown (ServingState.stop)
        shutil.copytree(final_dir, copy, ignore=shutil.ignore_patterns("*.lock", ".staging-*", ".old-*"))
        searcher = cls.open(copy)
        weakref.finalize(searcher, shutil.rmtree, copy.parent, True)
        return searcher

    def doc_count(self) -> int:
        return self._searcher.num_docs

    def doc_freq(self, field: str, term: str) -> int:
        """Documents whose analyzed ``field`` holds ``term`` (an already analyzed term)."""
        return int(self._searcher.doc_freq(field, term))

    def has_near_term(self, field: str, term: str, distance: int = 1) -> bool:
        """Some document holds a term within ``distance`` edits of ``term`` (a transposition
        counts as one edit): used to tell a typo of a corpus word from a word the corpus lacks."""
        query = tantivy.Query.fuzzy_term_query(
            self._schema, field, term, distance=distance, transposition_cost_one=True, prefix=False
        )
        result = self._searcher.search(query, 1, count=True)
        return result.count > 0  # type: ignore[attr-defined]  # tantivy's stub omits SearchResult.count

    def search(
        self,
        query: str,
        k: int,
        *,
        filters: dict[str, Any] | None = None,
        boosts: dict[str, float] | None = None,
    ) -> list[tuple[str, float]]:
        """Top ``k`` (chunk_id, BM25 score) among docs matching every filter."""
        text_query = self._text_query(query, _merge_boosts(boosts))
        if text_query is None or k <= 0:
            return []
        clauses = [(tantivy.Occur.Must, text_query)]
        for flt in self._filter_queries(filters or {}):
            clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(flt, 0.0)))
        hits = self._searcher.search(tantivy.Query.boolean_query(clauses), k, count=False).hits
        # Every document is indexed with its chunk_id, so get_first never returns None here.
        return [(cast(str, self._searcher.doc(addr).get_first("chunk_id")), score) for score, addr in hits]

    def _text_query(self, query: str, boosts: dict[str, float]) -> tantivy.Query | None:
        """OR of boosted term queries; alone it requires at least one term to match."""
        terms = {kind: analyze_query(query, kind) for kind in set(TEXT_FIELDS.values())}
        clauses = []
        for name, kind in TEXT_FIELDS.items():
            if boosts[name] <= 0:
                continue
            for term in terms[kind]:
                tq = tantivy.Query.term_query(self._schema, name, term, index_option="freq")
                clauses.append((tantivy.Occur.Should, tantivy.Query.boost_query(tq, boosts[name])))
        return tantivy.Query.boolean_query(clauses) if clauses else None

    def _filter_queries(self, filters: dict[str, Any]) -> Iterator[tantivy.Query]:
        q, schema = tantivy.Query, self._schema
        for key, value in filters.items():
            if value is None:
                continue
            if key in KEYWORD_FILTERS:
                yield q.term_set_query(schema, key, [str(v) for v in _as_list(value)])
            elif key == "section_prefix":
                yield q.regex_query(schema, "section_path", _regex_escape(str(value)) + ".*")
            elif key == "page":
                yield q.term_set_query(schema, "pages", [int(v) for v in _as_list(value)])
            else:
                raise ValueError(f"unknown lexical filter {key!r}")


def _merge_boosts(boosts: dict[str, float] | None) -> dict[str, float]:
    unknown = set(boosts or {}) - set(DEFAULT_BOOSTS)
    if unknown:
        raise ValueError(f"unknown boost fields {sorted(unknown)}")
    return {**DEFAULT_BOOSTS, **(boosts or {})}


def _as_list(value: Any) -> list[Any]:
    """A filter value is one value or a collection of alternatives (OR)."""
    return list(value) if isinstance(value, list | tuple | set | frozenset) else [value]


def _regex_escape(text: str) -> str:
    """Escape for tantivy's Rust regex syntax (Python's re.escape targets another dialect)."""
    return re.sub(r"([\\.+*?()|\[\]{}^$#&\-~])", r"\\\1", text)
