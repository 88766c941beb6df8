"""A throwaway PostgreSQL 15 server for tests, from the machine's own binaries.

We run as root in CI and on developer machines, and ``initdb``/``postgres`` refuse to run as
root, so the cluster is created and started as the ``postgres`` OS user (``runuser``), in a
temp directory owned by that user, listening on a free loopback port with its unix socket in
the same directory. The fixture stops the server and removes the directory at teardown.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_BIN_DIRS = [Path("/usr/lib/postgresql/15/bin"), *sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)]
PASSWORD = "infra-rag-test"


@dataclass
class PgServer:
    host: str
    port: int
    user: str
    password: str
    db: str
    root: Path

    def env(self) -> dict[str, str]:
        """The DAGSTER_PG_* variables deploy/dagster.production.yaml reads."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_DB": self.db,
            "DAGSTER_PG_USER": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
        }

    def query(self, sql: str, params: tuple = (), db: str | None = None) -> list[tuple]:
        import psycopg2

        conn = psycopg2.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, dbname=db or self.db
        )
        try:
            with conn, conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else []
        finally:
            conn.close()

    def query_admin(self, sql: str) -> None:
        """A statement outside a transaction (CREATE DATABASE)."""
        import psycopg2

        conn = psycopg2.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, dbname="postgres"
        )
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(sql)
        finally:
            conn.close()


def pg_bin() -> Path | None:
    for folder in PG_BIN_DIRS:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_postgres(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, *args], check=True, capture_output=True, text=True, timeout=120, **kwargs)


def start_pg_server(bin_dir: Path) -> PgServer:
    root = Path(tempfile.mkdtemp(prefix="infra_rag_pg_"))
    data, pwfile = root / "data", root / "pwfile"
    pwfile.write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        for path in (root, pwfile):
            os.chown(path, pw.pw_uid, pw.pw_gid)
    _as_postgres(
        [
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=scram-sha-256",
            f"--pwfile={pwfile}",
            "--encoding=UTF8",
            "--no-sync",
        ]
    )
    port = _free_port()
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=200"
    _as_postgres(
        [
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        ]
    )
    server = PgServer("127.0.0.1", port, "postgres", PASSWORD, "postgres", root)
    _as_postgres(
        [str(bin_dir / "psql"), "-h", str(root), "-p", str(port), "-U", "postgres", "-c", "CREATE DATABASE dagster"],
        env={**os.environ, "PGPASSWORD": PASSWORD},
    )
    server.db = "dagster"
    return server


def stop_pg_server(bin_dir: Path, server: PgServer) -> None:
    try:
        _as_postgres([str(bin_dir / "pg_ctl"), "-D", str(server.root / "data"), "-m", "immediate", "-w", "stop"])
    finally:
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_server():
    bin_dir = pg_bin()
    if bin_dir is None:
        pytest.skip(
            "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (.ci/run installs postgresql-15)"
        )
    pytest.importorskip("dagster_postgres", reason="the postgres extra is not installed: pip install -e '.[postgres]'")
    server = start_pg_server(bin_dir)
    try:
        yield server
    finally:
        stop_pg_server(bin_dir, server)
