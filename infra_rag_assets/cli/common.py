"""What every `infra-rag` subcommand module shares: the consoles, the one-line error types
and the decorator that turns expected failures into them, the data-home guard, ``--json`` and
the table/TSV printer. Kept apart from main.py so subcommand modules never import the group
that registers them (no import cycle).

Exit codes: 0 done, 1 a missing prerequisite (no data home, index version, release, eval run,
judge or model) or a refused or failed operation, 2 a usage error (bad option, value or input
file).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Sequence

import click
from rich.console import Console
from rich.table import Table

from ..rag.ingest.sources import SourceConfigError

console = Console(stderr=True)
out = Console()


class UserError(click.ClickException):
    """A one-line usage error: bad input (exit 2)."""

    exit_code = 2

    def show(self, file=None) -> None:  # noqa: ARG002 - click's signature
        console.print(f"[bold red]error:[/] {self.message}", highlight=False, soft_wrap=True)


class CommandFailed(UserError):
    """A one-line error for what is missing (home, version, release, ...) or refused (exit 1)."""

    exit_code = 1


# module -> its "what the command needs is not there" errors (exit 1, not a usage error)
_PREREQUISITE_ERRORS = {
    "infra_rag_assets.rag.search.engine": ("VersionNotFound",),
    "infra_rag_assets.rag.index.embedding": ("ModelMismatch", "ModelUnavailable"),
}


def _is_missing_prerequisite(exc: Exception) -> bool:
    """Only a loaded module can have raised its error, so nothing is imported just to check."""
    for module, names in _PREREQUISITE_ERRORS.items():
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, tuple(getattr(loaded, name) for name in names)):
            return True
    return False


def friendly_errors(fn):
    """Turn expected failures into one-line errors; keep tracebacks for real bugs only."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if _is_missing_prerequisite(exc):
                raise CommandFailed(_first_line(exc)) from None
            if isinstance(exc, (SourceConfigError, ValueError, FileNotFoundError)):
                raise UserError(_first_line(exc)) from None
            raise

    return wrapper


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def needs_home(fn):
    """For commands that read a data home: a missing one (a mistyped ``--home``) is exit 1 with
    one line, and is never created. Only ``build`` and ``ui`` create a home."""

    @functools.wraps(fn)
    def wrapper(obj, *args, **kwargs):
        require_home(obj)
        return fn(obj, *args, **kwargs)

    return wrapper


def require_home(obj: dict) -> None:
    """:func:`needs_home` for a command that needs the home on one path only."""
    root = obj["store"].data_home().root
    if not root.is_dir():
        raise CommandFailed(
            f"no data home at {root}: nothing is built there (`infra-rag build` creates one; "
            "check --home or INFRA_RAG_HOME)"
        )


def json_option(help: str = "JSON output"):
    """``--json``: every command that prints data offers it (test_cli_conventions walks them)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def print_json(value) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


def index_version_option(dest: str = "version", required: bool = False, multiple: bool = False, help: str = ""):
    """``--index-version`` (an index version). The old spelling ``--version`` still works as a
    hidden alias for one release, so ``infra-rag --version`` can mean the program's version."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            legacy = kwargs.pop(f"legacy_{dest}")
            if multiple:
                kwargs[dest] = tuple(kwargs.get(dest) or ()) + tuple(legacy or ())
            elif kwargs.get(dest) is None:
                kwargs[dest] = legacy
            if required and not kwargs[dest]:
                raise click.UsageError("Missing option '--index-version'.")
            return fn(*args, **kwargs)

        wrapper = click.option("--version", f"legacy_{dest}", hidden=True, default=None, multiple=multiple)(wrapper)
        suffix = "" if not required else " [required]"
        return click.option("--index-version", dest, default=None, multiple=multiple, help=help + suffix)(wrapper)

    return decorate


class LazyChoice(click.Choice):
    """A choice read from its source (the asset graph, the config registry) when first needed
    (help, completion, parsing), so the CLI's lists can never drift from it, and
    ``infra-rag --help`` stays fast."""

    def __init__(self, choices: Callable[[], Sequence[str]], what: str):
        super().__init__([], case_sensitive=True)
        self._choices, self.what = choices, what

    @property  # type: ignore[override]
    def choices(self) -> Sequence[str]:
        return list(self._choices())

    @choices.setter
    def choices(self, _value) -> None:
        pass

    def convert(self, value, param, ctx):  # noqa: ARG002 - click's signature
        """A value outside the list is the CLI's one-line usage error (exit 2), listing the choices."""
        if value not in self.choices:
            raise UserError(f"unknown {self.what} {value!r}; choose one of {', '.join(self.choices)}")
        return value


def stage_choice(stages: Callable[[], list[str]]) -> LazyChoice:
    return LazyChoice(stages, "stage")


def config_choice() -> LazyChoice:
    """The named retrieval configs of the registry (rag/search/retrieval_settings.NAMED_CONFIGS)."""

    def names() -> list[str]:
        from ..rag.search.retrieval_settings import NAMED_CONFIGS

        return list(NAMED_CONFIGS)

    return LazyChoice(names, "retrieval config")


def mode_choice() -> LazyChoice:
    def modes() -> list[str]:
        from ..rag.search.engine import MODE_CONFIGS

        return list(MODE_CONFIGS)

    return LazyChoice(modes, "mode")


def project_choice() -> LazyChoice:
    """The projects a source may belong to (rag/ingest/sources.PROJECTS)."""
    from ..rag.ingest.sources import PROJECTS

    return LazyChoice(lambda: sorted(PROJECTS), "project")


def print_rows(columns: list[str], rows: list[list[str]]) -> None:
    """A table on a terminal; tab-separated lines (with a header) for scripts and pipes."""
    if not out.is_terminal:
        click.echo("\t".join(columns))
        for row in rows:
            click.echo("\t".join(row))
        return
    table = Table(*columns)
    for row in rows:
        table.add_row(*row)
    out.print(table)
