"""Train a version's adapted model outside a build, exactly as ``domain_model`` would.

The model lands at the same content address (``<home>/models/<key>/``) the main job computes for
a version registered with the same recipe, so a later ``infra-rag build`` with unchanged chunks
reuses it. Used to measure recipes on a full-corpus home without rebuilding it:

    python -m eval.train_adapted --home /work/adapt-home --version 2026-12-01T0313-067db5 \
        [--labelled 1500 --doc 1500 --max-seq-length 96 --epochs 1]

then ``INFRA_RAG_MODEL=<printed model path> infra-rag build --from chunks --through eval_run``
measures it (the same chunks, every regime). Prints training.json's counts and timings.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

from infra_rag_assets.defs.resources import BuildResource, DataHomeResource
from infra_rag_assets.rag.adapt.version_model import model_for_version, train_version_model
from infra_rag_assets.rag.index.config import BuildSettings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--labelled", type=int)
    parser.add_argument("--doc", type=int)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--max-seq-length", type=int)
    args = parser.parse_args()
    home = DataHomeResource(home=args.home).data_home()
    recipe = BuildResource(adapt=True).recipe()
    overrides = {
        "labelled_examples": args.labelled,
        "doc_examples": args.doc,
        "epochs": args.epochs,
        "max_seq_length": args.max_seq_length,
    }
    recipe = dataclasses.replace(recipe, **{k: v for k, v in overrides.items() if v is not None})
    recorded = BuildSettings.from_dict(home.warehouse().version_config(args.version) or {})
    config = dataclasses.replace(recorded, adaptation=recipe)
    model = model_for_version(home, args.version, config)
    print(f"model {model.key}: {model.model_id}", flush=True)
    if model.directory(home).exists():
        print("exists: nothing to train")
        return
    started = time.perf_counter()
    last = [0.0]

    def progress(step: int, total: int, loss: float) -> None:
        if step == total or time.monotonic() - last[0] > 60:
            last[0] = time.monotonic()
            print(f"step {step}/{total} loss {loss:.4f} {time.perf_counter() - started:.0f}s", flush=True)

    record = train_version_model(home, args.version, config, model, progress=progress)
    keep = (
        "examples",
        "composition",
        "seconds_training_set",
        "seconds_training",
        "cpu_seconds_training",
        "pairs_per_second",
        "steps",
        "loss_first",
        "loss_last_20",
        "trained_weights_hash",
        "model_path",
    )
    print(json.dumps({k: record.get(k) for k in keep}, indent=2))


if __name__ == "__main__":
    main()
