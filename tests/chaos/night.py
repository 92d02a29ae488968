"""The chaos tests' night on the tests' CeleryExecutor deployment (tests/chaos/conftest.py): what it runs, and how a
test triggers it, watches it, clears it and reads what it stored."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid

from airflow_stack import CELERY_WORKER, AirflowStack
from dlperf_airflow import task_ids
from dlperf_core.storage import ResultStore
from helpers import REPO, dlperf_containers, network_of

IMAGE = "dlperf/pytorch-reference:cpu"  # the synthetic workload's image (any with python3 and the workload folder)
DAG_ID = "dlperf_benchmark"
SUITE = "tests/data/chaos-suite.yaml"
CASE_RUNS = 3
RUN_CASE = task_ids.in_case_run(task_ids.RUN_CASE)  # the tasks of a case run, in the case_run group
STORE_RESULT = task_ids.in_case_run(task_ids.STORE_RESULT)
HEARTBEAT_TIMEOUT_S = 20  # Airflow's default is 300 s: a killed worker's task is failed that much later


def start_worker(stack: AirflowStack) -> None:
    """(Re)start the deployment's Celery worker, in a process group of its own (what a kill -9 ends)."""
    stack.start("worker", *CELERY_WORKER, "--queues", "default", "--celery-hostname", f"w{uuid.uuid4().hex[:6]}@%h")


def trigger(stack: AirflowStack, suite: str = SUITE) -> str:
    status, body = stack.request(
        "POST",
        f"/api/v2/dags/{DAG_ID}/dagRuns",
        {"logical_date": None, "conf": {"suite": suite, "runtime": "docker"}},
        token=stack.token(),
    )
    assert status == 200, body
    return body["dag_run_id"]  # type: ignore[index]


def task_instances(stack: AirflowStack, run_id: str) -> list[dict]:
    body = stack.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances?limit=200", token=stack.token())[
        1
    ]
    return body["task_instances"]  # type: ignore[index]


def task_states(stack: AirflowStack, run_id: str) -> list[tuple[str, int, str]]:
    """(task_id, map_index, state) of every task instance of the run, sorted: what a failed check prints."""
    return sorted((t["task_id"], t["map_index"], t["state"]) for t in task_instances(stack, run_id))


def wait_for_end(stack: AirflowStack, run_id: str, timeout: float = 600) -> str:
    def ended() -> str | None:
        state = stack.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}", token=stack.token())[1]["state"]  # type: ignore[index]
        return state if state in ("success", "failed") else None

    return stack.wait_until(f"DAG run {run_id} to end", ended, timeout, every=1)


def clear_failed(stack: AirflowStack, run_id: str) -> None:
    """What a user does after a night that lost parts: clear the run's failed tasks (and their downstream) so that
    they run again."""
    status, body = stack.request(
        "POST",
        f"/api/v2/dags/{DAG_ID}/clearTaskInstances",
        {"dag_run_id": run_id, "only_failed": True, "reset_dag_runs": True, "dry_run": False},
        token=stack.token(),
    )
    assert status == 200, body


def clear_case_runs(stack: AirflowStack, run_id: str, indexes: list[int]) -> None:
    """What a user does to run case runs again whose tasks succeeded but whose results failed (the runtime could
    not reach a node's engine): clear their ``case_run.run_case`` task instances with what follows them (the UI's "Clear" on
    those instances, "Downstream" checked)."""
    status, body = stack.request(
        "POST",
        f"/api/v2/dags/{DAG_ID}/clearTaskInstances",
        {
            "dag_run_id": run_id,
            "task_ids": [["case_run.run_case", i] for i in indexes],
            "include_downstream": True,
            "only_failed": False,
            "reset_dag_runs": True,
            "dry_run": False,
        },
        token=stack.token(),
    )
    assert status == 200, body


def rows_of(url: str, run_id: str):
    store = ResultStore(url)
    try:
        return store.results(run_id=run_id, dag_id=DAG_ID)
    finally:
        store.dispose()


def containers_of(run_id: str) -> list[str]:
    names = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label=dlperf.run_id={run_id}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [
        n for n in names if n in dlperf_containers(network=network_of(REPO / "tests" / "data" / "chaos-inventory.yaml"))
    ]


def task_log(stack: AirflowStack, run_id: str, task_id: str, tail: int | None = 3000) -> str:
    """The logs of a task's instances in the run (the last ``tail`` characters of each; None: all of it)."""
    return "\n".join(
        p.read_text(errors="replace")[-tail if tail else 0 :]
        for p in (stack.home / "logs").rglob("*.log")
        if f"task_id={task_id}" in str(p) and run_id in str(p)
    )


# ------------------------------------------------------------------------------------------ the faults
def stop(stack: AirflowStack, name: str, sig: signal.Signals = signal.SIGTERM) -> None:
    """Stop one of the deployment's processes (its whole process group) and wait until it is gone."""
    proc = stack.processes.pop(name)
    os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def a_case_run_training(stack: AirflowStack, run_id: str):
    """A case_run.run_case task instance whose case's container runs (None before)."""
    running = [t for t in task_instances(stack, run_id) if t["task_id"] == RUN_CASE and t["state"] == "running"]
    return running[0] if running and containers_of(run_id) else None


def last_case_run_training(stack: AirflowStack, run_id: str) -> bool:
    """The night's last case run is training (every store_result is still to come)."""
    return any(
        t["task_id"] == RUN_CASE and t["map_index"] == CASE_RUNS - 1 and t["state"] == "running"
        for t in task_instances(stack, run_id)
    )


def check_the_night_completed(url: str, run_id: str, rec):
    """Every case run stored once, ok; no container left; the ledger's counts."""
    rows = rows_of(url, run_id)
    assert len(rows) == CASE_RUNS and set(rows["status"]) == {"ok"}, rows[["repeat", "status", "reason"]]
    assert rows.duplicated(["case_key", "repeat"]).sum() == 0
    leaked = containers_of(run_id)
    assert leaked == []
    rec.results_lost = CASE_RUNS - len(rows)
    rec.results_duplicated = int(rows.duplicated(["case_key", "repeat"]).sum())
    rec.containers_leaked = len(leaked)
    return rows
