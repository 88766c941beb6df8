"""The package finds its data files in itself, never in a checkout (the wheel runs anywhere)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra_rag_assets import package_data, settings
from infra_rag_assets.rag.evaluate.benchmarks import benchmark_path
from infra_rag_assets.rag.ingest.sources import load_sources

pytestmark = pytest.mark.unit

PACKAGE = Path(package_data.__file__).parent
# parents[...] that name code, not data: the library's own sources (hashed into eval cache keys)
# and the folder holding the package (the parse worker's import path). Both exist in a wheel.
CODE_PATHS = {"rag/evaluate/reuse.py", "rag/ingest/parse/budget.py"}


def test_no_module_reaches_outside_the_package_for_data():
    climbing = re.compile(r"PROJECT_ROOT|__file__.*\.parents?\b.*(\[|\.parent)")
    offenders = {
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if climbing.search(p.read_text(encoding="utf-8"))
    }
    assert offenders == CODE_PATHS


def test_defaults_are_packaged_files_and_settings_override_them(monkeypatch, tmp_path):
    for name in ("GATES", "CANARY", "SOURCES"):
        monkeypatch.delenv(settings.PREFIX + name, raising=False)
    shipped = [settings.gates_file(), settings.canary_file(), Path(settings.sources_file())]
    assert all(p.is_file() and p.parent == PACKAGE / "data" for p in shipped)
    assert package_data.dagster_yaml_template().is_file() and package_data.workspace_yaml().is_file()
    assert benchmark_path("own_labelled") == PACKAGE / "data" / "benchmarks" / "own_labelled.jsonl"
    assert benchmark_path("k8s_bench_eval").suffix == ".yaml"  # the spec, read before any jsonl
    for name in ("GATES", "CANARY", "SOURCES"):
        monkeypatch.setenv(settings.PREFIX + name, str(tmp_path / f"{name.lower()}.yaml"))
    assert [settings.gates_file().name, settings.canary_file().name] == ["gates.yaml", "canary.yaml"]
    assert settings.sources_file() == str(tmp_path / "sources.yaml")


def test_packaged_sources_follow_infra_rag_corpus(monkeypatch, tmp_path):
    """The shipped sources.yaml names no checkout folder: ${INFRA_RAG_CORPUS}, else ../shared/corpus
    from the current directory."""
    monkeypatch.setenv("INFRA_RAG_CORPUS", str(tmp_path / "mirror"))
    for folder in ("kubernetes", "prometheus/site", "prometheus/server", "argocd", "pdf"):
        (tmp_path / "mirror" / folder).mkdir(parents=True)
    mirrors = {s.name: Path(s.mirror) for s in load_sources(package_data.default_sources_file())}
    assert mirrors and all(m.is_relative_to(tmp_path / "mirror") for m in mirrors.values())
    monkeypatch.delenv("INFRA_RAG_CORPUS")
    monkeypatch.chdir(tmp_path)
    assert settings.expand("${INFRA_RAG_CORPUS}/kubernetes") == str(tmp_path.parent / "shared/corpus/kubernetes")
    assert settings.expand("${INFRA_RAG_CORPUS:-own}/x") == "own/x"  # a file's own default still wins
    monkeypatch.setenv("INFRA_RAG_BENCH", str(tmp_path / "bench"))
    assert settings.expand("${INFRA_RAG_BENCH}/k") == str(tmp_path / "bench" / "k")
    assert settings.expand("${UNKNOWN_VARIABLE}") == ""
