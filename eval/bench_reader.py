"""The reader against the extractive answerer over retrieved passages: token F1 / recall, citation
validity, abstention, safety and the reader's latency beyond retrieval.

Retrieval runs once per question (the serving config, packed as ``answer`` packs it); both
answerers read the same passages. F1 is the benchmark's SQuAD-style token F1 against the reference
answer: for the reader on its stated span (``short_answer``) and, reported beside it, on its
whole text (span + quoted evidence). Benchmarks: the k8s eval split (covered questions), our own
labelled set and the adversarial safety set (its support rule needs the judge: without one only
the behaviour, citation and forbidden-string rules are checked, and the output says so).
Nothing here tunes anything: the reader's recipe and floor were chosen on train-split dev pages.

    INFRA_RAG_HOME=/tmp/reader-home python -m eval.bench_reader --reader <home>/readers/<key> \
        [--version V] [--limit N] [--out eval/results/reader.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from infra_rag_assets.package_data import benchmarks_dir
from infra_rag_assets.rag.answer.extractive import answer_extractive
from infra_rag_assets.rag.answer.overlap import token_f1_recall
from infra_rag_assets.rag.answer.reader import Reader, answer_reader
from infra_rag_assets.rag.evaluate.benchmarks import coverage, load_benchmark
from infra_rag_assets.rag.evaluate.safety import check_answer, load_cases
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import QueryEngine, resolve_version, single_thread_queries

BENCHMARKS = ("k8s_bench_eval", "own_labelled", "adversarial", "near_miss_blind", "off_topic")


class FloorSweep:
    """The reader at a settable floor, scoring each question's sentences once for its own floor and
    every floor tried (``answer_reader`` reads ``spans``, ``floor`` and ``model_id`` only)."""

    def __init__(self, reader, floor: float) -> None:
        self.reader, self.floor, self.model_id = reader, floor, reader.model_id
        self._last: tuple = (None, None)

    def spans(self, question, passages):
        key = (question, tuple(passages))
        if self._last[0] != key:
            self._last = (key, self.reader.spans(question, passages))
        return self._last[1]


def exact(reply, hits) -> bool:
    """Every citation slices its passage's text exactly (and there is one)."""
    return bool(reply.citations) and all(
        hits[c.passage_number - 1].text[c.chunk_start : c.chunk_end] == c.cited_text for c in reply.citations
    )


def summarise(rows: list[dict], prefix: str) -> dict:
    scored = [r for r in rows if r[f"{prefix}_f1"] is not None]
    answered = [r for r in rows if r[f"{prefix}_outcome"] == "answered"]
    mean = lambda xs: round(statistics.fmean(xs), 4) if xs else None  # noqa: E731
    out = {
        "n": len(rows),
        "answered": len(answered),
        "abstained": sum(r[f"{prefix}_outcome"] == "abstained" for r in rows),
        # F1 over every question with a reference: an abstention scores 0 (it answered nothing)
        "token_f1": mean([r[f"{prefix}_f1"] or 0.0 for r in rows if r["has_reference"]]),
        "token_recall": mean([r[f"{prefix}_recall"] or 0.0 for r in rows if r["has_reference"]]),
        "token_f1_answered": mean([r[f"{prefix}_f1"] for r in scored]),
        "citation_validity": mean([float(r[f"{prefix}_exact"]) for r in answered]),
    }
    if prefix == "reader" and rows:
        forced = [r["reader_forced_f1"] or 0.0 for r in rows if r["has_reference"]]
        out["token_f1_forced_top_span"] = mean(forced)
        out["token_f1_full_text"] = mean([r["reader_f1_full"] or 0.0 for r in rows if r["has_reference"]])
        ms = sorted(r["reader_ms"] for r in rows)
        out["ms_beyond_retrieval_p50"] = ms[len(ms) // 2] if ms else None
        out["ms_beyond_retrieval_p90"] = ms[int(len(ms) * 0.9)] if ms else None
    return out


@dataclass(frozen=True)
class Passage:
    chunk_id: str
    doc_id: str
    project: str
    title: str
    section: str
    url: str
    text: str
    start_char: int
    end_char: int


class LexicalOnly:
    """Top-k BM25 chunks from the version's Tantivy index, for a home whose vectors are not built
    yet (the engine needs both indexes): weaker retrieval than the serving config, said in the output."""

    def __init__(self, home: DataHome, version: str, k: int) -> None:
        from infra_rag_assets.rag.index.lexical_store import LexicalSearcher

        self.home, self.version, self.k = home, version, k
        self.searcher = LexicalSearcher.open(home.version(version).tantivy, private_copy=True)
        cols = ("chunk_id", "doc_id", "project", "title", "section_path", "url", "text", "start_char", "end_char")
        rows = home.warehouse().chunks_of(version, cols).to_dicts()
        self.chunks = {r["chunk_id"]: Passage(**{**{k: v for k, v in r.items() if k != "section_path"},
                                                 "section": r["section_path"] or ""}) for r in rows}  # fmt: skip

    def passages(self, question: str) -> list[Passage]:
        return [self.chunks[c] for c, _ in self.searcher.search(question, self.k) if c in self.chunks]


def retrieve(engine, question: str, config: str) -> list:
    if isinstance(engine, LexicalOnly):
        return engine.passages(question)
    result, packed = engine.context(question, config=config)
    return [] if result.abstained else [p.hit for p in packed.passages]


def run(engine, name: str, reader, limit: int, config: str, floors: tuple[float, ...] = ()) -> tuple[dict, list[dict]]:
    bench = load_benchmark(name)
    covered, _ = coverage(bench.records, engine.home.warehouse().doc_ids(engine.version))
    records = covered[:limit] if limit else covered
    cases = {c.id: c for c in load_cases(benchmarks_dir() / "adversarial.jsonl")} if name == "adversarial" else {}
    rows = []
    for record in records:
        hits = retrieve(engine, record.question, config)
        ext = answer_extractive(record.question, hits)
        sweep = FloorSweep(reader, reader.floor)
        started = time.perf_counter()
        red = answer_reader(record.question, hits, sweep)
        reader_ms = round((time.perf_counter() - started) * 1000, 1)
        ref = record.reference_answer
        e = token_f1_recall(ext.text, ref) if ref and ext.outcome == "answered" else None
        r = token_f1_recall(red.short_answer, ref) if ref and red.outcome == "answered" else None
        rf = token_f1_recall(red.text, ref) if ref and red.outcome == "answered" else None
        row = {
            "id": record.id, "question": record.question, "reference": ref, "has_reference": bool(ref),
            "extractive_outcome": ext.outcome, "extractive_f1": e and e[0], "extractive_recall": e and e[1],
            "extractive_exact": exact(ext, hits), "reader_outcome": red.outcome, "reader_short": red.short_answer,
            "reader_f1": r and r[0], "reader_recall": r and r[1], "reader_f1_full": rf and rf[0],
            "reader_exact": exact(red, hits), "reader_ms": reader_ms,
            "reader_top": red.candidates[0] if red.candidates else None,
            "reader_runners_up": red.candidates[1:3],
            # diagnostic, not tuned on: the top span's F1 had the reader been forced to answer
            "reader_forced_f1": (token_f1_recall(red.candidates[0]["text"], ref) or (0.0, 0.0))[0]
            if ref and red.candidates else None,
        }  # fmt: skip
        replies = [("extractive", ext), ("reader", red)]
        for floor in floors:
            sweep.floor = floor
            at = answer_reader(record.question, hits, sweep)
            fr = token_f1_recall(at.short_answer, ref) if ref and at.outcome == "answered" else None
            prefix = f"floor{floor:g}"
            row.update({f"{prefix}_outcome": at.outcome, f"{prefix}_f1": fr and fr[0], f"{prefix}_recall": fr and fr[1],
                        f"{prefix}_exact": exact(at, hits)})  # fmt: skip
            replies.append((prefix, at))
        case = cases.get(record.id)
        if case is not None:
            for prefix, reply in replies:
                cited = list(dict.fromkeys(c.doc_id for c in reply.citations))
                verdict = check_answer(case, reply.text, reply.outcome, cited, None)
                row[f"{prefix}_safety_passed"], row[f"{prefix}_safety_reasons"] = verdict.passed, verdict.reasons
                row[f"{prefix}_safety_harmful"] = verdict.harmful
        rows.append(row)
    prefixes = ("extractive", "reader", *(f"floor{f:g}" for f in floors))
    summary = {p: summarise(rows, p) for p in prefixes}
    if cases:
        for p in prefixes:
            summary[p]["safety_pass"] = round(statistics.fmean(r[f"{p}_safety_passed"] for r in rows), 4)
            summary[p]["safety_harmful"] = sum(r[f"{p}_safety_harmful"] for r in rows)
            summary[p]["safety_note"] = "support rule not checked (no judge): behaviour, citations, forbidden strings"
    return summary, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reader", required=True, help="a trained reader folder (<home>/readers/<key>)")
    ap.add_argument("--version", default=None)
    ap.add_argument("--config", default="hybrid-learned", help="retrieval config (the eval run's serving one)")
    ap.add_argument("--limit", type=int, default=0, help="first N covered questions per benchmark (0: all)")
    ap.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    ap.add_argument("--out", default="eval/results/reader.json")
    ap.add_argument("--fp32", action="store_true", help="score with the fp32 encoder the calibrator was fitted on")
    ap.add_argument("--floors", default="", help="also answer at these reader floors (comma-separated)")
    ap.add_argument("--lexical-k", type=int, default=0, help="BM25 top-k only (a home without vectors yet)")
    args = ap.parse_args()
    single_thread_queries()
    home = DataHome.at()
    if args.lexical_k:
        engine: QueryEngine | LexicalOnly = LexicalOnly(home, args.version, args.lexical_k)
        args.config = f"lexical top-{args.lexical_k} (Tantivy BM25, no packing)"
    else:
        engine = QueryEngine(home, resolve_version(home, args.version))
    reader = Reader(Path(args.reader).resolve(), quantize=not args.fp32)
    record = json.loads((Path(args.reader) / "reader.json").read_text())
    out = {
        "version": engine.version, "config": args.config, "reader": str(args.reader), "floor": reader.floor,
        "fp32": args.fp32,
        "reader_dev": record.get("dev"), "reader_training": record.get("training"),
        "load_average": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "benchmarks": {},
    }  # fmt: skip
    rows_out = Path(args.out).with_suffix(".rows.jsonl")
    floors = tuple(float(f) for f in args.floors.split(",") if f)
    with rows_out.open("w") as fh:
        for name in args.benchmarks.split(","):
            summary, rows = run(engine, name, reader, args.limit, args.config, floors)
            out["benchmarks"][name] = summary
            fh.writelines(json.dumps({"benchmark": name, **r}) + "\n" for r in rows)
            print(name, json.dumps(summary), flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
