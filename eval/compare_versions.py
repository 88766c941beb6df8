"""Side-by-side eval_run metrics of index versions (e.g. base vs adapted), from a warehouse.

    python -m eval.compare_versions --warehouse HOME/warehouse.duckdb V1 V2 [--regimes dense serving]

Prints, per benchmark, regime and slice (overall; own set also per category), MRR@10 / hit@5 of
each version's newest eval_run, and abstention precision/recall on the own set. Read-only.
"""

from __future__ import annotations

import argparse

import duckdb

METRICS = ("mrr@10", "hit@5")


def newest_run(con, version: str) -> str:
    return con.execute(
        "SELECT run_id FROM eval_results WHERE index_version = ? GROUP BY run_id ORDER BY max(rowid) DESC LIMIT 1",
        [version],
    ).fetchone()[0]


def metric_rows(con, version: str, regimes: list[str]) -> dict:
    run = newest_run(con, version)
    rows = con.execute(
        "SELECT benchmark, regime, slice, slice_value, metric, value, n FROM eval_metrics WHERE index_version = ? "
        "AND run_id = ? AND regime IN (SELECT unnest(?)) AND (slice = 'overall' OR (benchmark = 'own_labelled' "
        "AND slice = 'category'))",
        [version, run, regimes],
    ).fetchall()
    return {(b, r, sv if s != "overall" else "overall", m): (v, n) for b, r, s, sv, m, v, n in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("versions", nargs="+")
    parser.add_argument("--regimes", nargs="+", default=["dense", "lexical", "hybrid-weighted", "serving"])
    args = parser.parse_args()
    con = duckdb.connect(args.warehouse, read_only=True)
    found = [metric_rows(con, v, args.regimes) for v in args.versions]
    keys = sorted({(b, r, s) for rows in found for b, r, s, _ in rows})
    print("benchmark\tregime\tslice\t" + "\t".join(f"{v} mrr@10/hit@5" for v in args.versions))
    for b, r, s in keys:
        cells = []
        for rows in found:
            mrr, hit = (rows.get((b, r, s, m), (None, None))[0] for m in METRICS)
            cells.append("-" if mrr is None else f"{mrr:.3f} / {hit:.3f}")
        print(f"{b}\t{r}\t{s}\t" + "\t".join(cells))
    for version, rows in zip(args.versions, found):
        abst = {
            m: rows.get(("own_labelled", "serving", "overall", m), (None,))[0]
            for m in ("abstention_precision", "abstention_recall")
        }
        print(f"{version} own serving abstention precision/recall: {abst}")


if __name__ == "__main__":
    main()
