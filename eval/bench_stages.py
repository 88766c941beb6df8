"""Throughput of the model stages on this machine's device: fine-tune, embed, judge-shaped scoring.

Why: the stages' cost on a GPU node decides whether a platform team waits minutes or half an
hour (issue 38). This runs the library's own functions (``finetune.train_bi_encoder``,
``Embedder.encode``, the support judge's ``AlignmentScorer`` over ``encode``d pairs) on the
device ``INFRA_RAG_DEVICE`` / ``--device`` names, and writes
``eval/results/stage_bench_<device>.json``.

It runs where only torch, transformers, sentence-transformers and numpy are installed (no
Dagster, DuckDB, LanceDB, polars, Tantivy, no corpus): its inputs are a small folder that
``--export-inputs DIR`` writes here from a built data home (gzipped JSONL of chunk inputs and
training triplets, plus CPU reference vectors of a sample so the other device's vectors can be
compared), and ``--model-dir`` names a carried copy of the MiniLM weights::

    python -m eval.bench_stages --export-inputs .bench_inputs --home /work/homes/full
    python -m eval.bench_stages --inputs .bench_inputs --model-dir .bench_inputs/model --device cuda
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from infra_rag_assets.rag.devices import Device, resolve, versions

RESULTS = Path(__file__).parent / "results"
REFERENCE_CHUNKS = 1000  # chunk inputs with CPU reference vectors
REFERENCE_QUESTIONS = 300  # triplets whose question and positive get CPU reference vectors


def _write_jsonl(path: Path, rows) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _read_jsonl(path: Path, limit: int | None = None) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return rows[:limit] if limit else rows


def export_inputs(out: Path, home: str, version: str | None, model_dir: str | None) -> dict:
    """Chunk inputs and the version's adaptation triplets (the recipe's training set), from a
    data home; needs the full install (warehouse), unlike the benchmark itself."""
    from infra_rag_assets.defs.resources import default_train_split
    from infra_rag_assets.rag.adapt.training_set import CHUNK_FIELDS, training_set
    from infra_rag_assets.rag.index.config import AdaptRecipe, BuildSettings
    from infra_rag_assets.rag.index.corpus_chunks import embed_input
    from infra_rag_assets.rag.index.embedding import DEFAULT_MODEL, Embedder, resolve_model_path
    from infra_rag_assets.rag.judge.support_judge import JudgeRecipe
    from infra_rag_assets.rag.operate.home import DataHome

    warehouse = DataHome(Path(home)).warehouse()
    version = version or warehouse.versions()["index_version"][-1]
    rows = warehouse.chunks_of(version, CHUNK_FIELDS).to_dicts()
    descriptions = dict(warehouse.documents_of(version, ("doc_id", "description")).rows())
    config = BuildSettings.from_dict(warehouse.version_config(version) or {})
    recipe = config.adaptation or AdaptRecipe(train_split=default_train_split())  # a quick build has none
    started = time.perf_counter()
    pairs = training_set(recipe, rows, {k: v for k, v in descriptions.items() if v})
    out.mkdir(parents=True, exist_ok=True)
    chunks = [{"text": embed_input(r.get("context") or "", r["text"])} for r in rows]
    _write_jsonl(out / "chunks.jsonl.gz", chunks)
    triplets = [{"question": p.question, "positive": p.positive, "negative": p.negative} for p in pairs]
    _write_jsonl(out / "triplets.jsonl.gz", triplets)
    model = resolve_model_path(DEFAULT_MODEL)
    if model_dir:  # the carried copy; the references are made with exactly its (rounded) weights
        export_model(model, Path(model_dir))
        model = usable_model(Path(model_dir), Path(tempfile.mkdtemp(prefix="bench-model-")))
    embedder = Embedder(str(model), device="cpu")
    np.savez_compressed(
        out / "reference.npz",
        chunks=embedder.encode([c["text"] for c in chunks[:REFERENCE_CHUNKS]], batch_size=8),
        questions=embedder.encode([t["question"] for t in triplets[:REFERENCE_QUESTIONS]], batch_size=8),
        positives=embedder.encode([t["positive"] for t in triplets[:REFERENCE_QUESTIONS]], batch_size=8),
    )
    manifest = {
        "home": home,
        "index_version": version,
        "chunks": len(chunks),
        "triplets": len(triplets),
        "composition": pairs.composition,
        "seconds_training_set": round(time.perf_counter() - started, 1),
        "adapt_recipe": {k: getattr(recipe, k) for k in ("batch_size", "max_seq_length", "lr", "seed")},
        "judge_recipe": {k: getattr(JudgeRecipe(), k) for k in ("max_seq_length", "layers", "batch_size")},
        "reference": {
            "device": "cpu",
            "chunks": REFERENCE_CHUNKS,
            "questions": REFERENCE_QUESTIONS,
            "weights": "the carried fp16-stored copy, restored to fp32" if model_dir else "the installed package's",
            **versions(),
        },
        "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def export_model(source: Path, out: Path) -> None:
    """The MiniLM folder with its weights stored in fp16 (45 MB instead of 91: what a 64 MiB
    carry to the GPU machine allows); ``usable_model`` restores fp32 before any use, and the
    CPU references are made from the same restored weights, so the comparison is the device's."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.safetensors", "*.md"))
    for weights in source.rglob("*.safetensors"):
        tensors = {k: v.half() if v.is_floating_point() else v for k, v in load_file(str(weights)).items()}
        save_file(tensors, str(out / weights.relative_to(source)), metadata={"format": "pt"})
    (out / STORED_FP16).write_text("weights stored in fp16 for transport; eval.bench_stages restores fp32\n")


STORED_FP16 = "STORED_FP16"


def usable_model(model_dir: Path, scratch: Path) -> Path:
    """``model_dir`` itself, or for an ``export_model`` copy an fp32 copy of it in ``scratch``."""
    if not (model_dir / STORED_FP16).is_file():
        return model_dir
    from safetensors.torch import load_file, save_file

    shutil.copytree(model_dir, scratch, dirs_exist_ok=True, ignore=shutil.ignore_patterns(STORED_FP16))
    for weights in model_dir.rglob("*.safetensors"):
        tensors = {k: v.float() if v.is_floating_point() else v for k, v in load_file(str(weights)).items()}
        save_file(tensors, str(scratch / weights.relative_to(model_dir)), metadata={"format": "pt"})
    return scratch


def bench_finetune(model_dir: str, triplets: list[dict], recipe: dict, device: Device) -> dict:
    """One epoch of the adaptation recipe's loop (batch and length as recorded in the manifest)."""
    from infra_rag_assets.rag.adapt.finetune import TrainExample, train_bi_encoder

    examples = [
        TrainExample(str(i), t["question"], f"doc{i}", t["positive"], t["negative"], f"p{i}", f"n{i}")
        for i, t in enumerate(triplets)
    ]
    with tempfile.TemporaryDirectory(prefix="bench-finetune-") as tmp:
        record = train_bi_encoder(
            model_dir,
            examples,
            Path(tmp) / "model",
            batch_size=recipe["batch_size"],
            max_seq_length=recipe["max_seq_length"],
            lr=recipe["lr"],
            seed=recipe["seed"],
            device=device,
        )
    seconds = record["seconds_training"]
    return {"triplets": len(examples), "seconds": seconds, "triplets_per_s": round(len(examples) / seconds, 2)}


def bench_embed(model_dir: str, texts: list[str], device: Device, reference: dict | None) -> dict:
    """Chunk inputs at the model's own length (256 tokens), the device's batch; plus how far
    this device's vectors are from the CPU reference, and dense MRR@10 with either."""
    from infra_rag_assets.rag.index.embedding import Embedder

    embedder = Embedder(model_dir, device=device)
    batch = device.batch_size("embed")
    embedder.encode(texts[:batch], batch_size=batch)  # load + warm-up, not timed
    _sync(device)
    started = time.perf_counter()
    embedder.encode(texts, batch_size=batch)
    _sync(device)
    seconds = time.perf_counter() - started
    report = {
        "chunks": len(texts),
        "batch_size": batch,
        "max_seq_length": embedder.info.max_seq_length,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(len(texts) / seconds, 1),
    }
    if reference is not None:
        report["vs_cpu_reference"] = compare_vectors(embedder, device, reference)
    return report


def compare_vectors(embedder, device: Device, reference: dict) -> dict:
    """Cosine of this device's vectors to the CPU's for the same texts, and MRR@10 of each
    reference question's positive among (reference chunks + positives) with either set."""
    mine = {name: embedder.encode(reference[f"{name}_texts"], batch_size=device.batch_size("embed")) for name in NAMES}
    cosine = np.concatenate([np.sum(mine[n] * reference[n], axis=1) for n in NAMES])
    return {
        "texts": int(cosine.size),
        "cosine_min": round(float(cosine.min()), 6),
        "cosine_mean": round(float(cosine.mean()), 6),
        "max_abs_diff": round(float(max(np.abs(mine[n] - reference[n]).max() for n in NAMES)), 6),
        "mrr_at_10_cpu_vectors": _mrr(reference),
        "mrr_at_10_this_device": _mrr(mine),
    }


NAMES = ("chunks", "questions", "positives")


def _mrr(vectors: dict) -> float:
    pool = np.concatenate([vectors["positives"], vectors["chunks"]])  # positive i is row i
    scores = vectors["questions"] @ pool.T
    ranks = (scores > scores[np.arange(len(scores)), np.arange(len(scores))][:, None]).sum(1)
    return round(float(np.where(ranks < 10, 1.0 / (ranks + 1), 0.0).mean()), 4)


def bench_pairs(model_dir: str, triplets: list[dict], recipe: dict, device: Device) -> dict:
    """The support judge's model (MiniLM's first ``layers`` layers + alignment head) scoring
    (question, passage) pairs at its scoring length, as the judge does per eval run."""
    import torch

    from infra_rag_assets.rag.judge.judge_training import encode, load_cross_encoder

    tokenizer, model = load_cross_encoder(model_dir, layers=recipe["layers"])
    model.to(device.torch_device)
    firsts = [f"support: {t['question']}" for t in triplets for _ in (0, 1)]
    seconds = [p for t in triplets for p in (t["positive"], t["negative"])]
    batch = device.batch_size("score")

    def score(n: int) -> None:
        with torch.inference_mode(), device.autocast():
            for start in range(0, n, batch):
                enc = encode(
                    tokenizer, firsts[start : start + batch], seconds[start : start + batch], recipe["max_seq_length"]
                )
                model(**{k: v.to(device.torch_device) for k, v in enc.items()}).float().cpu()

    score(min(batch, len(firsts)))  # warm-up
    _sync(device)
    started = time.perf_counter()
    score(len(firsts))
    _sync(device)
    seconds_taken = time.perf_counter() - started
    return {
        "pairs": len(firsts),
        "batch_size": batch,
        "max_seq_length": recipe["max_seq_length"],
        "layers": recipe["layers"],
        "seconds": round(seconds_taken, 2),
        "pairs_per_s": round(len(firsts) / seconds_taken, 1),
    }


def _sync(device: Device) -> None:
    if device.kind == "cuda":
        import torch

        torch.cuda.synchronize(device.torch_device)


def run(args) -> dict:
    device = resolve(args.device)
    device.apply_threads()
    inputs = Path(args.inputs)
    manifest = json.loads((inputs / "manifest.json").read_text())
    model_dir = (
        usable_model(Path(args.model_dir), Path(tempfile.mkdtemp(prefix="bench-model-")))
        if args.model_dir
        else _default_model()
    )
    chunks = [c["text"] for c in _read_jsonl(inputs / "chunks.jsonl.gz", args.chunks)]
    triplets = _read_jsonl(inputs / "triplets.jsonl.gz", args.triplets)
    reference = _reference(inputs) if not args.no_reference else None
    load = os.getloadavg()
    report: dict = {
        "device": device.torch_device,
        "precision": device.precision,
        "threads": device.threads,
        **versions(),
        "python": platform.python_version(),
        "machine": platform.node(),
        "inputs": {k: manifest[k] for k in ("index_version", "chunks", "triplets", "made")},
        "load_average_start": [round(x, 2) for x in load],
        "model_dir": str(model_dir),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if device.kind == "cuda":
        import torch

        report["gpu"] = torch.cuda.get_device_name(device.torch_device)
    stages = args.stages.split(",")
    if "embed" in stages:
        report["embed"] = bench_embed(str(model_dir), chunks, device, reference)
    if "finetune" in stages:
        report["finetune"] = bench_finetune(str(model_dir), triplets, manifest["adapt_recipe"], device)
    if "pairs" in stages:
        report["pairs"] = bench_pairs(str(model_dir), triplets[: args.pairs // 2], manifest["judge_recipe"], device)
    report["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    return report


def _reference(inputs: Path) -> dict | None:
    path = inputs / "reference.npz"
    if not path.is_file():
        return None
    stored = dict(np.load(path))
    texts = {
        "chunks": [c["text"] for c in _read_jsonl(inputs / "chunks.jsonl.gz", len(stored["chunks"]))],
        "questions": [t["question"] for t in _read_jsonl(inputs / "triplets.jsonl.gz", len(stored["questions"]))],
        "positives": [t["positive"] for t in _read_jsonl(inputs / "triplets.jsonl.gz", len(stored["positives"]))],
    }
    return {**stored, **{f"{k}_texts": v for k, v in texts.items()}}


def _default_model() -> Path:
    from infra_rag_assets.rag.index.embedding import DEFAULT_MODEL, resolve_model_path

    return resolve_model_path(DEFAULT_MODEL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export-inputs", metavar="DIR", help="write the inputs folder from --home and stop")
    parser.add_argument("--home", default=None, help="data home to export from (default INFRA_RAG_HOME)")
    parser.add_argument("--version", default=None, help="index version to export (default the latest)")
    parser.add_argument(
        "--export-model", metavar="DIR", help="with --export-inputs: the MiniLM folder, weights stored in fp16 (45 MB)"
    )
    parser.add_argument("--inputs", metavar="DIR", help="inputs folder written by --export-inputs")
    parser.add_argument("--model-dir", metavar="DIR", help="MiniLM weights folder (default the installed package's)")
    parser.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N, mps (default INFRA_RAG_DEVICE)")
    parser.add_argument("--chunks", type=int, default=None, help="embed only the first N chunk inputs")
    parser.add_argument("--triplets", type=int, default=None, help="fine-tune on only the first N triplets")
    parser.add_argument("--pairs", type=int, default=4000, help="pairs to score (question with positive, negative)")
    parser.add_argument("--stages", default="embed,finetune,pairs")
    parser.add_argument("--no-reference", action="store_true", help="skip the CPU-vector comparison")
    parser.add_argument("--out", default=None, help="JSON path (default eval/results/stage_bench_<device>.json)")
    args = parser.parse_args()
    if args.export_inputs:
        from infra_rag_assets import settings

        home = args.home or settings.home()
        print(json.dumps(export_inputs(Path(args.export_inputs), home, args.version, args.export_model), indent=2))
        return
    if not args.inputs:
        parser.error("--inputs DIR (or --export-inputs DIR)")
    if args.device is None:
        from infra_rag_assets import settings

        args.device = settings.device()
    report = run(args)
    out = Path(args.out or RESULTS / f"stage_bench_{report['device'].replace(':', '')}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
