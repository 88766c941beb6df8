"""CLI conventions that need no build: the version flag, stage options read from the graph."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from click.testing import CliRunner

from infra_rag_assets.cli import main

pytestmark = pytest.mark.unit


def test_version_flag_prints_the_installed_package_version():
    done = CliRunner().invoke(main, ["--version"])
    assert done.exit_code == 0 and done.output.strip() == f"infra-rag {version('infra_rag_assets')}"


def test_cli_stage_options_are_read_from_the_graph():
    """`--through`/`--from` accept exactly the graph's stages, so help and errors cannot drift."""
    from infra_rag_assets.control.stages import targets

    refused = CliRunner().invoke(main, ["build", "--through", "nope"])
    assert refused.exit_code == 2 and "unknown stage 'nope'; choose one of" in refused.output
    listed = refused.output.split("choose one of", 1)[1]
    assert [t.strip() for t in listed.split(",")] == targets()
    assert {"abstention_calibration", "page_ranker", "domain_model"} <= set(targets())
    refused = CliRunner().invoke(main, ["build", "--from", "indexes"])  # a group, not a stage to start at
    assert refused.exit_code == 2 and "unknown stage 'indexes'" in refused.output


def test_index_version_is_spelled_out_and_the_old_flag_still_works(tmp_path):
    """`--index-version` names the index; `--version` on a command is a hidden alias, kept for
    one release (the program's own `infra-rag --version` no longer collides with it)."""
    runner = CliRunner()
    home = str(tmp_path / "no-home")
    assert "--index-version" in runner.invoke(main, ["release", "--help"]).output
    assert "--version" not in runner.invoke(main, ["release", "--help"]).output
    missing = runner.invoke(main, ["--home", home, "release"])
    assert missing.exit_code == 2 and "Missing option '--index-version'" in missing.output
    for flag in ("--index-version", "--version"):
        done = runner.invoke(main, ["--home", home, "release", flag, "v-none"])
        assert done.exit_code == 2 and "v-none has no eval_run" in done.output, done.output
