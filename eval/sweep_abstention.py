"""Abstention sweep: the dense floor and answerability rules on one built version (read-only).

Every question of the own labelled set, the covered k8s eval split, a fixed sample of covered
k8s TRAIN questions and the off-topic set is retrieved once with the serving config *without*
any abstention; each rule is then replayed on those results, so a rule's cost is exactly the
answerable questions it refuses (their reciprocal rank becomes 0). Rules are chosen on the
train answerables (false refusals) and the odd-numbered own unanswerables; the even-numbered
ones are reported as a held-out half. The eval split is only reported.

    python -m eval.sweep_abstention [--home DIR] [--version V] [--train-sample 600] [--out FILE]

Writes eval/results/abstention_sweep.json unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
from pathlib import Path

from infra_rag_assets.rag.evaluate.benchmarks import TRAIN_BENCHMARK, coverage, load_benchmark
from infra_rag_assets.rag.evaluate.metrics import rank_of_first_relevant
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.answerability import AnswerabilityRule, unanswerable_reason
from infra_rag_assets.rag.search.engine import QueryEngine, named_config, single_thread_queries

ROOT = Path(__file__).resolve().parents[1]
FLOORS = (0.35, None)  # None: the version's calibrated floor
RULES = {
    "none": None,
    **{
        f"unknown(min{m},typo{t},disagree{int(d)})": AnswerabilityRule(m, t, d)
        for m in (3, 4, 5)
        for t in (0, 1)
        for d in (False, True)
    },
}


def question_sets(engine: QueryEngine, train_sample: int) -> dict[str, list]:
    known = {row["doc_id"] for row in engine.catalog.values()}
    train = [r for r in coverage(load_benchmark(TRAIN_BENCHMARK).records, known)[0]]
    random.Random(0).shuffle(train)
    return {
        "own": load_benchmark("own_labelled").records,
        "eval": coverage(load_benchmark("k8s_bench_eval").records, known)[0],
        "train": train[:train_sample],
        "off_topic": load_benchmark("off_topic").records,
    }


def retrieve(engine: QueryEngine, sets: dict[str, list]) -> list[dict]:
    """One unabstained serving retrieval per question: what every rule is replayed on."""
    config = dataclasses.replace(
        named_config("hybrid-page"), floor=None, calibrated_floor=False, answerability=False, name="no-abstention"
    )
    page = {cid: row["doc_id"] for cid, row in engine.catalog.items()}
    rows = []
    for name, records in sets.items():
        for record in records:
            result = engine.search(record.question, config=config, k=10)
            docs = [h.doc_id for h in result.hits]
            rank = rank_of_first_relevant(docs, set(record.relevant)) if record.relevant else None
            rows.append(
                {
                    "set": name,
                    "id": record.id,
                    "question": record.question,
                    "should_abstain": record.should_abstain,
                    "rank": rank,
                    "best_cosine": result.dense_ranking[0][1] if result.dense_ranking else 0.0,
                    "dense_pages": [page.get(c) for c, _ in result.dense_ranking[:1]],
                    "lexical_pages": [page.get(c) for c, _ in result.lexical_ranking[:1]],
                }
            )
    return rows


def refuses(row: dict, floor: float, rule: AnswerabilityRule | None, vocab) -> bool:
    if row["best_cosine"] < floor:
        return True
    return rule is not None and bool(
        unanswerable_reason(
            row["question"], vocab, rule=rule, dense_pages=row["dense_pages"], lexical_pages=row["lexical_pages"]
        )
    )


def score(rows: list[dict], refused: list[bool]) -> dict[str, dict]:
    """Per set: refusals, abstention precision/recall (own: odd/even halves), MRR@10 and hit@5 after."""
    out = {}
    for name in dict.fromkeys(r["set"] for r in rows):
        pairs = [(r, a) for r, a in zip(rows, refused) if r["set"] == name]
        answerable = [(r, a) for r, a in pairs if not r["should_abstain"]]
        should = [(r, a) for r, a in pairs if r["should_abstain"]]
        tp, fp = sum(a for _, a in should), sum(a for _, a in answerable)
        entry = {
            "refused_answerable": fp,
            "answerable": len(answerable),
            "refused_unanswerable": tp,
            "unanswerable": len(should),
            "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / len(should) if should else None,
        }
        if answerable:
            kept = [(r["rank"] if not a else None) for r, a in answerable]
            entry["mrr@10"] = sum(1 / k for k in kept if k and k <= 10) / len(kept)
            entry["hit@5"] = sum(1 for k in kept if k and k <= 5) / len(kept)
        if name == "own":
            for half, parity in (("odd", 1), ("even", 0)):
                part = [a for r, a in should if int(r["id"][-3:]) % 2 == parity]
                entry[f"recall_{half}"] = sum(part) / len(part) if part else None
        out[name] = entry
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home"), parser.add_argument("--version")
    parser.add_argument("--train-sample", type=int, default=600)
    parser.add_argument("--out", default=str(ROOT / "eval" / "results" / "abstention_sweep.json"))
    args = parser.parse_args()
    single_thread_queries()
    engine = QueryEngine.open(DataHome.at(args.home), args.version)
    rows = retrieve(engine, question_sets(engine, args.train_sample))
    vocab = engine.vocabulary()
    calibrated = engine.calibration.floor if engine.calibration else 0.35
    results = []
    for floor in FLOORS:
        floor = calibrated if floor is None else floor
        for label, rule in RULES.items():
            refused = [refuses(r, floor, rule, vocab) for r in rows]
            results.append({"floor": floor, "rule": label, "sets": score(rows, refused)})
            print(_line(floor, label, results[-1]["sets"]))
    Path(args.out).write_text(
        json.dumps({"version": engine.version, "calibrated_floor": calibrated, "results": results}, indent=1) + "\n"
    )


def _line(floor: float, label: str, sets: dict) -> str:
    own, ev, tr, off = (sets[s] for s in ("own", "eval", "train", "off_topic"))
    return (
        f"floor {floor:.4f} {label:32s} own P={_f(own['precision'])} R={_f(own['recall'])} "
        f"(odd {_f(own['recall_odd'])}, even {_f(own['recall_even'])}) | eval refused "
        f"{ev['refused_answerable']} MRR {_f(ev['mrr@10'])} hit@5 {_f(ev['hit@5'])} | train refused "
        f"{tr['refused_answerable']}/{tr['answerable']} | off-topic R={_f(off['recall'])}"
    )


def _f(value) -> str:
    return "–" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    main()
