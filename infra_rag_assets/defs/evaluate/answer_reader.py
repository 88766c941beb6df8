"""answer_reader: the sentence reader the offline answerer uses, trained here per corpus (no hub download).

chunks → answer_reader → eval_run. Examples come from the version's chunks and the k8s TRAIN split
(``rag/answer/reader_data.py``: each reference answer placed at the sentence of its page that
holds it, against a same-page sentence that only shares the question's words); the packaged
MiniLM encoder is tuned on them and calibrated on held-out pages (``rag/answer/reader_training.py``) into
``<home>/readers/<key>/``, where ``key`` hashes every input by content, so an unchanged rebuild
trains nothing. The version's serving snapshot gets a pointer to it, which the CLI, the service
and the eval run load (``rag/answer/answerers.py``).
"""

import json
import time

import dagster as dg
from pydantic import Field

from ... import settings
from ..partitions import index_version
from ..reporting import floats, training_progress
from ..resources import DataHomeResource, stage_device
from .training_inputs import training_inputs


def _recipe_default(name: str) -> int:
    """The recipe's default (one home: ``ReaderRecipe``; imported late, it loads torch)."""
    from ...rag.answer.reader_training import ReaderRecipe

    return getattr(ReaderRecipe, name)


class AnswerReaderConfig(dg.Config):
    max_examples: int = Field(
        default_factory=lambda: settings.reader_examples(_recipe_default("max_examples")),
        description="train + dev examples, 0 = all (env INFRA_RAG_READER_EXAMPLES, else the recipe's default)",
    )
    epochs: int = Field(default_factory=lambda: _recipe_default("epochs"), description="passes over the examples")


@dg.asset(
    partitions_def=index_version,
    deps=["chunks"],
    group_name="evaluation",
    kinds={"pytorch"},
    owners=["team:search-platform"],
    description="The sentence reader the offline answerer uses: MiniLM tuned to put each k8s train-split "
    "question next to the sentence of its page that holds the reference answer, against same-page "
    "sentences that only share the question's words; the top sentence's score is Platt-calibrated on "
    "held-out pages so abstention is a probability floor; content-addressed under <home>/readers/<key>/, "
    "reused when the inputs are unchanged.",
)
def answer_reader(
    context: dg.AssetExecutionContext, config: AnswerReaderConfig, store: DataHomeResource
) -> dg.MaterializeResult:
    from ...rag.answer.answerers import write_reader_pointer
    from ...rag.answer.reader_data import build_examples
    from ...rag.answer.reader_training import READER_JSON, ReaderRecipe, reader_key, train_reader
    from ...rag.judge.pairs.judge_pairs import load_train_rows

    hardware = stage_device()  # INFRA_RAG_DEVICE: a GPU when there is one
    inputs = training_inputs(context, store)
    home, version, chunks, base, lineage = inputs.home, inputs.version, inputs.chunks, inputs.base, inputs.lineage
    train_split = inputs.train_split
    recipe = ReaderRecipe(max_examples=config.max_examples, epochs=config.epochs)
    key = reader_key(recipe, **lineage)
    target = home.cache("readers").path(key)
    reused = (target / READER_JSON).is_file()
    if not reused:
        started = time.perf_counter()
        rows = load_train_rows(train_split) if lineage["train_data_hash"] else []
        made = build_examples(rows, chunks, seed=recipe.seed)
        context.log.info(f"reader examples {made.composition} in {time.perf_counter() - started:.1f}s")
        if not made.questions:  # offline answers stay extractive
            context.log.warning(f"no train answer placed in {version}'s sentences: {made.composition}; no reader")
            return dg.MaterializeResult(metadata={"key": key, "trained": False,
                                                  "composition": dg.MetadataValue.json(made.composition)},
                                        data_version=dg.DataVersion("no-reader"))  # fmt: skip
        target.parent.mkdir(parents=True, exist_ok=True)
        train_reader(base, made.questions, target, recipe, device=hardware.torch_device,
                     progress=training_progress(context, "reader training"),
                     extra={"key": key, "composition": made.composition,
                            "seconds_examples": round(time.perf_counter() - started, 1),
                            "lineage": {**lineage, "index_version": version}})  # fmt: skip
    record = json.loads((target / READER_JSON).read_text())
    write_reader_pointer(home, version, key, {"trained_weights_hash": record["trained_weights_hash"]})
    dev, training = record.get("dev", {}), record.get("training", {})
    numbers = {name: dev.get(name) for name in ("dev_sentence_f1", "dev_extractive_f1", "dev_right_share",
                                                 "dev_answerable_auroc", "dev_answered_share", "dev_refused_share",
                                                 "dev_calibration_ece")}  # fmt: skip
    return dg.MaterializeResult(
        metadata={
            **floats({**numbers, "seconds_training": training.get("seconds_training")}),
            "key": key,
            "reused_existing": reused,
            "train_examples": record.get("train_examples", 0),
            "dev_questions": dev.get("dev_questions", 0),
            "composition": dg.MetadataValue.json(record.get("composition", {})),
            "recipe": dg.MetadataValue.json(record.get("recipe", {})),
            "device": record.get("device", ""),
            "weights_hash": record.get("trained_weights_hash", ""),
            "trained_on_index_version": record.get("lineage", {}).get("index_version", ""),
            "path": dg.MetadataValue.path(str(target)),
        },
        data_version=dg.DataVersion(record["trained_weights_hash"]),
    )
