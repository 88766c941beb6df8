"""support_judge: the cross-encoder that scores answers, trained here per corpus (no hub download).

chunks → support_judge → eval_run. Pairs come from the version's chunks, the k8s TRAIN split
(``rag/judge/pairs/judge_pairs.py``, ``product_pairs.py``) and the public labelled answers of
``INFRA_RAG_JUDGE_DATA`` (``judge_data.py``); the
packaged MiniLM encoder is fine-tuned and calibrated on held-out pages
(``rag/judge/support_judge.py``) into ``<home>/judges/<key>/``, where ``key`` hashes every
input by content, so an unchanged rebuild trains nothing. The version's serving snapshot gets
a pointer to it, which the eval run, ``infra-rag judge`` and ``POST /judge`` load.
"""

import json
import time

import dagster as dg
from pydantic import Field

from ... import settings
from ...package_data import answer_labels_file
from ..partitions import index_version
from ..reporting import training_progress
from ..resources import DataHomeResource, stage_device
from .judge_report import judge_metadata, label_metadata
from .training_inputs import training_inputs


def label_report(home, version: str) -> dict:
    """The judge against the hand labels (the packaged benchmarks/answer_labels.jsonl), as metadata;
    computed once per judge and labels content."""
    from ...rag.judge.label_calibration import cached_report
    from ...rag.judge.version_judge import load_version_judge

    if not settings.judge_labels():
        return {"hand_labels": "not scored: INFRA_RAG_JUDGE_LABELS is off"}
    path = answer_labels_file()
    judge, note = load_version_judge(home, version)
    if judge is None or not path.is_file():
        return {"hand_labels": note if judge is None else f"no {path.name}"}
    report, cached = cached_report(judge, path, home.cache("judging"))
    return label_metadata(report, cached)


def _default_pairs() -> int:
    from ...rag.judge.support_judge import JudgeRecipe

    return settings.judge_pairs(JudgeRecipe.train_pairs)


class SupportJudgeConfig(dg.Config):
    train_pairs: int = Field(
        default_factory=_default_pairs,
        description="pairs of TRAIN sources trained on (env INFRA_RAG_JUDGE_PAIRS, else the recipe's default)",
    )
    epochs: int = 1


@dg.asset(
    partitions_def=index_version,
    deps=["chunks"],
    group_name="evaluation",
    kinds={"pytorch"},
    owners=["team:search-platform"],
    description="The support judge that scores answers: MiniLM (3 layers) fine-tuned as a cross-encoder over "
    "a claim and the union of its cited passages, on public LLM answers with human labels (RAGTruth train "
    "spans, AttributionBench dev, HaluEval length-matched), the k8s train split's reference answers, quotes, "
    "two-passage answers and near-miss edits, and corpus sentences; calibrated and thresholded on DEV sources; "
    "content-addressed under <home>/judges/<key>/ (judge-data hashes included), reused when the inputs are unchanged.",
)
def support_judge(
    context: dg.AssetExecutionContext, config: SupportJudgeConfig, store: DataHomeResource
) -> dg.MaterializeResult:
    from ...rag.judge.pairs.judge_data import data_hash
    from ...rag.judge.pairs.judge_pairs import load_train_rows
    from ...rag.judge.support_judge import (
        JUDGE_JSON,
        JudgeRecipe,
        judge_key,
        recipe_pairs,
        train_support_judge,
    )
    from ...rag.judge.version_judge import write_pointer

    hardware = stage_device()
    inputs = training_inputs(context, store)
    home, version, chunks, base, lineage = inputs.home, inputs.version, inputs.chunks, inputs.base, inputs.lineage
    train_split = inputs.train_split
    recipe = JudgeRecipe(train_pairs=config.train_pairs, epochs=config.epochs)
    judge_data = settings.judge_data_dir()
    lineage = {**lineage, "judge_data_hash": data_hash(judge_data)}  # '' without it: corpus pairs only
    key = judge_key(recipe, **lineage)
    target = home.cache("judge").path(key)
    reused = (target / JUDGE_JSON).is_file()
    if not reused:
        started = time.perf_counter()
        rows = load_train_rows(train_split) if lineage["train_data_hash"] else []
        pairs = recipe_pairs(recipe, chunks, rows, judge_data if lineage["judge_data_hash"] else None)
        context.log.info(f"{len(pairs)} judge pairs {dict(pairs.composition)} in {time.perf_counter() - started:.1f}s")
        target.parent.mkdir(parents=True, exist_ok=True)
        train_support_judge(base, pairs, target, recipe, progress=training_progress(context, "judge training"),
                            device=hardware.torch_device,
                            extra={"key": key, "lineage": {**lineage, "index_version": version}})  # fmt: skip
    record = json.loads((target / JUDGE_JSON).read_text())
    write_pointer(home, version, key, {"trained_weights_hash": record["trained_weights_hash"]})
    labels = label_report(home, version)
    return dg.MaterializeResult(
        metadata={
            **judge_metadata(record, key, reused),
            **labels,
            "path": dg.MetadataValue.path(str(target)),
        },
        data_version=dg.DataVersion(record["trained_weights_hash"]),
    )
