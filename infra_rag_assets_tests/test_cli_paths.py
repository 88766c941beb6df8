"""Path settings are resolved once, where the CLI starts: a child process (dagster dev, its
daemon's sensors, a run worker, uvicorn) started in another folder reads the same folders."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from infra_rag_assets import settings
from infra_rag_assets.cli.main import main

pytestmark = pytest.mark.unit

PRINT = "from infra_rag_assets import settings as s; print(s.corpus_dir()); print(s.bench_dir()); print(s.home())"


@pytest.fixture
def started_in(tmp_path, monkeypatch):
    start = tmp_path / "start"
    (start / "rel" / "corpus").mkdir(parents=True)
    monkeypatch.chdir(start)
    monkeypatch.setenv("INFRA_RAG_CORPUS", "rel/corpus")
    for name in ("BENCH", "HOME", "SOURCES"):
        monkeypatch.delenv(f"INFRA_RAG_{name}", raising=False)
    return start


def test_a_child_in_another_folder_reads_the_folders_the_cli_meant(started_in, tmp_path):
    elsewhere = tmp_path / "elsewhere" / "deeper"
    elsewhere.mkdir(parents=True)
    env = settings.child_environment()
    done = subprocess.run([sys.executable, "-c", PRINT], env=env, cwd=elsewhere, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        str(started_in / "rel" / "corpus"),
        str(tmp_path / "shared" / "bench"),  # the default ../shared/bench, from where the CLI started
        str(started_in / ".infra_rag"),
    ]


def test_ui_pins_absolute_paths_and_warns_about_missing_folders(started_in, tmp_path, monkeypatch):
    launched: dict = {}
    monkeypatch.setattr("os.execve", lambda _path, _argv, env: launched.update(env=env))  # the exec boundary
    result = CliRunner().invoke(main, ["--home", "h", "ui"], catch_exceptions=False)
    env = launched["env"]
    assert env["INFRA_RAG_CORPUS"] == str(started_in / "rel" / "corpus")
    assert env["INFRA_RAG_BENCH"] == str(tmp_path / "shared" / "bench")
    assert env["INFRA_RAG_HOME"] == str(started_in / "h")
    assert "INFRA_RAG_BENCH (unset" in result.output and "names no folder" in result.output, result.output
    assert "INFRA_RAG_CORPUS" not in result.output  # it exists: no warning
