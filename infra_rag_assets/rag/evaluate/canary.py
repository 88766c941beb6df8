"""Canary questions: a few known questions re-asked of the index that serves.

eval_run scores a version once, before it is released. What serves can still go wrong
afterwards (a rollback to an old version, a model cache swapped under the engine, a data home
restored from backup), so a handful of questions with a known answer page are re-asked on
demand (``infra-rag canary``) and hourly (the ``release_canary`` asset check). Each canary
names the page (doc id) that must be among the first ``within`` hits, the same hit@5 notion
eval_run uses, and whether the engine should answer or abstain.

An abstention canary is only meaningful when the serving retrieval config has a dense-cosine
floor (the served version's calibrated one, when it has a calibration) or answerability: without
either the retriever never abstains, so such a canary is reported as *skipped*
with that reason rather than failed or silently passed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ... import settings
from ..ingest.sources import read_yaml_list
from ..operate.traces import error_row, trace_row
from ..search.retrieval import RetrievalSettings

OUTCOMES = ("answered", "abstained")
ORIGIN = "canary"


def default_canary_file() -> Path:
    return settings.canary_file()


@dataclass(frozen=True)
class Canary:
    id: str
    question: str
    expected_outcome: str  # "answered" | "abstained"
    expected_doc: str | None = None  # required for "answered"
    within: int = 5


@dataclass
class CanaryResult:
    id: str
    question: str
    status: str  # "pass" | "fail" | "skipped"
    detail: str
    expected_outcome: str
    expected_doc: str | None
    outcome: str = ""  # what the engine did: answered | abstained | error | not run
    rank: int | None = None  # 1-based position of expected_doc among the hits
    top_docs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_canaries(path: Path | str | None = None) -> list[Canary]:
    """Parse and validate a canary file; any problem is one ValueError line naming the file."""
    path = Path(path) if path else default_canary_file()
    items = read_yaml_list(path, "canaries", what="canary file")
    canaries, seen = [], set()
    for n, item in enumerate(items, 1):
        canaries.append(_parse(path, n, item))
        if canaries[-1].id in seen:
            raise ValueError(f"{path}: canary #{n} repeats id {canaries[-1].id!r}")
        seen.add(canaries[-1].id)
    return canaries


def _parse(path: Path, n: int, item: Any) -> Canary:
    where = f"{path}: canary #{n}"
    if not isinstance(item, dict):
        raise ValueError(f"{where} is not a mapping")
    unknown = set(item) - {"id", "question", "expected_outcome", "expected_doc", "within", "why"}
    if unknown:
        raise ValueError(f"{where} has unknown keys {sorted(unknown)}")
    if not str(item.get("id", "")).strip() or not str(item.get("question", "")).strip():
        raise ValueError(f"{where} needs an id and a question")
    outcome = item.get("expected_outcome", "answered")
    if outcome not in OUTCOMES:
        raise ValueError(f"{where}: expected_outcome must be one of {', '.join(OUTCOMES)}")
    if outcome == "answered" and not item.get("expected_doc"):
        raise ValueError(f"{where}: an 'answered' canary needs expected_doc")
    within = item.get("within", 5)
    if not isinstance(within, int) or within < 1:
        raise ValueError(f"{where}: within must be a positive integer")
    return Canary(
        id=str(item["id"]),
        question=str(item["question"]),
        expected_outcome=outcome,
        expected_doc=item.get("expected_doc"),
        within=within,
    )


def run_canaries(
    engine: Any, canaries: list[Canary], config: RetrievalSettings, k: int = 10
) -> tuple[list[CanaryResult], list[dict]]:
    """Ask each canary through ``engine.search``; returns results and trace rows (origin canary).

    A search that raises is a failed canary with an error trace, never an exception: the
    canary's job is to report what serves, including that it is broken.
    """
    results, traces = [], []
    can_abstain = (config.floor is not None and config.mode != "lexical") or config.answerability
    for canary in canaries:
        base: dict[str, Any] = dict(
            id=canary.id,
            question=canary.question,
            expected_outcome=canary.expected_outcome,
            expected_doc=canary.expected_doc,
        )
        if canary.expected_outcome == "abstained" and not can_abstain:
            results.append(
                CanaryResult(
                    **base,
                    status="skipped",
                    outcome="not run",
                    detail=f"skipped: no floor or answerability in {config.name}",
                )
            )
            continue
        try:
            result = engine.search(canary.question, config=config, k=max(k, canary.within))
        except Exception as exc:  # noqa: BLE001 - reported as a failed canary
            message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
            traces.append(
                error_row(
                    origin=ORIGIN,
                    version=engine.version,
                    config_name=config.name,
                    question=canary.question,
                    error=message,
                )
            )
            results.append(CanaryResult(**base, status="fail", outcome="error", detail=message))
            continue
        traces.append(trace_row(origin=ORIGIN, version=engine.version, config_name=config.name, result=result))
        results.append(judge(canary, result, **base))
    return results, traces


def judge(canary: Canary, result: Any, **base: Any) -> CanaryResult:
    """Pass/fail of one canary from its RetrievalResult."""
    docs = [h.doc_id for h in result.hits]
    outcome = "abstained" if result.abstained or not docs else "answered"
    rank = docs.index(canary.expected_doc) + 1 if canary.expected_doc in docs else None
    top = list(dict.fromkeys(docs))[:5]
    if outcome != canary.expected_outcome:
        why = (result.abstain_reason or "no hits") if outcome == "abstained" else f"top hit {docs[0]}"
        return CanaryResult(
            **base,
            status="fail",
            outcome=outcome,
            rank=rank,
            top_docs=top,
            detail=f"expected {canary.expected_outcome}, got {outcome} ({why})",
        )
    if canary.expected_outcome == "answered" and (rank is None or rank > canary.within):
        where = f"at rank {rank}" if rank else "not in the hits"
        return CanaryResult(
            **base,
            status="fail",
            outcome=outcome,
            rank=rank,
            top_docs=top,
            detail=f"{canary.expected_doc} {where}, needed top {canary.within}",
        )
    detail = f"rank {rank}" if rank else (result.abstain_reason or "abstained")
    return CanaryResult(**base, status="pass", outcome=outcome, rank=rank, top_docs=top, detail=detail)


def summary(results: list[CanaryResult]) -> str:
    """One line: counts by status and the ids of failures."""
    failed = [r.id for r in results if r.status == "fail"]
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "skipped")}
    line = f"{counts['pass']} passed, {counts['fail']} failed, {counts['skipped']} skipped"
    return line + (f" (failed: {', '.join(failed)})" if failed else "")


@dataclass
class CanaryReport:
    version: str
    released: bool  # False: no release, so the version that would serve (the newest build)
    config: str
    results: list[CanaryResult]

    @property
    def failed(self) -> list[CanaryResult]:
        return [r for r in self.results if r.status == "fail"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "released": self.released,
            "config": self.config,
            "ok": not self.failed,
            "summary": summary(self.results),
            "results": [r.to_dict() for r in self.results],
        }


def canary_suite(home: Any, version: str | None = None, path: Path | str | None = None) -> CanaryReport:
    """Run every canary against ``version`` (default: what serves) and append their traces.

    Shared by `infra-rag canary` and the hourly ``release_canary`` asset check, so a canary
    run by hand and one run by the daemon ask the same engine the same way.
    """
    from ..operate import releases
    from ..operate.traces import process_sink
    from ..search.engine import QueryEngine, named_config
    from ..search.retrieval_settings import DEFAULT_CONFIG

    canaries = load_canaries(path)  # a bad file fails before any model loads
    engine = QueryEngine.open(home, version)
    config = named_config(DEFAULT_CONFIG)
    results, traces = run_canaries(engine, canaries, config)
    sink = process_sink(home.traces_dir())
    for row in traces:
        sink.submit(row)
    sink.flush()
    released = releases.read_pointer(home.release_pointer()).get("current") == engine.version
    return CanaryReport(version=engine.version, released=released, config=config.name, results=results)
