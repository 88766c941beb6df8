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
    "ADAPT": "0/false/no/off: build new versions with the base model as is (the quick build)",
    "OCR": "0/false/no/off: do not OCR PDF pages without a text layer (default on when Tesseract is installed)",
    "JUDGE_PAIRS": "pairs the support judge trains on (default the recipe's; tests use few)",
    "MODEL": "embedding model id or local path for new versions (default the packaged MiniLM)",
    "DAGSTER_URL": "base URL of the Dagster UI that run links point at (default http://127.0.0.1:3000)",
    "GATES": "gates.yaml the eval run judges (default the packaged data/gates.yaml)",
    "CANARY": "canary.yaml of the hourly canary (default the packaged data/canary.yaml)",
    "CLAUDE_MODEL": "Claude model id of the generative answerer (default in rag/answer/generate.py)",
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


def adapt() -> bool:
    return _read("ADAPT").lower() not in ("0", "false", "no", "off")


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


def dagster_url() -> str:
    return (_read("DAGSTER_URL") or "http://127.0.0.1:3000").rstrip("/")


def gates_file() -> Path:
    return Path(_read("GATES") or package_data.default_gates_file())


def canary_file() -> Path:
    return Path(_read("CANARY") or package_data.default_canary_file())


def claude_model() -> str:
    """The configured Claude model id, '' for the answerer's default."""
    return _read("CLAUDE_MODEL")


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


def child_environment(**settings: str | Path | None) -> dict[str, str]:
    """This process's environment plus ``INFRA_RAG_<NAME>`` settings, for a process the CLI starts.

    ``dagster_home`` sets DAGSTER_HOME (Dagster's own variable), ``metrics_dir`` prometheus_client's
    PROMETHEUS_MULTIPROC_DIR; a value of None leaves a name as it is.
    """
    env = dict(os.environ)
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
