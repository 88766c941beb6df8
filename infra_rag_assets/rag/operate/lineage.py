"""Where did a score come from: question -> hit chunk -> document span -> source page bytes.

The warehouse half of lineage (the Dagster half — which run materialized what, with which data
version — comes from the instance's materialization records; see ``cli_ops.lineage``).
"""

from __future__ import annotations

from .warehouse import Warehouse


def question_chain(warehouse: Warehouse, question_id: str, regime: str = "serving", version: str | None = None) -> dict:
    """The latest scored run of ``question_id`` and the provenance of its top hit."""
    row = warehouse.latest_eval_result(question_id, regime, version)
    if row is None:
        raise ValueError(f"no eval result for question {question_id!r} (regime {regime})")
    chain = {
        "question": {
            k: row[k]
            for k in (
                "question_id",
                "question",
                "benchmark",
                "regime",
                "index_version",
                "run_id",
                "rank",
                "relevant",
                "retrieval_config_hash",
            )
        }
    }
    chunk_ids = row["ranked_chunk_ids"] or []
    if chunk_ids:
        chain["hit"] = chunk_provenance(warehouse, row["index_version"], chunk_ids[0])
    return chain


def chunk_provenance(warehouse: Warehouse, version: str, chunk_id: str) -> dict:
    """A chunk's span in its document and the exact source page bytes behind it."""
    found = warehouse.chunk_provenance(version, chunk_id)
    if found is None:
        raise ValueError(f"chunk {chunk_id} not found in {version}")
    return found


def version_summary(warehouse: Warehouse, version: str) -> dict:
    info = warehouse.version_info(version)
    if info is None:
        raise ValueError(f"unknown index version {version!r}")
    counts = {t: warehouse.row_count(t, version) for t in ("source_pages", "documents", "chunks", "eval_results")}
    return {"index_version": version, **info, "created_at": str(info["created_at"]), "rows": counts}
