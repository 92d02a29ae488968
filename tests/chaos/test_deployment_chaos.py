"""The deployment loses parts mid-night (issue 24), on the tests' CeleryExecutor deployment: api-server,
scheduler and dag-processor, a Celery worker on the default queue (Redis broker), Airflow's metadata in the shared
PostgreSQL, and dlperf's results in a private PostgreSQL server of their own that a test may restart. The night is
tests/data/chaos-suite.yaml: three case runs of the synthetic workload (about 9 s each) in containers on the local
Docker Engine.

Each test injects one fault while the night runs and then checks what the issue asks: every case run ends ``ok`` or
``failed`` with a reason that names what happened; no result row is lost (spooled results reach the database when
it returns) or duplicated; no framework container is left on the engine; clearing the DAG run's failed tasks and
running them again completes the rest without duplicates. Each records its figures in the fault ledger (the table
pytest prints at the end, docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from airflow_stack import CELERY_WORKER, AirflowStack, celery_env, prepare_stack, redis_url, start_stack
from dlperf_core.storage import ResultStore
from dlperf_core.storage.spool import ResultSpool
from faults.private_pg import PrivatePostgres, running_private_pg
from helpers import dlperf_containers, docker_marks

IMAGE = "dlperf/pytorch-reference:cpu"  # the synthetic workload's image (any with python3 and the workload folder)
DAG_ID = "dlperf_benchmark"
SUITE = "tests/data/chaos-suite.yaml"
CASE_RUNS = 3
HEARTBEAT_TIMEOUT_S = 20  # Airflow's default is 300 s: a killed worker's task is failed that much later
pytestmark = [*docker_marks(IMAGE), pytest.mark.postgres]


@pytest.fixture(scope="module")
def results_pg() -> Iterator[PrivatePostgres]:
    yield from running_private_pg()


def start_worker(stack: AirflowStack) -> None:
    """(Re)start the deployment's Celery worker, in a process group of its own (what a kill -9 ends)."""
    stack.start("worker", *CELERY_WORKER, "--queues", "default", "--celery-hostname", f"w{uuid.uuid4().hex[:6]}@%h")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, module_metadata_url, results_pg) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("chaos") / "airflow"
    broker = redis_url()
    stack = prepare_stack(
        home,
        module_metadata_url,
        results_pg.url,
        "dlperf",
        f"pw-{uuid.uuid4().hex[:10]}",
        extra_env={
            **celery_env(broker, module_metadata_url),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_S),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
            "DLPERF_SPOOL_DIR": str(home / "spool"),
        },
    )
    try:
        start_stack(stack)
        start_worker(stack)
        token = stack.token()
        assert stack.request("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False}, token=token)[0] == 200
        yield stack
    finally:
        stack.stop()
        subprocess.run(["redis-cli", "-u", broker, "flushdb"], capture_output=True)


# ------------------------------------------------------------------------------------------ helpers
def trigger(stack: AirflowStack) -> str:
    status, body = stack.request(
        "POST",
        f"/api/v2/dags/{DAG_ID}/dagRuns",
        {"logical_date": None, "conf": {"suite": SUITE, "runtime": "docker"}},
        token=stack.token(),
    )
    assert status == 200, body
    return body["dag_run_id"]  # type: ignore[index]


def task_instances(stack: AirflowStack, run_id: str) -> list[dict]:
    body = stack.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances?limit=200", token=stack.token())[
        1
    ]
    return body["task_instances"]  # type: ignore[index]


def wait_for_end(stack: AirflowStack, run_id: str, timeout: float = 600) -> str:
    def ended() -> str | None:
        state = stack.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}", token=stack.token())[1]["state"]  # type: ignore[index]
        return state if state in ("success", "failed") else None

    return stack.wait_until(f"DAG run {run_id} to end", ended, timeout, every=2)


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
    return [n for n in names if n in dlperf_containers()]


def task_log(stack: AirflowStack, run_id: str, task_id: str) -> str:
    return "\n".join(
        p.read_text(errors="replace")[-3000:]
        for p in (stack.home / "logs").rglob("*.log")
        if f"task_id={task_id}" in str(p) and run_id in str(p)
    )


# ------------------------------------------------------------------------------------------ the faults
def test_a_worker_killed_mid_case_fails_that_case_run_with_the_reason_and_a_rerun_completes_it(
    deployment: AirflowStack, results_pg: PrivatePostgres, fault
) -> None:
    rec = fault(
        "fault",
        "Celery worker killed mid-case (CeleryExecutor)",
        "`kill -9` of the Celery worker's process group while its run_case task runs a case's container; a new "
        f"worker started at once; Airflow's task heartbeat timeout {HEARTBEAT_TIMEOUT_S} s; then the DAG run's failed "
        "tasks cleared and run again",
        "that case run stored as failed 'lost: run_case failed ...', the others ok, the run failed; its container "
        "removed by the teardown; after the clear every case run ok, one row each; no container left",
    )
    stack = deployment
    run_id = trigger(stack)

    def a_case_running() -> dict | None:
        running = [t for t in task_instances(stack, run_id) if t["task_id"] == "run_case" and t["state"] == "running"]
        return running[0] if running and containers_of(run_id) else None

    victim = stack.wait_until("a case run's container", a_case_running, 300, every=1)
    time.sleep(2)  # mid-case: the synthetic workload runs ~9 s
    worker = stack.processes.pop("worker")
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    killed_at = time.monotonic()
    start_worker(stack)

    assert wait_for_end(stack, run_id) == "failed"
    detected_s = time.monotonic() - killed_at
    rows = rows_of(results_pg.url, run_id)
    assert len(rows) == CASE_RUNS and rows.duplicated(["case_key", "repeat"]).sum() == 0, rows
    failed = rows[rows["status"] == "failed"]
    states = sorted((t["task_id"], t["map_index"], t["state"]) for t in task_instances(stack, run_id))
    assert list(failed["repeat"]) == [victim["map_index"]], (rows[["repeat", "status", "reason"]].to_dict(), states)
    reason = failed["reason"].iloc[0]
    assert reason.startswith("lost: run_case failed"), reason
    assert set(rows[rows["status"] != "failed"]["status"]) == {"ok"}
    assert containers_of(run_id) == [], "the teardown leaves no container of the run"

    clear_failed(stack, run_id)
    assert wait_for_end(stack, run_id) == "success", task_log(stack, run_id, "run_case")
    again = rows_of(results_pg.url, run_id)
    assert len(again) == CASE_RUNS and set(again["status"]) == {"ok"}, again[["repeat", "status", "reason"]]
    assert again.duplicated(["case_key", "repeat"]).sum() == 0
    leaked = containers_of(run_id)
    assert leaked == []
    rec.results_lost = CASE_RUNS - len(again)
    rec.results_duplicated = int(again.duplicated(["case_key", "repeat"]).sum())
    rec.containers_leaked = len(leaked)
    rec.observed = (
        f"run failed {detected_s:.0f} s after the kill; repeat {victim['map_index']} stored failed: {reason[:60]}...; "
        f"after the clear {len(again)} rows ok, 0 duplicates, 0 containers"
    )


def test_the_results_database_restarted_while_results_are_stored_loses_nothing(
    deployment: AirflowStack, results_pg: PrivatePostgres, fault
) -> None:
    rec = fault(
        "fault",
        "results PostgreSQL restarted mid-night (CeleryExecutor)",
        "the results database's server stopped (`pg_ctl stop -m fast`) while the night's last case run trains (the "
        "mapped store_result starts once every run_case is done), kept down until a store_result spooled its result, "
        "then started again",
        "store_result spools while the server is down (the task does not fail); the next store_result or finish_run "
        "writes the spool; every case run ok, one row each, the run succeeds; no container left",
    )
    stack = deployment
    run_id = trigger(stack)
    spool = ResultSpool(results_pg.url, root=stack.home / "spool")

    def last_case_run_training() -> bool:
        return any(
            t["task_id"] == "run_case" and t["map_index"] == CASE_RUNS - 1 and t["state"] == "running"
            for t in task_instances(stack, run_id)
        )

    stack.wait_until("the last case run to train", last_case_run_training, 300, every=1)
    stored_before = len(rows_of(results_pg.url, run_id))
    results_pg.stop()
    stopped_at = time.monotonic()
    try:
        spooled = stack.wait_until("a result spooled while the database is down", spool.pending, 120, every=1)
        spooled_repeats = sorted(json.loads(path.read_text())["repeat"] for path in spooled)
    finally:
        results_pg.start()
    down_s = time.monotonic() - stopped_at
    assert stored_before == 0, "store_result ran before every run_case was done"

    state = wait_for_end(stack, run_id)
    rows = rows_of(results_pg.url, run_id)
    assert state == "success", (rows[["repeat", "status", "reason"]], task_log(stack, run_id, "finish_run"))
    assert len(rows) == CASE_RUNS and set(rows["status"]) == {"ok"}
    assert rows.duplicated(["case_key", "repeat"]).sum() == 0
    assert spool.pending() == []
    leaked = containers_of(run_id)
    assert leaked == []
    rec.results_lost = CASE_RUNS - len(rows)
    rec.results_duplicated = int(rows.duplicated(["case_key", "repeat"]).sum())
    rec.containers_leaked = len(leaked)
    rec.observed = (
        f"down {down_s:.0f} s from the last case run's training on, before any result was stored; repeat "
        f"{spooled_repeats} spooled meanwhile; run success, {len(rows)} rows, spool empty"
    )
