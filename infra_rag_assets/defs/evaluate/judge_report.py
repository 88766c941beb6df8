"""support_judge's metadata: what it trained on, how long it took, and how well it separates and
calibrates on pages it never trained on (floats plot across versions)."""

from __future__ import annotations

import dagster as dg
import polars as pl

from ..reporting import floats, md_table


def judge_metadata(record: dict, key: str, reused: bool) -> dict:
    metrics = record.get("calibration_metrics", {})
    numbers = {
        f"{task}_{name}": metrics.get(task, {}).get(name)
        for task in ("support", "relevance")
        for name in ("auroc", "ece")
    }
    return {
        **floats(
            {
                **numbers,
                "seconds_total": record.get("seconds_total"),
                **{f"{task}_threshold": at for task, at in record.get("thresholds", {}).items()},
            }
        ),  # fmt: skip
        "key": key,
        "reused_existing": reused,
        "pairs": record.get("pairs", 0),
        "train_pairs": record.get("train_pairs", 0),
        "calibration_pairs": record.get("calibration_pairs", 0),
        "composition": dg.MetadataValue.json(record.get("composition", {})),
        "support_reliability": md_table(_reliability(metrics.get("support", {})), 12),
        "weights_hash": record.get("trained_weights_hash", ""),
        "recipe": dg.MetadataValue.json(record.get("recipe", {})),
        "trained_on_index_version": record.get("lineage", {}).get("index_version", ""),
    }


def _reliability(task_metrics: dict) -> pl.DataFrame:
    """Predicted probability bin → pairs, mean predicted, observed rate (held-out pages)."""
    return pl.DataFrame(task_metrics.get("reliability", []))


def label_metadata(report: dict, cached: bool) -> dict:
    """AUROC on the hand labels as floats (plotted), every check as a table row, and every
    disagreement of the report half listed."""
    checks = report.get("checks", {})
    rows = [
        {"signal~label": name, **{k: v for k, v in check.items() if k != "disagreements"}}
        for name, check in checks.items()
    ]
    disagreements = [
        {"check": name, **{k: str(v) for k, v in d.items()}}
        for name, c in checks.items()
        for d in c.get("disagreements", [])
    ]
    grounded = checks.get("adherence~grounded", {})
    return {
        **floats(
            {
                "labels_adherence_auroc": grounded.get("auroc_report_half"),
                "labels_adherence_kappa": grounded.get("kappa"),
            }
        ),
        "hand_labels": f"{report.get('answers', 0)} answers ({'cached' if cached else 'scored now'})",
        "label_checks": md_table(pl.DataFrame(rows), 10, 30),
        "label_disagreements": md_table(pl.DataFrame(disagreements), 60, 100),
    }
