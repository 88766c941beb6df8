"""The `infra-rag` CLI end to end on the fixture corpus (real Dagster instance under tmp)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from infra_rag_assets.cli import main
from infra_rag_assets.rag.operate.warehouse import Warehouse

pytestmark = pytest.mark.build


@pytest.fixture
def cli(tmp_path, fixture_sources, monkeypatch):
    monkeypatch.setenv("INFRA_RAG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("INFRA_RAG_SOURCES", str(fixture_sources))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(main, list(args), catch_exceptions=False)

    run.warehouse = Warehouse(tmp_path / "home" / "warehouse.duckdb")
    return run


def test_build_through_documents_then_versions(cli):
    result = cli("build", "--through", "documents")
    assert result.exit_code == 0, result.output
    version = result.stdout.strip().splitlines()[-1]
    assert cli.warehouse.rows("SELECT count(*) FROM documents WHERE index_version = ?", [version])[0][0] == 12
    assert "documents: done" in result.output  # the last stage's end is shown, not left "waiting"
    listed = cli("versions")
    assert listed.exit_code == 0 and version in listed.stdout


def test_from_chunks_reuses_previous_documents(cli):
    first = cli("build", "--through", "documents").stdout.strip().splitlines()[-1]
    result = cli("build", "--from", "chunks", "--through", "chunks")
    assert result.exit_code == 0, result.output
    second = result.stdout.strip().splitlines()[-1]
    assert second != first and f"reusing earlier stages of {first}" in result.output
    counts = cli.warehouse.rows("SELECT index_version, count(*) FROM documents GROUP BY 1")
    assert dict(counts) == {first: 12, second: 12}
    assert cli.warehouse.rows("SELECT count(*) FROM chunks WHERE index_version = ?", [second])[0][0] > 0


@pytest.mark.parametrize(
    "args, message, code",
    [
        (["build", "--through", "nonsense"], "unknown stage 'nonsense'", 2),
        (["build", "--from", "chunks", "--through", "documents"], "--from chunks is not a stage before", 2),
        (["build", "--version", "no-such-version"], "unknown index version", 1),  # not in this home
    ],
)
def test_bad_arguments_give_one_line_errors(cli, args, message, code):
    result = cli(*args)
    assert result.exit_code == code
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_missing_mirror_is_a_one_line_error(cli, tmp_path, monkeypatch):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "sources:\n  - {name: k, project: kubernetes, kind: markdown_tree, license: x, "
        "url_template: 'https://x/{page_path}', mirror: /nonexistent/mirror}\n"
    )
    monkeypatch.setenv("INFRA_RAG_SOURCES", str(bad))
    result = cli("build", "--through", "documents")
    assert result.exit_code == 2 and "mirror folder not found" in result.output
    assert "Traceback" not in result.output
