"""sources.yaml model and readers: list the pages of a source and read their bytes.

Offline, a source is read from its local mirror folder. With no mirror and network access,
``fetch_upstream`` makes one (shallow git checkout of the pinned commit, or plain HTTP for a
URL list) under the data home, so the rest of the pipeline always reads a folder.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import yaml

KINDS = {"markdown_tree": (".md", ".markdown"), "html_pages": (".html", ".htm"), "pdf_files": (".pdf",)}
PROJECTS = {"kubernetes", "prometheus", "argocd", "cncf"}
_ENV_PATTERN = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


class SourceConfigError(ValueError):
    """sources.yaml is unreadable or names something invalid (message is one line)."""


@dataclass(frozen=True)
class Source:
    name: str
    project: str
    kind: str
    license: str
    url_template: str
    mirror: Path | None
    upstream: dict = field(default_factory=dict, hash=False, compare=False)

    def url_for(self, rel_path: str) -> str:
        upstream_path = (self.upstream.get("files") or {}).get(rel_path, rel_path)
        url = self.url_template.format(page_path=page_path(rel_path), upstream_path=upstream_path)
        return re.sub(r"(?<!:)/{2,}", "/", url)  # the top index page has an empty page_path

    def upstream_ref(self) -> str:
        if "git" in self.upstream:
            return f"{self.upstream['git']}@{self.upstream.get('commit', 'HEAD')}"
        return ",".join(self.upstream.get("urls", [])[:1]) or "local"


@dataclass(frozen=True)
class PageRef:
    """One file of a source, before reading: where it is and how it is cited."""

    source: Source
    rel_path: str
    abs_path: Path

    @property
    def page_id(self) -> str:
        return page_id_for(self.rel_path)

    @property
    def doc_id(self) -> str:
        return f"{self.source.name}:{self.page_id}"

    @property
    def url(self) -> str:
        return self.source.url_for(self.rel_path)


def page_path(rel_path: str) -> str:
    """Path without extension, ``_index``/``index`` collapsed to the folder (Hugo/MkDocs URLs)."""
    stem = re.sub(r"\.[^./]+$", "", rel_path)
    stem = re.sub(r"(^|/)_?index$", "", stem)
    return stem


def page_id_for(rel_path: str) -> str:
    """Page id as ../shared/corpus/SOURCES.md defines it: path sans .md, '/' -> '_', top index = root."""
    if rel_path.lower().endswith(".pdf"):
        return re.sub(r"\.pdf$", "", rel_path, flags=re.I).replace("/", "_")
    return page_path(rel_path).replace("/", "_") or "root"


def expand_env(value: str) -> str:
    """``${VAR:-default}`` from the environment (sources.yaml and benchmark specs share it)."""
    return _ENV_PATTERN.sub(lambda m: os.environ.get(m.group(1)) or (m.group(2) or ""), value)


def read_yaml_list(path: Path | str, key: str, error: type[Exception] = ValueError,
                   what: str = "file") -> list:
    """The non-empty list under ``key`` of a YAML file; every problem is one ``error`` line."""
    path = Path(path)
    if not path.is_file():
        raise (FileNotFoundError if error is ValueError else error)(f"{what} not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    entries = raw.get(key) if isinstance(raw, dict) else None
    if not isinstance(entries, list) or not entries:
        raise error(f"{path}: expected a non-empty '{key}:' list")
    return entries


def load_sources(path: Path | str) -> list[Source]:
    """Parse and validate sources.yaml; relative mirrors resolve against the file's folder."""
    path = Path(path)
    entries = read_yaml_list(path, "sources", SourceConfigError, what="sources file")
    sources, names = [], set()
    for i, entry in enumerate(entries):
        source = _source_from_entry(entry, i, path.parent)
        if source.name in names:
            raise SourceConfigError(f"{path}: duplicate source name {source.name!r}")
        names.add(source.name)
        sources.append(source)
    return sources


def _source_from_entry(entry: dict, index: int, base: Path) -> Source:
    where = f"source #{index + 1}"
    if not isinstance(entry, dict):
        raise SourceConfigError(f"{where}: expected a mapping")
    missing = [k for k in ("name", "project", "kind", "license", "url_template") if not entry.get(k)]
    if missing:
        raise SourceConfigError(f"{where}: missing {', '.join(missing)}")
    if entry["kind"] not in KINDS:
        raise SourceConfigError(f"{where} ({entry['name']}): kind must be one of {sorted(KINDS)}")
    if entry["project"] not in PROJECTS:
        raise SourceConfigError(f"{where} ({entry['name']}): project must be one of {sorted(PROJECTS)}")
    mirror = entry.get("mirror")
    mirror_path = None
    if mirror:
        mirror_path = Path(expand_env(str(mirror)))
        mirror_path = (mirror_path if mirror_path.is_absolute() else base / mirror_path).resolve()
    return Source(
        name=str(entry["name"]), project=entry["project"], kind=entry["kind"],
        license=str(entry["license"]), url_template=str(entry["url_template"]),
        mirror=mirror_path, upstream=dict(entry.get("upstream") or {}),
    )


def iter_pages(source: Source, root: Path | None = None) -> Iterator[PageRef]:
    """Every file of the source's kind under its mirror, in a stable (sorted) order."""
    root = root or source.mirror
    if root is None or not root.is_dir():
        raise SourceConfigError(f"source {source.name!r}: mirror folder not found: {root}")
    suffixes = KINDS[source.kind]
    for abs_path in sorted(p for p in root.rglob("*") if p.is_file()):
        if abs_path.suffix.lower() in suffixes:
            yield PageRef(source, abs_path.relative_to(root).as_posix(), abs_path)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def mirror_fingerprint(source: Source) -> str:
    """Hash of (path, bytes hash) over the mirror: changes exactly when a page changes."""
    digest = hashlib.sha256(source.name.encode())
    for page in iter_pages(source):
        digest.update(page.rel_path.encode() + b"\0" + sha256_bytes(page.abs_path.read_bytes()).encode())
    return digest.hexdigest()


def fetch_upstream(source: Source, cache_dir: Path, timeout: float = 120.0) -> Path:
    """Materialize a mirror from upstream when none exists locally (needs network).

    git: shallow fetch of the pinned commit, sparse to the subpath. urls: plain HTTP GETs.
    Not exercised by the test suite (the build machines have no network besides registries).
    """
    target = cache_dir / f"{source.name}-{(source.upstream.get('commit') or 'http')[:12]}"
    if target.is_dir():
        return _upstream_root(source, target)
    target.mkdir(parents=True)
    if "git" in source.upstream:
        commit = source.upstream.get("commit") or "HEAD"
        for cmd in (["git", "init", "-q"], ["git", "remote", "add", "origin", source.upstream["git"]],
                    ["git", "fetch", "-q", "--depth", "1", "origin", commit],
                    ["git", "checkout", "-q", "FETCH_HEAD"]):
            subprocess.run(cmd, cwd=target, check=True, timeout=timeout, capture_output=True)
    else:
        for url in source.upstream.get("urls", []):
            name = re.sub(r"[^\w.-]+", "_", url.split("://", 1)[-1]).strip("_")
            with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - configured URL
                (target / (name if Path(name).suffix else name + ".html")).write_bytes(resp.read())
    return _upstream_root(source, target)


def _upstream_root(source: Source, checkout: Path) -> Path:
    sub = source.upstream.get("subpath")
    return checkout / sub if sub else checkout
