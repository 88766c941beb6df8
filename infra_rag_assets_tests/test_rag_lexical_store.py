"""Lexical store: ranking on real-looking docs, filters, boosts, atomic and serialized builds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from infra_rag_assets.rag.index import lexical_store
from infra_rag_assets.rag.index.analysis import analyze_query
from infra_rag_assets.rag.index.lexical_store import LexicalDoc, LexicalSearcher, build_index, cleanup_stale_staging

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]


def _doc(cid, project, source, kind, *, title, section, text, pages=()) -> LexicalDoc:
    return LexicalDoc(cid, f"doc-{cid}", project, source, kind, section, title, text, list(pages))


K8S, PROM, ARGO = "kubernetes", "prometheus", "argocd"
CORPUS = [
    _doc("deploy-maxsurge", K8S, "web", "concept", title="Deployments",
         section="Deployments > Rolling Update Deployment > Max Surge",
         text=".spec.strategy.rollingUpdate.maxSurge is an optional field that specifies the "
              "maximum number of Pods that can be created over the desired number of Pods."),
    _doc("deploy-maxunavailable", K8S, "web", "concept", title="Deployments",
         section="Deployments > Rolling Update Deployment > Max Unavailable",
         text=".spec.strategy.rollingUpdate.maxUnavailable specifies the maximum number of "
              "Pods that can be unavailable during the update process."),
    _doc("deploy-rollback", K8S, "web", "task", title="Rolling back a Deployment",
         section="Deployments > Rolling Back a Deployment",
         text="Sometimes a Deployment is unstable. Use kubectl rollout undo "
              "deployment/nginx-deployment to go back to the previous revision."),
    _doc("deploy-scale", K8S, "web", "concept", title="Deployments",
         section="Deployments > Scaling a Deployment",
         text="You can scale a Deployment with kubectl scale deployment/nginx-deployment "
              "--replicas=10. Proportional scaling spreads new replicas."),
    _doc("apiserver-flags", K8S, "pdf", "reference", title="kube-apiserver",
         section="kube-apiserver > Options", pages=[3, 4],
         text="--feature-gates mapStringBool: A set of key=value pairs that describe feature "
              "gates for alpha/experimental features."),
    _doc("apiserver-audit", K8S, "pdf", "reference", title="kube-apiserver",
         section="kube-apiserver > Options > Audit", pages=[5],
         text="--audit-log-path string: If set, all requests coming to the apiserver will be "
              "logged to this file."),
    _doc("static-pods", K8S, "web", "task", title="Create static Pods",
         section="Static Pods > Configuration files",
         text="The kubelet watches /etc/kubernetes/manifests and creates static Pods from the"
              " manifests it finds there."),
    _doc("pod-resources", K8S, "web", "concept",
         title="Resource Management for Pods and Containers",
         section="Resource Management > Requests and limits",
         text="When you specify the resource request for containers in a Pod, the "
              "kube-scheduler uses this information to decide which node to place the Pod on."),
    _doc("glossary-pod", K8S, "web", "glossary", title="Pod",
         section="Pod",
         text="The smallest and simplest Kubernetes object. A Pod represents a set of running"
              " containers on your cluster."),
    _doc("prom-http-requests", PROM, "web", "reference", title="Metric and label naming",
         section="Metric and label naming > Metric names",
         text="A metric name should have a suffix describing the unit, for example "
              "http_requests_total for a counter of HTTP requests."),
    _doc("prom-histogram", PROM, "web", "concept", title="Histograms and summaries",
         section="Histograms and summaries > Quantiles",
         text="Use histogram_quantile(0.95, "
              "sum(rate(http_request_duration_seconds_bucket[5m])) by (le)) to compute the "
              "95th percentile latency."),
    _doc("prom-relabel", PROM, "web", "reference", title="Configuration",
         section="Configuration > relabel_config",
         text="Relabeling is a powerful tool to dynamically rewrite the label set of a target"
              " before it gets scraped. The configuration key is relabel_configs."),
    _doc("prom-scrape", PROM, "web", "reference", title="Configuration",
         section="Configuration > scrape_config",
         text="A scrape_config section specifies a set of targets and parameters describing "
              "how to scrape them, such as scrape_interval and metrics_path."),
    _doc("prom-matchers", PROM, "pdf", "concept", title="Querying basics",
         section="Querying basics > Instant vector selectors", pages=[12],
         text='Label matchers like {job="api-server", code=~"5.."} filter time series; the =~'
              " operator selects labels that regex-match."),
    _doc("prom-alerting", PROM, "web", "concept", title="Alerting rules",
         section="Alerting rules > Defining alerting rules",
         text="Alerting rules allow you to define alert conditions based on PromQL "
              "expressions and to send notifications about firing alerts to Alertmanager."),
    _doc("argocd-cm-keys", ARGO, "web", "reference", title="Declarative Setup",
         section="Declarative Setup > argocd-cm",
         text="The argocd-cm ConfigMap holds general Argo CD configuration such as url, "
              "dex.config and resource.exclusions."),
    _doc("argocd-rbac", ARGO, "web", "reference", title="RBAC Configuration",
         section="RBAC Configuration > argocd-rbac-cm",
         text="The argocd-rbac-cm ConfigMap defines policy.csv and policy.default for role "
              "based access control."),
    _doc("argocd-sync", ARGO, "web", "concept", title="Sync Options",
         section="Sync Options > Prune",
         text="Argo CD syncs the desired state in Git to the cluster. With automated sync and"
              " prune enabled, resources removed from Git are deleted."),
    _doc("argocd-app", ARGO, "web", "concept", title="Core Concepts",
         section="Core Concepts > Application",
         text="An Application is a group of Kubernetes resources as defined by a manifest. It"
              " is a Custom Resource Definition."),
    _doc("argocd-health", ARGO, "pdf", "concept", title="Resource Health",
         section="Resource Health > Custom health checks", pages=[7, 8],
         text="Argo CD provides built-in health assessment for several standard Kubernetes "
              "types, which is then surfaced to the overall Application health."),
]  # fmt: skip


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory) -> LexicalSearcher:
    final = tmp_path_factory.mktemp("lex") / "lexical"
    assert build_index(final, CORPUS) == len(CORPUS)
    return LexicalSearcher.open(final)


def test_near_terms_are_one_edit_or_transposition_from_an_indexed_term(searcher):
    """What answerability's typo rule asks (rag/search/answerability.py): a word one edit from a
    corpus term is a typo of it, a word further away is not in the corpus."""
    assert searcher.doc_freq("ident", "kubelet") and not searcher.doc_freq("ident", "kubelte")
    assert searcher.has_near_term("ident", "kubelte")  # a transposition counts as one edit
    assert searcher.has_near_term("ident", "kubelat")  # one substitution
    assert searcher.has_near_term("ident", "kublet")  # one deletion
    assert not searcher.has_near_term("ident", "kublte")  # two edits
    assert not searcher.has_near_term("ident", "kaniko")  # nowhere in the index
    assert searcher.has_near_term("ident", "kublte", distance=2)


def _ids(hits: list[tuple[str, float]]) -> list[str]:
    return [cid for cid, _ in hits]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("maxSurge", "deploy-maxsurge"),
        ("max surge", "deploy-maxsurge"),
        ("feature gates", "apiserver-flags"),
        ("--feature-gates", "apiserver-flags"),
        ("http_requests_total", "prom-http-requests"),
        ("argocd-cm", "argocd-cm-keys"),
        ("/etc/kubernetes/manifests", "static-pods"),
        ("how do I roll back a deployment", "deploy-rollback"),
        ("relabel_configs", "prom-relabel"),
    ],
)
def test_queries_rank_the_right_doc_first(searcher: LexicalSearcher, query: str, expected: str) -> None:
    hits = searcher.search(query, 5)
    assert _ids(hits)[0] == expected, hits
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


@pytest.mark.parametrize("query", ["", "   ", "the and of", "!!! ---"])
def test_empty_or_stopword_only_query_returns_nothing(searcher: LexicalSearcher, query: str) -> None:
    assert searcher.search(query, 10) == []


def _matches(doc: LexicalDoc, query: str, filters: dict) -> bool:
    """Ground truth computed with the same analyzer: any query term in any field, all filters."""
    prose = set(analyze_query(" ".join((doc.title, doc.section_path, doc.text)), "prose"))
    ident = set(analyze_query(" ".join((doc.title, doc.section_path, doc.text)), "ident"))
    hit = prose & set(analyze_query(query, "prose")) or ident & set(analyze_query(query, "ident"))
    checks = {
        "project": lambda v: doc.project in (v if isinstance(v, list) else [v]),
        "source": lambda v: doc.source == v,
        "page_kind": lambda v: doc.page_kind == v,
        "section_prefix": lambda v: doc.section_path.startswith(v),
        "page": lambda v: v in doc.pages,
    }
    return bool(hit) and all(checks[key](value) for key, value in filters.items())


@pytest.mark.parametrize(
    "filters",
    [
        {"project": K8S},
        {"project": PROM},
        {"project": [ARGO, PROM]},
        {"source": "pdf"},
        {"page_kind": "reference"},
        {"project": K8S, "page_kind": "concept"},
        {"section_prefix": "Deployments > Rolling"},
        {"section_prefix": "Configuration > "},
        {"page": 4},
        {"project": ARGO, "source": "pdf", "page": 8},
    ],
)
@pytest.mark.parametrize("query", ["configuration resource", "kubernetes pods set", "maxSurge"])
def test_filters_apply_before_ranking(searcher: LexicalSearcher, query: str, filters: dict) -> None:
    expected = {d.chunk_id for d in CORPUS if _matches(d, query, filters)}
    by_id = {d.chunk_id: d for d in CORPUS}
    for k in (1, 2, 3, 50):
        got = _ids(searcher.search(query, k, filters=filters))
        assert len(got) == min(k, len(expected)), (k, got, expected)
        assert set(got) <= expected
        assert all(_matches(by_id[cid], query, filters) for cid in got)
    assert set(_ids(searcher.search(query, 50, filters=filters))) == expected


def test_filters_do_not_change_scores(searcher: LexicalSearcher) -> None:
    unfiltered = dict(searcher.search("configuration", 50))
    for cid, score in searcher.search("configuration", 50, filters={"project": PROM}):
        assert score == pytest.approx(unfiltered[cid])


def test_top_unfiltered_hit_is_excluded_by_filter(searcher: LexicalSearcher) -> None:
    assert _ids(searcher.search("maxSurge", 3))[0] == "deploy-maxsurge"
    assert searcher.search("maxSurge", 3, filters={"project": ARGO}) == []


def test_unknown_filter_or_boost_is_rejected(searcher: LexicalSearcher) -> None:
    with pytest.raises(ValueError):
        searcher.search("pod", 3, filters={"colour": "red"})
    with pytest.raises(ValueError):
        searcher.search("pod", 3, boosts={"colour": 2.0})


def test_title_boost_outranks_body_only_hit(tmp_path: Path) -> None:
    filler = "Pods run containers on nodes in the cluster. " * 3
    docs = [
        _doc(
            "body-only",
            K8S,
            "web",
            "concept",
            title="Workloads",
            section="Workloads",
            text=filler + "A rollback restores it.",
        ),
        _doc("title-hit", K8S, "web", "task", title="Rollback", section="Tasks", text=filler),
    ]
    build_index(tmp_path / "lex", docs)
    s = LexicalSearcher.open(tmp_path / "lex")
    assert _ids(s.search("rollback", 2)) == ["title-hit", "body-only"]
    body_only = {"title": 0.0, "section": 0.0, "ident": 0.0}
    assert _ids(s.search("rollback", 2, boosts=body_only)) == ["body-only"]
    low, high = (dict(s.search("rollback", 2, boosts={"title": b}))["title-hit"] for b in (1, 4))
    assert high > low


def test_equal_scores_rank_in_build_order_every_build(tmp_path: Path) -> None:
    """Identical chunks (equal BM25 scores) come back in the order they were indexed, in every
    build: a release's lexical ties must not depend on how indexing threads split the work."""
    docs = [
        _doc(
            f"twin-{i:03d}",
            K8S,
            "web",
            "concept",
            title="Twins",
            section="Twins",
            text="A rollback restores the previous revision of the workload.",
        )
        for i in range(300)
    ]
    expected = [d.chunk_id for d in docs][:120]
    for build in range(3):
        build_index(tmp_path / f"lex-{build}", docs)
        assert _ids(LexicalSearcher.open(tmp_path / f"lex-{build}").search("rollback revision", 120)) == expected


def _temp_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith((".staging-", ".old-")))


def test_rebuild_replaces_index_atomically(tmp_path: Path) -> None:
    final = tmp_path / "lexical"
    build_index(final, CORPUS[:5])
    old = LexicalSearcher.open(final)
    build_index(final, CORPUS[5:])
    new = LexicalSearcher.open(final)
    assert (old.doc_count(), new.doc_count()) == (5, len(CORPUS) - 5)
    assert new.manifest["doc_count"] == len(CORPUS) - 5
    # an open reader keeps serving its snapshot; a fresh one sees only the new docs
    assert _ids(old.search("maxSurge", 1)) == ["deploy-maxsurge"]
    assert new.search("maxSurge", 1) == []
    assert _temp_dirs(tmp_path) == []


def _fail_on_staging_rename(monkeypatch: pytest.MonkeyPatch) -> None:
    real_rename = os.rename

    def rename(src, dst):
        if Path(src).name.startswith(".staging-"):
            raise OSError("simulated crash at publish")
        return real_rename(src, dst)

    monkeypatch.setattr(lexical_store.os, "rename", rename)


def test_failed_publish_leaves_no_final_dir(tmp_path: Path, monkeypatch) -> None:
    _fail_on_staging_rename(monkeypatch)
    with pytest.raises(OSError, match="simulated"):
        build_index(tmp_path / "lexical", CORPUS)
    assert not (tmp_path / "lexical").exists()
    assert _temp_dirs(tmp_path) == []


def test_failed_publish_keeps_previous_index(tmp_path: Path, monkeypatch) -> None:
    build_index(tmp_path / "lexical", CORPUS[:3])
    _fail_on_staging_rename(monkeypatch)
    with pytest.raises(OSError, match="simulated"):
        build_index(tmp_path / "lexical", CORPUS)
    assert LexicalSearcher.open(tmp_path / "lexical").doc_count() == 3
    assert _temp_dirs(tmp_path) == []


def test_failure_before_publish_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    def boom(*_args):
        raise RuntimeError("simulated crash after commit")

    monkeypatch.setattr(lexical_store, "_write_manifest", boom)
    with pytest.raises(RuntimeError):
        build_index(tmp_path / "lexical", CORPUS)
    assert list(tmp_path.iterdir()) == [tmp_path / ".lexical.lock"]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_cleanup_removes_only_dead_builders_leftovers(tmp_path: Path) -> None:
    dead, live = _dead_pid(), os.getpid()
    names = {
        "dead_staging": f".staging-lexical-{dead}-{'a' * 32}",
        "live_staging": f".staging-lexical-{live}-{'b' * 32}",
        "dead_aside": f".old-lexical-{dead}-{'c' * 32}",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "junk").write_text("x")
    handled = cleanup_stale_staging(tmp_path)
    assert sorted(p.name for p in handled) == sorted([names["dead_aside"], names["dead_staging"]])
    assert _temp_dirs(tmp_path) == [names["live_staging"]]
    # the final dir was missing, so the index a dead builder had moved aside is restored
    assert (tmp_path / "lexical" / "junk").read_text() == "x"


_KILLED_BUILDER = """
import sys
from pathlib import Path
from infra_rag_assets.rag.index.lexical_store import LexicalDoc, build_index

def docs():
    words = "pod node deployment maxSurge kube-apiserver http_requests_total argocd-cm".split()
    i = 0
    while True:  # endless: the parent kills us mid-build
        if i == 200:
            print("started", flush=True)
        yield LexicalDoc(f"c{i}", "d", "kubernetes", "web", "concept", "A > B", "T",
                         " ".join(words[(i + j) % len(words)] for j in range(200)), [1])
        i += 1

build_index(Path(sys.argv[1]), docs(), heap_bytes=20_000_000)
"""


@pytest.mark.parametrize("with_previous", [False, True])
def test_killed_build_never_exposes_a_partial_index(tmp_path: Path, with_previous: bool) -> None:
    final = tmp_path / "lexical"
    if with_previous:
        build_index(final, CORPUS[:4])
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_BUILDER, str(final)],
        stdout=subprocess.PIPE, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert proc.stdout.readline().strip() == b"started"
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    if with_previous:
        assert LexicalSearcher.open(final).doc_count() == 4
    else:
        assert not final.exists()
    assert len(_temp_dirs(tmp_path)) == 1  # the dead builder's staging dir
    assert len(cleanup_stale_staging(tmp_path)) == 1
    assert _temp_dirs(tmp_path) == []


def test_concurrent_builders_serialize(tmp_path: Path) -> None:
    final = tmp_path / "lexical"
    spans: dict[str, list[float]] = {}
    errors: list[BaseException] = []

    def slow_docs(name: str, docs: list[LexicalDoc]):
        spans[name] = [time.monotonic()]
        for doc in docs:
            time.sleep(0.01)
            yield doc
        spans[name].append(time.monotonic())

    def run(name: str, docs: list[LexicalDoc]) -> None:
        try:
            build_index(final, slow_docs(name, docs), heap_bytes=20_000_000)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=("a", CORPUS[:12])),
        threading.Thread(target=run, args=("b", CORPUS[12:])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not errors
    (a0, a1), (b0, b1) = spans["a"], spans["b"]
    assert a1 <= b0 or b1 <= a0, "builders overlapped"
    count = LexicalSearcher.open(final).doc_count()
    assert count == (12 if a0 > b0 else len(CORPUS) - 12)  # the later builder wins
    assert _temp_dirs(tmp_path) == []


def test_stale_analyzer_version_is_refused(tmp_path: Path) -> None:
    final = tmp_path / "lexical"
    build_index(final, CORPUS[:2])
    manifest = json.loads((final / "lexical_manifest.json").read_text())
    assert manifest["doc_count"] == 2 and "ident" in manifest["fields"]
    manifest["analyzer_version"] = "0"
    (final / "lexical_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="rebuild"):
        LexicalSearcher.open(final)
