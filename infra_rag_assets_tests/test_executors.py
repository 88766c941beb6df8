"""INFRA_RAG_STEP_EXECUTOR: the build jobs' executor, and one-line errors before any work."""

from __future__ import annotations

import sys

import dagster as dg
import pytest
from click.testing import CliRunner

from infra_rag_assets.cli.main import main
from infra_rag_assets.defs.executors import STEP_EXECUTORS, StepExecutorError, build_executor
from infra_rag_assets.defs.jobs import build_jobs

pytestmark = pytest.mark.unit


def test_the_default_runs_steps_in_the_run_process(monkeypatch):
    monkeypatch.delenv("INFRA_RAG_STEP_EXECUTOR", raising=False)
    assert build_executor() is dg.in_process_executor


def test_every_build_job_takes_the_configured_executor(monkeypatch):
    from infra_rag_assets.definitions import ASSETS

    monkeypatch.setenv("INFRA_RAG_STEP_EXECUTOR", "multiprocess")
    jobs = build_jobs(ASSETS)
    assert jobs and all(job.executor_def is dg.multiprocess_executor for job in jobs)


@pytest.mark.parametrize("setting", ["tpu", "celery", "in process; rm -rf /"])
def test_an_unknown_executor_is_one_line_naming_the_setting(monkeypatch, setting):
    monkeypatch.setenv("INFRA_RAG_STEP_EXECUTOR", setting)
    with pytest.raises(StepExecutorError) as raised:
        build_executor()
    message = str(raised.value)
    assert message.startswith("INFRA_RAG_STEP_EXECUTOR=") and "\n" not in message
    assert all(name in message for name in STEP_EXECUTORS)


@pytest.mark.parametrize("name, package", [("docker", "dagster_docker"), ("k8s", "dagster_k8s")])
def test_a_missing_integration_package_names_the_extra(monkeypatch, name, package):
    monkeypatch.setitem(sys.modules, package, None)  # as on an install without the extra
    with pytest.raises(StepExecutorError, match=rf"needs the {package.replace('_', '-')} package .*\[{name}\]"):
        build_executor(name)


def test_the_cli_refuses_a_bad_executor_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("INFRA_RAG_STEP_EXECUTOR", "tpu")
    result = CliRunner().invoke(main, ["--home", str(tmp_path), "versions"])
    assert result.exit_code == 2
    assert "INFRA_RAG_STEP_EXECUTOR='tpu' is not an executor" in result.output
    assert not any(tmp_path.iterdir())
