"""Train a sentence reader outside the asset graph on a built version, to compare recipes by their
dev-page numbers (the pages held out of training; nothing from the eval split is read).

The examples are the ones ``answer_reader`` makes (the k8s TRAIN split's reference answers
placed at their page's sentence, with a same-page hard negative); the recipe's defaults are
``ReaderRecipe``'s, each flag overrides one field. Prints the dev report and training seconds;
the folder it writes is what ``eval.bench_reader --reader`` reads.

    INFRA_RAG_HOME=<home> python -m eval.train_reader --out /tmp/reader-r2 [--version V | --chunks F.json] \
        [--max-examples 0] [--epochs 1] [--lr 5e-5] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from infra_rag_assets import settings
from infra_rag_assets.defs.resources import default_train_split
from infra_rag_assets.rag.answer.reader_data import build_examples
from infra_rag_assets.rag.answer.reader_training import ReaderRecipe, train_reader
from infra_rag_assets.rag.index.config import BuildSettings
from infra_rag_assets.rag.index.embedding import DEFAULT_MODEL, resolve_model_path
from infra_rag_assets.rag.judge.pairs.judge_pairs import load_train_rows
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import resolve_version


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--version", default=None, help="index version (default: the released one)")
    parser.add_argument("--chunks", type=Path, help="a JSON list of chunks (doc_id, text) instead of a version's")
    overrides = {f.name: f for f in dataclasses.fields(ReaderRecipe) if f.type in ("int", "float")}
    for name, field in overrides.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int if field.type == "int" else float)
    args = parser.parse_args()
    recipe = ReaderRecipe(**{n: getattr(args, n) for n in overrides if getattr(args, n) is not None})
    if args.chunks:
        version, model_id = str(args.chunks), DEFAULT_MODEL
        chunks = json.loads(args.chunks.read_text())
    else:
        home = DataHome.at(settings.home())
        version = resolve_version(home, args.version)
        warehouse = home.warehouse()
        model_id = BuildSettings.from_dict(warehouse.version_config(version) or {}).model_id
        chunks = warehouse.chunks_of(version, ("chunk_id", "doc_id", "text")).to_dicts()
    started = time.perf_counter()
    rows = load_train_rows(default_train_split())
    made = build_examples(rows, chunks, seed=recipe.seed)
    print(f"{version}: examples {made.composition} in {time.perf_counter() - started:.0f} s", flush=True)

    def progress(step: int, total: int, loss: float) -> None:
        if step % 25 == 0 or step == total:
            print(f"step {step}/{total} loss {loss:.3f} ({time.perf_counter() - started:.0f} s)", flush=True)

    record = train_reader(resolve_model_path(model_id), made.questions, args.out, recipe, progress=progress)
    print(json.dumps({"recipe": record["recipe"], "training": record["training"], "dev": record["dev"]}, indent=1))


if __name__ == "__main__":
    main()
