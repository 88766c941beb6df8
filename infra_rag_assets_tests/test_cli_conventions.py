"""CLI conventions that need no build: the version flag, choices read from the graph and the
registries, ``--json`` on every command that prints data, exit codes, and no home created by a
command that only reads one."""

from __future__ import annotations

from importlib.metadata import version

import click
import pytest
from click.testing import CliRunner

from infra_rag_assets.cli import main

pytestmark = pytest.mark.unit

# Commands that print no data: they replace the process with a server.
SERVERS = {"serve", "ui"}
# The commands that may create a data home; every other one only reads it.
CREATES_HOME = {"build", "ui"}
NO_HOME = {"sources"}  # writes the mirrors sources.yaml names; reads no data home
# Valid arguments for each home-reading command (a new command must be added here).
READER_ARGS = {
    "versions": [],
    "search": ["What is a Pod?"],
    "answer": ["--offline", "What is a Pod?"],
    "traces": [],
    "judge": ["--batch", "-"],
    "judge-labels": [],
    "release": ["--index-version", "v1"],
    "rollback": [],
    "lineage": ["v1"],
    "snapshot": [],
    "health": [],
    "canary": [],
    "serve": [],
}


def commands(group: click.Group = main, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], click.Command]:
    """Every leaf command of the CLI, by its path (subgroups included)."""
    found: dict[tuple[str, ...], click.Command] = {}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found.update(commands(command, (*prefix, name)))
        else:
            found[(*prefix, name)] = command
    return found


def _options(command: click.Command) -> set[str]:
    return {opt for param in command.params for opt in param.opts}


def test_version_flag_prints_the_installed_package_version():
    done = CliRunner().invoke(main, ["--version"])
    assert done.exit_code == 0 and done.output.strip() == f"infra-rag {version('infra_rag_assets')}"


def test_cli_stage_options_are_read_from_the_graph():
    """`--through`/`--from` accept exactly the graph's stages, so help and errors cannot drift."""
    from infra_rag_assets.control.stages import stage_order, targets

    refused = CliRunner().invoke(main, ["build", "--through", "nope"])
    assert refused.exit_code == 2 and "unknown stage 'nope'; choose one of" in refused.output
    listed = refused.output.split("choose one of", 1)[1]
    assert [t.strip() for t in listed.split(",")] == targets()
    assert {"abstention_calibration", "page_ranker", "domain_model"} <= set(targets())
    refused = CliRunner().invoke(main, ["build", "--from", "indexes"])  # a group, not a stage to start at
    assert refused.exit_code == 2 and "unknown stage 'indexes'" in refused.output
    params = {p.name: p for p in main.commands["build"].params}
    assert list(params["through"].type.choices) == targets() and list(params["start"].type.choices) == stage_order()


def test_help_choices_are_the_registries():
    """--config, --mode and --project list the config registry, the modes and the projects."""
    from infra_rag_assets.rag.ingest.sources import PROJECTS
    from infra_rag_assets.rag.search.engine import MODE_CONFIGS
    from infra_rag_assets.rag.search.retrieval_settings import NAMED_CONFIGS

    wanted = {"config": list(NAMED_CONFIGS), "mode": list(MODE_CONFIGS), "project": sorted(PROJECTS)}
    for name in ("search", "answer"):
        params = {p.name: p for p in main.commands[name].params}
        for option, choices in wanted.items():
            if option in params:
                assert list(params[option].type.choices) == choices, (name, option)
    usage = CliRunner().invoke(main, ["search", "--help"]).output
    assert f"[{'|'.join(NAMED_CONFIGS)}]" in usage.replace("\n", "").replace(" ", "")
    refused = CliRunner().invoke(main, ["search", "q", "--project", "istio"])
    assert refused.exit_code == 2 and f"choose one of {', '.join(sorted(PROJECTS))}" in refused.output


def test_every_command_that_prints_data_has_json():
    without = {" ".join(path) for path, command in commands().items() if "--json" not in _options(command)}
    assert without == SERVERS


def test_shell_completion_lists_commands_and_stages():
    """The completion docs/operations.md documents (`_INFRA_RAG_COMPLETE=bash_source`) works."""
    env = {"_INFRA_RAG_COMPLETE": "bash_complete", "COMP_WORDS": "infra-rag build --through ", "COMP_CWORD": "3"}
    done = CliRunner().invoke(main, [], prog_name="infra-rag", env=env)
    assert done.exit_code == 0 and "plain,release" in done.output and "plain,eval_run" in done.output
    source = CliRunner().invoke(main, [], prog_name="infra-rag", env={"_INFRA_RAG_COMPLETE": "bash_source"})
    assert "_infra_rag_completion" in source.output


@pytest.mark.parametrize("path", sorted(p for p in commands() if p[0] not in CREATES_HOME | NO_HOME), ids=" ".join)
def test_a_mistyped_home_is_exit_1_and_is_not_created(path, tmp_path):
    name = " ".join(path)
    assert name in READER_ARGS, f"add `{name}` to READER_ARGS (or CREATES_HOME) with valid arguments"
    typo = tmp_path / "no-such-home"
    done = CliRunner().invoke(main, ["--home", str(typo), *path, *READER_ARGS[name]], input="")
    assert done.exit_code == 1, done.output
    assert len(done.output.strip().splitlines()) == 1 and "Traceback" not in done.output
    assert not typo.exists()


def test_usage_errors_are_exit_2_and_missing_prerequisites_exit_1(tmp_path):
    runner = CliRunner()
    home = tmp_path / "home"
    home.mkdir()  # an empty home: nothing built
    assert runner.invoke(main, ["versions", "--no-such-flag"]).exit_code == 2
    assert runner.invoke(main, ["search", "q", "-k", "0"]).exit_code == 2
    for args in (["search", "What is a Pod?"], ["rollback"], ["health"]):
        done = runner.invoke(main, ["--home", str(home), *args])
        assert done.exit_code == 1, (args, done.output)


def test_health_on_an_empty_home_says_nothing_is_built_and_how_to_build(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    done = CliRunner().invoke(main, ["--home", str(home), "health"])
    assert done.exit_code == 1 and f"nothing built yet in {home}: run `infra-rag build`" in done.output
    assert "serving the latest built version" not in done.output  # nothing serves
    report = CliRunner().invoke(main, ["--home", str(home), "health", "--json"])
    assert report.exit_code == 1 and '"nothing_built": true' in report.stdout


def test_index_version_is_spelled_out_and_the_old_flag_still_works(tmp_path):
    """`--index-version` names the index; `--version` on a command is a hidden alias, kept for
    one release (the program's own `infra-rag --version` no longer collides with it). An
    unknown version is named as unknown, pointing at `infra-rag versions`."""
    runner = CliRunner()
    home = tmp_path / "home"
    home.mkdir()
    assert "--index-version" in runner.invoke(main, ["release", "--help"]).output
    assert "--version" not in runner.invoke(main, ["release", "--help"]).output
    missing = runner.invoke(main, ["--home", str(home), "release"])
    assert missing.exit_code == 2 and "Missing option '--index-version'" in missing.output
    for flag in ("--index-version", "--version"):
        done = runner.invoke(main, ["--home", str(home), "release", flag, "v-none"])
        assert done.exit_code == 1 and "unknown index version 'v-none'" in done.output, done.output
        assert "see `infra-rag versions`" in done.output and "eval_run" not in done.output
