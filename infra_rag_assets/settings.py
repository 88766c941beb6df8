"""Every ``INFRA_RAG_*`` environment variable is read here and nowhere else.

Each function reads the environment when called (so a test's ``monkeypatch.setenv`` or a run
worker's environment applies), returns a typed value, and names its default. Processes the CLI
starts (uvicorn workers, ``dagster dev``, ``dagster job launch``) get their settings through
``child_environment``, an environment passed to the child, never by writing ``os.environ``.
Framework-free: the library, the Dagster definitions, the CLI and the service all import it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from . import package_data

PREFIX = "INFRA_RAG_"

# name -> what it sets (docs/operations.md lists every one; test_settings.py keeps the two in step)
VARIABLES = {
    "HOME": "data home: warehouse, blobs, indexes, caches (default ./.infra_rag)",
    "LANCEDB_URI": "LanceDB URI, e.g. s3://bucket/path (default <home>/lancedb)",
    "SOURCES": "sources.yaml to build from (default the packaged infra_rag_assets/data/sources.yaml)",
    "CORPUS": "mirror folder that sources.yaml's ${INFRA_RAG_CORPUS} names (default ../shared/corpus from the cwd)",
    "BENCH": "folder holding k8s-docs-rag-bench/ (default ../shared/bench from the cwd)",
    "JUDGE_DATA": "folder of the support judge's public labelled answers (default ../shared/judge-data; none: without)",
    "ADAPT": "0/false/no/off: build new versions with the base model as is (the quick build)",
    "OCR": "0/false/no/off: do not OCR PDF pages without a text layer (default on when Tesseract is installed)",
    "JUDGE_LABELS": "0/false/no/off: skip scoring the hand-labelled answers in support_judge (tests; default on)",
    "JUDGE_PAIRS": "pairs the support judge trains on (default the recipe's; tests use few)",
    "READER_EXAMPLES": "examples the answer reader trains on (default the recipe's; tests use few)",
    "DEVICE": "model stages' hardware: auto (CUDA when present, else CPU), cpu, cuda, cuda:N or mps; "
    "the service's query embedding stays on the CPU unless set",
    "STEP_EXECUTOR": "where a build run's steps execute: in_process (default, one after another in the "
    "run's process), multiprocess, docker (dagster-docker) or k8s (dagster-k8s); the run config's "
    "`execution` block configures the last two",
    "MODEL": "embedding model id or local path for new versions (default the packaged MiniLM)",
    "DAGSTER_URL": "base URL of the Dagster UI that run links point at (default http://127.0.0.1:3000)",
    "GATES": "gates.yaml the eval run judges (default the packaged data/gates.yaml)",
    "CANARY": "canary.yaml of the hourly canary (default the packaged data/canary.yaml)",
    "CLAUDE_MODEL": "Claude model id of the generative answerer (default in rag/answer/generate.py)",
    "JUDGE_BACKEND": "who judges answers: trained (the version's support judge, default) or claude (needs a key)",
    "JUDGE_MODEL": "Claude model id of the claude judge backend (default: INFRA_RAG_CLAUDE_MODEL's)",
    "MEMORY_SCAN_MAX_ROWS": "rows a vector searcher may scan in process (0 = LanceDB always)",
    "MAX_INFLIGHT": "service: queries per worker at once before 503 (set by `infra-rag serve`)",
    "RELEASE_POLL_S": "service: seconds between checks of the release pointer (set by `infra-rag serve`)",
    "API_KEY_FILE": "service: file of API keys, one per line; requests then need `Authorization: Bearer <key>`",
    "API_KEY": "service: one API key (a secret: set it from a secret store); joins the file's keys",
}

METRICS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
_TEMPLATE = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def _read(name: str) -> str:
    if name not in VARIABLES:
        raise KeyError(f"{PREFIX}{name} is not a known setting")
    return os.environ.get(PREFIX + name, "").strip()


def is_set(name: str) -> bool:
    """Whether ``INFRA_RAG_<name>`` is set to a non-blank value."""
    return bool(_read(name))


def home() -> str:
    return _read("HOME") or str(Path.cwd() / ".infra_rag")


def lancedb_uri() -> str:
    return _read("LANCEDB_URI")


def sources_file() -> str:
    return _read("SOURCES") or str(package_data.default_sources_file())


def corpus_dir() -> Path:
    """The mirrors' folder; unset, ``../shared/corpus`` from the current directory (beside a
    checkout when run from its root, as the data home defaults to ``./.infra_rag``)."""
    return Path(_read("CORPUS") or Path.cwd().parent / "shared" / "corpus")


def bench_dir() -> Path:
    """The folder holding k8s-docs-rag-bench/; unset, ``../shared/bench`` from the current directory."""
    return Path(_read("BENCH") or Path.cwd().parent / "shared" / "bench")


def judge_data_dir() -> Path | None:
    """The judge's public training data (RAGTruth, AttributionBench, HaluEval rows); unset,
    ``../shared/judge-data`` from the current directory; ``none``: train without it."""
    value = _read("JUDGE_DATA")
    if value.lower() in ("none", "0", "off"):
        return None
    return Path(value or Path.cwd().parent / "shared" / "judge-data")


def adapt() -> bool:
    return _read("ADAPT").lower() not in ("0", "false", "no", "off")


def judge_labels() -> bool:
    return _read("JUDGE_LABELS").lower() not in ("0", "false", "no", "off")


def ocr() -> bool:
    return _read("OCR").lower() not in ("0", "false", "no", "off")


def tessdata_prefix() -> str:
    """Tesseract's own TESSDATA_PREFIX (its language files), '' when unset."""
    return os.environ.get("TESSDATA_PREFIX", "").strip()


def judge_pairs(default: int) -> int:
    """How many pairs the support judge trains on (INFRA_RAG_JUDGE_PAIRS; tests use few)."""
    value = _read("JUDGE_PAIRS")
    return int(value) if value.strip().isdigit() else default


def reader_examples(default: int) -> int:
    """How many examples the answer reader trains on (INFRA_RAG_READER_EXAMPLES; tests use few)."""
    value = _read("READER_EXAMPLES")
    return int(value) if value.strip().isdigit() else default


def model() -> str:
    """The configured embedding model, '' for the packaged default."""
    return _read("MODEL")


def device() -> str:
    """The raw ``INFRA_RAG_DEVICE`` ("auto" when unset); ``rag.devices.configured`` resolves it."""
    return _read("DEVICE") or "auto"


def step_executor() -> str:
    """The raw ``INFRA_RAG_STEP_EXECUTOR`` ("in_process" when unset); defs/executors.py resolves it."""
    return _read("STEP_EXECUTOR") or "in_process"


def dagster_url() -> str:
    return (_read("DAGSTER_URL") or "http://127.0.0.1:3000").rstrip("/")


def gates_file() -> Path:
    return Path(_read("GATES") or package_data.default_gates_file())


def canary_file() -> Path:
    return Path(_read("CANARY") or package_data.default_canary_file())


def claude_model() -> str:
    """The configured Claude model id, '' for the answerer's default."""
    return _read("CLAUDE_MODEL")


JUDGE_BACKENDS = ("trained", "claude")


def judge_backend(given: str | None = None) -> str:
    """Who judges answers: ``given`` (a CLI option, an eval plan), else INFRA_RAG_JUDGE_BACKEND,
    else ``trained``; an unknown name is a one-line error naming the setting."""
    value = (given or _read("JUDGE_BACKEND") or "trained").strip().lower()
    if value not in JUDGE_BACKENDS:
        raise ValueError(f"{PREFIX}JUDGE_BACKEND / --backend must be one of {', '.join(JUDGE_BACKENDS)}, got {value!r}")
    return value


def judge_model() -> str:
    """The Claude judge's model id, '' for the answerer's model (INFRA_RAG_CLAUDE_MODEL or its default)."""
    return _read("JUDGE_MODEL") or claude_model()


def memory_scan_max_rows(default: int) -> int:
    raw = _read("MEMORY_SCAN_MAX_ROWS")
    if not raw:
        return default
    if not raw.isdigit():
        raise ValueError(
            f"{PREFIX}MEMORY_SCAN_MAX_ROWS must be a whole number of rows (0 turns the in-process "
            f"scan off), got {raw!r}"
        )
    return int(raw)


def max_inflight(default: int) -> int:
    return int(_read("MAX_INFLIGHT") or default)


def release_poll_s(default: float) -> float:
    return float(_read("RELEASE_POLL_S") or default)


def api_key_file() -> str:
    """Path of the service's API key file, '' when unset (set by `infra-rag serve --api-key-file`)."""
    return _read("API_KEY_FILE")


def api_key() -> str:
    """The service's API key from the environment (a secret), '' when unset."""
    return _read("API_KEY")


def metrics_dir() -> str:
    """prometheus_client's own PROMETHEUS_MULTIPROC_DIR (its multiprocess mode), '' when unset;
    `infra-rag serve` sets a fresh one per start."""
    return os.environ.get(METRICS_DIR_VARIABLE, "").strip()


def dagster_home() -> str:
    """Dagster's own DAGSTER_HOME, '' when unset (the CLI then uses <data home>/dagster)."""
    return os.environ.get("DAGSTER_HOME", "").strip()


def expand(value: str) -> str:
    """``${VAR:-default}`` from the environment: the templating of sources.yaml and benchmark specs.

    ``${INFRA_RAG_CORPUS}`` and ``${INFRA_RAG_BENCH}`` without a default of their own expand to
    the settings' defaults, so the packaged files name no folder of a checkout.
    """

    def value_of(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        if os.environ.get(name) or default is not None:
            return os.environ.get(name) or default
        return str(_FOLDER_DEFAULTS[name]()) if name in _FOLDER_DEFAULTS else ""

    return _TEMPLATE.sub(value_of, value)


_FOLDER_DEFAULTS = {PREFIX + "CORPUS": corpus_dir, PREFIX + "BENCH": bench_dir}


# Settings that name files or folders: relative ones (and the cwd-relative defaults) are made
# absolute once, in the CLI's process, so a child started elsewhere (dagster dev's code server,
# its daemon's sensors, a run worker) finds what the user meant, whatever its working directory.
PATH_SETTINGS = ("HOME", "SOURCES", "CORPUS", "BENCH", "GATES", "CANARY", "API_KEY_FILE")


def absolute_paths() -> dict[str, str]:
    """``INFRA_RAG_<NAME>`` for every path setting, as this process resolves it now, absolute."""
    values = {
        "HOME": home(), "SOURCES": sources_file(), "CORPUS": str(corpus_dir()), "BENCH": str(bench_dir()),
        "GATES": str(gates_file()), "CANARY": str(canary_file()), "API_KEY_FILE": api_key_file(),
    }  # fmt: skip
    return {PREFIX + name: os.path.abspath(os.path.expanduser(value)) for name, value in values.items() if value}


def missing_folders() -> list[str]:
    """One line per folder setting that names no folder (the build would fail on it later)."""
    lines = []
    for name, folder in (("CORPUS", corpus_dir()), ("BENCH", bench_dir())):
        if not folder.is_dir():
            how = "set" if is_set(name) else f"unset: the default ../shared/{name.lower()} from {Path.cwd()}"
            lines.append(f"{PREFIX}{name} ({how}) names no folder: {folder.absolute()}")
    return lines


def child_environment(**settings: str | Path | None) -> dict[str, str]:
    """This process's environment plus ``INFRA_RAG_<NAME>`` settings, for a process the CLI starts.

    Every path setting is absolute there (``absolute_paths``), so the child's own working
    directory never changes what it reads.

    ``dagster_home`` sets DAGSTER_HOME (Dagster's own variable), ``metrics_dir`` prometheus_client's
    PROMETHEUS_MULTIPROC_DIR; a value of None leaves a name as it is.
    """
    env = {**os.environ, **absolute_paths()}
    foreign = {"dagster_home": "DAGSTER_HOME", "metrics_dir": METRICS_DIR_VARIABLE}
    for name, value in settings.items():
        if value is None:
            continue
        if name in foreign:
            env[foreign[name]] = str(value)
            continue
        key = name.upper()
        if key not in VARIABLES:
            raise KeyError(f"{PREFIX}{key} is not a known setting")
        env[PREFIX + key] = str(value)
    return env
