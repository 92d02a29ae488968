"""Node routing end to end: a task for node X runs on node X's Celery worker.

A real deployment in miniature: api-server, scheduler and dag-processor with the CeleryExecutor (Redis broker,
PostgreSQL metadata DB), a central Celery worker on the default queue, and one Celery worker per stand-in node,
each listening only on its node's queue with ``DLPERF_NODE`` set, as docker-compose's ``airflow-node-worker``
runs on a GPU node. Airflow's option ``[dlperf] cluster_inventory`` (``AIRFLOW__DLPERF__CLUSTER_INVENTORY``)
names the two-node inventory, and ``dlperf cluster sync`` creates the nodes' one-slot pools. The trigger runs the
smoke suite's 1n1g and 2n1g on the docker runtime.

Checked: the run succeeds and stores both cases with a throughput; every ``case_run.on_<node>`` task instance
ran from its node's queue and on the worker of that node (what the worker says it is); the 1n1g case skipped
node1; node 0's log reached store_result; each node's containers were started by its own task and removed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from airflow_stack import CELERY_WORKER, AirflowStack, celery_env, prepare_stack, redis_url, start_stack
from dlperf_core.run.handoff import NodeReport, PlannedRun, RunSettings
from dlperf_core.storage import ResultStore
from e2e_helpers import run_ok
from helpers import DLPERF, REPO, dlperf_containers, docker_marks

IMAGE = "dlperf/pytorch-reference:cpu"
DAG_ID = "dlperf_benchmark"
QUEUES = {"node0": "node-a", "node1": "node-b"}
pytestmark = docker_marks(IMAGE)


@pytest.fixture
def cluster(tmp_path) -> str:
    """docker-local's two stand-in nodes, each with a queue of its own."""
    inventory = yaml.safe_load((REPO / "inventories/docker-local.yaml").read_text())
    inventory["name"] = "routed-local"
    for node in inventory["nodes"]:
        node["queue"] = QUEUES[node["name"]]
    path = tmp_path / "routed-local.yaml"
    path.write_text(yaml.safe_dump(inventory))
    return str(path)


@pytest.fixture
def stack(tmp_path, metadata_url, pg_url, cluster):
    broker = redis_url()
    deployment = prepare_stack(
        tmp_path / "airflow",
        metadata_url,
        pg_url,
        "dlperf",
        f"pw-{uuid.uuid4().hex[:10]}",
        extra_env={
            **celery_env(broker, metadata_url),
            "AIRFLOW__DLPERF__CLUSTER_INVENTORY": cluster,
            "DLPERF_JOIN_TIMEOUT_S": "300",
        },
    )
    sync = subprocess.run(
        [*DLPERF, "cluster", "sync", "--inventory", cluster],
        env=deployment.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert sync.returncode == 0, sync.stderr
    try:
        start_stack(deployment)
        worker = list(CELERY_WORKER)
        deployment.start("worker-central", *worker, "--queues", "default", "--celery-hostname", "central@%h")
        for node, queue in QUEUES.items():
            deployment.start(
                f"worker-{node}",
                *worker,
                "--queues",
                queue,
                "--celery-hostname",
                f"{queue}@%h",
                env={"DLPERF_NODE": node},
            )
        yield deployment
    finally:
        deployment.stop()
        subprocess.run(["redis-cli", "-u", broker, "flushdb"], capture_output=True)


def trigger_and_wait(stack: AirflowStack, token: str, conf: dict) -> tuple[str, list[dict]]:
    """Trigger dlperf_benchmark with ``conf``, wait for it to succeed; (run id, its task instances)."""
    status, body = stack.request(
        "POST", f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": conf}, token=token
    )
    assert status == 200, body
    run_id = body["dag_run_id"]  # type: ignore[index]

    def finished():
        state = stack.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}", token=token)[1]["state"]  # type: ignore[index]
        return state if state in ("success", "failed") else None

    state = stack.wait_until("the routed run to finish", finished, timeout=1200, every=1)
    tis = stack.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances?limit=100", token=token)[1]
    summary = sorted((t["task_id"], t["map_index"], t["state"], t["queue"]) for t in tis["task_instances"])  # type: ignore[index]
    if state != "success":  # the failed tasks' own logs say why
        failed = [t for t in tis["task_instances"] if t["state"] not in ("success", "skipped")]  # type: ignore[index]
        logs = "\n".join(
            f"===== {p}\n{p.read_text(errors='replace')[-3000:]}"
            for t in failed
            for p in (stack.home / "logs").rglob("*.log")
            if f"task_id={t['task_id']}" in str(p) and run_id in str(p)
        )
        pytest.fail(f"{state}: {summary}\n{logs}\n{stack.logs()}")
    return run_id, tis["task_instances"]  # type: ignore[index]


def test_each_node_task_runs_on_its_node_worker(stack: AirflowStack, pg_url, cluster):
    token = stack.token()
    assert stack.request("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False}, token=token)[0] == 200
    run_id, task_instances = trigger_and_wait(
        stack,
        token,
        {
            "suite": "suites/smoke.yaml",
            "runtime": "docker",
            "inventory": cluster,
            "repeats": 1,
            "topologies": ["1n1g", "2n1g"],
            "frameworks": ["pytorch_reference"],
        },
    )  # without the suite's fabric probe
    tis = {"task_instances": task_instances}

    rows = ResultStore(pg_url).results(run_id=run_id)
    assert sorted(rows["case_key"].str.extract(r"(\dn\dg)")[0]) == ["1n1g", "2n1g"]
    assert (rows["status"] == "ok").all() and (rows["throughput"] > 0).all(), rows[["case_key", "status", "reason"]]
    assert rows["environment_id"].notna().all()  # probed on each node by its own task, stored by collect_case

    node_tis = [t for t in tis["task_instances"] if t["task_id"].startswith("case_run.on_")]  # type: ignore[index]
    assert len(node_tis) == 4  # two case runs x two nodes
    ran = {}
    for t in node_tis:
        node = t["task_id"].removeprefix("case_run.on_")
        assert t["queue"] == QUEUES[node], t
        assert t["pool"] == f"dlperf_node_{node}", t
        if t["state"] == "skipped":
            ran[(node, t["map_index"])] = "skipped"
            continue
        assert t["state"] == "success", t
        path = (
            f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{t['task_id']}/xcomEntries/return_value"
            f"?map_index={t['map_index']}"
        )
        status, entry = stack.request("GET", path, token=token)
        assert status == 200, entry
        stored = entry["value"]  # type: ignore[index]
        stored = json.loads(stored) if isinstance(stored, str) else stored  # the serde form: class, version, data
        assert stored["__classname__"] == "dlperf_core.run.handoff.NodeReport", stored
        report = NodeReport.from_json(stored["__data__"])
        assert report.ran_on == node, f"task for {node} ran on the worker of {report.ran_on}"
        assert report.share is not None and report.share.exit_code == 0 and report.share.failure is None, report
        ran[(node, t["map_index"])] = report.share.rank
    # the 1n1g case ran on node0 alone (node1's task skipped it); the 2n1g case on both, node0 as rank 0
    assert sorted(ran.values(), key=str) == [0, 0, 1, "skipped"], ran
    assert dlperf_containers() == []

    # mpirun across the two node workers: node1's sshd first, keys made on each node, node 0 reaches it
    run_id, _ = trigger_and_wait(
        stack,
        token,
        {"suite": "tests/data/mpi-suite.yaml", "runtime": "docker", "inventory": cluster, "topologies": ["2n1g"]},
    )
    rows = ResultStore(pg_url).results(run_id=run_id)
    assert list(rows["status"]) == ["ok"] and rows["throughput"].iloc[0] > 0, rows[["case_key", "reason"]]
    node0_log = Path(rows["log_path"].iloc[0]).read_text()  # node 0's log, brought to store_result through XCom
    assert "dlperf: ssh to every node works" in node0_log and "[1,0]<stdout>" in node0_log
    assert dlperf_containers() == []


# --------------------------------------------------------------------------- without servers

SHAPE = r"""
import json
from dlperf_cli.embedded import prepare_environment
prepare_environment()
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder='REPO/dags')
dag = bag.dags['dlperf_benchmark']
print(json.dumps({
    "errors": {k: str(v) for k, v in bag.import_errors.items()},
    "tasks": {t.task_id: [t.queue, t.pool, t.is_teardown, t.trigger_rule.value] for t in dag.tasks},
    "collect_after": sorted(dag.get_task('case_run.collect_case').upstream_task_ids),
    "searches_after": sorted(dag.get_task('search_max_batch').upstream_task_ids),
}))
"""


def test_the_dag_renders_one_task_per_node_on_its_queue_and_pool(cluster, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow"), AIRFLOW__DLPERF__CLUSTER_INVENTORY=cluster, DLPERF_DB_URL="sqlite://"
    )
    out = run_ok([sys.executable, "-c", SHAPE.replace("REPO", str(REPO))], env=env, timeout=300)
    shape = json.loads(out.stdout.strip().splitlines()[-1])
    assert shape["errors"] == {}
    tasks = shape["tasks"]
    assert tasks["case_run.on_node0"][:2] == ["node-a", "dlperf_node_node0"]
    assert tasks["case_run.on_node1"][:2] == ["node-b", "dlperf_node_node1"]
    assert tasks["remove_containers_node0"][0] == "node-a" and tasks["remove_containers_node0"][2] is True
    assert tasks["remove_containers_node1"][0] == "node-b" and tasks["remove_containers_node1"][2] is True
    assert "case_run.run_case" not in tasks and "capture_environment" not in tasks and "remove_containers" not in tasks
    assert tasks["case_run.collect_case"][0] == "default" and tasks["case_run.collect_case"][3] == "all_done"
    assert shape["collect_after"] == ["case_run.on_node0", "case_run.on_node1", "route_cases"]
    assert "case_run.store_result" in shape["searches_after"]  # probes never share a node with a case run


def test_a_task_on_another_nodes_worker_refuses_to_run(monkeypatch, cluster):
    from dlperf_airflow.node_step import node_step
    from dlperf_core.cluster.inventory import load_inventory
    from dlperf_core.model import RunIds
    from dlperf_core.plan.cases import PlanFilters, plan_suite
    from dlperf_core.plan.suite import load_suite
    from gang_board import DictBoard

    suite = load_suite(REPO / "suites/smoke.yaml")
    inventory = load_inventory(cluster)
    run = plan_suite(suite, inventory, PlanFilters(topologies=("2n1g",), repeats=1))[0]
    settings = RunSettings("suites/smoke.yaml", "docker", str(cluster), 60, None)
    item = PlannedRun.of(run, settings, inventory)
    monkeypatch.setenv("DLPERF_NODE", "node1")
    board = DictBoard()
    report = node_step(item, RunIds("d", "r"), "node0", None, board.view("node0"))
    assert report.share is not None and report.share.failure == (
        "node0: its task ran on the worker of node node1; give each node's worker only that node's queue (node-a)"
    )
    assert board.states["node0"]["phase"] == "gave_up"  # node1's task stops waiting for it
    one = plan_suite(suite, inventory, PlanFilters(topologies=("1n1g",)))[0]
    assert one.case.key.startswith("pytorch_reference/resnet50_v1.5/fp32/b32/1n1g+args=")
    alone = PlannedRun.of(one, settings, inventory)
    assert node_step(alone, RunIds("d", "r"), "node1", None, board.view("node1")) == NodeReport(
        "node1", skipped=f"{one.case.key} runs on node0"
    )


def test_a_trigger_outside_the_deployments_inventory_is_refused(tmp_path, cluster):
    from dlperf_core.cluster.inventory import load_inventory
    from dlperf_core.errors import ConfigError
    from dlperf_core.plan.trigger import check_routed

    routing = load_inventory(cluster)
    check_routed(routing, routing)
    with pytest.raises(ConfigError) as refused:
        check_routed(load_inventory(REPO / "inventories/docker-local.yaml"), routing, "docker-local.yaml")
    assert "node node0: queue 'default' differs from the deployment's 'node-a'" in str(refused.value)
    other = tmp_path / "other.yaml"
    other.write_text("name: other\nnodes:\n  - {name: gpu9}\n")
    with pytest.raises(ConfigError, match="node gpu9: not in the deployment's inventory routed-local"):
        check_routed(load_inventory(other), routing)


def test_a_max_batch_search_on_node_local_engines_is_refused_before_it_starts(monkeypatch, cluster):
    """Searches run from the central worker: with per-node sockets they would probe the wrong engine."""
    from dlperf_airflow import steps
    from dlperf_core.errors import ConfigError
    from dlperf_core.model import RunIds

    monkeypatch.setenv("AIRFLOW__DLPERF__CLUSTER_INVENTORY", cluster)  # Airflow reads an option's variable each time
    params = {"suite": str(REPO / "tests/data/maxbatch/suite.yaml"), "runtime": "docker", "inventory": cluster}
    with pytest.raises(ConfigError, match="nodes node0 are reached through their own Docker socket"):
        steps.plan_step(params, RunIds("d", "r"), "manual")
