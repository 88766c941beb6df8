"""Benchmarks as one record type, whatever their origin, with a content hash for provenance.

Two kinds are supported: a YAML *spec* that maps a foreign JSONL dataset onto our record shape
(``k8s_bench_eval``: the external k8s-docs-rag-bench eval split), and our own hand-labelled
JSONL (``own_labelled``) already written in that shape. ``version_hash`` covers the spec and
data bytes, so every stored score can say exactly which benchmark content produced it.

Relevance is page-level: ``relevant`` holds ``<source>:<page_id>`` doc ids. An empty tuple
means the corpus cannot answer the question and the right behaviour is to abstain.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from ...package_data import benchmarks_dir
from ..common import jsonl_objects
from ..ingest.sources import expand_env

UNANSWERABLE = "unanswerable"
# The labelled TRAIN split: fits and calibrations read it; the eval and own sets stay for reporting.
TRAIN_BENCHMARK = "k8s_bench_train"
_DOC_ID = re.compile(r"^[a-z0-9-]+:\S+$")


class BenchmarkError(ValueError):
    """A benchmark spec or data file is missing or malformed (message is one line)."""


@dataclass(frozen=True)
class BenchRecord:
    id: str
    question: str
    relevant: tuple[str, ...]
    reference_answer: str
    category: str
    page_kind: str = "unknown"
    why: str = ""

    @property
    def should_abstain(self) -> bool:
        return not self.relevant

    @property
    def sources(self) -> tuple[str, ...]:
        """Distinct source names of the relevant pages (map to projects via sources.yaml)."""
        return tuple(dict.fromkeys(doc_id.split(":", 1)[0] for doc_id in self.relevant))


@dataclass(frozen=True)
class Benchmark:
    name: str
    version_hash: str
    records: list[BenchRecord]


def load_benchmark(name_or_path: str | Path) -> Benchmark:
    """Load ``k8s_bench_eval`` / ``own_labelled`` by name, or a ``.yaml`` spec / ``.jsonl`` path."""
    path = benchmark_path(name_or_path)
    if path.suffix in (".yaml", ".yml"):
        return _from_spec(path)
    return _from_own_jsonl(path)


def benchmark_path(name_or_path: str | Path) -> Path:
    """A name resolves among the packaged benchmarks (spec first); a path is taken as it is."""
    text = str(name_or_path)
    if not text.endswith((".yaml", ".yml", ".jsonl")):
        for suffix in (".yaml", ".jsonl"):
            candidate = benchmarks_dir() / f"{text}{suffix}"
            if candidate.is_file():
                return candidate
        raise BenchmarkError(f"no benchmark named {text!r} under {benchmarks_dir()}")
    path = Path(text)
    if not path.is_file():
        raise BenchmarkError(f"benchmark file not found: {path}")
    return path


def _hash(*blobs: bytes) -> str:
    digest = hashlib.sha256()
    for blob in blobs:
        digest.update(hashlib.sha256(blob).digest())  # length-safe concatenation
    return digest.hexdigest()


def _read_jsonl(path: Path) -> list[dict]:
    return [row for _, row in jsonl_objects(path.read_text(encoding="utf-8").splitlines(), path, BenchmarkError)]


# --- external dataset through a spec -------------------------------------------------------


def _load_spec(path: Path) -> dict:
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise BenchmarkError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(spec, dict):
        raise BenchmarkError(f"{path}: expected a mapping")
    missing = [k for k in ("name", "data", "fields", "relevant_template") if not spec.get(k)]
    if missing:
        raise BenchmarkError(f"{path}: missing {', '.join(missing)}")
    return spec


def _from_spec(spec_path: Path) -> Benchmark:
    spec = _load_spec(spec_path)
    data_path = Path(expand_env(str(spec["data"])))
    data_path = data_path if data_path.is_absolute() else spec_path.parent / data_path
    if not data_path.is_file():
        raise BenchmarkError(f"{spec_path}: data file not found: {data_path} (set INFRA_RAG_BENCH?)")
    data = data_path.read_bytes()
    rows = _read_jsonl(data_path)
    expected = spec.get("expected_rows")
    if expected is not None and len(rows) != expected:
        raise BenchmarkError(f"{data_path}: {len(rows)} rows, spec expects {expected}")
    records = [_mapped_record(row, spec, f"{data_path}:{i}") for i, row in enumerate(rows, 1)]
    _check_unique(records, data_path)
    return Benchmark(str(spec["name"]), _hash(spec_path.read_bytes(), data), records)


def _mapped_record(row: dict, spec: dict, where: str) -> BenchRecord:
    """One foreign row -> BenchRecord through the spec's field map and relevance template."""
    fields = spec["fields"]
    try:
        values = {ours: row[theirs] for ours, theirs in fields.items()}
    except KeyError as exc:
        raise BenchmarkError(f"{where}: missing field {exc.args[0]!r}") from None
    page = values.pop("relevant_page", None)
    template = spec["relevant_template"]
    relevant = (template.format(**{fields["relevant_page"]: page}),) if page else ()
    mode = row.get("answer_mode")
    return BenchRecord(
        id=str(values["id"]),
        question=str(values["question"]),
        relevant=relevant,
        reference_answer=str(values.get("reference_answer") or ""),
        category=str(spec.get("category") or "default"),
        page_kind=str(values.get("page_kind") or "unknown"),
        why=f"source_page {page} (answer_mode={mode})" if mode else f"source_page {page}",
    )


# --- our own labelled JSONL ----------------------------------------------------------------


def _from_own_jsonl(path: Path) -> Benchmark:
    data = path.read_bytes()
    records = [own_record(row, f"{path}:{i}") for i, row in enumerate(_read_jsonl(path), 1)]
    if not records:
        raise BenchmarkError(f"{path}: no records")
    _check_unique(records, path)
    return Benchmark(path.stem, _hash(b"", data), records)


def own_record(row: dict, where: str) -> BenchRecord:
    """Validate one hand-written record: answerable iff it names relevant pages."""
    missing = [k for k in ("id", "question", "category") if not row.get(k)]
    if missing:
        raise BenchmarkError(f"{where}: missing {', '.join(missing)}")
    relevant = row.get("relevant")
    if not isinstance(relevant, list) or not all(isinstance(d, str) and _DOC_ID.match(d) for d in relevant):
        raise BenchmarkError(f"{where}: 'relevant' must be a list of '<source>:<page_id>' ids")
    if (row["category"] == UNANSWERABLE) != (not relevant):
        raise BenchmarkError(f"{where}: only category {UNANSWERABLE!r} may have no relevant pages")
    return BenchRecord(
        id=str(row["id"]),
        question=str(row["question"]),
        relevant=tuple(relevant),
        reference_answer=str(row.get("reference_answer") or ""),
        category=str(row["category"]),
        page_kind=str(row.get("page_kind") or "unknown"),
        why=str(row.get("why") or ""),
    )


def _check_unique(records: list[BenchRecord], path: Path) -> None:
    seen: set[str] = set()
    for record in records:
        if record.id in seen:
            raise BenchmarkError(f"{path}: duplicate record id {record.id!r}")
        seen.add(record.id)


# --- coverage ------------------------------------------------------------------------------


def coverage(
    records: Iterable[BenchRecord], known_doc_ids: Iterable[str]
) -> tuple[list[BenchRecord], list[BenchRecord]]:
    """Split records into (covered, uncovered) against the doc ids of a built corpus.

    An answerable record is covered when any relevant page exists in the corpus; scoring an
    uncovered one would measure the corpus snapshot, not retrieval, so reports count them
    separately. Unanswerable records are always covered: abstaining needs no page.
    """
    known = set(known_doc_ids)
    covered: list[BenchRecord] = []
    uncovered: list[BenchRecord] = []
    for record in records:
        ok = record.should_abstain or any(d in known for d in record.relevant)
        (covered if ok else uncovered).append(record)
    return covered, uncovered


def answerable_sample(
    records: Sequence[BenchRecord], known_doc_ids: Iterable[str], size: int, seed: int = 0
) -> list[BenchRecord]:
    """A fixed, seeded sample of answerable records whose relevant page the version has (``size``
    0: all of them, shuffled). The calibration and the page ranker derive from these."""
    covered, _ = coverage((r for r in records if not r.should_abstain), known_doc_ids)
    covered.sort(key=lambda r: r.id)
    random.Random(seed).shuffle(covered)
    return covered[:size] if size else covered
