"""Ingestion against a hostile mirror (issue 13): symlinks in every direction, a FIFO, sparse
multi-GB files, pathological nesting and lines, bad encodings, broken PDFs, config mistakes.

Real components throughout (real walk, blob store, parser worker, tokenizer, CLI).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pymupdf
import pytest
from click.testing import CliRunner

from infra_rag_assets.cli import main
from infra_rag_assets.rag.index.config import MAX_CHUNK_CHARS, ChunkSettings
from infra_rag_assets.rag.index.corpus_chunks import chunk_documents
from infra_rag_assets.rag.index.tokens import HFTokenCounter
from infra_rag_assets.rag.ingest.blobs import BlobStore
from infra_rag_assets.rag.ingest.parse.budget import ParseWorker
from infra_rag_assets.rag.ingest.parse.markdown import parse_markdown
from infra_rag_assets.rag.ingest.pipeline import MAX_DOC_CHARS, list_pages, parse_documents, snapshot_pages
from infra_rag_assets.rag.ingest.sources import (
    Source,
    SourceConfigError,
    check_sources,
    iter_pages,
    load_sources,
    mirror_fingerprint,
)

SECRET = "HOSTSECRET-4711 this text lives outside the mirror"
GOOD = (
    "---\ntitle: {t}\n---\n# {t}\n\nThe {t} page explains how a controller reconciles desired state "
    "with the observed state of the cluster, step by step, with examples.\n"
)
SPARSE_SIZE = 2_500_000_000  # sparse: costs no disk


def _link(path: Path, target: str | Path) -> None:
    path.symlink_to(target)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("hostile")
    host = base / "host"
    host.mkdir()
    (host / "secret.md").write_text(SECRET)
    (host / "inner.md").write_text(SECRET)
    md = base / "mirror" / "docs"
    (md / "sub").mkdir(parents=True)
    (md / "good.md").write_text(GOOD.format(t="Deployment"))
    (md / "sub" / "good2.md").write_text(GOOD.format(t="StatefulSet"))
    _link(md / "out_abs.md", host / "secret.md")
    _link(md / "out_rel.md", "../../host/secret.md")
    _link(md / "out_etc.md", "/etc/os-release")
    _link(md / "outdir", host)
    _link(md / "self.md", "self.md")
    _link(md / "loop_a.md", "loop_b.md")
    _link(md / "loop_b.md", "loop_a.md")
    _link(md / "dangling.md", "missing.md")
    _link(md / "in_link.md", "good.md")
    _link(md / "insub", "sub")
    os.mkfifo(md / "fifo.md")
    with open(md / "sparse.md", "wb") as f:
        os.truncate(f.fileno(), SPARSE_SIZE)
    (md / "nested.md").write_text("# Nested\n\n" + "".join(" " * (4 * i) + f"- level {i}\n" for i in range(600)))
    (md / "longword.md").write_text("# Blob\n\n" + "A" * 200_000 + "\n")
    (md / "oneline.md").write_text("# One line\n\n" + "word " * 300_000)
    (md / "latin1.md").write_bytes("# Café\n\nUne page encodée en latin-1 avec des accents éàü.\n".encode("latin-1"))
    (md / "utf16.md").write_bytes("# UTF-16\n\nA page saved as UTF-16 with a byte order mark.\n".encode("utf-16"))
    (md / "nul.md").write_bytes(b"# Binary\n\x00\x01\x02 not text\n")
    (md / "unclosed.md").write_text(
        "---\ntitle: Broken\nweight: 3\n\n# Broken\n\nThis page never closes its "
        "front matter block but has a real body of prose.\n"
    )
    pdf = base / "mirror" / "pdf"
    pdf.mkdir()
    (pdf / "corrupt.pdf").write_bytes(b"%PDF-1.7\n1 0 obj <<>> endobj\n" + os.urandom(2048))
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Encrypted whitepaper text")
    doc.save(pdf / "encrypted.pdf", encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="o", user_pw="u")
    good = pymupdf.open()
    good.new_page().insert_text((72, 72), "Supply chain security: sign every artifact and verify provenance.")
    good.save(pdf / "good.pdf")
    _link(pdf / "out.pdf", host / "secret.md")
    sources = [
        Source("docs", "kubernetes", "markdown_tree", "x", "https://d/{page_path}/", md),
        Source("papers", "cncf", "pdf_files", "x", "https://p/{upstream_path}", pdf),
    ]
    blobs = BlobStore(base / "blobs")
    pages = snapshot_pages(list_pages(sources), blobs)
    docs, _ = parse_documents(pages, blobs)
    return {"base": base, "md": md, "pdf": pdf, "sources": sources, "pages": pages, "docs": docs}


MD_ENTRIES = {  # every entry of the Markdown mirror -> its expected page status
    "good.md": "ok",
    "sub/good2.md": "ok",
    "in_link.md": "ok",
    "out_abs.md": "error",
    "out_rel.md": "error",
    "out_etc.md": "error",
    "outdir": "error",
    "self.md": "error",
    "loop_a.md": "error",
    "loop_b.md": "error",
    "dangling.md": "error",
    "insub": "skipped",
    "fifo.md": "skipped",
    "sparse.md": "too_large",
    "nested.md": "ok",
    "longword.md": "ok",
    "oneline.md": "too_large",
    "latin1.md": "ok",
    "utf16.md": "error",
    "nul.md": "error",
    "unclosed.md": "ok",
}


@pytest.mark.unit
def test_one_record_per_entry_with_status(hostile):
    docs = {(r["source"], r["doc_id"].split(":", 1)[1]): r for r in hostile["docs"].to_dicts()}
    pages = hostile["pages"].filter(hostile["pages"]["source"] == "docs")
    assert sorted(pages["rel_path"].to_list()) == sorted(MD_ENTRIES)
    by_path = {
        r["rel_path"]: r
        for r in hostile["docs"].join(hostile["pages"].select("doc_id", "rel_path"), on="doc_id").to_dicts()
    }
    got = {p: by_path[p]["status"].split(":")[0] for p in MD_ENTRIES}
    got["in_link.md"] = "ok" if got["in_link.md"] == "duplicate_of" else got["in_link.md"]
    assert got == MD_ENTRIES
    assert all(
        r["reason"]
        for r in by_path.values()
        if r["status"] not in ("ok",) and not r["status"].startswith("duplicate_of")
    )
    assert "loop" in by_path["self.md"]["reason"] and "loop" in by_path["loop_a.md"]["reason"]
    assert "outside the mirror" in by_path["out_rel.md"]["reason"]
    assert "FIFO" in by_path["fifo.md"]["reason"]
    assert "unclosed front matter" in by_path["unclosed.md"]["reason"]
    assert len(docs) == len(hostile["docs"])
    papers = hostile["docs"].filter(hostile["docs"]["source"] == "papers").select("page_id", "status").rows()
    assert dict(papers) == {"corrupt": "error", "encrypted": "error", "good": "ok", "out": "error"}


@pytest.mark.unit
def test_nothing_outside_the_mirror_is_read(hostile):
    host_text = Path("/etc/os-release").read_text() if Path("/etc/os-release").exists() else ""
    marker = next((line for line in host_text.splitlines() if "=" in line), "no-host-line")
    for row in hostile["docs"].to_dicts():
        assert "HOSTSECRET" not in row["text"] and marker not in row["text"]
    sizes = dict(zip(hostile["pages"]["rel_path"], hostile["pages"]["size_bytes"]))
    assert sizes["out_abs.md"] == 0 and sizes["out_etc.md"] == 0
    unclosed = hostile["docs"].filter(hostile["docs"]["page_id"] == "unclosed").row(0, named=True)
    assert "weight" not in unclosed["text"] and unclosed["title"] == "Broken"


@pytest.mark.unit
def test_chunks_are_bounded_exact_slices(hostile):
    from infra_rag_assets.rag.index.embedding import resolve_model_path

    counter = HFTokenCounter.from_model_path(resolve_model_path("all-MiniLM-L6-v2"))
    truncated: list[str] = []
    docs = hostile["docs"].to_dicts()
    chunks = chunk_documents(docs, counter, ChunkSettings(), truncated=truncated)
    text_of = {d["doc_id"]: d["text"] for d in docs}
    assert len(chunks) > 0 and truncated == []
    for row in chunks.to_dicts():
        assert len(row["text"]) <= MAX_CHUNK_CHARS and row["token_count"] <= 256
        assert text_of[row["doc_id"]][row["start_char"] : row["end_char"]] == row["text"]
    assert max(len(t) for t in text_of.values()) <= MAX_DOC_CHARS
    few = chunk_documents(docs, counter, ChunkSettings(max_chunks=3), truncated=truncated)
    assert few.group_by("doc_id").len()["len"].max() <= 3 and "docs:nested" in truncated


@pytest.mark.unit
def test_fingerprint_streams_and_matches_whole_file_hashing(hostile, tmp_path):
    mirror = tmp_path / "m"
    (mirror / "a").mkdir(parents=True)
    (mirror / "a" / "x.md").write_text("one")
    (mirror / "a-b.md").write_text("two")
    source = Source("s", "kubernetes", "markdown_tree", "x", "https://x/{page_path}", mirror)
    digest = hashlib.sha256(b"s")  # the pre-streaming definition: (path, sha256 of read_bytes()) in Path order
    for path in sorted(p for p in mirror.rglob("*") if p.is_file()):
        rel = path.relative_to(mirror).as_posix()
        digest.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).hexdigest().encode())
    assert mirror_fingerprint(source) == digest.hexdigest()
    assert mirror_fingerprint(hostile["sources"][0]) == mirror_fingerprint(hostile["sources"][0])


_RSS_CHILD = """
import resource, sys
from pathlib import Path
from infra_rag_assets.rag.ingest.blobs import BlobStore
from infra_rag_assets.rag.ingest.pipeline import list_pages, snapshot_pages
from infra_rag_assets.rag.ingest.safe_paths import hash_entry, walk_mirror
from infra_rag_assets.rag.ingest.sources import Source, mirror_fingerprint
mirror = Path(sys.argv[1])
source = Source("s", "kubernetes", "markdown_tree", "x", "https://x/{page_path}", mirror)
mirror_fingerprint(source)
snapshot_pages(list_pages([source]), BlobStore(mirror.parent / "blobs"))
for entry in walk_mirror(mirror, (".md",)):
    hash_entry(entry, 10**12)  # no cap: the whole file is hashed, block by block
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@pytest.mark.slow
def test_peak_memory_is_flat_in_file_size(tmp_path):
    def peak_kb(size: int) -> int:
        mirror = tmp_path / f"m{size}"
        mirror.mkdir()
        with open(mirror / "big.md", "wb") as f:
            os.truncate(f.fileno(), size)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        out = subprocess.run(
            [sys.executable, "-c", _RSS_CHILD, str(mirror)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return int(out.stdout.split()[-1])

    small, large = peak_kb(1_000), peak_kb(2_200_000_000)
    assert large - small < 64 * 1024, (small, large)  # < 64 MB apart for a 2.2 GB file


@pytest.mark.unit
def test_parse_time_budget_stops_a_slow_page_and_recovers():
    with ParseWorker(budget_s=0.05) as worker:
        slow = worker.parse("markdown_tree", ("- item\n  " * 400_000).encode(), path="slow.md")
        assert slow.status == "error" and "time budget" in slow.reason
    with ParseWorker(budget_s=30) as worker:
        fine = worker.parse("markdown_tree", GOOD.format(t="Pod").encode(), path="pod.md")
    assert fine.status == "ok" and fine.title == "Pod"


@pytest.mark.unit
def test_unclosed_front_matter_never_reaches_the_text():
    doc = parse_markdown(b"---\ntitle: Broken\nweight: 3\n", path="x.md")
    assert "weight" not in doc.text and "unclosed front matter" in doc.reason
    rule = parse_markdown(b"---\n\nA page that starts with a thematic break and then has prose.\n", path="r.md")
    assert rule.status == "ok" and rule.reason == "" and "thematic break" in rule.text


@pytest.mark.unit
def test_main_wrapped_in_form_or_link_is_not_navigation():
    from infra_rag_assets.rag.ingest.parse.html import parse_html

    scripts = "<script>var x = '<p>not prose</p>';</script>" * 50
    for wrapper in ("form", "a href='/x'"):
        raw = (
            f"<html><head>{scripts}</head><body>{scripts}<nav><a href='/'>Home</a></nav><{wrapper}><main>"
            "<p>Pods are the smallest deployable units of computing that you can create and manage.</p>"
            f"</main></{wrapper.split()[0]}>{scripts}</body></html>"
        ).encode()
        doc = parse_html(raw, path="pods.html")
        assert doc.status == "ok" and "smallest deployable units" in doc.text, (wrapper, doc.reason)


@pytest.mark.unit
def test_hand_built_page_ref_is_read_safely(tmp_path):
    from infra_rag_assets.rag.ingest.sources import PageRef

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "x.md").symlink_to(tmp_path / "outside.md")
    (tmp_path / "outside.md").write_text(SECRET)
    source = Source("s", "kubernetes", "markdown_tree", "x", "https://x/{page_path}", tmp_path / "m")
    frame = snapshot_pages([PageRef(source, "x.md", tmp_path / "m" / "x.md")], BlobStore(tmp_path / "b"))
    assert frame["fetch_status"].to_list() == ["error"]


@pytest.mark.unit
def test_urls_are_percent_encoded():
    source = Source("s", "kubernetes", "markdown_tree", "x", "https://x/{page_path}/", None)
    assert source.url_for("a b/c&d?e#f.md") == "https://x/a%20b/c%26d%3Fe%23f/"
    assert source.url_for("concepts/pod-v1_x.md") == "https://x/concepts/pod-v1_x/"


VALID = (
    "{name: k, project: kubernetes, kind: markdown_tree, license: x, "
    "url_template: 'https://x/{page_path}', mirror: MIRROR}"
)


@pytest.mark.unit
@pytest.mark.parametrize(
    "entry, message",
    [
        (VALID.replace("license: x,", "license: x, exclude: [a],"), "unknown key 'exclude'"),
        (VALID.replace("mirror:", "mirorr:"), "unknown key 'mirorr' (did you mean 'mirror'?)"),
        (VALID.replace("{page_path}", "{oops}"), "unknown placeholder {oops}"),
        (VALID.replace("{page_path}", "{page_pth}"), "did you mean {page_path}?"),
        (VALID.replace("{page_path}", "{page_path"), "not a valid template"),
        (VALID.replace("kind: markdown_tree", "kind: markdown"), "kind must be one of"),
    ],
)
def test_config_mistakes_are_one_line_errors(tmp_path, entry, message):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.md").write_text("# A\n")
    path = tmp_path / "sources.yaml"
    path.write_text("sources:\n  - " + entry.replace("MIRROR", str(tmp_path / "m")) + "\n")
    with pytest.raises(SourceConfigError) as err:
        load_sources(path)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.unit
def test_zero_page_mirror_is_an_error_naming_the_source(tmp_path):
    (tmp_path / "empty").mkdir()
    source = Source("empty-src", "kubernetes", "markdown_tree", "x", "https://x/{page_path}", tmp_path / "empty")
    with pytest.raises(SourceConfigError, match="'empty-src'.*zero pages"):
        check_sources([source])
    with pytest.raises(SourceConfigError, match="zero pages"):
        list(iter_pages(source))
    (tmp_path / "empty" / "link").symlink_to(tmp_path)  # like /etc: entries, but no readable page
    os.mkfifo(tmp_path / "empty" / "fifo.md")
    with pytest.raises(SourceConfigError, match=r"zero pages\) \(2 entries refused or skipped\)"):
        check_sources([source])


@pytest.mark.unit
@pytest.mark.parametrize(
    "entry, message",
    [
        (VALID.replace("MIRROR", "EMPTY"), "zero pages"),
        (VALID.replace("{page_path}", "{oops}"), "unknown placeholder {oops}"),
        (VALID.replace("mirror:", "mirorr:"), "did you mean 'mirror'?"),
    ],
)
def test_cli_config_errors_are_one_line_and_register_nothing(tmp_path, monkeypatch, entry, message):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.md").write_text("# A\n\nSome prose for the page.\n")
    (tmp_path / "empty").mkdir()
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "sources:\n  - " + entry.replace("EMPTY", str(tmp_path / "empty")).replace("MIRROR", str(tmp_path / "m")) + "\n"
    )
    monkeypatch.setenv("INFRA_RAG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("INFRA_RAG_SOURCES", str(bad))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    result = CliRunner().invoke(main, ["build", "--through", "source_pages"], catch_exceptions=False)
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    warehouse = tmp_path / "home" / "warehouse.duckdb"
    if warehouse.exists():
        from infra_rag_assets.rag.operate.warehouse import Warehouse

        assert Warehouse(warehouse).rows("SELECT count(*) FROM index_versions")[0][0] == 0
    assert json.dumps(result.output)  # printable


@pytest.mark.unit
def test_sensor_skips_a_broken_sources_file_and_registers_nothing(tmp_path):
    import dagster as dg

    from infra_rag_assets.defs.operate.automation import sources_changed
    from infra_rag_assets.defs.resources import BuildResource, DataHomeResource

    (tmp_path / "empty").mkdir()
    bad = tmp_path / "bad.yaml"
    bad.write_text("sources:\n  - " + VALID.replace("MIRROR", str(tmp_path / "empty")) + "\n")
    store = DataHomeResource(home=str(tmp_path / "home"))
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(
            instance=instance, resources={"store": store, "settings": BuildResource(sources_file=str(bad))}
        )
        result = sources_changed(context)
        assert isinstance(result, dg.SkipReason) and "zero pages" in result.skip_message
        assert instance.get_dynamic_partitions("index_version") == []
    assert store.data_home().warehouse().rows("SELECT count(*) FROM index_versions")[0][0] == 0
