"""The support judge of an index version against the hand labels: writes
eval/results/answer_label_calibration.json (AUROC, thresholds from the tuning half, agreement,
Cohen's κ, precision and recall on the report half, every disagreement).

    INFRA_RAG_HOME=<home> python -m eval.calibrate_judge [--index-version V]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from infra_rag_assets.package_data import answer_labels_file
from infra_rag_assets.rag.judge.label_calibration import calibration_report, load_labels, signals
from infra_rag_assets.rag.judge.version_judge import load_version_judge
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.engine import resolve_version

ROOT = Path(__file__).resolve().parents[1]
LABELS = answer_labels_file()
OUT = ROOT / "eval" / "results" / "answer_label_calibration.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index-version", default=None)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    home = DataHome.at()
    version = resolve_version(home, args.index_version)
    judge, note = load_version_judge(home, version)
    if judge is None:
        raise SystemExit(f"error: {note}")
    items = load_labels(LABELS)
    started = time.perf_counter()
    scored = signals(judge, items)
    seconds = round(time.perf_counter() - started, 1)
    report = {
        "command": "python -m eval.calibrate_judge",
        "index_version": version,
        "judge": judge.identity,
        "seconds_scoring": seconds,
        **calibration_report(items, scored),
    }
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    for name, check in report["checks"].items():
        print(name, {k: v for k, v in check.items() if k != "disagreements"})


if __name__ == "__main__":
    main()
