"""Markdown parser and section builder, on snippets copied from the real corpus and on the
whole corpus itself (no Dagster involved)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from infra_rag_assets.rag.ingest.models import (
    STATUS_ERROR,
    STATUS_NO_CONTENT,
    STATUS_OK,
    STATUS_TOO_LARGE,
    check_spans,
)
from infra_rag_assets.rag.ingest.parse.markdown import PARSER_NAME, PARSER_VERSION, page_kind, parse_markdown
from infra_rag_assets.rag.ingest.parse.sections import build_sections, slugify

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"real corpus not found at {CORPUS}")

# Copied from kubernetes/concepts/services-networking/endpoint-slices.md (shortened).
ENDPOINT_SLICES = """---
reviewers:
- freehan
title: EndpointSlices
content_type: concept
weight: 60
description: >-
  The EndpointSlice API is the mechanism that Kubernetes uses to let your Service
  scale to handle large numbers of backends.
---


<!-- overview -->

{{< feature-state for_k8s_version="v1.21" state="stable" >}}

Kubernetes' _EndpointSlice_ API provides a way to track network endpoints
within a Kubernetes cluster. EndpointSlices offer a more scalable and extensible
alternative to [Endpoints](/docs/concepts/services-networking/service/#endpoints).

<!-- body -->

## EndpointSlice API {#endpointslice-resource}

The control plane automatically creates EndpointSlices
for any Kubernetes Service that has a {{< glossary_tooltip text="selector"
term_id="selector" >}} specified.

```yaml
# an EndpointSlice manifest
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
```

### Address types

EndpointSlices support three address types.

## {{% heading "whatsnext" %}}

* Read [Connecting Applications with Services](/docs/tutorials/services/connect-applications-service/)
"""


def parse(text: str, path: str = "kubernetes/concepts/x.md"):
    doc = parse_markdown(text.encode(), path=path)
    assert check_spans(doc) == []
    return doc


@pytest.mark.unit
def test_front_matter_gives_title_description_and_kind():
    doc = parse(ENDPOINT_SLICES)
    assert doc.status == STATUS_OK and doc.reason == ""
    assert (doc.parser, doc.parser_version) == (PARSER_NAME, PARSER_VERSION)
    assert doc.title == "EndpointSlices"
    assert doc.description.startswith("The EndpointSlice API is the mechanism")
    assert doc.page_kind == "concept"
    assert doc.text.startswith("# EndpointSlices\n\nThe EndpointSlice API is the mechanism")
    assert "reviewers" not in doc.text and "<!--" not in doc.text


@pytest.mark.unit
def test_shortcodes_links_and_anchors_are_rendered_as_reader_text():
    doc = parse(ENDPOINT_SLICES)
    assert "FEATURE STATE: Kubernetes v1.21 [stable]" in doc.text
    assert "has a selector specified" in doc.text  # multi-line glossary_tooltip -> its text
    assert "alternative to Endpoints." in doc.text  # link -> text
    assert "{{" not in doc.text and "](/docs" not in doc.text and "{#" not in doc.text
    by_heading = {s.heading: s for s in doc.sections}
    assert by_heading["EndpointSlice API"].anchor == "endpointslice-resource"
    assert by_heading["Address types"].anchor == "address-types"
    assert by_heading["What's next"].path == ("EndpointSlices", "What's next")


@pytest.mark.unit
def test_code_fence_comments_are_not_headings():
    doc = parse(ENDPOINT_SLICES)
    assert "# an EndpointSlice manifest" in doc.text
    assert [s.heading for s in doc.sections] == ["EndpointSlices", "EndpointSlice API", "Address types", "What's next"]
    tilde = parse("# Title\n\n~~~shell\n# not a heading\n## nor this\n~~~\n\n## Real\n\ntext\n")
    assert [s.heading for s in tilde.sections] == ["Title", "Real"]


@pytest.mark.unit
def test_section_spans_nest_and_end_at_next_same_level_heading():
    doc = parse(ENDPOINT_SLICES)
    api, types, nxt = (
        next(s for s in doc.sections if s.heading == h) for h in ("EndpointSlice API", "Address types", "What's next")
    )
    assert doc.text[api.start :].startswith("## EndpointSlice API\n")
    assert api.end == nxt.start and types.end == nxt.start
    assert types.path == ("EndpointSlices", "EndpointSlice API", "Address types")
    assert doc.sections[0].start == 0 and doc.sections[0].end == len(doc.text)


@pytest.mark.unit
@pytest.mark.parametrize(
    "source, expected",
    [
        ("{{< note >}}\nUse a Secret.\n{{< /note >}}", "Note:\nUse a Secret."),
        ("{{<note>}}Inline note.{{</note>}}", "Note:Inline note."),
        ("{{< caution >}}\nBe careful.\n{{< /caution >}}", "Caution:\nBe careful."),
        (
            '{{< tabs name="k8s_install" >}}\n{{% tab name="Ubuntu" %}}\napt-get install\n{{% /tab %}}\n{{< /tabs >}}',
            "Ubuntu\napt-get install",
        ),
        (
            '{{< table caption="Configuration parameters" >}}\nParameter | Default\n{{< /table >}}',
            "Configuration parameters\nParameter | Default",
        ),
        ('a {{<glossary_tooltip text="Pods" term_id="pod">}} runs', "a Pods runs"),
        ('see [pretty]({{< ref "../common-parameters/common-parameters#pretty" >}}) here', "see pretty here"),
        ("{{< comment >}}\nhidden\n{{< /comment >}}\nshown", "shown"),
        ('v{{< skew currentVersion >}} and {{< include "task-tutorial-prereqs.md" >}}.', "v<version> and ."),
    ],
)
def test_shortcode_rendering(source, expected):
    doc = parse(f"---\ntitle: T\n---\n{source}\n")
    body = doc.text.split("\n\n", 1)[1].strip()
    assert body == expected


@pytest.mark.unit
def test_escaped_and_unclosed_shortcodes_leave_no_delimiters():
    doc = parse("Use `{{</* note */>}}` here.\n\nBroken {{< note\n\nrest %}} end\n")
    assert "{{<" not in doc.text and "{{%" not in doc.text
    assert "Use `[note]` here." in doc.text


@pytest.mark.unit
def test_index_page_with_only_a_description_is_ok():
    doc = parse("---\ntitle: Tutorials\ndescription: Learn by doing.\n---\n<!-- body -->\n")
    assert doc.status == STATUS_OK
    assert doc.text == "# Tutorials\n\nLearn by doing.\n"
    assert [s.heading for s in doc.sections] == ["Tutorials"]


@pytest.mark.unit
def test_title_only_page_is_no_content():
    doc = parse("---\ntitle: Command Line\nsort_rank: 9\n---\n", path="prometheus/server/command-line/index.md")
    assert doc.status == STATUS_NO_CONTENT and doc.reason
    assert doc.title == "Command Line"


@pytest.mark.unit
def test_malformed_front_matter_is_stripped_and_reported():
    # From argocd/proposals/headless-argocd.md: the indentation is invalid YAML.
    source = (
        '---\ntitle: Neat-enhancement-idea\nauthors:\n- "@alexmt"\n  sponsors:\n- TBD\n---\n'
        "# Neat Enhancement Idea\n\nSupport disabling multi-tenancy features.\n"
    )
    doc = parse(source, path="argocd/proposals/headless-argocd.md")
    assert doc.status == STATUS_OK
    assert "malformed front matter" in doc.reason
    assert "sponsors" not in doc.text and doc.text.startswith("# Neat Enhancement Idea")
    assert doc.title == "Neat-enhancement-idea"  # salvaged from the broken block
    assert doc.page_kind == "proposal"


@pytest.mark.unit
def test_no_front_matter_takes_first_h1_or_file_name():
    argo = parse(
        "# Orphaned Resources Monitoring\n\nAn orphaned resource is ...\n",
        path="argocd/user-guide/orphaned-resources.md",
    )
    assert argo.title == "Orphaned Resources Monitoring" and argo.text.startswith("# Orphaned")
    kubeadm = parse(
        "<!--\ngenerated\n-->\n\nPull images used by kubeadm\n\n### Synopsis\n\ntext\n",
        path="kubernetes/reference/setup-tools/kubeadm/generated/kubeadm_config_images_pull.md",
    )
    assert kubeadm.title == "Kubeadm config images pull"
    assert kubeadm.text.startswith("# Kubeadm config images pull\n\nPull images")
    assert kubeadm.page_kind == "reference"


@pytest.mark.unit
def test_raw_html_pre_block_is_code_not_headings():
    # Shape of kubernetes/reference/config-api/kubeadm-config.v1beta3.md (Chroma-highlighted YAML).
    doc = parse(
        '# Config\n\n<div class="highlight"><pre tabindex="0"><code class="language-yaml">'
        '<span style="color:#000">etcd</span>:\n<span style="color:#998"># one of local or external</span>\n'
        '  local: {}</code></pre></div>\n\n<label class="metric_detail">Type:</label> Counter\n'
    )
    assert [s.heading for s in doc.sections] == ["Config"]
    assert "```\netcd:\n# one of local or external\n  local: {}\n```" in doc.text
    assert "Type: Counter" in doc.text and "<label" not in doc.text


@pytest.mark.unit
def test_mkdocs_admonition_keeps_text_without_marker():
    doc = parse(
        '# Hydrator\n\n!!! note "Feature Parity"\n    The source hydrator supports the same options.\n\n## Next\n\nx\n'
    )
    assert "!!!" not in doc.text
    assert "Note: Feature Parity\nThe source hydrator supports the same options." in doc.text


@pytest.mark.unit
def test_links_images_html_and_blank_lines_are_cleaned():
    doc = parse(
        "# T\n\n![pencil icon](/images/pencil.png) and "
        "[a `kubectl` link](https://x.io/a_(b)).\n\n\n\n\n"
        "<table><tr><td>--config string</td></tr></table>\n\nUse `<table>` and &lt;pod-name&gt;.\n"
    )
    assert "pencil icon and a `kubectl` link." in doc.text
    assert "<td>" not in doc.text and "--config string" in doc.text
    assert "Use `<table>` and <pod-name>." in doc.text
    assert "\n\n\n\n" not in doc.text


@pytest.mark.unit
def test_empty_and_whitespace_files_are_no_content():
    for raw in (b"", b"  \n\t\n"):
        assert parse_markdown(raw).status == STATUS_NO_CONTENT


@pytest.mark.unit
def test_twenty_megabyte_file_is_refused_fast(tmp_path):
    big = tmp_path / "big.md"
    big.write_bytes(b"# Big\n\n" + b"lorem ipsum dolor sit amet\n" * 800_000)
    assert big.stat().st_size > 20_000_000
    started = time.perf_counter()
    doc = parse_markdown(big.read_bytes(), path=str(big))
    assert time.perf_counter() - started < 1.0
    assert doc.status == STATUS_TOO_LARGE and "limit" in doc.reason


@pytest.mark.unit
def test_invalid_utf8_falls_back_and_says_so():
    doc = parse_markdown(b"---\ntitle: Caf\xe9\n---\nSome \xff\xfe text.\n", path="x.md")
    assert doc.status == STATUS_OK and "latin-1" in doc.reason
    assert doc.title == "Caf\u00e9" and check_spans(doc) == []


@pytest.mark.unit
@pytest.mark.parametrize(
    "raw",
    [
        b"---\n",
        b"---\ntitle: [unclosed\n---\n",
        b"```\n# open fence never closed\n",
        b"\x00\x01binary",
        b"{{< note\n" * 1000,
        b"#\n##\n###### \n",
        "\u00e9\u2028\u0085 x".encode(),
        b"---\n- a list\n---\nbody\n",
    ],
)
def test_never_raises_on_odd_input(raw):
    doc = parse_markdown(raw, path="odd.md")
    assert doc.status in {STATUS_OK, STATUS_NO_CONTENT, STATUS_ERROR}
    assert check_spans(doc) == [] and "{{<" not in doc.text


@pytest.mark.unit
@pytest.mark.parametrize(
    "content_type, path, kind",
    [
        ("tool-reference", "", "reference"),
        ("api_reference", "", "reference"),
        ("task ", "", "task"),
        ("", "kubernetes/reference/glossary/pod.md", "glossary"),
        ("", "argocd/user-guide/commands/argocd_app.md", "reference"),
        ("", "argocd/operator-manual/upgrading/2.14-3.0.md", "upgrade"),
        ("custom", "kubernetes/tutorials/hello.md", "tutorial"),
        ("", "argocd/faq.md", "guide"),
    ],
)
def test_page_kind(content_type, path, kind):
    assert page_kind(content_type, path) == kind


@pytest.mark.unit
def test_slugify_and_duplicate_anchors():
    assert slugify("What's next") == "whats-next"
    assert slugify("Install kubectl on Linux (x86-64)") == "install-kubectl-on-linux-x86-64"
    assert slugify("`kube_proxy` flags") == "kube_proxy-flags"
    sections = build_sections("## Example\n\na\n\n## Example\n\nb\n", {})
    assert [s.anchor for s in sections] == ["example", "example-1"]


@pytest.mark.unit
@needs_corpus
def test_real_endpoint_slices_page():
    raw = (CORPUS / "kubernetes/concepts/services-networking/endpoint-slices.md").read_bytes()
    doc = parse_markdown(raw, path="kubernetes/concepts/services-networking/endpoint-slices.md")
    assert doc.status == STATUS_OK and doc.title == "EndpointSlices" and check_spans(doc) == []
    anchors = {s.heading: s.anchor for s in doc.sections}
    assert anchors["EndpointSlice API"] == "endpointslice-resource"
    assert all(doc.text[s.heading_start : s.heading_end] == s.heading for s in doc.sections)


@pytest.mark.slow
@needs_corpus
def test_every_corpus_page_parses_cleanly():
    statuses: Counter[tuple[str, str]] = Counter()
    for file in sorted(CORPUS.rglob("*.md")):
        rel = file.relative_to(CORPUS).as_posix()
        if rel == "SOURCES.md":
            continue
        doc = parse_markdown(file.read_bytes(), path=rel)
        assert "{{<" not in doc.text and "{{%" not in doc.text, rel
        assert check_spans(doc) == [], rel
        assert doc.status in {STATUS_OK, STATUS_NO_CONTENT}, (rel, doc.reason)
        if doc.status == STATUS_OK:
            assert doc.title and doc.text.startswith(("# ", "#")), rel
        statuses[(rel.split("/")[0], doc.status)] += 1
    assert statuses[("kubernetes", STATUS_OK)] >= 820, statuses
    assert statuses[("prometheus", STATUS_OK)] >= 85, statuses
    assert statuses[("argocd", STATUS_OK)] >= 440, statuses
