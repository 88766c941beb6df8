"""Benchmarks: loading both kinds, stable hashes, own labels against the real corpus, coverage."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from infra_rag_assets import settings
from infra_rag_assets.package_data import benchmarks_dir, default_sources_file
from infra_rag_assets.rag.evaluate.benchmarks import BenchmarkError, BenchRecord, coverage, load_benchmark
from infra_rag_assets.rag.ingest.sources import SourceConfigError, iter_pages, load_sources

pytestmark = pytest.mark.unit

MINIMUMS = {"identifier": 25, "cncf": 5, "unanswerable": 25}  # and prometheus + argocd >= 45
EXPECTED_K8S_COVERED = 557  # per ../shared/bench/README.md


@pytest.fixture(scope="module")
def corpus_doc_ids() -> set[str]:
    """Doc ids of every page of the real corpus, as sources.yaml maps them."""
    try:
        sources = load_sources(default_sources_file())
        return {page.doc_id for source in sources for page in iter_pages(source)}
    except SourceConfigError as exc:
        pytest.skip(f"real corpus not available: {exc}")


@pytest.fixture(scope="module")
def own():
    return load_benchmark("own_labelled")


@pytest.fixture(scope="module")
def k8s():
    try:
        return load_benchmark("k8s_bench_eval")
    except BenchmarkError as exc:
        pytest.skip(f"k8s bench data not available: {exc}")


# --- own_labelled --------------------------------------------------------------------------


def test_own_labelled_loads_with_category_minimums(own):
    counts = Counter(r.category for r in own.records)
    assert counts["prometheus"] + counts["argocd"] >= 45
    for category, minimum in MINIMUMS.items():
        assert counts[category] >= minimum, (category, counts)
    assert own.name == "own_labelled" and len(own.version_hash) == 64
    assert all(r.should_abstain == (r.category == "unanswerable") for r in own.records)


def test_own_labelled_spreads_over_pages_and_projects(own):
    pages = Counter(r.relevant[0] for r in own.records if r.category in ("prometheus", "argocd"))
    assert len(pages) >= 35  # many different pages, not a handful asked many times
    sources = {s for r in own.records for s in r.sources}
    assert {"prometheus-site", "prometheus-server", "argocd", "kubernetes", "cncf-whitepapers"} <= sources
    prometheus_sources = {s for r in own.records if r.category == "prometheus" for s in r.sources}
    assert prometheus_sources == {"prometheus-site", "prometheus-server"}
    identifier_sources = {r.sources[0] for r in own.records if r.category == "identifier"}
    assert {"kubernetes", "argocd"} <= identifier_sources
    assert identifier_sources & {"prometheus-site", "prometheus-server"}


def test_every_own_relevant_doc_id_exists_in_the_corpus(own, corpus_doc_ids):
    missing = {d for r in own.records for d in r.relevant} - corpus_doc_ids
    assert not missing
    covered, uncovered = coverage(own.records, corpus_doc_ids)
    assert uncovered == [] and len(covered) == len(own.records)


def test_hash_is_stable_and_tracks_content(own, tmp_path: Path):
    again = load_benchmark(benchmarks_dir() / "own_labelled.jsonl")
    assert again.version_hash == own.version_hash
    copy = tmp_path / "own_labelled.jsonl"
    shutil.copyfile(benchmarks_dir() / "own_labelled.jsonl", copy)
    assert load_benchmark(copy).version_hash == own.version_hash  # content, not path
    with copy.open("a") as fh:
        fh.write(json.dumps({"id": "extra", "question": "q?", "relevant": [], "category": "unanswerable"}) + "\n")
    assert load_benchmark(copy).version_hash != own.version_hash


@pytest.mark.parametrize(
    "record, error",
    [
        ({"question": "q", "relevant": [], "category": "unanswerable"}, "missing id"),
        ({"id": "a", "question": "q", "relevant": "argocd:faq", "category": "argocd"}, "must be a list"),
        ({"id": "a", "question": "q", "relevant": ["faq"], "category": "argocd"}, "<source>:<page_id>"),
        ({"id": "a", "question": "q", "relevant": [], "category": "argocd"}, "only category"),
        ({"id": "a", "question": "q", "relevant": ["argocd:faq"], "category": "unanswerable"}, "only category"),
    ],
)
def test_own_record_validation(tmp_path: Path, record: dict, error: str):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(BenchmarkError, match=error):
        load_benchmark(path)


def test_duplicate_ids_and_bad_json(tmp_path: Path):
    row = json.dumps({"id": "a", "question": "q", "relevant": [], "category": "unanswerable"})
    dup = tmp_path / "dup.jsonl"
    dup.write_text(f"{row}\n{row}\n")
    with pytest.raises(BenchmarkError, match="duplicate record id 'a'"):
        load_benchmark(dup)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(row + "\n{not json\n")
    with pytest.raises(BenchmarkError, match=r"broken.jsonl:2: not valid JSON"):
        load_benchmark(broken)


def test_unknown_name_and_missing_path(tmp_path: Path):
    with pytest.raises(BenchmarkError, match="no benchmark named 'nope'"):
        load_benchmark("nope")
    with pytest.raises(BenchmarkError, match="not found"):
        load_benchmark(tmp_path / "missing.jsonl")


# --- k8s_bench_eval through its spec -------------------------------------------------------


def test_k8s_spec_maps_rows(k8s):
    assert k8s.name == "k8s_bench_eval" and len(k8s.records) == 745
    first = k8s.records[0]
    assert first.id == "kubernetes-eval-manualv2-0007"
    assert first.relevant == ("kubernetes:concepts_configuration_secret",)
    assert first.reference_answer.startswith("A Secret is an object")
    assert (first.category, first.page_kind) == ("kubernetes", "concept")
    assert "answer_mode=normal" in first.why
    assert not any(r.should_abstain for r in k8s.records)
    assert load_benchmark("k8s_bench_eval").version_hash == k8s.version_hash


def test_k8s_coverage_against_real_corpus(k8s, corpus_doc_ids):
    covered, uncovered = coverage(k8s.records, corpus_doc_ids)
    assert len(covered) == EXPECTED_K8S_COVERED and len(uncovered) == 745 - EXPECTED_K8S_COVERED


def test_spec_env_override_and_missing_data(tmp_path: Path, monkeypatch, k8s):
    bench = tmp_path / "bench" / "k8s-docs-rag-bench"
    bench.mkdir(parents=True)
    source = settings.bench_dir() / "k8s-docs-rag-bench" / "qa_eval.jsonl"
    shutil.copyfile(source, bench / "qa_eval.jsonl")
    monkeypatch.setenv("INFRA_RAG_BENCH", str(tmp_path / "bench"))
    assert load_benchmark("k8s_bench_eval").version_hash == k8s.version_hash
    monkeypatch.setenv("INFRA_RAG_BENCH", str(tmp_path / "elsewhere"))
    with pytest.raises(BenchmarkError, match="data file not found"):
        load_benchmark("k8s_bench_eval")


def test_spec_row_count_and_field_checks(tmp_path: Path):
    data = tmp_path / "rows.jsonl"
    data.write_text(
        json.dumps({"id": "1", "question": "q", "answer": "a", "page_kind": "task", "source_page": "p"}) + "\n"
    )
    spec = tmp_path / "spec.yaml"
    base = (
        f"name: t\ndata: {data}\nrelevant_template: 'kubernetes:{{source_page}}'\n"
        "fields: {id: id, question: question, reference_answer: answer, page_kind: page_kind,"
        " relevant_page: source_page}\n"
    )
    spec.write_text(base)
    [record] = load_benchmark(spec).records
    assert record.relevant == ("kubernetes:p",) and record.category == "default"
    spec.write_text(base + "expected_rows: 2\n")
    with pytest.raises(BenchmarkError, match="1 rows, spec expects 2"):
        load_benchmark(spec)
    spec.write_text(base.replace("answer,", "missing_field,"))
    with pytest.raises(BenchmarkError, match="missing field 'missing_field'"):
        load_benchmark(spec)


# --- coverage ------------------------------------------------------------------------------


def test_coverage_rules():
    known = {"kubernetes:a", "argocd:b"}
    records = [
        BenchRecord("1", "q", ("kubernetes:a",), "", "kubernetes"),
        BenchRecord("2", "q", ("kubernetes:gone", "argocd:b"), "", "argocd"),  # any one suffices
        BenchRecord("3", "q", ("kubernetes:gone",), "", "kubernetes"),
        BenchRecord("4", "q", (), "", "unanswerable"),  # always kept
    ]
    covered, uncovered = coverage(records, known)
    assert [r.id for r in covered] == ["1", "2", "4"] and [r.id for r in uncovered] == ["3"]
