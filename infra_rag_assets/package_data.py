"""The files the package ships beside its code (``infra_rag_assets/data/``), found through
``importlib.resources`` so an installed wheel runs from any directory.

``workspace.yaml`` and ``dagster.yaml`` are kept once, at the repository root, where ``dagster
dev`` looks for them; the build (setup.py) copies them into the wheel's ``data/``. So they are
found in the package when it is installed from a wheel, else beside it in the checkout.

Every default the settings name (gates, canary, sources, benchmarks, the Dagster instance
template and workspace) comes from here; settings.py decides whether an override applies.
Stdlib only: the library, the Dagster definitions, the CLI and the service all import it.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def data_path(*parts: str) -> Path:
    """A shipped file or folder as a real path (the package is installed unzipped, as pip does)."""
    root = files("infra_rag_assets") / "data"
    if not isinstance(root, Path):  # a zipped import would need importlib.resources.as_file
        raise RuntimeError(f"infra_rag_assets must be installed as files, not imported from {root}")
    return root.joinpath(*parts)


def benchmarks_dir() -> Path:
    """The benchmark specs and hand-labelled JSONL files (named by ``load_benchmark``)."""
    return data_path("benchmarks")


def answer_labels_file() -> Path:
    """The hand-labelled answers the judge's agreement is measured on (``label_calibration``)."""
    return data_path("benchmarks", "answer_labels.jsonl")


def default_sources_file() -> Path:
    """The shipped sources.yaml: the four projects' mirrors under ``${INFRA_RAG_CORPUS}``."""
    return data_path("sources.yaml")


def default_gates_file() -> Path:
    return data_path("gates.yaml")


def default_canary_file() -> Path:
    return data_path("canary.yaml")


def root_file(name: str) -> Path:
    """A file kept at the repository root and shipped in the wheel: the installed copy, else the
    checkout's (the folder holding the package; an editable install or ``PYTHONPATH``)."""
    shipped = data_path(name)
    return shipped if shipped.is_file() else data_path().parent.parent / name


def dagster_yaml_template() -> Path:
    """The embedded instance's dagster.yaml, copied into a new DAGSTER_HOME by the CLI."""
    return root_file("dagster.yaml")


def workspace_yaml() -> Path:
    """The workspace ``dagster job launch`` and ``dagster dev`` load the Definitions through."""
    return root_file("workspace.yaml")
