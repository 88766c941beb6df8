"""What every `infra-rag` subcommand module shares: the consoles, the one-line error type and
the decorator that turns expected failures into it, and the table/TSV printer. Kept apart from
cli.py so subcommand modules never import the group that registers them (no import cycle)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import click
from rich.console import Console
from rich.table import Table

from ..rag.ingest.sources import SourceConfigError

console = Console(stderr=True)
out = Console()


class UserError(click.ClickException):
    """A one-line error for bad input or a missing prerequisite."""

    exit_code = 2

    def show(self, file=None) -> None:  # noqa: ARG002 - click's signature
        console.print(f"[bold red]error:[/] {self.message}", highlight=False, soft_wrap=True)


def friendly_errors(fn):
    """Turn expected failures into one-line errors; keep tracebacks for real bugs only."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (SourceConfigError, ValueError, FileNotFoundError) as exc:
            raise UserError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None

    return wrapper


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


class StageChoice(click.Choice):
    """A choice of stages read from the asset graph when first needed (help, completion, parsing),
    so the CLI's stage lists can never drift from the graph, and ``infra-rag --help`` stays fast."""

    def __init__(self, stages: Callable[[], list[str]]):
        super().__init__([], case_sensitive=True)
        self._stages = stages

    @property  # type: ignore[override]
    def choices(self) -> Sequence[str]:
        return self._stages()

    @choices.setter
    def choices(self, _value) -> None:
        pass

    def convert(self, value, param, ctx):  # noqa: ARG002 - click's signature
        """A stage outside the graph is the CLI's one-line error (exit 2), listing the stages."""
        if value not in self.choices:
            raise UserError(f"unknown stage {value!r}; choose one of {', '.join(self.choices)}")
        return value


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
