"""One home per setting and per path: settings.py, DataHome's version map and content caches."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra_rag_assets import settings
from infra_rag_assets.rag.operate.home import CACHE_KINDS, DataHome

pytestmark = pytest.mark.unit

PACKAGE = Path(settings.__file__).parent


def test_no_module_but_settings_reads_an_infra_rag_variable():
    readers = re.compile(r"(environ(\.get)?\(|environ\[|getenv\(|envvar=)\s*[\"']INFRA_RAG_")
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "settings.py" and readers.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_entry_points_write_no_environment_and_nothing_writes_a_setting():
    """The CLI, control layer and service pass settings to children; only the model loader sets
    huggingface's offline switches (rag/index/embedding.offline_models)."""
    writers = re.compile(r"os\.environ\[[^]]+\]\s*=|os\.environ\.(update|setdefault)\(|os\.putenv\(")
    entry_points = [p for folder in ("cli", "control", "service") for p in (PACKAGE / folder).rglob("*.py")]
    assert [p.name for p in entry_points if writers.search(p.read_text())] == []
    setting_writers = re.compile(r"os\.environ(\[|\.setdefault\(|\.update\()\s*[\"']?INFRA_RAG_")
    assert [p.name for p in PACKAGE.rglob("*.py") if setting_writers.search(p.read_text())] == []


def test_every_variable_is_documented_for_operators():
    documented = set(re.findall(r"INFRA_RAG_([A-Z_]+)", (PACKAGE.parent / "docs" / "operations.md").read_text()))
    assert set(settings.VARIABLES) <= documented


def test_values_are_read_when_asked_with_their_defaults(monkeypatch, tmp_path):
    for name in settings.VARIABLES:
        monkeypatch.delenv(settings.PREFIX + name, raising=False)
    assert settings.home() == str(Path.cwd() / ".infra_rag") and settings.adapt() is True
    assert settings.memory_scan_max_rows(7) == 7 and settings.max_inflight(32) == 32
    monkeypatch.setenv("INFRA_RAG_HOME", str(tmp_path))
    monkeypatch.setenv("INFRA_RAG_ADAPT", " Off ")
    monkeypatch.setenv("INFRA_RAG_MEMORY_SCAN_MAX_ROWS", "12x")
    assert settings.home() == str(tmp_path) and settings.adapt() is False
    with pytest.raises(ValueError, match="MEMORY_SCAN_MAX_ROWS must be a whole number"):
        settings.memory_scan_max_rows(7)


def test_child_environment_names_only_known_settings(monkeypatch):
    monkeypatch.delenv("INFRA_RAG_LANCEDB_URI", raising=False)
    env = settings.child_environment(home="/data", max_inflight=8, lancedb_uri=None, dagster_home="/dh")
    assert env["INFRA_RAG_HOME"] == "/data" and env["INFRA_RAG_MAX_INFLIGHT"] == "8" and env["DAGSTER_HOME"] == "/dh"
    assert "INFRA_RAG_LANCEDB_URI" not in env
    with pytest.raises(KeyError, match="INFRA_RAG_HOMES is not a known setting"):
        settings.child_environment(homes="/typo")


def test_a_version_map_refuses_names_that_would_escape_the_home(tmp_path):
    home = DataHome.at(tmp_path)
    paths = home.version("2026-12-03T0811-d782a4")
    assert paths.tantivy == tmp_path / "tantivy" / "2026-12-03T0811-d782a4"
    assert paths.ranker.parent == paths.snapshot == tmp_path / "serving" / "2026-12-03T0811-d782a4"
    assert {paths.ranker.name, paths.page_vectors.name, paths.calibration.name} == {
        "ranker.json",
        "page_vectors.npz",
        "calibration.json",
    }
    for bad in ("", "../x", "a/b", ".hidden"):
        with pytest.raises(ValueError, match="not an index version name"):
            home.version(bad)


def test_a_cache_entry_is_found_again_by_its_key(tmp_path):
    home = DataHome.at(tmp_path)
    rankers = home.cache("ranker")
    assert rankers.root == tmp_path / CACHE_KINDS["ranker"] and rankers.get("abc.json") is None
    stored = rankers.put("abc.json", lambda path: path.write_text("{}"))
    assert rankers.get("abc.json") == stored and stored.read_text() == "{}"
    with pytest.raises(ValueError, match="unknown cache 'rankers'"):
        home.cache("rankers")
    with pytest.raises(ValueError, match="not a cache key"):
        rankers.path("../escape")
