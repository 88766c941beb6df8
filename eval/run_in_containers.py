"""The main job with every step in its own container (issue 38): a documented run, not a test.

What the Kubernetes job executor does, on one machine: the run worker (this process) hands each
step to Dagster's ``docker_executor`` (INFRA_RAG_STEP_EXECUTOR=docker), which starts it as a
container of the product image through podman's Docker-compatible API, as uid 10001 on a
read-only root with /tmp in memory. Every container sees the same data-home volume, the fixture
corpus and bench read-only, and the instance's PostgreSQL storage (runs, events, pool slots) on
the host network. The result (per-step seconds, containers started, outcome) goes to
eval/results/containers_run.json; deploy/README.md records the runs.

Needs root, podman + runc (Debian's), PostgreSQL 15's server binaries, the test and docker
extras here, and the image (``--build-image`` builds it as deploy/README.md says, from a
debootstrap base, since no container registry is reachable here).

    python -m eval.run_in_containers [--build-image] [--image localhost/infra-rag:dev] [--work /srv/infra-rag-ctr]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UID = 10001
# Small model stages, as in the suite: the run is about where steps execute, not model quality.
SMALL = {
    "INFRA_RAG_ADAPT": "0",
    "INFRA_RAG_JUDGE_PAIRS": "400",
    "INFRA_RAG_JUDGE_DATA": "none",
    "INFRA_RAG_JUDGE_LABELS": "0",
    "INFRA_RAG_READER_EXAMPLES": "96",
}
COMPUTE_LOGS = """
# Step output stays in each container's log (as the Helm values' NoOpComputeLogManager).
compute_logs:
  module: dagster.core.storage.noop_compute_log_manager
  class: NoOpComputeLogManager
"""


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], check=check, capture_output=True, text=True)


def build_image(image: str, base: str) -> None:
    """The base from debootstrap (no registry here), then deploy/Dockerfile with the flags
    deploy/README.md gives for podman on this kind of host."""
    if podman("image", "exists", base, check=False).returncode != 0:
        rootfs = Path("/tmp/bookworm-rootfs")
        shutil.rmtree(rootfs, ignore_errors=True)
        subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates", "bookworm",
             str(rootfs), "http://deb.debian.org/debian"],
            check=True,
        )  # fmt: skip
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(["podman", "import", "-", base], stdin=tar.stdout, check=True)
        tar.wait()
    wheels = ROOT / "deploy" / "wheels"
    if not list(wheels.glob("torch-2.13.0+cpu-*.whl")):
        # pip takes the CPU wheel from this machine's disk (see the env notes), not a CUDA build
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(wheels), "torch==2.13.0"],
                       check=True)  # fmt: skip
    ca = "/etc/ssl/certs/ca-certificates.crt"
    subprocess.run(
        ["podman", "build", "--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
         "--network", "host", "-v", f"{ca}:/run/host-ca.pem:ro", "--build-arg", "PIP_CERT=/run/host-ca.pem",
         "--build-arg", f"PYTHON_IMAGE={base}", "-f", "deploy/Dockerfile", "-t", image, "."],
        cwd=ROOT,
        check=True,
    )  # fmt: skip


def podman_api(socket: Path) -> subprocess.Popen:
    """podman's Docker-compatible API on a unix socket (what docker-py's DOCKER_HOST names)."""
    socket.unlink(missing_ok=True)
    service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{socket}"])
    for _ in range(100):
        if socket.exists():
            return service
        time.sleep(0.1)
    service.kill()
    sys.exit("podman system service did not open its socket")


def executor_config(image: str, shared: list[Path], env_names: list[str]) -> dict:
    """docker_executor's run config: the image, uid 10001 on a read-only root, host network
    (PostgreSQL on loopback), the shared folders at the same paths as here."""
    return {
        "image": image,
        "max_concurrent": 2,
        "env_vars": env_names,
        "container_kwargs": {
            "user": f"{UID}:{UID}",
            "read_only": True,
            "tmpfs": {"/tmp": "rw,size=2g"},
            "network_mode": "host",
            # podman's default limits cannot be set inside this machine's sandbox ("error setting
            # rlimit type 7: operation not permitted"): the same lowered limits as the image build.
            "ulimits": [{"name": n, "soft": 1024, "hard": 1024} for n in ("nofile", "nproc")],
            "volumes": {str(p): {"bind": str(p), "mode": "rw" if i == 0 else "ro"} for i, p in enumerate(shared)},
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default="localhost/infra-rag:dev")
    parser.add_argument("--base", default="localhost/bookworm-python:3.11")
    parser.add_argument("--build-image", action="store_true")
    parser.add_argument("--work", default="/srv/infra-rag-ctr")
    parser.add_argument("--out", default=str(ROOT / "eval" / "results" / "containers_run.json"))
    args = parser.parse_args()
    if args.build_image or podman("image", "exists", args.image, check=False).returncode != 0:
        started = time.monotonic()
        build_image(args.image, args.base)
        print(f"image {args.image} built in {time.monotonic() - started:.0f} s", flush=True)

    # Before anything loads the code location: its build jobs take the executor when they are made.
    os.environ["INFRA_RAG_STEP_EXECUTOR"] = "docker"
    from infra_rag_assets_tests.conftest import make_fixture_corpus, write_fixture_sources
    from infra_rag_assets_tests.pg_server import pg_bin, start_pg_server, stop_pg_server

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    old = podman("ps", "-aq", "--filter", "name=dagster-step-", check=False).stdout.split()
    if old:
        podman("rm", "-f", *old, check=False)
    home, dagster_home, inputs = work / "home", work / "dagster_home", work / "inputs"
    for folder in (home, dagster_home, inputs):
        folder.mkdir(parents=True)
    sources = write_fixture_sources(inputs / "sources.yaml", make_fixture_corpus(inputs / "corpus"))
    (dagster_home / "dagster.yaml").write_text((ROOT / "deploy" / "dagster.production.yaml").read_text() + COMPUTE_LOGS)
    bench = Path(os.environ.get("INFRA_RAG_BENCH", ROOT.parent / "shared" / "bench")).resolve()
    bin_dir = pg_bin()
    server = start_pg_server(bin_dir)
    service = podman_api(work / "podman.sock")
    env = {
        **server.env(),
        **SMALL,
        "DAGSTER_HOME": str(dagster_home),
        "INFRA_RAG_HOME": str(home),
        "INFRA_RAG_SOURCES": str(sources),
        "INFRA_RAG_BENCH": str(bench),
        "INFRA_RAG_STEP_EXECUTOR": "docker",
    }
    os.environ.update(env, DOCKER_HOST=f"unix://{work / 'podman.sock'}")
    try:
        result = run_main_job(args.image, home, dagster_home, [work, bench], sorted(env))
    finally:
        service.terminate()
        stop_pg_server(bin_dir, server)
    result["containers"] = containers_of()
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "steps"}, indent=2))


def run_main_job(image: str, home: Path, dagster_home: Path, shared: list[Path], env_names: list[str]) -> dict:
    """Register a version, hand its data home to uid 10001, run the main job with the docker executor."""
    import dagster as dg

    from infra_rag_assets.control.builds import materialize_version, register_version
    from infra_rag_assets.control.stages import stage_order
    from infra_rag_assets.defs.resources import BuildResource, DataHomeResource

    store, settings = DataHomeResource(home=str(home)), BuildResource(sources_file=os.environ["INFRA_RAG_SOURCES"])
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        version = register_version(instance, store, settings, created_by="containers")
        subprocess.run(["chown", "-R", f"{UID}:{UID}", str(home), str(dagster_home)], check=True)
        started = time.monotonic()
        outcome = materialize_version(
            version,
            stage_order(),
            instance,
            store,
            settings,
            run_config={"execution": {"config": executor_config(image, shared, env_names)}},
            quiet=False,
            in_process=True,
        )
        seconds = time.monotonic() - started
        stats = instance.get_run_step_stats(outcome.run_id)
        return {
            "index_version": version,
            "run_id": outcome.run_id,
            "success": outcome.success,
            "failure": outcome.failure(),
            "seconds": round(seconds, 1),
            "steps": {
                s.step_key: {
                    "status": str(s.status.value if s.status else None),
                    "seconds": round(s.end_time - s.start_time, 1) if s.start_time and s.end_time else None,
                }
                for s in stats
            },
        }


def containers_of() -> dict:
    """How many step containers ran and how they exited (those of earlier runs were removed at the start)."""
    listed = podman("ps", "-a", "--filter", "name=dagster-step-", "--format", "json", check=False)
    rows = json.loads(listed.stdout or "[]")
    exits = [row.get("ExitCode") for row in rows]
    return {"started": len(rows), "exit_codes": {str(c): exits.count(c) for c in set(exits)}}


if __name__ == "__main__":
    main()
