"""abstention_calibration: the dense floor of one index version, derived from its own cosines.

After both indexes (it asks the version's QueryEngine, which reads the serving snapshot that
lexical_index writes), before eval_run (which, like serving, then judges abstention at this
floor). Writes ``<home>/serving/<version>/calibration.json``; a rebuilt snapshot keeps it when the
chunks are unchanged and drops it when they changed (the version then falls back to the fixed
floor until this asset runs again; it is downstream of lexical_index, so every build does).
A calibration is also kept under ``<home>/calibrations/<key>/`` by a key of everything it was
measured from (upstream data versions, configuration, question files, code): an unchanged
rebuild copies it instead of asking ~600 questions again.
"""

import dagster as dg
import polars as pl

from ...rag.evaluate.benchmarks import TRAIN_BENCHMARK, load_benchmark
from ...rag.evaluate.calibrate import MIN_QUESTIONS, calibrate_or_reuse
from ...rag.evaluate.reuse import content_key
from ...rag.index.config import stable_hash
from ...rag.search.calibration import calibration_path, write_calibration
from ...rag.search.retrieval_settings import DEFAULT_FLOOR
from ..asset_lineage import upstream_lineage
from ..partitions import index_version
from ..reporting import md_table
from ..resources import DataHomeResource


class CalibrationConfig(dg.Config):
    off_topic: str = "off_topic"  # the packaged benchmarks/off_topic.jsonl: questions that must be refused
    answerable: str = TRAIN_BENCHMARK  # TRAIN split: the eval split stays clean for reporting
    sample: int = 500
    seed: int = 0
    min_questions: int = MIN_QUESTIONS
    reuse_identical: bool = True  # copy the calibration of an identical earlier build instead of re-asking


@dg.asset(
    partitions_def=index_version,
    deps=["vectors", "lexical_index"],
    group_name="evaluation",
    kinds={"python"},
    owners=["team:search-platform"],
    description="Abstention floor of this index version: best dense cosines of off-topic questions and of "
    "a fixed sample of answerable train questions, with the version's own model; floor = off-topic "
    "p99, capped at answerable p01. Written as calibration.json in the serving snapshot, where the "
    "query path (CLI, service, eval_run, canary) reads it.",
)
def abstention_calibration(
    context: dg.AssetExecutionContext, config: CalibrationConfig, store: DataHomeResource
) -> dg.MaterializeResult:
    from ...rag.search.engine import QueryEngine

    version = context.partition_key
    home = store.data_home()
    target = home.version(version).snapshot
    calibration_path(target).unlink(missing_ok=True)  # a stale calibration must not outlive this run
    engine = QueryEngine(home, version)
    off_topic = load_benchmark(config.off_topic)
    answerable = load_benchmark(config.answerable)
    key = _calibration_key(context, config, store, off_topic, answerable)
    kept = home.cache("calibration").path(key) if key and config.reuse_identical else None
    calibration, why_not, reused = calibrate_or_reuse(
        engine, off_topic, answerable, kept, sample=config.sample, seed=config.seed, min_questions=config.min_questions
    )
    if reused is not None:
        context.log.info(f"{version}: calibration of {reused.version} reused (identical inputs and code)")
    if calibration is None:
        context.log.warning(f"{version} not calibrated: {why_not}")
        return dg.MaterializeResult(
            metadata={"calibrated": False, "reason": why_not, "floor": DEFAULT_FLOOR},
            data_version=dg.DataVersion(stable_hash(["uncalibrated", why_not], 16)),
        )
    path = write_calibration(target, calibration)
    quantiles = pl.DataFrame(
        [
            {"questions": name, "n": part["n"], **part["quantiles"]}
            for name, part in (("off-topic", calibration.off_topic), ("answerable (train)", calibration.answerable))
        ]
    )
    derivation = calibration.derivation
    return dg.MaterializeResult(
        metadata={
            "calibrated": True,
            "floor": calibration.floor,
            "rule": derivation["rule"],
            "off_topic_p99": derivation["off_topic_q99"],
            "answerable_p01": derivation["answerable_q01"],
            "separated": derivation["separated"],
            "best_cosine_quantiles": md_table(quantiles),
            "answerability_rule": dg.MetadataValue.json(calibration.answerability),
            "model_hash": calibration.model_hash,
            "path": dg.MetadataValue.path(str(path)),
            "reused_from": reused.version if reused is not None else "measured in this run",
        },
        data_version=dg.DataVersion(
            stable_hash(
                [calibration.floor, calibration.off_topic, calibration.answerable, calibration.answerability], 16
            )
        ),
    )


def _calibration_key(
    context: dg.AssetExecutionContext, config: CalibrationConfig, store: DataHomeResource, off_topic, answerable
) -> str | None:
    """Everything the calibration is measured from; the version name itself is not part of it.
    None when an upstream has no content address (e.g. indexes built outside Dagster)."""
    version = context.partition_key
    upstream = [
        row["data_version"]
        for row in upstream_lineage(context.instance, version, ("chunks", "vectors", "lexical_index"))
    ]
    if not all(upstream):
        return None
    return content_key(
        "calibration",
        {
            "upstream": upstream,
            "build_config": store.data_home().warehouse().version_config(version),
            "questions": [off_topic.version_hash, answerable.version_hash],
            "config": config.model_dump(exclude={"reuse_identical"}),
        },
    )
