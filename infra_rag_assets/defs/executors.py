"""The executor of the build jobs, chosen by ``INFRA_RAG_STEP_EXECUTOR`` (settings.py).

The default runs a build's steps one after another in the run's process, which loads each model
once on a small host. Scale-out is Dagster's own executors, selected here and configured by the
run config's ``execution`` block: ``multiprocess`` (a process per step), ``docker`` (a container
per step from the product image, ``dagster-docker``) and ``k8s`` (a Kubernetes Job per step,
``dagster-k8s``). The integration packages are imported only when chosen; every process that
loads the code location (run worker, step containers, code server) must see the same setting.
"""

from __future__ import annotations

import dagster as dg

from .. import settings

STEP_EXECUTORS = ("in_process", "multiprocess", "docker", "k8s")
_PACKAGES = {"docker": ("dagster_docker", "docker_executor"), "k8s": ("dagster_k8s", "k8s_job_executor")}


class StepExecutorError(ValueError):
    """A bad ``INFRA_RAG_STEP_EXECUTOR``: one line naming the setting."""


def build_executor(name: str | None = None) -> dg.ExecutorDefinition:
    """The executor definition for ``name`` (default: the setting)."""
    name = (name or settings.step_executor()).strip().lower().replace("-", "_")
    if name == "in_process":
        return dg.in_process_executor
    if name == "multiprocess":
        return dg.multiprocess_executor
    if name in _PACKAGES:
        module_name, attribute = _PACKAGES[name]
        try:
            module = __import__(module_name)
        except ImportError:
            raise StepExecutorError(
                f"INFRA_RAG_STEP_EXECUTOR={name} needs the {module_name.replace('_', '-')} package "
                f"(pip install 'infra_rag_assets[{name}]')"
            ) from None
        return getattr(module, attribute)
    raise StepExecutorError(
        f"INFRA_RAG_STEP_EXECUTOR={name!r} is not an executor: choose one of {', '.join(STEP_EXECUTORS)}"
    )
