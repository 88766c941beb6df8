"""Where did a score come from: question -> hit chunk -> document span -> source page bytes.

The warehouse half of lineage (the Dagster half — which run materialized what, with which data
version — comes from the instance's materialization records; see ``cli_ops.lineage``).
"""

from __future__ import annotations

from .warehouse import Warehouse


def question_chain(warehouse: Warehouse, question_id: str, regime: str = "serving",
                   version: str | None = None) -> dict:
    """The latest scored run of ``question_id`` and the provenance of its top hit."""
    params = [question_id, regime] + ([version] if version else [])
    found = warehouse.frame(
        "SELECT * FROM eval_results WHERE question_id = ? AND regime = ?"
        + (" AND index_version = ?" if version else "") + " ORDER BY run_id DESC LIMIT 1", params).to_dicts()
    if not found:
        raise ValueError(f"no eval result for question {question_id!r} (regime {regime})")
    row = found[0]
    chain = {"question": {k: row[k] for k in ("question_id", "question", "benchmark", "regime", "index_version",
                                              "run_id", "rank", "relevant", "retrieval_config_hash")}}
    chunk_ids = row["ranked_chunk_ids"] or []
    if chunk_ids:
        chain["hit"] = chunk_provenance(warehouse, row["index_version"], chunk_ids[0])
    return chain


def chunk_provenance(warehouse: Warehouse, version: str, chunk_id: str) -> dict:
    """A chunk's span in its document and the exact source page bytes behind it."""
    rows = warehouse.frame(
        "SELECT c.chunk_id, c.doc_id, c.section_path, c.start_char, c.end_char, c.text_hash, c.url AS cite_url, "
        "d.content_hash AS document_hash, d.parser, d.parser_version, p.url, p.rel_path, p.bytes_hash, "
        "p.size_bytes, p.upstream, p.license, "
        "substr(d.text, c.start_char + 1, c.end_char - c.start_char) = c.text AS span_matches "
        "FROM chunks c JOIN documents d USING (index_version, doc_id) "
        "JOIN source_pages p USING (index_version, doc_id) WHERE c.index_version = ? AND c.chunk_id = ?",
        [version, chunk_id]).to_dicts()
    if not rows:
        raise ValueError(f"chunk {chunk_id} not found in {version}")
    return rows[0]


def version_summary(warehouse: Warehouse, version: str) -> dict:
    found = warehouse.rows("SELECT created_at, created_by, config_hash, sources_fingerprint FROM index_versions "
                           "WHERE index_version = ?", [version])
    if not found:
        raise ValueError(f"unknown index version {version!r}")
    created_at, created_by, config_hash, fingerprint = found[0]
    counts = {t: warehouse.rows(f"SELECT count(*) FROM {t} WHERE index_version = ?", [version])[0][0]
              for t in ("source_pages", "documents", "chunks", "eval_results")}
    return {"index_version": version, "created_at": str(created_at), "created_by": created_by,
            "config_hash": config_hash, "sources_fingerprint": fingerprint, "rows": counts}
