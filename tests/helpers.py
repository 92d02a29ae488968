"""Helpers shared by the tests: driving the real CLI, Airflow and Docker, and rows for the results database."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlperf_core.storage import BenchmarkRunRecord, ResultRecord

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DLPERF_SHARED", REPO.parent / "shared"))  # seeds, reallogs, reference notes
DLPERF = [sys.executable, "-m", "dlperf_cli.main"]
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)  # when the records of run_record/result_record start by default


def cli_env(tmp_path: Path, db_url: str, **extra: str) -> dict[str, str]:
    """Environment of a `dlperf` subprocess with its own AIRFLOW_HOME, log folder and results DB."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        DLPERF_LOG_DIR=str(tmp_path / "logs"),
        DLPERF_DB_URL=db_url,
        DLPERF_PROGRESS="1",
        **extra,
    )
    return env


def docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def image_present(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True).returncode == 0


OWN_NETWORK_INVENTORIES = tuple(
    REPO / "tests" / "data" / name
    for name in ("chaos-inventory.yaml", "llm-inventory.yaml", "docker-local-3g.yaml", "node-sweep-inventory.yaml")
)
"""The inventories of the Docker tests that run beside the Docker Engine group (tests/conftest.py: OWN_NETWORK_TESTS):
stand-in nodes on a network of their own, with names of their own."""


def network_of(inventory: Path) -> str:
    """The one network of an inventory's nodes."""
    from dlperf_core.cluster.inventory import load_inventory

    (network,) = {node.network for node in load_inventory(inventory).nodes}
    return network


@functools.cache
def own_networks() -> dict[str, frozenset[str]]:
    """Network -> its nodes' names, of OWN_NETWORK_INVENTORIES. Those tests' containers are on that network, but for
    the environment probe, which runs on Docker's bridge labelled with its node (dlperf.probe). They count the
    containers of their own network; the group's checks that no dlperf container is left count every other one."""
    from dlperf_core.cluster.inventory import load_inventory

    return {
        network_of(path): frozenset(node.name for node in load_inventory(path).nodes)
        for path in OWN_NETWORK_INVENTORIES
    }


def _dlperf_containers_by_network(all_states: bool = True) -> dict[str, str]:
    """Every container started by dlperf (label dlperf.run_id) -> the own network it belongs to ("": none)."""
    fields = '{{.Names}}\t{{.Networks}}\t{{.Label "dlperf.probe"}}'
    cmd = ["docker", "ps", "--filter", "label=dlperf.run_id", "--format", fields]
    if all_states:
        cmd.insert(2, "-a")
    found: dict[str, str] = {}
    for line in subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines():
        name, networks, probe_of = (line.split("\t") + ["", ""])[:3]
        if name:
            on = set(networks.split(","))
            found[name] = next((net for net, nodes in own_networks().items() if net in on or probe_of in nodes), "")
    return found


PREEXISTING_CONTAINERS: frozenset[str] = frozenset()
"""dlperf containers already on the Docker engine when this test session started (conftest's
``pytest_sessionstart``): left by an earlier session that was killed, or by a deployment sharing the engine. The
tests neither count them as their own leftovers nor remove them."""


def note_preexisting_containers() -> frozenset[str]:
    """Record (and return) the dlperf containers present before any test ran."""
    global PREEXISTING_CONTAINERS
    PREEXISTING_CONTAINERS = frozenset(_dlperf_containers_by_network()) if docker_available() else frozenset()
    return PREEXISTING_CONTAINERS


def dlperf_containers(all_states: bool = True, network: str = "") -> list[str]:
    """Names of containers started by dlperf (label dlperf.run_id), running or not, that were not already there
    when the test session started: those of no own network (own_networks()), or those of ``network``."""
    return [
        name
        for name, own in _dlperf_containers_by_network(all_states).items()
        if name not in PREEXISTING_CONTAINERS and own == network
    ]


def run_id_of(output: str) -> str:
    """The DAG run id `dlperf run` reports on its last line."""
    found = re.findall(r"^DAG run (\S+): ", output, flags=re.M)
    assert found, output[-2000:]
    return found[-1]


TINY_DOCKER_SUITE: dict[str, Any] = {
    "name": "tiny-docker",
    "description": "The smallest workload of the docker e2e tests (tests/data/kill-suite.yaml) at 1n1g, once.",
    "runtime": "docker",
    "repeats": 1,
    "warmup_iterations": 2,
    "measured_iterations": 5,
    "timeout_s": 300,
    "watchdog_s": 120,
    "benchmarks": [
        {
            "framework": "pytorch_reference",
            "model": "resnet50_v1.5",
            "precisions": ["fp32"],
            "batch_size_per_device": 4,
            "topologies": ["1n1g"],
            "image": "dlperf/pytorch-reference:cpu",
            "extra_args": ["--image-size", "32", "--width", "8", "--device", "cpu"],
        }
    ],
}
"""One tiny case on the docker runtime, as a suite's YAML holds it (tests write it into a dlperf home)."""


def with_marks(marks: list) -> Any:
    """A decorator that puts ``marks`` (e.g. :func:`docker_marks`) on one test."""

    def wrap(test: Any) -> Any:
        for mark in marks:
            test = mark(test)
        return test

    return wrap


def docker_marks(image: str) -> list:
    """pytest marks of a test that runs containers of ``image`` on the local Docker Engine."""
    import pytest

    return [
        pytest.mark.docker,
        pytest.mark.postgres,
        pytest.mark.skipif(not docker_available(), reason="no Docker engine answers (make test starts one)"),
        pytest.mark.skipif(docker_available() and not image_present(image), reason=f"{image} not built (make images)"),
    ]


# --------------------------------------------------------------------------- rows of the results database


def run_record(**overrides: Any) -> BenchmarkRunRecord:
    """A benchmark run record: run "r1" of DAG "dag", suite "smoke" by the CLI on docker, started at T0 and still
    running; ``overrides`` replace any field."""
    from dlperf_core.storage import BenchmarkRunRecord

    fields = dict(dag_id="dag", run_id="r1", suite="smoke", trigger="cli", runtime="docker", started_at=T0)
    return BenchmarkRunRecord(**(fields | overrides))


CASE_KEY = re.compile(
    r"(?P<framework>[^/]+)/(?P<model>[^/]+)/(?P<precision>[^/]+)/b(?P<batch>\d+)/(?P<nodes>\d+)n(?P<gpus>\d+)g"
)


def result_record(**overrides: Any) -> ResultRecord:
    """An ok result record: repeat 0 of pt/resnet50/fp32/b8/1n1g at 100 samples/s, started at T0, in run "r1" of
    DAG "dag" (or in ``benchmark_run``'s run when that is given); ``overrides`` replace any field.

    A ``case_key`` of the form framework/model/precision/bB/NnGg[+options] sets those fields too (where not given
    as well); without a case key, the key is made of those fields."""
    from dlperf_core.storage import ResultRecord

    fields: dict[str, Any] = dict(
        dag_id="dag",
        run_id="r1",
        framework="pt",
        model="resnet50",
        precision="fp32",
        batch_size_per_device=8,
        nodes=1,
        gpus_per_node=1,
        repeat=0,
        status="ok",
        throughput=100.0,
        started_at=T0,
    )
    run = overrides.get("benchmark_run")
    if run is not None:
        fields.update(dag_id=run.dag_id, run_id=run.run_id)
    parsed = CASE_KEY.match(overrides.get("case_key", ""))
    if parsed:
        fields.update(
            framework=parsed["framework"],
            model=parsed["model"],
            precision=parsed["precision"],
            batch_size_per_device=int(parsed["batch"]),
            nodes=int(parsed["nodes"]),
            gpus_per_node=int(parsed["gpus"]),
        )
    fields.update(overrides)
    fields.setdefault(
        "case_key",
        "{framework}/{model}/{precision}/b{batch_size_per_device}/{nodes}n{gpus_per_node}g".format(**fields),
    )
    return ResultRecord(**fields)


def node_sweep_results(
    run: BenchmarkRunRecord, sweep: str, figures: dict[str, float], args: str = "+args=0badc0de", repeats: int = 2
) -> list[ResultRecord]:
    """A per-node sweep's ok rows in ``run``: ``repeats`` repeats of ``sweep`` (a case key without options) pinned to
    each node of ``figures`` (``{node: samples/s}``), key ``<sweep>+node=<node><args>``, a minute apart from the run's
    start."""
    from datetime import timedelta

    return [
        result_record(
            case_key=f"{sweep}+node={node}{args}",
            variant=f"+node={node}{args}",
            repeat=repeat,
            throughput=value,
            started_at=run.started_at + timedelta(minutes=repeat),
            benchmark_run=run,
        )
        for node, value in figures.items()
        for repeat in range(repeats)
    ]


def store_results_before_head(store: Any, results: list[ResultRecord]) -> None:
    """Store ``results`` in a database that an earlier migration left: each row with only the columns its
    ``results`` table has (``ResultStore.upsert_results`` writes every column of the head schema)."""
    from dataclasses import asdict

    import sqlalchemy as sa

    table = sa.Table("results", sa.MetaData(), autoload_with=store.engine)
    with store.engine.begin() as conn:
        for record in results:
            run_pk = store._ensure_run(conn, record.dag_id, record.run_id, record.started_at, record.benchmark_run)
            values = {k: v for k, v in asdict(record).items() if k in table.c}
            if "compiled" in table.c:  # the flag's name before migration 0010
                values["compiled"] = record.compile
            conn.execute(table.insert().values(**values, benchmark_run_id=run_pk))


@contextlib.contextmanager
def full_tmpfs(mount: Path, size: str, folders: tuple[str, ...] = ()) -> Iterator[Path]:
    """``mount`` (made if missing) as a tmpfs of ``size`` with ``folders`` made in it, then filled to its last byte;
    unmounted after. Skips the test where no tmpfs can be mounted (needs root/CAP_SYS_ADMIN)."""
    import pytest

    mount.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root/CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        for folder in folders:
            (mount / folder).mkdir(parents=True)
        with (mount / "filler").open("wb", buffering=0) as out:  # unbuffered: close() has nothing to flush
            try:
                while True:
                    out.write(b"x" * 4096)
            except OSError:
                pass
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
