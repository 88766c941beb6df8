"""Out-of-fold support scores for RAGTruth QA answers: judge recipes compared on 36 sources, not 9.

DEV holds 9 RAGTruth QA sources (53 answers), so a recipe difference under ~0.1 AUROC is not
resolved by it (docs/answers.md). This script folds the TRAIN and DEV RAGTruth QA sources
(REPORT sources are never read) into ``--folds`` groups by a hash; for each fold it trains the
recipe's judge on every pair except that fold's sources (calibrating on the remaining DEV
sources), then scores the fold's answers as `judge --batch` does and sentence by sentence.
The per-answer records (label, per-sentence raw logits and probabilities) go to
``eval/results/judge_cv_<name>.jsonl`` (appended), so aggregations are compared afterwards
without retraining (``--summarize``).

    python -m eval.judge_cv --name base [--folds 4] [recipe fields as options]
    python -m eval.judge_cv --name lists --judges base   # the same judges, scoring changed
    python -m eval.judge_cv --summarize eval/results/judge_cv_base.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from eval.judge_dev_report import SHARED, load_chunks, recalibrate
from infra_rag_assets.rag.index.embedding import DEFAULT_MODEL, resolve_model_path
from infra_rag_assets.rag.judge.batch import Item, judge_items
from infra_rag_assets.rag.judge.judge_training import PREFIX, logits
from infra_rag_assets.rag.judge.pairs.judge_data import (
    by_split,
    dataset_of,
    evidence,
    load_rows,
    row_pairs,
    source_of,
    split_of,
)
from infra_rag_assets.rag.judge.pairs.judge_pairs import SUPPORT, JudgePairs, load_train_rows
from infra_rag_assets.rag.judge.support_judge import (
    JudgeRecipe,
    SupportJudge,
    recipe_pairs,
    train_support_judge,
)
from infra_rag_assets.rag.probabilities import auroc, auroc_interval

ROOT = Path(__file__).resolve().parents[1]
SCORING_CHARS = (1400, 1800)  # the passages' union at scoring (recipe default, and the RAGTruth pairs')


def fold_of(source: str, folds: int) -> int:
    return int(hashlib.sha256(f"judge-cv:{source}".encode()).hexdigest()[:8], 16) % folds


def qa_rows(folder: str) -> list[dict]:
    """RAGTruth QA answers of TRAIN and DEV sources (never REPORT)."""
    return [
        r for r in load_rows(folder) if dataset_of(r) == "ragtruth_qa" and split_of(source_of(r)) in ("train", "dev")
    ]


def score_fold(judge: SupportJudge, rows: list[dict]) -> list[dict]:
    """Per answer: its label and per-sentence scores (sentence pairs at each SCORING_CHARS, raw
    logit and probability; and the `judge --batch` verdicts)."""
    items = [
        Item(r["id"], r["question"], tuple((p["id"], p["text"]) for p in r["passages"]), r["answer"]) for r in rows
    ]
    batch = judge_items(judge, items)
    out = []
    for r, b in zip(rows, batch, strict=True):
        pairs = [p for p in row_pairs(r) if p.task == SUPPORT]
        record = {
            "id": r["id"],
            "source": source_of(r),
            "adherent": int(r["label"]["adherent"]),
            "sentence_labels": [p.label for p in pairs],
            "batch": [v["supported"] for v in b["sentences"]],
            "batch_adherence": b["adherence"],
        }
        own = judge.evidence_chars
        for chars in SCORING_CHARS:
            judge.evidence_chars = chars
            record[f"prob_{chars}"] = (
                judge.support([p.first for p in pairs], [p.second for p in pairs]) if pairs else []
            )
            seconds = [evidence(p.first, p.second.split("\n\n"), chars) for p in pairs]
            raw = logits(judge.model, judge.tokenizer, [PREFIX[SUPPORT] + p.first for p in pairs], seconds,
                         judge.max_seq_length) if pairs else []  # fmt: skip
            record[f"logit_{chars}"] = [round(float(x), 4) for x in raw]
        judge.evidence_chars = own
        out.append(record)
    return out


def summarize(path: Path) -> dict:
    """AUROC of several response scores and of sentences, with source-resampled intervals."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    y = np.array([r["adherent"] for r in records])
    groups = [r["source"] for r in records]

    def agg(name, fn):
        s = np.array([fn(r) for r in records], dtype=np.float64)
        return name, {"auroc": round(auroc(s, y), 4), "auroc_95": auroc_interval(s, y, groups)}

    out: dict = {"answers": len(records), "hallucinated": int((y == 0).sum()), "response": {}}
    for key in ("batch", "prob_1400", "prob_1800", "logit_1400", "logit_1800"):
        for name, fn in (
            ("min", lambda r, k=key: min(r[k], default=1.0 if not k.startswith("logit") else 20.0)),
            ("mean_log", lambda r, k=key: float(np.mean(np.log(np.clip(r[k], 1e-6, 1)))) if r[k] else 0.0),
            ("product", lambda r, k=key: float(np.prod(r[k])) if r[k] else 1.0),
        ):
            if key.startswith("logit") and name != "min":
                continue
            label, value = agg(f"{key}:{name}", fn)
            out["response"][label] = value
    out["sentence"] = {}
    for key in ("prob_1400", "prob_1800", "logit_1400", "logit_1800"):
        s = np.array([x for r in records for x in r[key]])
        labels = np.array([x for r in records for x in r["sentence_labels"]])
        g = [r["source"] for r in records for _ in r[key]]
        out["sentence"][key] = {"auroc": round(auroc(s, labels), 4), "auroc_95": auroc_interval(s, labels, g),
                                "sentences": len(s), "unsupported": int((labels == 0).sum())}  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="base")
    ap.add_argument("--judges", default="", help="score the folds' judges of this name (default: --name; trains none)")
    ap.add_argument("--folds", type=int, default=4)
    ap.add_argument("--only-folds", default="", help="comma-separated fold numbers (default: all)")
    ap.add_argument("--work", default="/tmp/judge-cv")
    ap.add_argument("--chunks", default="/tmp/judge-work/chunks.json")
    ap.add_argument("--judge-data", default=str(SHARED / "judge-data"))
    ap.add_argument("--train-split", default=str(SHARED / "bench" / "k8s-docs-rag-bench" / "qa_train.jsonl"))
    ap.add_argument("--summarize", default="")
    ap.add_argument("--features", default="", help="refit the support calibrator with these lexical features")
    for name, value in JudgeRecipe().to_dict().items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            ap.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = ap.parse_args()
    if args.summarize:
        print(json.dumps(summarize(Path(args.summarize)), indent=1))
        return
    recipe = JudgeRecipe(**{k: getattr(args, k) for k in JudgeRecipe().to_dict() if hasattr(args, k)})
    pairs = recipe_pairs(recipe, load_chunks(args.chunks), load_train_rows(args.train_split), args.judge_data)
    rows = qa_rows(args.judge_data)
    out = ROOT / "eval" / "results" / f"judge_cv_{args.name}.jsonl"
    wanted = [int(k) for k in args.only_folds.split(",")] if args.only_folds else list(range(args.folds))
    base = resolve_model_path(DEFAULT_MODEL)
    for fold in wanted:
        held = {source_of(r) for r in rows if fold_of(source_of(r), args.folds) == fold}
        kept = JudgePairs([p for p in pairs if p.doc_id not in held])
        kept.composition = pairs.composition
        target = Path(args.work) / (args.judges or args.name) / f"fold{fold}"
        started = time.perf_counter()
        if not (target / "judge.json").is_file():
            train_support_judge(base, kept, target, recipe)
        judge = SupportJudge.load(target)
        calibration = {}
        if args.features:
            features = tuple(args.features.split(","))
            cache = target / "dev_support_logits.npy"
            calibration = recalibrate(judge, by_split(kept)["dev"], features, cache)
            print(json.dumps({"fold": fold, **calibration}), flush=True)
        records = score_fold(judge, [r for r in rows if source_of(r) in held])
        for record in records:
            record["calibration"] = calibration
        with out.open("a") as f:
            for record in records:
                f.write(json.dumps({"fold": fold, "recipe": args.name, **record}) + "\n")
        print(f"fold {fold}: {len(held)} sources, {len(records)} answers, {time.perf_counter() - started:.0f} s",
              flush=True)  # fmt: skip
    print(json.dumps(summarize(out), indent=1))


if __name__ == "__main__":
    main()
