"""The deployment loses parts mid-night, the two faults that need more time or set-up than CI has (``make chaos``,
``DLPERF_CHAOS=all``): a stand-in node's own Docker Engine (a second dockerd, tests/chaos/node_engine.py) stopped
mid-case, and the spool's disk full while the results database is down. Same deployment and night as
test_deployment_chaos.py (tests/chaos/conftest.py, tests/chaos/night.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_stack import AirflowStack
from chaos.night import (
    CASE_RUNS,
    IMAGE,
    RUN_CASE,
    STORE_RESULT,
    SUITE,
    check_the_night_completed,
    clear_case_runs,
    clear_failed,
    containers_of,
    last_case_run_training,
    rows_of,
    task_instances,
    task_log,
    trigger,
    wait_for_end,
)
from chaos.node_engine import NodeEngine
from dlperf_core.storage.spool import ResultSpool
from faults.private_pg import PrivatePostgres
from helpers import REPO, docker_marks, full_tmpfs

pytestmark = [
    *docker_marks(IMAGE),
    pytest.mark.postgres,
    pytest.mark.skipif(
        os.environ.get("DLPERF_CHAOS") != "all",
        reason="runs in `make chaos` (DLPERF_CHAOS=all), not in `make test`: CI's time is short",
    ),
]


@pytest.fixture
def node_engine() -> Iterator[NodeEngine]:
    """A stand-in node's own Docker Engine (tests/chaos/node_engine.py) with the workload's image."""
    if os.geteuid() != 0:
        pytest.skip("a second dockerd needs root")
    engine = NodeEngine()
    try:
        engine.start()
        engine.ensure_image(IMAGE)
        yield engine
    finally:
        engine.close()


def test_a_nodes_own_engine_stopped_mid_case_fails_its_case_runs_with_the_reason_and_a_rerun_completes_them(
    deployment: AirflowStack, results_pg: PrivatePostgres, node_engine: NodeEngine, fault, tmp_path
) -> None:
    rec = fault(
        "fault",
        "a node's own Docker Engine stopped mid-case (CeleryExecutor)",
        "the stand-in node's engine (a second dockerd, apart from the deployment's) stopped (SIGTERM: it stops its "
        "containers and exits) while a case run trains on it; started again after the DAG run ended; then the "
        "failed case runs' run_case task instances cleared with their downstream and run again",
        "the case run on the stopped engine and those after it stored as failed with a reason naming the engine; "
        "the run failed; after the engine is back and the clear, every case run ok, one row each; no container "
        "left on either engine",
    )
    inventory = tmp_path / "node-engine.yaml"
    inventory.write_text(
        "name: node-engine\nnodes:\n"
        f"  - {{name: node0, gpus: 1, accelerator: cpu, docker_url: '{node_engine.url}', network: none, "
        "ipc_host: false, shm_size: 1g}\n"
    )
    suite = tmp_path / "suite.yaml"
    suite.write_text((REPO / SUITE).read_text().replace("chaos-inventory.yaml", str(inventory)))
    stack = deployment
    run_id = trigger(stack, str(suite))
    label = f"dlperf.run_id={run_id}"

    def training_on_the_node() -> dict | None:
        running = [t for t in task_instances(stack, run_id) if t["task_id"] == RUN_CASE and t["state"] == "running"]
        return running[0] if running and node_engine.containers(label) else None

    victim = stack.wait_until("a case run's container on the node's engine", training_on_the_node, 300, every=1)
    time.sleep(2)
    node_engine.stop()
    stopped_at = time.monotonic()
    assert wait_for_end(stack, run_id) == "failed"
    detected_s = time.monotonic() - stopped_at
    rows = rows_of(results_pg.url, run_id)
    assert len(rows) == CASE_RUNS and rows.duplicated(["case_key", "repeat"]).sum() == 0, rows
    failed = rows[rows["status"] == "failed"]
    assert victim["map_index"] in list(failed["repeat"]), rows[["repeat", "status", "reason"]]
    reasons = list(failed["reason"])
    assert all(f"node0's Docker Engine at {node_engine.url} does not answer" in r for r in reasons), reasons
    assert containers_of(run_id) == []  # nothing of the night on the deployment's own engine

    node_engine.start()
    clear_case_runs(stack, run_id, sorted(int(r) for r in failed["repeat"]))  # one case: map index = repeat
    assert wait_for_end(stack, run_id) == "success", task_log(stack, run_id, RUN_CASE)
    again = rows_of(results_pg.url, run_id)
    assert len(again) == CASE_RUNS and set(again["status"]) == {"ok"}, again[["repeat", "status", "reason"]]
    leaked = node_engine.containers(label) + containers_of(run_id)
    assert leaked == []
    rec.results_lost = CASE_RUNS - len(again)
    rec.results_duplicated = int(again.duplicated(["case_key", "repeat"]).sum())
    rec.containers_leaked = len(leaked)
    rec.observed = (
        f"run failed {detected_s:.0f} s after the stop; {len(failed)} case runs failed, e.g. {reasons[0][:70]}...; "
        f"after the restart and the clear {len(again)} rows ok, 0 duplicates, 0 containers on either engine"
    )


@pytest.fixture
def full_spool_disk(deployment: AirflowStack) -> Iterator[Path]:
    """The deployment's spool folder on a 64 KiB tmpfs, filled to its last byte (unmounted after)."""
    with full_tmpfs(deployment.home / "spool", "64k") as mount:
        yield mount


def test_the_spool_disk_full_while_the_database_is_down_fails_the_stores_naming_both_and_a_rerun_stores_every_result(
    deployment: AirflowStack, results_pg: PrivatePostgres, full_spool_disk: Path, fault
) -> None:
    rec = fault(
        "fault",
        "spool disk full while the results database is down (CeleryExecutor)",
        "the spool folder on a full 64 KiB tmpfs; the results database stopped while the night's last case run "
        "trains, so that no result can be written or spooled; the run left to end; then the database started, the "
        "disk freed and the DAG run's failed tasks cleared and run again",
        "store_result fails naming both (database unavailable, no space on the spool's disk), nothing half-written "
        "in the spool; the run failed; after the clear every case run ok, one row each, from the outcomes their "
        "run_case tasks kept; no container left",
    )
    stack = deployment
    run_id = trigger(stack)
    spool = ResultSpool(results_pg.url, root=full_spool_disk)

    stack.wait_until("the last case run to train", lambda: last_case_run_training(stack, run_id), 300, every=1)
    results_pg.stop()
    try:
        assert wait_for_end(stack, run_id) == "failed"
        log = task_log(stack, run_id, STORE_RESULT, tail=None)
        assert "No space left on device" in log and "results database unavailable" in log, log
        failed_stores = [
            t for t in task_instances(stack, run_id) if t["task_id"] == STORE_RESULT and t["state"] == "failed"
        ]
        assert failed_stores, "store_result did not fail"
        half_written = list(spool.folder.iterdir()) if spool.folder.exists() else []
        assert half_written == []
    finally:
        results_pg.start()
    (full_spool_disk / "filler").unlink()
    clear_failed(stack, run_id)
    assert wait_for_end(stack, run_id) == "success", task_log(stack, run_id, STORE_RESULT)
    rows = check_the_night_completed(results_pg.url, run_id, rec)
    rec.observed = (
        f"{len(failed_stores)} store_result failed naming the database and the full disk; after the clear "
        f"{len(rows)} rows ok, 0 duplicates, spool empty, 0 containers"
    )
