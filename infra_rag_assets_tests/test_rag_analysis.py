"""The shared analyzer: identifier splitting, prose stemming, index/query symmetry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra_rag_assets.rag.index.analysis import (
    MAX_TERM_CHARS,
    STOP_WORDS,
    analyze_for_index,
    analyze_query,
    identifier_terms,
    prose_terms,
    stem,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("maxSurge", ["maxsurge", "max", "surge"]),
        ("kube-apiserver", ["kube-apiserver", "kube", "apiserver"]),
        ("spec.template.metadata", ["spec.template.metadata", "spec", "template", "metadata"]),
        ("snake_case_key", ["snake_case_key", "snake", "case", "key"]),
        ("--feature-gates", ["feature-gates", "feature", "gates"]),
        ("HTTPServer2", ["httpserver2", "http", "server2"]),
        ("IPv6", ["ipv6", "ip", "v6"]),
        ("http_requests_total", ["http_requests_total", "http", "requests", "total"]),
        ("argocd-cm", ["argocd-cm", "argocd", "cm"]),
        (
            "/etc/kubernetes/manifests",
            ["etc/kubernetes/manifests", "etc", "kubernetes", "manifests"],
        ),
        ("v1.28", ["v1.28", "1.28"]),
        ("apps/v1", ["apps/v1", "apps", "v1"]),
        ("app=nginx", ["app=nginx", "app", "nginx"]),
        ("10.0.0.1", ["10.0.0.1"]),
        ("k8s", ["k8s"]),
    ],
)
def test_identifier_whole_form_first_then_parts(text: str, expected: list[str]) -> None:
    assert identifier_terms(text) == expected


def test_identifier_terms_in_running_text_keep_order_and_drop_noise() -> None:
    text = 'Set the maxSurge of kube-apiserver; query rate(http_requests_total{job="api"}[5m]).'
    assert identifier_terms(text) == [
        "set", "maxsurge", "max", "surge", "kube-apiserver", "kube", "apiserver",
        "query", "rate", "http_requests_total", "http", "requests", "total", "job", "api",
        "5m",
    ]  # fmt: skip


def test_identifier_terms_trailing_punctuation_and_camel_acronyms() -> None:
    assert identifier_terms("see spec.template.") == ["see", "spec.template", "spec", "template"]
    assert identifier_terms("kubeAPIServer") == ["kubeapiserver", "kube", "api", "server"]
    assert identifier_terms("imagePullPolicy: IfNotPresent")[:4] == [
        "imagepullpolicy", "image", "pull", "policy"
    ]  # fmt: skip


def test_identifier_terms_are_lowercase_and_skip_stop_words() -> None:
    terms = identifier_terms("The Deployment IS READY and THE ArgoCD")
    assert terms == ["deployment", "ready", "argocd", "argo", "cd"]
    assert all(t == t.lower() for t in terms)


def test_overlong_whole_forms_are_dropped_but_parts_kept() -> None:
    url = "https://example.com/" + "-".join(["segment"] * 20)
    terms = identifier_terms(url)
    assert all(len(t) <= MAX_TERM_CHARS for t in terms)
    assert "segment" in terms and "example" in terms


@pytest.mark.parametrize(
    ("words", "shared"),
    [
        (["running", "runs", "run"], "run"),
        (["configuration", "configure", "configured", "configuring"], "configur"),
        (["deployments", "deployment", "deployed"], "deploy"),
        (["queries", "querying", "query"], "queri"),
    ],
)
def test_inflections_share_a_stem(words: list[str], shared: str) -> None:
    assert {stem(w) for w in words} == {shared}


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("caresses", "caress"), ("ponies", "poni"), ("ties", "tie"), ("agreed", "agre"),
        ("hopping", "hop"), ("filing", "file"), ("happy", "happi"), ("relational", "relat"),
        ("generously", "generous"), ("communication", "communic"), ("dying", "die"),
        ("replacement", "replac"), ("adoption", "adopt"), ("effective", "effect"),
        ("sky", "sky"), ("k8s", "k8s"), ("go", "go"),
    ],
)  # fmt: skip
def test_porter2_reference_vocabulary(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_prose_terms_stem_and_remove_stop_words() -> None:
    assert prose_terms("The Pods are RUNNING on the nodes") == ["pod", "run", "node"]
    assert prose_terms("http_requests_total") == ["http", "request", "total"]
    assert prose_terms("the of and is") == []
    assert not STOP_WORDS & set(prose_terms(" ".join(sorted(STOP_WORDS)) + " pod"))


_TEXT = st.text(alphabet=st.sampled_from(list("aZk8-_./:= \t\n{}\"'ßÄé\u00a0\u2003xyY")), max_size=80)


@given(_TEXT, st.sampled_from(["prose", "ident"]))
def test_index_and_query_analysis_are_identical(text: str, kind: str) -> None:
    indexed = analyze_for_index(text, kind)
    # tantivy's whitespace tokenizer splits on ASCII whitespace only: terms must contain none
    tokens = indexed.split(" ") if indexed else []
    assert all(t and not any(c.isspace() for c in t) for t in tokens)
    assert analyze_query(text, kind) == list(dict.fromkeys(tokens))


def test_unknown_analyzer_kind_is_rejected() -> None:
    with pytest.raises(KeyError):
        analyze_query("x", "fancy")
