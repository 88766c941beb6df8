"""The wheel, installed into a fresh venv outside the checkout, builds and serves on its own.

The venv sees the packages of the environment the suite runs in (torch, dagster and the rest are
not reinstalled) and gets this checkout's wheel with ``--no-deps``. Not ``--system-site-packages``:
run from a virtualenv, that exposes the *base* interpreter's packages, not the suite's. A ``.pth``
file in the new venv adds the suite's own site folders instead (``suite_site_lines``), after the
venv's, so the wheel installed there is the one imported. Every command
runs from an empty temporary directory with PYTHONPATH unset, so gates, canary, benchmarks, the
dagster.yaml template and workspace.yaml can only come from the installed package's data.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import make_fixture_corpus, write_fixture_sources
from test_cli_health import FIXTURE_CANARIES

from infra_rag_assets import settings

pytestmark = pytest.mark.slow

CHECKOUT = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT_S = 1800  # through release: ~2.3 min alone on 2 quiet cores; the margin is for loaded CI
# The fixture corpus covers no k8s-bench question, so the shipped gates cannot pass on it.
FIXTURE_GATES = """gates:
  - {name: wheel-smoke-hit10, metric: hit@10, regime: serving, slice: own_labelled/overall,
     comparison: floor, threshold: 0.0, severity: critical}
"""


def suite_site_dirs() -> list[str]:
    """The site folders of the interpreter running the suite: its virtualenv's (and, when that venv
    was made with system site packages, the base ones after them), or the system interpreter's,
    and the user site when it is enabled: exactly where its packages come from."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def suite_site_lines(dirs: list[str]) -> str:
    """A ``.pth`` body adding ``dirs`` as site folders (``site.addsitedir``), so their own ``.pth``
    files run too, as they do for the suite's interpreter."""
    return "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)


def test_suite_site_lines_add_each_folder_as_a_site_dir(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "extra.pth").write_text(str(tmp_path / "from_pth") + "\n")
    (tmp_path / "from_pth").mkdir()
    body = suite_site_lines([str(tmp_path / "a")])
    probe = "import json, sys; print(json.dumps([p for p in sys.path if p.startswith(sys.argv[1])]))"
    (tmp_path / "probe.pth").write_text(body)
    code = f"import site; site.addsitedir({str(tmp_path)!r}); {probe}"
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [str(tmp_path), str(tmp_path / "a"), str(tmp_path / "from_pth")]
    assert sys.prefix == sys.base_prefix or any(d.startswith(sys.prefix) for d in suite_site_dirs())


def _run(*command: str | Path, env: dict, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """(venv bin folder, environment, empty working directory) with only the wheel installed.

    ``--ignore-installed``: pip would otherwise take the shared env's editable install of the
    same version as already satisfied and install nothing into the venv (never uninstalls it).
    """
    if not (settings.bench_dir() / "k8s-docs-rag-bench" / "qa_eval.jsonl").is_file():
        pytest.skip(f"k8s-docs-rag-bench not found in {settings.bench_dir()} (the eval run's benchmark)")
    base = tmp_path_factory.mktemp("wheel")
    wheels = base / "dist"
    built = _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, CHECKOUT,
        env=dict(os.environ), cwd=base,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = wheels.glob("infra_rag_assets-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("infra_rag_assets_tests")]
    assert {"infra_rag_assets/data/gates.yaml", "infra_rag_assets/data/benchmarks/answer_labels.jsonl"} <= set(names)
    venv = base / "venv"
    # No pip in the venv (ensurepip: 11 s): this interpreter's pip installs into it (--python).
    made = _run(sys.executable, "-m", "venv", "--without-pip", venv, env=dict(os.environ), cwd=base)
    assert made.returncode == 0, made.stderr[-2000:]
    [venv_site] = (venv / "lib").glob("python3*/site-packages")
    (venv_site / "zz_suite_env.pth").write_text(suite_site_lines(suite_site_dirs()))
    install = ["install", "-q", "--no-deps", "--no-index", "--ignore-installed", wheel]
    pip = _run(
        sys.executable, "-m", "pip", "--python", venv / "bin" / "python", *install, env=dict(os.environ), cwd=base
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    corpus = make_fixture_corpus(base / "corpus")
    (base / "gates.yaml").write_text(FIXTURE_GATES)
    (base / "canary.yaml").write_text(FIXTURE_CANARIES)
    env = {k: v for k, v in os.environ.items() if not k.startswith(settings.PREFIX) and k != "PYTHONPATH"}
    env.pop("DAGSTER_HOME", None)  # the CLI sets up <home>/dagster from the packaged template
    env.pop("ANTHROPIC_API_KEY", None)
    env.update(
        INFRA_RAG_HOME=str(base / "home"),
        INFRA_RAG_SOURCES=str(write_fixture_sources(base / "sources.yaml", corpus)),
        INFRA_RAG_BENCH=str(settings.bench_dir()),
        INFRA_RAG_GATES=str(base / "gates.yaml"),
        INFRA_RAG_ADAPT="0",
        # Quality is not under test here, so the model stages run their smallest recipes: the judge
        # trains seconds on fixture pairs, skips the public answers (they are ../shared data, not
        # packaged) and the hand-label report (its packaged file is read below instead), and the
        # reader trains on a few examples. Together these were 5+ of the test's 9 minutes.
        INFRA_RAG_JUDGE_PAIRS="120",
        INFRA_RAG_JUDGE_DATA="none",
        INFRA_RAG_JUDGE_LABELS="0",
        INFRA_RAG_READER_EXAMPLES="96",
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    cwd = base / "cwd"
    cwd.mkdir()
    return {"bin": venv / "bin", "env": env, "cwd": cwd, "base": base}


def test_installed_wheel_builds_searches_and_passes_health(installed):
    bin_, env, cwd = installed["bin"], installed["env"], installed["cwd"]
    where = _run(bin_ / "python", "-c", "import infra_rag_assets as p; print(p.__file__)", env=env, cwd=cwd)
    package_file = Path(where.stdout.strip())
    print(f"imported {package_file}")
    assert package_file.is_relative_to(installed["base"] / "venv") and not package_file.is_relative_to(CHECKOUT)

    labels = "from infra_rag_assets.package_data import answer_labels_file as f; p = f()\n"
    labels += "print(p, len(p.read_text().splitlines()))"
    packaged = _run(bin_ / "python", "-c", labels, env=env, cwd=cwd)
    labels_file, rows = packaged.stdout.split()
    assert Path(labels_file).is_relative_to(package_file.parent) and int(rows) > 100, packaged.stderr[-2000:]

    version = _run(bin_ / "infra-rag", "--version", env=env, cwd=cwd)
    assert version.returncode == 0 and version.stdout.startswith("infra-rag 0."), version.stderr

    build = _run(bin_ / "infra-rag", "build", env=env, cwd=cwd, timeout=BUILD_TIMEOUT_S)
    assert build.returncode == 0, build.stderr[-3000:]
    index_version = build.stdout.strip().splitlines()[-1]
    dagster_yaml = installed["base"] / "home" / "dagster" / "dagster.yaml"
    # A cold build leaves the version's trained reader and judge named in its serving snapshot
    # (their assets may run before lexical_index writes it: a rewrite once dropped them).
    snapshot = installed["base"] / "home" / "serving" / index_version
    assert {"reader.json", "judge.json"} <= {p.name for p in snapshot.iterdir()}, sorted(snapshot.iterdir())
    assert dagster_yaml.read_text() == (package_file.parent / "data" / "dagster.yaml").read_text()

    search = _run(bin_ / "infra-rag", "search", "--json", "-k", "3", "What does maxSurge control?", env=env, cwd=cwd)
    assert search.returncode == 0, search.stderr[-2000:]
    record = json.loads(search.stdout.splitlines()[0])
    assert record["hits"] and record["hits"][0]["url"].startswith("https://")

    health = _run(bin_ / "infra-rag", "health", "--json", env=env, cwd=cwd)
    assert health.returncode == 0 and json.loads(health.stdout)["ok"] is True, health.stdout + health.stderr

    canary = _run(bin_ / "infra-rag", "canary", "--json", "--file", installed["base"] / "canary.yaml", env=env, cwd=cwd)
    assert canary.returncode == 0 and json.loads(canary.stdout)["version"] == index_version, canary.stderr[-2000:]
    # The packaged canaries (full-corpus pages) are found in the installed package, and fail on
    # the fixture corpus: exit 1 with results, not a missing-file error (exit 2).
    shipped = _run(bin_ / "infra-rag", "canary", "--json", env=env, cwd=cwd)
    assert shipped.returncode == 1 and json.loads(shipped.stdout)["results"], shipped.stderr[-2000:]
    assert list(cwd.iterdir()) == []  # nothing written to the working directory
