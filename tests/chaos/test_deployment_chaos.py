"""The deployment loses parts mid-night (issue 24), on the tests' CeleryExecutor deployment: api-server,
scheduler and dag-processor, a Celery worker on the default queue (Redis broker), Airflow's metadata in the shared
PostgreSQL, and dlperf's results in a private PostgreSQL server of their own that a test may restart. The night is
tests/data/chaos-suite.yaml: three case runs of the synthetic workload (about 9 s each) in containers on the local
Docker Engine.

The faults, one per test: a Celery worker killed mid-case, the results database restarted while results are
stored, the scheduler restarted (these three here), the api-server stopped and started (test_api_server_chaos.py,
on a deployment of its own); these four in ``make test``, so in CI; a stand-in node's own Docker Engine (a second
dockerd, tests/chaos/node_engine.py) stopped mid-case, and the spool's disk full while the results database is down
(test_node_and_disk_chaos.py, in ``make chaos`` only: ``DLPERF_CHAOS=all``).

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
import time

import pytest

from airflow_stack import AirflowStack
from chaos.night import (
    CASE_RUNS,
    HEARTBEAT_TIMEOUT_S,
    IMAGE,
    RUN_CASE,
    a_case_run_training,
    check_the_night_completed,
    clear_failed,
    containers_of,
    last_case_run_training,
    rows_of,
    start_worker,
    stop,
    task_log,
    task_states,
    trigger,
    wait_for_end,
)
from dlperf_core.storage.spool import ResultSpool
from faults.private_pg import PrivatePostgres
from helpers import docker_marks

pytestmark = [*docker_marks(IMAGE), pytest.mark.postgres]


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

    victim = stack.wait_until("a case run's container", lambda: a_case_run_training(stack, run_id), 300, every=1)
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
    states = task_states(stack, run_id)
    assert list(failed["repeat"]) == [victim["map_index"]], (rows[["repeat", "status", "reason"]].to_dict(), states)
    reason = failed["reason"].iloc[0]
    assert reason.startswith("lost: run_case failed"), reason
    assert set(rows[rows["status"] != "failed"]["status"]) == {"ok"}
    assert containers_of(run_id) == [], "the teardown leaves no container of the run"

    clear_failed(stack, run_id)
    assert wait_for_end(stack, run_id) == "success", task_log(stack, run_id, RUN_CASE)
    again = check_the_night_completed(results_pg.url, run_id, rec)
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
        "the results database's server stopped (`pg_ctl stop -m fast`) while the night's last case run trains (each "
        "case run's store_result follows its own run_case), kept down until a store_result spooled its result, then "
        "started again",
        "store_result spools while the server is down (the task does not fail); the next store_result or finish_run "
        "writes the spool; every case run ok, one row each, the run succeeds; no container left",
    )
    stack = deployment
    run_id = trigger(stack)
    spool = ResultSpool(results_pg.url, root=stack.home / "spool")

    stack.wait_until("the last case run to train", lambda: last_case_run_training(stack, run_id), 300, every=1)
    stored_before = len(rows_of(results_pg.url, run_id))
    results_pg.stop()
    stopped_at = time.monotonic()
    try:
        spooled = stack.wait_until("a result spooled while the database is down", spool.pending, 120, every=1)
        spooled_repeats = sorted(json.loads(path.read_text())["repeat"] for path in spooled)
    finally:
        results_pg.start()
    down_s = time.monotonic() - stopped_at
    assert stored_before < CASE_RUNS, "the last case run was stored before it trained"

    state = wait_for_end(stack, run_id)
    rows = rows_of(results_pg.url, run_id)
    assert state == "success", (rows[["repeat", "status", "reason"]], task_log(stack, run_id, "finish_run"))
    rows = check_the_night_completed(results_pg.url, run_id, rec)
    assert spool.pending() == []
    rec.observed = (
        f"down {down_s:.0f} s from the last case run's training on ({stored_before} stored before); repeat "
        f"{spooled_repeats} spooled meanwhile; run success, {len(rows)} rows, spool empty"
    )


def test_the_scheduler_restarted_mid_case_loses_nothing(
    deployment: AirflowStack, results_pg: PrivatePostgres, fault
) -> None:
    rec = fault(
        "fault",
        "scheduler restarted mid-case (CeleryExecutor)",
        "the scheduler stopped (SIGTERM to its process group, as `docker compose restart` does) while a case run "
        "trains on the Celery worker, kept down 10 s, then a new scheduler started",
        "the running task goes on on its worker and reports to the api-server; the new scheduler adopts the run "
        "and schedules the rest; every case run ok, one row each, the run succeeds; no container left",
    )
    stack = deployment
    run_id = trigger(stack)
    victim = stack.wait_until("a case run's container", lambda: a_case_run_training(stack, run_id), 300, every=1)
    stop(stack, "scheduler")
    stopped_at = time.monotonic()
    time.sleep(10)
    stack.start("scheduler", "scheduler")
    down_s = time.monotonic() - stopped_at
    state = wait_for_end(stack, run_id)
    assert state == "success", (
        task_states(stack, run_id),
        stack.log("scheduler"),
    )
    check_the_night_completed(results_pg.url, run_id, rec)
    rec.observed = (
        f"down {down_s:.0f} s while repeat {victim['map_index']} trained; run success, {CASE_RUNS} rows ok, "
        "0 duplicates, 0 containers"
    )
