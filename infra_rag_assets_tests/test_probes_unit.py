"""Small things outside probes found, tested on their own: per-process temp folders swept by
owner, questions of only invisible characters, a copied home's model taken from that home."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pytest

from infra_rag_assets.rag.operate import temp_dirs
from infra_rag_assets.rag.operate.home import DataHome
from infra_rag_assets.rag.search.questions import QuestionError, clean_question

pytestmark = pytest.mark.unit


def test_temp_dirs_sweep_only_dead_owners_and_remove_their_own(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    live = temp_dirs.make("probe-")
    assert temp_dirs.owner_of(live, "probe-") == os.getpid()
    (tmp_path / f"probe-{dead.stdout.strip()}-old").mkdir()
    (tmp_path / "probe-notapid").mkdir()
    assert temp_dirs.sweep("probe-") == 1 and live.is_dir() and (tmp_path / "probe-notapid").is_dir()
    assert temp_dirs.remove_own("probe-") == 1 and not live.exists()


@pytest.mark.parametrize("question", ["\u200b", "\u200b \u200c\u200d\u2060\ufeff", "\u3164", "\u2800\u00ad", "\x07"])
def test_a_question_of_invisible_characters_is_blank(question):
    with pytest.raises(QuestionError, match="blank"):
        clean_question(question)


@pytest.mark.parametrize("question", ["\u200bWhat is a Pod?", "Pod\u200d?", "ポッドとは"])
def test_visible_questions_with_invisible_characters_pass(question):
    assert clean_question(question) == question


def test_a_copied_home_loads_its_model_from_itself(tmp_path):
    import lancedb

    from infra_rag_assets.rag.index.vector_store import table_name
    from infra_rag_assets.rag.search.engine import served_model

    original = DataHome.at(tmp_path / "original")
    model = original.root / "models" / "abc123" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    schema = pa.schema([pa.field("chunk_id", pa.string())], metadata={"model_id": str(model)})
    lancedb.connect(original.vectors_uri()).create_table(table_name("v1"), pa.table({"chunk_id": ["c"]}, schema=schema))
    shutil.copytree(original.root, tmp_path / "copy")
    copy = DataHome.at(tmp_path / "copy")
    assert served_model(original, "v1", "configured") == str(model)
    assert served_model(copy, "v1", "configured") == str(copy.root / "models" / "abc123" / "model")
