"""Resources: where the data home lives, which sources to read, and build settings.

Everything an asset touches on disk hangs off one data home (``INFRA_RAG_HOME``, default
``./.infra_rag``), so tests point the whole graph at a tmp dir by configuring one resource.
"""

from __future__ import annotations

import os
import socket

import dagster as dg
from pydantic import Field

from .. import settings
from ..rag.index.config import AdaptRecipe, BuildSettings, ChunkSettings, make_build_config
from ..rag.index.embedding import DEFAULT_MODEL
from ..rag.ingest.sources import Source, load_sources
from ..rag.operate.home import DataHome, default_home

HOST_TAG, PID_TAG = "infra_rag/host", "infra_rag/pid"  # the process that runs a run's steps


def default_train_split() -> str:
    """The benchmark's train split (INFRA_RAG_BENCH overrides the bench folder, as for eval specs)."""
    return str(settings.bench_dir() / "k8s-docs-rag-bench" / "qa_train.jsonl")


def default_model() -> str:
    """INFRA_RAG_MODEL (e.g. a domain_model path) or the bundled base model."""
    return settings.model() or DEFAULT_MODEL


def from_env(name: str, default: str) -> str | dg.EnvVar:
    """A resource field set by ``INFRA_RAG_<name>``: a ``dg.EnvVar`` when the variable is set (the
    UI shows where the value comes from, and each run worker reads its own environment), else
    the default. Whether it is set is asked of settings.py, the one reader of these variables."""
    return dg.EnvVar(settings.PREFIX + name) if settings.is_set(name) else default


class DataHomeResource(dg.ConfigurableResource):
    """The data home: DuckDB warehouse, page blobs, LanceDB and Tantivy directories."""

    home: str = Field(default_factory=default_home, description="data home directory")
    lancedb_uri: str = Field(default="", description="LanceDB URI; empty = <home>/lancedb (may be s3://...)")

    def data_home(self) -> DataHome:
        """Every path under the home (warehouse, blobs, indexes, a version's files, caches) is DataHome's."""
        return DataHome.at(self.home, self.lancedb_uri)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Tag the run with the host and pid of the process that writes the stores, so a run
        whose worker was killed (``kill -9``, the OOM killer) is recognised later (runs.py)."""
        instance, run = context.instance, context.run
        if instance is None or run is None or instance.is_ephemeral:
            return
        here = {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}
        if any(run.tags.get(k) != v for k, v in here.items()):
            instance.add_run_tags(run.run_id, here)


class BuildResource(dg.ConfigurableResource):
    """Sources file and the settings a *new* version is built with (recorded per version)."""

    sources_file: str = Field(default_factory=settings.sources_file)
    model: str = Field(
        default_factory=default_model,
        description=f"sentence-transformers id or local path (default: env INFRA_RAG_MODEL, else {DEFAULT_MODEL})",
    )
    chunk_target_tokens: int = ChunkSettings.target_tokens
    chunk_max_tokens: int = ChunkSettings.max_tokens
    context_line: bool = ChunkSettings.context_line
    adapt: bool = Field(
        default_factory=settings.adapt,
        description="adapt the model to the corpus in the build "
        "(domain_model, 10-20 min cold, reused when unchanged); false = quick base-model build "
        "(default: env INFRA_RAG_ADAPT, else true)",
    )
    adapt_labelled_examples: int = AdaptRecipe.labelled_examples
    adapt_doc_examples: int = AdaptRecipe.doc_examples
    adapt_epochs: int = AdaptRecipe.epochs
    adapt_max_seq_length: int = AdaptRecipe.max_seq_length
    train_split: str = Field(
        default_factory=default_train_split,
        description="labelled train questions (JSONL, never eval/test); missing = label-free pairs only",
    )

    def recipe(self) -> AdaptRecipe | None:
        """The adaptation recipe a new version records (None: the quick base-model build)."""
        if not self.adapt:
            return None
        return AdaptRecipe(
            labelled_examples=self.adapt_labelled_examples,
            doc_examples=self.adapt_doc_examples,
            epochs=self.adapt_epochs,
            max_seq_length=self.adapt_max_seq_length,
            train_split=self.train_split,
        )

    def sources(self) -> list[Source]:
        return load_sources(self.sources_file)

    def chunk_settings(self) -> ChunkSettings:
        return ChunkSettings(
            target_tokens=self.chunk_target_tokens, max_tokens=self.chunk_max_tokens, context_line=self.context_line
        )

    def build_config(self) -> BuildSettings:
        from ..rag.ingest.parse.dispatch import parser_versions

        return make_build_config(
            self.sources(),
            parser_versions(),
            self.chunk_settings(),
            self.model,
            model_hash_for(self.model),
            self.recipe(),
        )


def model_hash_for(model: str) -> str:
    """Weights hash of the configured model, or '' when it cannot be resolved here."""
    try:
        from ..rag.index.embedding import resolve_model_path, weights_hash

        return weights_hash(resolve_model_path(model))
    except Exception:  # noqa: BLE001 - recorded as unknown; the vectors stage refuses later
        return ""


def version_config(store: DataHomeResource, settings: BuildResource, version: str, created_by: str) -> BuildSettings:
    """The configuration recorded for ``version``; a version made in the UI records it now."""
    warehouse = store.data_home().warehouse()
    recorded = warehouse.version_config(version)
    if recorded is not None:
        return BuildSettings.from_dict(recorded)
    config = settings.build_config()
    warehouse.record_version(version, config.to_dict(), config.config_hash(), _fingerprint(config), created_by)
    return config


def _fingerprint(config: BuildSettings) -> str:
    from ..rag.index.config import sources_fingerprint

    return sources_fingerprint(config.sources)


class EmbedderResource(dg.ConfigurableResource):
    """How to run the embedding model (which model is part of the version's configuration)."""

    batch_size: int = Field(
        default=8,
        description="texts per forward pass: 8 measured fastest on 2 CPU cores "
        "(23.9 texts/s vs 19.4 at 32 and 16.5 at 64, length-sorted chunks, 2026-12-02)",
    )
    device: str = "cpu"

    def embedder(self, model: str):
        """One loaded model per process and model id: repeated materializations reuse it."""
        from ..rag.index.embedding import shared_embedder

        return shared_embedder(model, device=self.device)


class StageGraphResource(dg.ConfigurableResource):
    """Every asset upstream of each lineage-reporting asset (eval_run, release) in the whole code
    location's graph, in build order. definitions.py fills it from the assembled assets: a run's
    own graph covers only its job's (or subset's) assets, and defs/ must not import definitions.py."""

    upstream: dict[str, list[str]] = Field(default_factory=dict)

    def upstream_of(self, asset: str) -> list[str]:
        return list(self.upstream[asset])
