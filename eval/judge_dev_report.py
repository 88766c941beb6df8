"""Train the answer-support judge on the TRAIN sources and report it on DEV and REPORT sources.

Pairs: corpus sentences (``judge_pairs``), answer-shaped product pairs from the k8s TRAIN split
(``product_pairs``) and the public labelled answers of ../shared/judge-data (``judge_data``),
split by source (page / RAGTruth source / question) with ``judge_data.split_of``. DEV fits the
calibrators and the thresholds (and chose the recipe); REPORT is touched by nothing but this
report. Per dataset AUROC, per answer kind the share judged supported at the DEV threshold and
each defect kind's AUROC against the product positives, a reliability table, RAGTruth
response-level AUROC / F1 (a response is as supported as its weakest sentence), and the share
of reference answers judged adherent with their page's chunk(s) as context.

    python -m eval.judge_dev_report [--train-pairs N (recipe fields as options)] [--out eval/results/answer_judge.json]
    python -m eval.judge_dev_report --judge DIR --features a,b,c   # DIR's support calibrator refit on DEV
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from infra_rag_assets.rag.index.embedding import DEFAULT_MODEL, resolve_model_path
from infra_rag_assets.rag.judge.judge_training import logits, model_inputs
from infra_rag_assets.rag.judge.pairs.judge_data import by_split, data_hash, response_rows, source_of
from infra_rag_assets.rag.judge.pairs.judge_pairs import SUPPORT, load_train_rows
from infra_rag_assets.rag.judge.pairs.product_pairs import NEGATIVE_KINDS, POSITIVE_KINDS
from infra_rag_assets.rag.judge.support_judge import (
    JudgeRecipe,
    SupportJudge,
    fit_calibrator,
    fitted,
    recipe_pairs,
    train_support_judge,
)
from infra_rag_assets.rag.probabilities import auroc, auroc_interval, reliability

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
PUBLIC = ("ragtruth_qa_sentence", "ragtruth_summary_sentence", "attributionbench", "halueval")
CORPUS_KINDS = ("sentence", "paraphrase", "answer", "number", "negation", "identifier", "component", "neighbour")


def load_chunks(path: str | None) -> list[dict]:
    if path and Path(path).is_file():
        return json.loads(Path(path).read_text())
    from eval.train_judge import corpus_chunks
    from infra_rag_assets import settings

    return corpus_chunks(settings.sources_file())  # its mirrors: INFRA_RAG_CORPUS, else ../shared/corpus


def split_report(judge: SupportJudge, pairs, folder: str, split: str) -> dict:
    support = [p for p in pairs if p.task == SUPPORT]
    probs = np.array(judge.support([p.first for p in support], [p.second for p in support]))
    memo = {(p.first, p.second): float(x) for p, x in zip(support, probs)}
    labels = np.array([p.label for p in support])
    kinds = np.array([p.kind for p in support])
    sources = np.array([p.doc_id for p in support])
    at = judge.threshold
    product_pos = np.isin(kinds, POSITIVE_KINDS)
    out: dict = {"pairs": len(support), "threshold": at, "datasets": {}, "answer_kinds": {}}
    for name in PUBLIC:
        m = kinds == name
        if m.any():
            out["datasets"][name] = _group(probs[m], labels[m], at, sources[m])
    product = np.isin(kinds, (*POSITIVE_KINDS, *NEGATIVE_KINDS))
    out["datasets"]["product"] = _group(probs[product], labels[product], at, sources[product])
    corpus = np.isin(kinds, CORPUS_KINDS)
    out["datasets"]["corpus_sentences"] = _group(probs[corpus], labels[corpus], at, sources[corpus])
    for kind in (*POSITIVE_KINDS, *NEGATIVE_KINDS):
        m = kinds == kind
        if not m.any():
            continue
        row = {"pairs": int(m.sum()), "judged_supported": round(float((probs[m] >= at).mean()), 4)}
        if kind in NEGATIVE_KINDS and product_pos.any():
            both = m | product_pos
            row["auroc_vs_product_positives"] = _r(auroc(probs[both], labels[both]))
        out["answer_kinds"][kind] = row
    ref = kinds == "reference"
    out["reference_answers_adherent"] = round(float((probs[ref] >= at).mean()), 4) if ref.any() else None
    out["reliability"] = reliability(probs, labels)
    out["responses"] = _responses(judge, folder, split, memo)
    out["batch_responses"] = batch_responses(judge, folder, split)
    return out


def batch_responses(judge: SupportJudge, folder: str, split: str) -> dict:
    """RAGTruth QA answers as a user judges them: ``judge --batch`` items (question, passages,
    answer; no citation markers), scored by the answer's ``adherence`` and its verdict."""
    from infra_rag_assets.rag.judge.batch import Item, judge_items

    rows = [r["row"] for r in response_rows(folder, split) if r["row"]["id"].startswith("ragtruth-qa-")]
    if not rows:
        return {}
    items = [
        Item(r["id"], r["question"], tuple((p["id"], p["text"]) for p in r["passages"]), r["answer"]) for r in rows
    ]
    results = judge_items(judge, items)
    y = np.array([int(r["label"]["adherent"]) for r in rows])
    score = np.array([1.0 if x["adherence"] is None else x["adherence"] for x in results])
    adherent = np.array([x["adherent"] is not False for x in results])
    return {
        "responses": len(rows),
        "hallucinated": int((y == 0).sum()),
        "auroc": _r(auroc(score, y)),
        "auroc_95": auroc_interval(score, y, [source_of(r) for r in rows]),
        "clean_judged_adherent": round(float(adherent[y == 1].mean()), 4) if (y == 1).any() else None,
        "hallucinated_judged_adherent": round(float(adherent[y == 0].mean()), 4) if (y == 0).any() else None,
    }


def _responses(judge: SupportJudge, folder: str, split: str, memo: dict) -> dict:
    """RAGTruth answers: response score = its weakest sentence's probability."""
    rows = [r for r in response_rows(folder, split) if r["pairs"]]
    flat = [p for r in rows for p in r["pairs"]]
    todo = [p for p in flat if (p.first, p.second) not in memo]
    memo.update(
        zip(((p.first, p.second) for p in todo), judge.support([p.first for p in todo], [p.second for p in todo]))
    )
    probs = [memo[(p.first, p.second)] for p in flat]
    scores, labels, sources, at = [], [], [], 0
    for r in rows:
        sources.append(r["pairs"][0].doc_id)
        scores.append(min(probs[at : at + len(r["pairs"])]))
        at += len(r["pairs"])
        labels.append(int(r["row"]["label"]["adherent"]))
    y, s = np.array(labels), np.array(scores)
    predicted_bad = s < judge.threshold
    bad = y == 0
    tp, fp, fn = int((predicted_bad & bad).sum()), int((predicted_bad & ~bad).sum()), int((~predicted_bad & bad).sum())
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return {
        "responses": len(rows),
        "hallucinated": int(bad.sum()),
        "auroc": _r(auroc(s, y)),
        "auroc_95": auroc_interval(s, y, sources),
        "f1_hallucinated_at_threshold": round(f1, 4),
        "adherent_judged_adherent": round(float((~predicted_bad[~bad]).mean()), 4) if (~bad).any() else None,
    }


def hand_labels(judge: SupportJudge) -> dict:
    """The judge against the packaged hand labels: AUROC of adherence ~ grounded on their
    report half (nothing in this judge was chosen on any hand label)."""
    from infra_rag_assets.package_data import benchmarks_dir
    from infra_rag_assets.rag.judge.label_calibration import calibration_report, load_labels, signals

    items = load_labels(benchmarks_dir() / "answer_labels.jsonl")
    report = calibration_report(items, signals(judge, items))
    keep = ("answers", "auroc", "auroc_report_half")
    return {name: {k: check.get(k) for k in keep} for name, check in report["checks"].items() if "auroc" in check}


def _group(probs, labels, at, sources) -> dict:
    return {
        "pairs": len(labels),
        "positives": int(labels.sum()),
        "auroc": _r(auroc(probs, labels)),
        "auroc_95": auroc_interval(probs, labels, sources),  # resampling whole sources
        "accuracy_at_threshold": round(float(((probs >= at) == (labels > 0)).mean()), 4) if len(labels) else None,
    }


def _r(x):
    return None if x is None else round(x, 4)


def recalibrate(judge: SupportJudge, calibration: list, features: tuple[str, ...], cache: Path | None = None) -> dict:
    """Refit a trained judge's support calibrator and threshold on DEV pairs with ``features``
    beside the logit (what ``support_judge.calibrate`` does with ``FEATURES``); the DEV pairs'
    raw logits are cached in ``cache`` when given. Returns DEV figures of the refitted calibrator."""
    chosen = [fitted(p, judge.evidence_chars) for p in calibration if p.task == SUPPORT]
    if cache and cache.is_file():
        raw = np.load(cache)
    else:
        firsts, seconds = model_inputs(chosen)
        raw = np.asarray(logits(judge.model, judge.tokenizer, firsts, seconds, judge.max_seq_length))
        if cache:
            np.save(cache, raw)
    platt, probs, at = fit_calibrator(SUPPORT, raw, chosen, features)
    judge.calibrators[SUPPORT], judge.threshold = platt, at
    judge.thresholds[SUPPORT] = at
    kinds = np.array([p.kind for p in chosen])
    labels = [p.label for p in chosen]
    y = np.array(labels)
    product = np.isin(kinds, (*POSITIVE_KINDS, *NEGATIVE_KINDS))
    ref = kinds == "reference"
    return {"weights": dict(zip(platt.inputs, platt.weights)), "threshold": at,
            "product_auroc_dev": round(auroc(probs[product], y[product]), 4),
            "reference_adherent_dev": round(float((probs[ref] >= at).mean()), 4)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", default="/tmp/judge-work/chunks.json")
    ap.add_argument("--out", default=str(ROOT / "eval" / "results" / "answer_judge.json"))
    ap.add_argument("--keep", default="")
    ap.add_argument("--judge-data", default=str(SHARED / "judge-data"))
    ap.add_argument("--train-split", default=str(SHARED / "bench" / "k8s-docs-rag-bench" / "qa_train.jsonl"))
    ap.add_argument("--device", default="cpu", help="train on this torch device")
    ap.add_argument("--score-device", default="cpu", help="score the report on this device (cpu: the int8 judge)")
    ap.add_argument("--judge", default="", help="report on this trained judge folder (no training)")
    ap.add_argument("--splits", default="dev,report")
    ap.add_argument("--features", default="", help="with --judge: refit its support calibrator on DEV with these")
    ap.add_argument("--hand-labels", action="store_true", help="also score the packaged hand labels")
    ap.add_argument(
        "--real-answers-in-full", type=lambda v: v.lower() in ("1", "true", "yes"), default=True,
        help="train on every RAGTruth TRAIN sentence beside the sample (false: the sample only)",
    )  # fmt: skip
    ap.add_argument("--max-eval", type=int, default=0, help="smoke runs: at most this many DEV/REPORT pairs")
    for name, value in JudgeRecipe().to_dict().items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            ap.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = ap.parse_args()
    recipe = JudgeRecipe(**{k: getattr(args, k) for k in JudgeRecipe().to_dict() if hasattr(args, k)})
    if args.judge:  # the pairs of the judge's own recipe (its DEV / REPORT sources)
        recipe = JudgeRecipe(**json.loads((Path(args.judge) / "judge.json").read_text())["recipe"])
    load_start = os.getloadavg()
    started = time.perf_counter()
    folder = args.judge_data
    chunks = load_chunks(args.chunks)
    rows = load_train_rows(args.train_split)
    pairs = recipe_pairs(recipe, chunks, rows, folder)
    parts = by_split(pairs)
    seconds_pairs = time.perf_counter() - started
    for split in ("dev", "report"):
        if args.max_eval and len(parts[split]) > args.max_eval:
            parts[split] = random.Random(1).sample(parts[split], args.max_eval)
    used = [*parts["train"], *parts["dev"], *parts["report"]]
    base = resolve_model_path(DEFAULT_MODEL)
    target = Path(args.keep or tempfile.mkdtemp(prefix="judge-")) / "judge"
    if args.judge:
        target = Path(args.judge)
        record = json.loads((target / "judge.json").read_text())
    else:
        record = train_support_judge(base, used, target, recipe, progress=_progress(), device=args.device)
    judge = SupportJudge.load(target, args.score_device)
    report: dict = {}
    if args.features:  # scoring-side change: same weights, calibrator and threshold refit on DEV
        report["refit"] = recalibrate(judge, parts["dev"], tuple(args.features.split(",")))
        record = {**record, "thresholds": dict(judge.thresholds)}
    scoring = time.perf_counter()
    for split in args.splits.split(","):  # each split's numbers are written as soon as they exist
        report[split] = split_report(judge, parts[split], folder, split)
        partial = {"judge": str(target), "thresholds": record["thresholds"], "partial": True, **report}
        Path(args.out).write_text(json.dumps(partial, indent=1) + "\n")
    if args.hand_labels:
        report["hand_labels"] = hand_labels(judge)
    result = {
        "command": "python -m eval.judge_dev_report " + " ".join(f"--{k} {v}" for k, v in vars(args).items() if v),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "load_average_start": load_start, "load_average_end": os.getloadavg(),
                    "torch_threads": record.get("torch_threads")},
        "recipe": recipe.to_dict(),
        "judge_data_hash": data_hash(folder),
        "pairs": {s: len(v) for s, v in parts.items()},
        "composition": pairs.composition,
        "seconds_pairs": round(seconds_pairs, 1),
        "seconds_training": record["seconds_training"],
        "training_device": record.get("device"),
        "calibration": "Platt + thresholds on DEV, int8 model on CPU" if record.get("quantized") else "Platt on DEV",
        "seconds_total_training": record["seconds_total"],
        "seconds_report_scoring": round(time.perf_counter() - scoring, 1),
        "thresholds": record["thresholds"],
        "calibration_metrics_dev": {k: {m: v[m] for m in ("pairs", "auroc", "auroc_logit", "ece", "threshold")}
                                    for k, v in record["calibration_metrics"].items()},
        **report,
    }  # fmt: skip
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({s: {"datasets": result[s]["datasets"], "ref": result[s]["reference_answers_adherent"],
                          "responses": result[s]["responses"], "batch": result[s]["batch_responses"]}
                      for s in args.splits.split(",")}, indent=1))  # fmt: skip


def _progress():
    last = [0.0]

    def report(step: int, total: int, loss: float) -> None:
        if time.perf_counter() - last[0] > 30 or step == total:
            last[0] = time.perf_counter()
            print(f"step {step}/{total} loss {loss:.4f}", flush=True)

    return report


if __name__ == "__main__":
    main()
