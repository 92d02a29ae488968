"""A node whose Docker daemon cannot be reached: its case fails fast naming the node, the others run, and
no container of the run is left. Real Docker Engine for the good node, a socket with no daemon for the bad."""

from __future__ import annotations

import subprocess
import time

import pytest
import yaml

from dlperf_airflow.docker_runtime import DockerRuntime
from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.storage import ResultStore
from faults.common import DATA, containers_of_run, run_cli
from helpers import docker_marks, run_id_of

IMAGE = "dlperf/pytorch-reference:cpu"
DEAD_SOCKET = "unix:///tmp/dlperf-fault-no-daemon.sock"
pytestmark = docker_marks(IMAGE)


def test_unreachable_docker_node_fails_its_cases_fast(tmp_path, pg_url, fault):
    rec = fault(
        "fault",
        "node unreachable (Docker daemon down)",
        f"inventory node1's docker_url is {DEAD_SOCKET} (no daemon); suite 1n1g (node0) + 2n1g (node0+node1)",
        "2n1g failed fast with a reason naming node1; 1n1g ok; DAG run failed; no container of the run left",
    )
    inventory = tmp_path / "inventory.yaml"
    node = {"gpus": 1, "accelerator": "cpu", "network": "dlperf-net", "ipc_host": False, "shm_size": "1g"}
    inventory.write_text(
        yaml.safe_dump(
            {
                "name": "half-dead",
                "nodes": [
                    {"name": "node0", "docker_url": "unix:///var/run/docker.sock", **node},
                    {"name": "node1", "docker_url": DEAD_SOCKET, **node},
                ],
            }
        )
    )
    out = run_cli(tmp_path, pg_url, str(DATA / "unreachable-docker.yaml"), "--inventory", str(inventory))
    run_id = run_id_of(out.stdout)
    leaked = containers_of_run(run_id)
    rows = ResultStore(pg_url).results(run_id=run_id)
    by_nodes = {r.nodes: r for r in rows.itertuples()}
    rec.results_lost = 2 - len(rows)
    rec.containers_leaked = len(leaked)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-3000:]  # the DAG run ends failed
    assert len(rows) == 2, rows
    good, dead = by_nodes[1], by_nodes[2]
    assert good.status == "ok" and good.throughput > 0, good.reason
    assert dead.status == "failed" and "node1" in dead.reason, dead.reason
    dead_s = (dead.finished_at - dead.started_at).total_seconds()
    assert dead_s < 60, f"the dead node's case took {dead_s:.0f} s to fail"
    assert leaked == [], leaked
    left = subprocess.run(
        [
            "docker",
            "ps",
            "-aq",
            "--filter",
            "label=dlperf.case",
            "--filter",
            f"label=dlperf.run_id={run_id}",
        ],
        capture_output=True,
        text=True,
    ).stdout
    assert left.strip() == ""  # node0's half of the 2n1g case was removed too
    rec.observed = f"2n1g failed after {dead_s:.1f} s: {dead.reason!r}; 1n1g ok ({good.throughput:.2f} samples/s); 0 containers left"


def test_cleanup_sweeps_every_reachable_node_and_names_the_dead_one(fault):
    """The teardown's sweep: a dead engine listed FIRST does not stop the others being swept."""
    rec = fault(
        "fault",
        "cleanup with a node unreachable",
        f"remove_containers' sweep over [{DEAD_SOCKET} (no daemon), the real engine] with a leftover "
        "container of the run on the real engine",
        "the leftover on the reachable engine is removed; the sweep then fails naming the dead engine",
    )
    labels = {"dlperf.dag_id": "fault-cleanup", "dlperf.run_id": f"sweep-{time.time_ns()}"}
    subprocess.run(
        [
            "docker",
            "run",
            "-d",
            "--name",
            f"dlperf-sweep-{time.time_ns()}",
            *[a for k, v in labels.items() for a in ("--label", f"{k}={v}")],
            IMAGE,
            "sleep",
            "300",
        ],
        check=True,
        capture_output=True,
    )
    runtime = DockerRuntime(
        Inventory(
            name="half-dead",
            nodes=(
                Node(name="dead", docker_url=DEAD_SOCKET),
                Node(name="alive", docker_url="unix:///var/run/docker.sock"),
            ),
        )
    )
    with pytest.raises(RuntimeError, match="could not reach the Docker engine of unix:///tmp/dlperf-fault"):
        runtime.cleanup(labels)
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=dlperf.run_id={labels['dlperf.run_id']}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    rec.containers_leaked = len(left)
    rec.results_lost = 0
    assert left == []
    rec.observed = "leftover removed on the reachable engine; the sweep failed naming the dead engine"


def test_a_runtime_error_names_the_nodes_engine_that_does_not_answer():
    """What a case stores when its runtime raised: the engines of its nodes that do not answer, then the
    exception (a client's ConnectionError alone does not say which engine went away)."""
    from dlperf_airflow.runtimes import runtime_error

    alive = Node(name="node0", gpus=1, accelerator="cpu", docker_url="unix:///var/run/docker.sock")
    dead = Node(name="node1", gpus=1, accelerator="cpu", docker_url=DEAD_SOCKET)
    runtime = DockerRuntime(Inventory(name="half-dead", nodes=(alive, dead)))
    reason = runtime_error(runtime, [alive, dead], ConnectionError("Connection aborted."))
    assert reason.startswith(f"runtime error: node1's Docker Engine at {DEAD_SOCKET} does not answer ("), reason
    assert reason.endswith("; ConnectionError: Connection aborted.") and "node0" not in reason, reason
    assert runtime_error(runtime, [alive], ValueError("x")) == "runtime error: ValueError: x"
    assert runtime_error(None, [dead], ValueError("x")) == "runtime error: ValueError: x"
