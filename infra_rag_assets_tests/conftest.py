"""Shared fixtures: the real corpus location and a small fixture corpus built from it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest

from infra_rag_assets import settings

# Fixture builds are quick builds (base model as is): adapting the model trains for seconds to
# minutes per build. The tests of adaptation itself (test_domain_model.py) opt in with
# BuildResource(adapt=True) and a tiny recipe.
os.environ.setdefault("INFRA_RAG_ADAPT", "0")
# Likewise the support judge trains on a few hundred pairs in fixture builds (seconds, not minutes).
os.environ.setdefault("INFRA_RAG_JUDGE_PAIRS", "240")
# ... on the fixture corpus and train-split pairs only (the public answers make calibration minutes long).
os.environ.setdefault("INFRA_RAG_JUDGE_DATA", "none")
# The hand-label report scores 161 answers at 512 tokens (minutes on 2 cores) in every fixture build;
# its code is tested on its own (test_rag_label_calibration.py), so builds skip it.
os.environ.setdefault("INFRA_RAG_JUDGE_LABELS", "0")
os.environ.setdefault("INFRA_RAG_READER_EXAMPLES", "96")  # the reader trains seconds (quality is not under test)
# `-n 2` runs two workers (and the builds they start) on 2 cores: one torch thread per process.
# Two threads each made torch's threads contend: a 36-test build subset took 153 s (254 CPU-s)
# against 138 s (201 CPU-s) with one (2026-12-07). devices.cpu_threads() honours it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The real corpus and bench: INFRA_RAG_CORPUS / INFRA_RAG_BENCH, else ../shared/* from the cwd.
# Made absolute in the environment, so servers and builds the tests start elsewhere (dagster dev,
# the installed wheel) find the same folders whatever their working directory.
os.environ["INFRA_RAG_CORPUS"] = str(settings.corpus_dir().resolve())
os.environ["INFRA_RAG_BENCH"] = str(settings.bench_dir().resolve())
CORPUS = settings.corpus_dir()
TRAIN_SPLIT = settings.bench_dir() / "k8s-docs-rag-bench" / "qa_train.jsonl"
PAGE = "concepts_workloads_controllers_deployment"  # the fixture's page with real train questions
OFF_FIXTURE = 4  # train questions in train_subset whose page is not in the fixture corpus

FIXTURE_PAGES = {
    "kubernetes": [
        "_index.md",
        "concepts/services-networking/endpoint-slices.md",
        "concepts/workloads/controllers/deployment.md",
        "reference/glossary/pod.md",
        "tasks/_index.md",
    ],
    "prometheus/site": ["guides/basic-auth.md"],
    "argocd": ["core_concepts.md"],
}

NAV_ONLY_HTML = b"""<html><head><title>Docs index</title></head><body>
<nav><ul><li><a href="/a">Home</a></li><li><a href="/b">Docs</a></li><li><a href="/c">Blog</a></li></ul></nav>
</body></html>"""

ARTICLE_HTML = b"""<html><head><title>Alertmanager routing</title></head><body>
<nav><a href="/">Home</a></nav><main><article><h1>Alertmanager routing</h1>
<p>The routing tree decides which receiver gets an alert. Each route matches on labels and can
group alerts by cluster and alertname before notifying a receiver such as email or PagerDuty.</p>
<h2>Grouping</h2><p>The group_by setting batches alerts that share label values into one
notification, which keeps on-call engineers from receiving hundreds of pages at once.</p>
<h2>Inhibition</h2><p>Inhibition rules mute alerts when another alert is already firing, for
example muting warning alerts for a cluster while a critical cluster-down alert fires.</p>
</article></main></body></html>"""


def load_factor() -> float:
    """How many runnable processes each core has now, at least 1: waits on subprocess work scale
    by it, so a limit set on a quiet machine still holds on a busy one (load 12 on 2 cores: 6)."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def require_corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"real corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture
def fixture_corpus(tmp_path: Path) -> Path:
    """A tiny corpus: real Markdown pages, a real PDF, HTML pages and broken files."""
    return make_fixture_corpus(tmp_path / "corpus")


def make_fixture_corpus(root: Path) -> Path:
    corpus = require_corpus()
    for folder, pages in FIXTURE_PAGES.items():
        for rel in pages:
            target = root / folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(corpus / folder / rel, target)
    (root / "kubernetes" / "empty.md").write_bytes(b"")
    (root / "html").mkdir()
    (root / "html" / "nav.html").write_bytes(NAV_ONLY_HTML)
    (root / "html" / "routing.html").write_bytes(ARTICLE_HTML)
    (root / "pdf").mkdir()
    shutil.copyfile(corpus / "pdf" / "cncf-software-supply-chain-practices-v2.pdf", root / "pdf" / "supply-chain.pdf")
    (root / "pdf" / "random.pdf").write_bytes(bytes(range(256)) * 64)
    return root


@pytest.fixture
def fixture_sources(tmp_path: Path, fixture_corpus: Path) -> Path:
    """sources.yaml over the fixture corpus (same shape as the project's own)."""
    return write_fixture_sources(tmp_path / "sources.yaml", fixture_corpus)


def write_fixture_sources(path: Path, fixture_corpus: Path) -> Path:
    path.write_text(f"""
sources:
  - name: kubernetes
    project: kubernetes
    kind: markdown_tree
    license: CC-BY-4.0
    upstream: {{git: https://github.com/kubernetes/website, commit: 5c744748, subpath: content/en/docs}}
    url_template: "https://kubernetes.io/docs/{{page_path}}/"
    mirror: {fixture_corpus}/kubernetes
  - name: prometheus-site
    project: prometheus
    kind: markdown_tree
    license: Apache-2.0
    upstream: {{git: https://github.com/prometheus/docs, commit: c105550a, subpath: docs}}
    url_template: "https://prometheus.io/docs/{{page_path}}/"
    mirror: {fixture_corpus}/prometheus/site
  - name: argocd
    project: argocd
    kind: markdown_tree
    license: Apache-2.0
    upstream: {{git: https://github.com/argoproj/argo-cd, commit: 37ee0097, subpath: docs}}
    url_template: "https://argo-cd.readthedocs.io/en/stable/{{page_path}}/"
    mirror: {fixture_corpus}/argocd
  - name: alerting-html
    project: prometheus
    kind: html_pages
    license: Apache-2.0
    upstream: {{urls: ["https://example.invalid/routing.html"]}}
    url_template: "https://example.invalid/{{page_path}}.html"
    mirror: {fixture_corpus}/html
  - name: cncf-whitepapers
    project: cncf
    kind: pdf_files
    license: CC-BY-4.0
    upstream: {{git: https://github.com/cncf/tag-security, commit: 948951ea}}
    url_template: "https://example.invalid/{{upstream_path}}"
    mirror: {fixture_corpus}/pdf
""")
    return path


@pytest.fixture
def pipeline_env(tmp_path, fixture_sources):
    """(ephemeral Dagster instance, DataHomeResource in tmp, BuildResource over the fixture sources)."""
    import dagster as dg

    from infra_rag_assets.defs.resources import BuildResource, DataHomeResource

    store = DataHomeResource(home=str(tmp_path / "home"))
    settings = BuildResource(sources_file=str(fixture_sources))
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance, store, settings


@pytest.fixture(scope="session")
def train_subset(tmp_path_factory) -> Path:
    """The train split's questions on the fixture's deployment page (30 real ones) plus a few
    whose pages the fixture lacks (they must be skipped and counted)."""
    if not TRAIN_SPLIT.is_file():
        pytest.skip(f"train split not found at {TRAIN_SPLIT}")
    rows = [json.loads(line) for line in TRAIN_SPLIT.read_text().splitlines() if line.strip()]
    on_page = [r for r in rows if r["source_page"] == PAGE]
    elsewhere = [r for r in rows if r["source_page"].startswith("tasks_")][:OFF_FIXTURE]
    assert len(on_page) >= 25
    path = tmp_path_factory.mktemp("train") / "qa_train_subset.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in on_page + elsewhere))
    return path


def build_index_version(home: Path, sources: Path) -> str:
    """Register a new index version of ``sources`` in ``home`` and build it through the indexes."""
    import dagster as dg

    from infra_rag_assets.control.builds import materialize_version, register_version
    from infra_rag_assets.control.stages import index_stages
    from infra_rag_assets.defs.resources import BuildResource, DataHomeResource, EmbedderResource

    store = DataHomeResource(home=str(home))
    settings = BuildResource(sources_file=str(sources))
    with dg.DagsterInstance.ephemeral() as instance:
        version = register_version(instance, store, settings, created_by="test")
        result = materialize_version(
            version, index_stages(), instance, store, settings, EmbedderResource(batch_size=16)
        )
        assert result.success
    return version


def shared_across_workers(tmp_path_factory, name: str, build) -> dict:
    """``build(folder)``'s result, built once per suite run however many xdist workers ask.

    The first worker to take the lock builds into a folder beside the workers' own tmp roots;
    the others wait for it (the cores are the limit either way) and reuse the folder read-only.
    ``build`` returns a JSON-able dict; Path values come back as Paths.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by every worker of this run
    folder, done = root / name, root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if a worker dies
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            result = build(folder)
            paths = sorted(k for k, v in result.items() if isinstance(v, Path))
            done.write_text(json.dumps({"paths": paths, "values": {k: str(v) for k, v in result.items()}}))
    saved = json.loads(done.read_text())
    return {k: Path(v) if k in saved["paths"] else v for k, v in saved["values"].items()}


@pytest.fixture(scope="session")
def built_index(tmp_path_factory):
    """One fixture-corpus index version built through every index stage, shared read-only
    (by every xdist worker). Tests that change state (releases, traces) get their own data home
    via ``fresh_home``."""

    def build(base: Path) -> dict:
        corpus = make_fixture_corpus(base / "corpus")
        sources = write_fixture_sources(base / "sources.yaml", corpus)
        version = build_index_version(base / "home", sources)
        return {"home": base / "home", "version": version, "sources": sources, "corpus": corpus}

    return shared_across_workers(tmp_path_factory, "built_index", build)


@pytest.fixture(scope="session")
def judged_index(built_index, tmp_path_factory):
    """The built fixture index plus its support judge (trained on a few hundred fixture pairs),
    shared read-only like ``built_index``."""

    def build(base: Path) -> dict:
        import dagster as dg

        from infra_rag_assets.control.builds import materialize_version
        from infra_rag_assets.defs.resources import BuildResource, DataHomeResource, EmbedderResource

        home = base / "home"
        shutil.copytree(built_index["home"], home)
        store = DataHomeResource(home=str(home))
        settings = BuildResource(sources_file=str(built_index["sources"]))
        with dg.DagsterInstance.ephemeral() as instance:
            instance.add_dynamic_partitions("index_version", [built_index["version"]])
            result = materialize_version(
                built_index["version"], ["support_judge"], instance, store, settings, EmbedderResource(batch_size=16)
            )
            assert result.success
        return {**built_index, "home": home}

    return shared_across_workers(tmp_path_factory, "judged_index", build)


@pytest.fixture
def fresh_home(built_index, tmp_path):
    """A private copy of the built data home (safe to write releases and traces into)."""
    return shutil.copytree(built_index["home"], tmp_path / "home")


@pytest.fixture
def fresh_judged_home(judged_index, tmp_path):
    """A private copy of the judged data home (its caches, releases and traces may be written)."""
    return shutil.copytree(judged_index["home"], tmp_path / "home")


TIERS = ("unit", "build", "slow", "browser", "postgres")
LONGEST_FIRST = ("browser", "postgres", "slow", "build", "unit")  # tiers by their tests' typical length


def pytest_collection_modifyitems(config, items):
    """Refuse to collect a test that carries no tier marker or more than one (see pyproject.toml),
    and run the longest tiers first.

    A module sets its tier with ``pytestmark = pytest.mark.<tier>``; a module that mixes fast and
    long tests marks each test instead. ``-m unit`` is then the fast inner loop. Long tests first
    (collection order within a tier) lets ``-n 2``'s workers finish together on short tests
    instead of one worker running a 6-minute test alone at the end.
    """
    wrong, tier_of = [], {}
    for item in items:
        tiers = sorted({mark.name for mark in item.iter_markers() if mark.name in TIERS})
        if len(tiers) != 1:
            wrong.append(f"  {item.nodeid}: {', '.join(tiers) or 'no tier'}")
        else:
            tier_of[item.nodeid] = tiers[0]
    if not wrong:
        items.sort(key=lambda item: LONGEST_FIRST.index(tier_of[item.nodeid]))
        return
    message = f"every test needs exactly one tier marker of {', '.join(TIERS)} ({len(wrong)} do not):\n" + "\n".join(
        wrong
    )
    if not hasattr(config, "workerinput"):
        raise pytest.UsageError(message)
    # An xdist worker's UsageError reaches the controller as a bare internal error without this
    # message: report it as a collection error instead, and run nothing.
    config.hook.pytest_collectreport(report=pytest.CollectReport("tiers", "failed", message, []))
    items.clear()
