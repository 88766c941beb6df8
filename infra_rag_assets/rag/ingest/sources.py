"""sources.yaml model and readers: list the pages of a source and read their bytes.

A source is always read from its local mirror folder. ``upstream_sync`` brings a mirror to
the upstream commit, branch or checksummed URLs named here and leaves a sync record
(``SYNC_RECORD``) in it; the record's commit is what lineage names as the page's upstream.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import yaml

from ... import settings
from .safe_paths import Entry, hash_entry, walk_mirror

KINDS = {"markdown_tree": (".md", ".markdown"), "html_pages": (".html", ".htm"), "pdf_files": (".pdf",)}
PROJECTS = {"kubernetes", "prometheus", "argocd", "cncf"}
REQUIRED_KEYS = ("name", "project", "kind", "license", "url_template")
SOURCE_KEYS = (*REQUIRED_KEYS, "mirror", "upstream")
UPSTREAM_KEYS = ("git", "commit", "branch", "subpath", "files", "urls")
TOP_KEYS = ("sources",)
PLACEHOLDERS = ("page_path", "upstream_path")
MAX_PAGE_BYTES = 50_000_000  # read cap: a larger file is recorded as too_large, never loaded
SYNC_RECORD = ".infra_rag_sync.json"  # in a synced mirror: the upstream commit / URLs it holds


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
    synced: dict = field(default_factory=dict, hash=False, compare=False)  # the mirror's sync record

    def url_for(self, rel_path: str) -> str:
        upstream_path = (self.upstream.get("files") or {}).get(rel_path, rel_path)
        # File names with spaces or ``&?#%`` must not end or split the URL: values are encoded.
        url = self.url_template.format(
            page_path=quote(page_path(rel_path), safe="/"), upstream_path=quote(upstream_path, safe="/")
        )
        return re.sub(r"(?<!:)/{2,}", "/", url)  # the top index page has an empty page_path

    def upstream_ref(self) -> str:
        """Where the mirror's bytes came from: the synced commit when a sync recorded one, else
        what sources.yaml pins (a mirror copied by hand is taken to be that commit)."""
        if "git" in self.upstream:
            commit = self.synced.get("commit") or self.upstream.get("commit") or self.upstream.get("branch", "HEAD")
            return f"{self.upstream['git']}@{commit}"
        urls = [u["url"] if isinstance(u, dict) else str(u) for u in self.upstream.get("urls", [])]
        return ",".join(urls[:1]) or "local"


@dataclass(frozen=True)
class PageRef:
    """One file of a source, before reading: where it is and how it is cited."""

    source: Source
    rel_path: str
    abs_path: Path
    entry: Entry | None = field(default=None, hash=False, compare=False)  # how to read it safely

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
    return settings.expand(value)


def read_yaml_list(path: Path | str, key: str, error: type[Exception] = ValueError, what: str = "file") -> list:
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
    """Parse and validate sources.yaml as a whole; relative mirrors resolve against its folder.

    Every problem of the file (unknown keys with a "did you mean", missing fields, bad
    kinds, unknown URL placeholders, duplicate names) is collected into one one-line error,
    so a typo is reported before anything is registered or read.
    """
    path = Path(path)
    entries = read_yaml_list(path, "sources", SourceConfigError, what="sources file")
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    problems = unknown_keys(raw, TOP_KEYS, "top level")
    sources, names = [], set()
    for i, entry in enumerate(entries):
        try:
            source = _source_from_entry(entry, i, path.parent)
        except SourceConfigError as exc:
            problems.append(str(exc))
            continue
        if source.name in names:
            problems.append(f"duplicate source name {source.name!r}")
        names.add(source.name)
        sources.append(source)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise SourceConfigError(f"{path}: " + "; ".join(problems[:5]) + more)
    return sources


def unknown_keys(mapping: object, known: tuple[str, ...], where: str) -> list[str]:
    """One message per key not in ``known``, with the closest known key when there is one."""
    if not isinstance(mapping, dict):
        return []
    out = []
    for key in mapping:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"
            out.append(f"{where}: unknown key {key!r}{hint}")
    return out


def check_url_template(template: str) -> str:
    """The problem with a URL template ('' when fine): only known named placeholders."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        return f"url_template is not a valid template ({exc})"
    for name in fields:
        if name not in PLACEHOLDERS:
            close = difflib.get_close_matches(name, PLACEHOLDERS, n=1, cutoff=0.6)
            hint = f"did you mean {{{close[0]}}}? " if close else ""
            return (
                f"url_template has unknown placeholder {{{name}}} ({hint}known: "
                + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
                + ")"
            )
    return ""


def _source_from_entry(entry: dict, index: int, base: Path) -> Source:
    where = f"source #{index + 1}"
    if not isinstance(entry, dict):
        raise SourceConfigError(f"{where}: expected a mapping")
    if entry.get("name"):
        where = f"{where} ({entry['name']})"
    problems = unknown_keys(entry, SOURCE_KEYS, where)
    upstream = entry.get("upstream") or {}
    if not isinstance(upstream, dict):
        problems.append(f"{where}: upstream must be a mapping")
        upstream = {}
    problems += unknown_keys(upstream, UPSTREAM_KEYS, f"{where} upstream")
    missing = [k for k in REQUIRED_KEYS if not entry.get(k)]
    if missing:
        problems.append(f"{where}: missing {', '.join(missing)}")
    if entry.get("kind") and entry["kind"] not in KINDS:
        problems.append(f"{where}: kind must be one of {sorted(KINDS)}")
    if entry.get("project") and entry["project"] not in PROJECTS:
        problems.append(f"{where}: project must be one of {sorted(PROJECTS)}")
    if upstream.get("commit") and upstream.get("branch"):
        problems.append(f"{where}: upstream names both commit and branch (pin one)")
    if entry.get("url_template") and (problem := check_url_template(str(entry["url_template"]))):
        problems.append(f"{where}: {problem}")
    if problems:
        raise SourceConfigError("; ".join(problems))
    mirror = entry.get("mirror")
    mirror_path = None
    if mirror:
        mirror_path = Path(expand_env(str(mirror)))
        mirror_path = mirror_location(mirror_path if mirror_path.is_absolute() else base / mirror_path)
    return Source(
        name=str(entry["name"]),
        project=entry["project"],
        kind=entry["kind"],
        license=str(entry["license"]),
        url_template=str(entry["url_template"]),
        mirror=mirror_path,
        upstream=dict(upstream),
        synced=read_sync_record(mirror_path),
    )


def mirror_location(path: Path) -> Path:
    """An absolute mirror path whose last part is never resolved.

    Why: a synced mirror is a symlink that every sync replaces; resolving it would hand the
    next sync the tree it points at, and that sync would then nest its link inside the old
    tree (a chain that breaks reads after 40 syncs). Only the folder holding it is resolved.
    """
    path = Path(os.path.abspath(path))
    return path.parent.resolve() / path.name


def read_sync_record(mirror: Path | None) -> dict:
    """The sync record of a mirror ({} for a mirror that was never synced or an unreadable one)."""
    try:
        record = json.loads((mirror / SYNC_RECORD).read_text(encoding="utf-8")) if mirror else {}
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def iter_pages(source: Source, root: Path | None = None) -> Iterator[PageRef]:
    """Every entry of the source's kind under its mirror, sorted; see ``safe_paths``.

    Symlinks out of the mirror, loops and non-regular files come back as entries with a
    status (one each) and are never read. A mirror with no entry at all is a config error.
    """
    root = root or source.mirror
    if root is None:
        raise SourceConfigError(f"source {source.name!r}: no 'mirror:' folder configured")
    if not root.is_dir():
        raise SourceConfigError(f"source {source.name!r}: mirror folder not found: {root}")
    entries = list(walk_mirror(root, KINDS[source.kind]))
    if not any(e.status == "ok" for e in entries):  # /etc: no page, just a folder symlink
        refused = f" ({len(entries)} entries refused or skipped)" if entries else ""
        raise SourceConfigError(
            f"source {source.name!r}: mirror {root} has no readable "
            f"{'/'.join(KINDS[source.kind])} files (zero pages){refused}"
        )
    for entry in entries:
        yield PageRef(source, entry.rel_path, root / entry.rel_path, entry)


def check_sources(sources: list[Source]) -> None:
    """Fail with one line naming the source when a mirror is missing or yields zero pages."""
    for source in sources:
        next(iter_pages(source))


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def mirror_fingerprint(source: Source) -> str:
    """Hash of (path, bytes hash) over the mirror: changes exactly when a page changes.

    Bytes are hashed in fixed-size blocks; a file over the read cap contributes its size and
    an unreadable entry its reason (neither is read), so memory stays flat for any file.
    """
    digest = hashlib.sha256(source.name.encode())
    for page in iter_pages(source):
        entry = page.entry
        assert entry is not None  # iter_pages gives every page its entry
        try:
            token = hash_entry(entry, MAX_PAGE_BYTES)
        except OSError as exc:
            token = f"{entry.status}:{entry.reason or exc}"
        digest.update(page.rel_path.encode() + b"\0" + token.encode())
    return digest.hexdigest()
