"""Rewriting a version's serving snapshot keeps what later stages fitted on the same chunks
(calibrated floor, page ranker) and drops it when the chunks changed."""

from __future__ import annotations

import os

import pytest

from infra_rag_assets.rag.index.serving_snapshot import (
    read_catalog,
    read_manifest,
    snapshot_dir,
    snapshot_files,
    write_snapshot,
)

pytestmark = pytest.mark.unit

VERSION = "2026-12-02T1300-abcdef"


def _rows(texts):
    return [
        {
            "chunk_id": f"c{i}",
            "doc_id": f"d{i}",
            "project": "kubernetes",
            "text": text,
            "pages": [],
            "start_char": 0,
            "end_char": len(text),
        }
        for i, text in enumerate(texts)
    ]


def _derive(root, version=VERSION):
    """What abstention_calibration and page_ranker write into the snapshot after it exists."""
    folder = snapshot_dir(root, version)
    (folder / "calibration.json").write_text('{"floor": 0.37}')
    (folder / "ranker.json").write_text('{"hash": "r1"}')
    return folder


def test_an_unchanged_catalog_keeps_the_fitted_files_byte_for_byte(tmp_path):
    first = write_snapshot(tmp_path, VERSION, _rows(["a pod", "a node"]), {"model": "m"})
    folder = _derive(tmp_path)
    again = write_snapshot(tmp_path, VERSION, _rows(["a pod", "a node"]), {"model": "m"})
    assert again.catalog_sha256 == first.catalog_sha256
    assert snapshot_files(tmp_path, VERSION) == ["calibration.json", "ranker.json"]
    assert (folder / "calibration.json").read_text() == '{"floor": 0.37}'
    assert (folder / "ranker.json").read_text() == '{"hash": "r1"}'
    assert set(read_catalog(tmp_path, VERSION)) == {"c0", "c1"}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging or aside left


def test_changed_chunks_drop_what_was_fitted_on_the_old_ones(tmp_path):
    write_snapshot(tmp_path, VERSION, _rows(["a pod", "a node"]), {})
    _derive(tmp_path)
    write_snapshot(tmp_path, VERSION, _rows(["a pod", "a changed node"]), {})
    assert snapshot_files(tmp_path, VERSION) == []
    assert read_manifest(tmp_path, VERSION).chunks == 2


def test_an_old_snapshot_that_cannot_vouch_for_its_files_keeps_nothing(tmp_path):
    for damage in ("not json", "[1, 2]", '{"catalog_sha256": null}'):
        write_snapshot(tmp_path, VERSION, _rows(["a pod"]), {})
        folder = _derive(tmp_path)
        (folder / "manifest.json").write_text(damage)
        write_snapshot(tmp_path, VERSION, _rows(["a pod"]), {})
        assert snapshot_files(tmp_path, VERSION) == [], damage


def test_only_plain_files_are_carried(tmp_path):
    write_snapshot(tmp_path, VERSION, _rows(["a pod"]), {})
    folder = _derive(tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_text("secret")
    os.symlink(outside, folder / "linked.json")
    (folder / "subdir").mkdir()
    (folder / ".partial.json").write_text("{")
    write_snapshot(tmp_path, VERSION, _rows(["a pod"]), {})
    assert sorted(p.name for p in folder.iterdir()) == [
        "calibration.json",
        "catalog.parquet",
        "manifest.json",
        "ranker.json",
    ]


def test_model_pointers_written_before_the_first_snapshot_survive_it_and_changed_chunks(tmp_path):
    """answer_reader and support_judge need only chunks, so a cold build may run them before
    lexical_index writes the first snapshot: their pointers name content-keyed models (not chunk
    ids) and must survive it, and a rewrite over changed chunks, while fitted files do not."""
    from infra_rag_assets.rag.operate.files import write_model_pointer
    from infra_rag_assets.rag.operate.home import JUDGE_POINTER, READER_POINTER

    folder = snapshot_dir(tmp_path, VERSION)
    for name in (READER_POINTER, JUDGE_POINTER):
        write_model_pointer(folder / name, f"key-{name}", {})
    write_snapshot(tmp_path, VERSION, _rows(["a pod"]), {})
    assert snapshot_files(tmp_path, VERSION) == sorted([JUDGE_POINTER, READER_POINTER])
    _derive(tmp_path)
    write_snapshot(tmp_path, VERSION, _rows(["a changed pod"]), {})
    assert snapshot_files(tmp_path, VERSION) == sorted([JUDGE_POINTER, READER_POINTER])
    assert '"key": "key-reader.json"' in (folder / READER_POINTER).read_text()
