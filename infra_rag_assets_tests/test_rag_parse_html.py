"""HTML parser: main-content extraction, sections, navigation-only pages and hostile input
(no Dagster involved)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from infra_rag_assets.rag.ingest.models import (
    STATUS_ERROR,
    STATUS_NO_CONTENT,
    STATUS_OK,
    STATUS_TOO_LARGE,
    check_spans,
)
from infra_rag_assets.rag.ingest.parse.html import PARSER_NAME, PARSER_VERSION, parse_html
from infra_rag_assets.rag.ingest.parse.markdown import parse_markdown

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def _trafilatura_problem() -> str | None:
    try:
        import trafilatura  # noqa: F401
    except ImportError as exc:  # e.g. lxml>=5.2 without the separate lxml_html_clean package
        return f"trafilatura cannot be imported: {exc}"
    return None


needs_trafilatura = pytest.mark.skipif(_trafilatura_problem() is not None, reason=_trafilatura_problem() or "")

# Site chrome in the shape of kubernetes.io (Docsy): top menu, sidebar, breadcrumbs, footer.
CHROME = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{title} | Kubernetes</title>
<meta property="og:title" content="{title}">
<meta name="description" content="{description}">
</head><body>
<header><nav class="td-navbar"><ul>
<li><a href="/docs/">Documentation</a></li><li><a href="/blog/">Kubernetes Blog</a></li>
<li><a href="/training/">Training</a></li><li><a href="/community/">Community</a></li>
</ul></nav></header>
<div class="td-main"><aside class="td-sidebar"><nav><ul>
<li><a href="/docs/concepts/">Concepts</a></li><li><a href="/docs/tasks/">Tasks</a></li>
<li><a href="/docs/tutorials/">Tutorials</a></li><li><a href="/docs/reference/">Reference</a></li>
</ul></nav></aside>
<main role="main" class="td-main">
<nav aria-label="breadcrumb"><ol><li><a href="/docs/">Docs</a></li>
<li><a href="/docs/concepts/">Concepts</a></li></ol></nav>
<div class="td-content">{body}</div>
</main></div>
<footer><p>&copy; 2024 The Kubernetes Authors | Documentation Distributed under CC BY 4.0</p>
<p>Copyright &copy; 2024 The Linux Foundation &reg;. All rights reserved.</p></footer>
</body></html>"""

# Text from kubernetes/concepts/services-networking/service.md, as the site renders it.
SERVICE_BODY = """<h1>Service</h1>
<p class="lead">Expose an application running in your cluster behind a single outward-facing
endpoint, even when the workload is split across multiple backends.</p>
<p>In Kubernetes, a Service is a method for exposing a network application that is running as
one or more Pods in your cluster.</p>
<h2 id="services-in-kubernetes">Services in Kubernetes</h2>
<p>The Service API, part of Kubernetes, is an abstraction to help you expose groups of Pods over
a network. Each Service object defines a logical set of endpoints (usually these endpoints are
Pods) along with a policy about how to make those pods accessible.</p>
<div class="highlight"><pre><code class="language-yaml"># a Service manifest
apiVersion: v1
kind: Service
metadata:
  name: my_service</code></pre></div>
<h3 id="cloud-native-service-discovery">Cloud-native service discovery</h3>
<p>If you're able to use Kubernetes APIs for service discovery in your application, you can
query the API server for matching EndpointSlices.</p>
<h2 id="defining-a-service">Defining a Service</h2>
<p>A Service is an object (the same way that a Pod or a ConfigMap is an object). You can create,
view or modify Service definitions using the Kubernetes API.</p>
<table><thead><tr><th>Protocol</th><th>Supported</th></tr></thead>
<tbody><tr><td>TCP</td><td>yes</td></tr><tr><td>SCTP</td><td>yes</td></tr></tbody></table>
"""

SERVICE_URL = "https://kubernetes.io/docs/concepts/services-networking/service/"


def page(body: str, title: str = "Service", description: str = "Expose an application.") -> bytes:
    return CHROME.format(title=title, description=description, body=body).encode()


@needs_trafilatura
def test_article_keeps_main_content_and_sections():
    doc = parse_html(page(SERVICE_BODY), url=SERVICE_URL)
    assert doc.status == STATUS_OK, doc.reason
    assert (doc.parser, doc.parser_version) == (PARSER_NAME, PARSER_VERSION)
    assert doc.title == "Service" and doc.page_kind == "concept"
    assert doc.text.startswith("# Service")
    assert "abstraction to help you expose groups of Pods" in doc.text
    assert "my_service" in doc.text  # code kept verbatim, not markdown-escaped
    for chrome in ("Kubernetes Blog", "Linux Foundation", "Training"):
        assert chrome not in doc.text
    assert check_spans(doc) == []
    by_heading = {s.heading: s for s in doc.sections}
    assert "a Service manifest" not in " ".join(by_heading)  # `#` line in code is no heading
    assert by_heading["Services in Kubernetes"].anchor == "services-in-kubernetes"
    assert by_heading["Services in Kubernetes"].level == 2
    assert by_heading["Cloud-native service discovery"].path == (
        "Service",
        "Services in Kubernetes",
        "Cloud-native service discovery",
    )
    defining = by_heading["Defining a Service"]
    assert doc.text[defining.start : defining.end].rstrip().endswith("| SCTP | yes |")


@needs_trafilatura
def test_title_falls_back_to_h1_then_path():
    html = (
        b"<html><body><article><h1>Ingress</h1><p>"
        + b"Ingress exposes HTTP routes. " * 5
        + b"</p></article></body></html>"
    )
    assert parse_html(html, path="site/ingress.html").title == "Ingress"
    bare = b"<html><body><p>" + b"Plain words without any heading at all. " * 5 + b"</p></body></html>"
    doc = parse_html(bare, path="concepts/network_policies.html")
    assert doc.title == "Network policies" and doc.text.startswith("# Network policies\n")


@needs_trafilatura
@pytest.mark.parametrize(
    "html",
    [
        b"<html><head><title>Docs</title></head><body><nav><ul><li><a href='/a'>Home</a></li>"
        b"<li><a href='/b'>Concepts</a></li><li><a href='/c'>Tasks</a></li></ul></nav></body></html>",
        b"<html><body><ul><li><a href='/a'>Home</a></li><li><a href='/b'>Blog</a></li></ul>"
        b"<footer>Copyright 2024 The Authors, all rights reserved</footer></body></html>",
        page("<nav><ul><li><a href='/docs/a'>Page A</a></li><li><a href='/docs/b'>Page B</a></li></ul></nav>"),
    ],
    ids=["nav-element", "bare-link-list", "site-chrome-around-a-menu"],
)
def test_navigation_only_page_is_no_content(html):
    doc = parse_html(html, url="https://kubernetes.io/docs/")
    assert doc.status == STATUS_NO_CONTENT
    assert "navigation" in doc.reason and doc.text == "" and doc.sections == []


@needs_trafilatura
@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"real corpus not found at {CORPUS}")
def test_real_page_rendered_to_html_keeps_its_headings():
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py renders the corpus page")
    rel = "kubernetes/concepts/services-networking/endpoint-slices.md"
    source = parse_markdown((CORPUS / rel).read_bytes(), path=rel)
    rendered = markdown_it.MarkdownIt("commonmark").enable("table").render(source.text)
    doc = parse_html(page(rendered, title=source.title, description=source.description), url=SERVICE_URL)
    assert doc.status == STATUS_OK and check_spans(doc) == []
    headings = [(s.level, s.heading) for s in doc.sections]
    expected = [(s.level, s.heading) for s in source.sections]
    assert [h for h in expected if h[0] == 2] == [h for h in headings if h[0] == 2]


def test_empty_page_is_no_content():
    for raw in (b"", b" \n\t "):
        assert parse_html(raw).status == STATUS_NO_CONTENT


def test_twenty_megabyte_page_is_refused_fast(tmp_path):
    big = tmp_path / "big.html"
    big.write_bytes(b"<html><body>" + b"<p>lorem ipsum dolor sit amet</p>\n" * 620_000 + b"</body></html>")
    assert big.stat().st_size > 20_000_000
    started = time.perf_counter()
    doc = parse_html(big.read_bytes(), path=str(big))
    assert time.perf_counter() - started < 1.0
    assert doc.status == STATUS_TOO_LARGE and "limit" in doc.reason


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00\x01\x02\x03binary",
        b"<html",
        b"</html>",
        b"<html><body></body></html>",
        b"<p>caf\xe9 \xff\xfe invalid utf-8 bytes in an otherwise readable sentence</p>",
        b"<html><body><h1></h1><h2>   </h2></body></html>",
        b"<!-- only a comment -->",
        b"<div>" * 5000,
        "<p>\u00e9\u2028 unicode text with several words here</p>".encode(),
    ],
)
def test_never_raises_on_odd_input(raw):
    doc = parse_html(raw, path="odd.html")
    assert doc.status in {STATUS_OK, STATUS_NO_CONTENT, STATUS_ERROR}
    assert check_spans(doc) == []
    assert doc.status != STATUS_OK or doc.text.strip()
