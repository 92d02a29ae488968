"""Shared pytest fixtures of the dlperf test suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# --------------------------------------------------------------------------- the Docker engine as found


def pytest_sessionstart() -> None:  # pluggy passes only the arguments a hook names
    """Note the dlperf containers already on the engine, so that a leftover of an earlier, killed session (or a
    deployment's running benchmark on the same engine) is neither taken for this session's leftover nor removed."""
    from helpers import note_preexisting_containers

    found = note_preexisting_containers()
    if found:
        print(f"\ndlperf containers already on this Docker engine, not this session's: {', '.join(sorted(found))}")


# --------------------------------------------------------------------------- databases

DEFAULT_PG_BASE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
"""Admin URL of the test PostgreSQL server; ``$DLPERF_TEST_PG_URL`` overrides it."""


def _pg_ready(host: str, port: int) -> bool:
    """Whether ``pg_isready`` reports the server at host:port accepting connections."""
    if shutil.which("pg_isready") is None:
        return False
    probe = subprocess.run(["pg_isready", "-h", host, "-p", str(port)], capture_output=True, check=False)
    return probe.returncode == 0


def _start_local_pg() -> None:
    """Start the local PostgreSQL cluster(s) (Debian layout), ignoring failures."""
    for version in sorted(Path("/etc/postgresql").glob("*")):
        subprocess.run(
            [
                "pg_ctlcluster",
                "--skip-systemctl-redirect",
                version.name,
                "main",
                "start",
            ],
            capture_output=True,
            check=False,
        )


def _ensure_pg_running(host: str, port: int, may_start: bool) -> None:
    """Skip the test unless PostgreSQL answers at host:port (starting the local one if allowed)."""
    if _pg_ready(host, port):
        return
    if may_start and shutil.which("pg_ctlcluster"):
        _start_local_pg()
        for _ in range(30):
            if _pg_ready(host, port):
                return
            time.sleep(0.5)
    pytest.skip(f"no PostgreSQL server at {host}:{port}")


@pytest.fixture(scope="session")
def pg_server():
    """(base URL, admin(sql)) of the PostgreSQL server the tests use.

    The server is ``$DLPERF_TEST_PG_URL`` (an admin URL, database ``postgres``), else the local
    one at 127.0.0.1:5432 (started when it is not running). Tests are skipped without a server.
    """
    psycopg2 = pytest.importorskip("psycopg2")
    from sqlalchemy import make_url

    override = os.environ.get("DLPERF_TEST_PG_URL")
    base = make_url(override or DEFAULT_PG_BASE_URL)
    _ensure_pg_running(base.host or "127.0.0.1", base.port or 5432, may_start=not override)
    admin_dsn = base.set(drivername="postgresql").render_as_string(hide_password=False)

    def admin(sql: str) -> None:
        conn = psycopg2.connect(admin_dsn)
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
        finally:
            conn.close()

    return base, admin


def _fresh_database(pg_server, prefix: str) -> Iterator[str]:
    base, admin = pg_server
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin(f'CREATE DATABASE "{name}"')
    try:
        yield base.set(drivername="postgresql+psycopg2", database=name).render_as_string(hide_password=False)
    finally:
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url(pg_server) -> Iterator[str]:
    """SQLAlchemy URL of a fresh, empty PostgreSQL database for this one test (dropped after)."""
    yield from _fresh_database(pg_server, "dlperf_test")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """SQLAlchemy URL of a SQLite file in this test's tmp_path (not created yet)."""
    return f"sqlite:///{tmp_path / 'dlperf.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def dialect_url(request: pytest.FixtureRequest) -> str:
    """A fresh results database on each dialect in turn: :func:`sqlite_url`, then :func:`pg_url`."""
    return str(request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url"))


@pytest.fixture
def metadata_url(pg_server) -> Iterator[str]:
    """A fresh PostgreSQL database for Airflow's metadata (a real api-server and scheduler; dropped after)."""
    yield from _fresh_database(pg_server, "dlperf_airflow")


@pytest.fixture(scope="module")
def module_metadata_url(pg_server) -> Iterator[str]:
    """:func:`metadata_url` for a deployment that the tests of one module share (tests/chaos/)."""
    yield from _fresh_database(pg_server, "dlperf_airflow")
