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

# --------------------------------------------------------------------------- the fault ledger, the skip guard


def pytest_configure(config: pytest.Config) -> None:
    """The fault ledger (tests/fault_ledger.py) as a session plugin: on the controller too under pytest-xdist, where
    it merges the workers' records and prints the one ledger. The skip guard (tests/ci_skips.py): on CI (CI=true) a
    skipped test that is not in its ALLOWED_ON_CI fails the session; it runs on the controller, which sees every
    worker's reports."""
    import ci_skips
    from fault_ledger import register

    register(config)
    ci_skips.register(config)


# --------------------------------------------------------------------------- two workers (pytest-xdist)

ENGINE_GROUP = "docker-engine"
ENGINE_TESTS = (
    "tests/airflow_plugin/test_container_oom.py",
    "tests/airflow_plugin/test_docker_network.py",
    "tests/airflow_plugin/test_docker_tls.py",
    "tests/airflow_plugin/test_node_routing.py",
    "tests/airflow_plugin/test_ssh_preflight.py",
    "tests/core/measure/test_maxbatch.py",
    "tests/core/plan/test_reproduce.py",
    "tests/deploy/test_compose.py",
    "tests/deploy/test_docker_images.py",
    "tests/deploy/test_provider_install.py",  # its smoke run: the reference image on docker-local.yaml's nodes
    "tests/e2e/test_compose_e2e.py",
    "tests/e2e/test_e2e_docker.py",
    "tests/e2e/test_e2e_mpi.py",
    "tests/e2e/test_e2e_seed_replay.py",
    "tests/e2e/test_seeds_cpu.py::test_every_seed_framework_trains_for_real_on_two_stand_in_nodes",
    "tests/faults/test_node_unreachable.py",
    "tests/faults/test_security.py",
)
"""The tests (files, folders or single tests) that run one after another on one pytest-xdist worker, as one unit: every
test that starts containers on this machine's Docker Engine (marked ``docker``) is in one of them. They share
what a real cluster gives one run at a time: the stand-in nodes' network (dlperf-net, where node0 and node1 are
names that two runs at once would both claim), the engine's CPU for real training, and the engine itself for the
checks that no dlperf container is left. Every other test file goes to whichever worker is free."""


OWN_NETWORK_TESTS = (
    "tests/chaos/",
    "tests/core/workload/test_llm.py",
    "tests/e2e/test_node_sweep.py",
    "tests/e2e/test_seeds_cpu.py::test_every_seed_frameworks_real_failures_are_failed_rows_with_their_cause",
    "tests/e2e/test_slurm_cluster.py",  # its Slurm cluster: tests/slurm_cluster.py, on a network of its own
    "tests/e2e/test_slurm_e2e.py",  # the same Slurm test cluster, dlperf run through it
)
"""Docker tests that run beside the group: their stand-in nodes are on a network of their own (helpers.own_networks:
a name on it is no name on dlperf-net) and they count their own containers, which the group's checks leave out."""


def _listed(nodeid: str, entries: tuple[str, ...]) -> bool:
    """Whether the test is one of ``entries``: a folder (ends with /), a file, or a test (with its parameters)."""
    return any(
        nodeid.startswith(entry) and (entry.endswith("/") or nodeid[len(entry) : len(entry) + 1] in ("", ":", "["))
        for entry in entries
    )


def in_engine_group(nodeid: str) -> bool:
    return _listed(nodeid, ENGINE_TESTS)


def on_own_network(nodeid: str) -> bool:
    return _listed(nodeid, OWN_NETWORK_TESTS)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: known only where xdist is loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup`` as this suite needs it: the ENGINE_TESTS as one unit, every other test file as one (its
    module-scoped fixtures, e.g. tests/chaos/'s deployment, are made once). The worker that ends the group first
    takes its share of the files after it.

    xdist's own loadgroup reads ``xdist_group`` marks by renaming ``item._nodeid``, which pytest 9 no longer reads
    (a node's id is ``item._id``): with pytest 9.2 and xdist 3.8 it groups nothing. The controller sees node ids
    only, so the group is a list of files, and the workers' collection checks that every ``docker`` test is in it.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class EngineGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return ENGINE_GROUP if in_engine_group(nodeid) else nodeid.split("::", 1)[0]

    return EngineGroupScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A ``docker`` test in neither list would run beside the group on the engine's own network: refuse the session."""
    outside = [
        item.nodeid
        for item in items
        if item.get_closest_marker("docker") and not (in_engine_group(item.nodeid) or on_own_network(item.nodeid))
    ]
    if outside:
        raise pytest.UsageError(
            "tests marked docker in neither ENGINE_TESTS nor OWN_NETWORK_TESTS of tests/conftest.py (they would run "
            f"beside the other Docker tests under pytest-xdist): add their files to one: {', '.join(outside)}"
        )


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
