"""The chaos tests' deployment (module-scoped: one per test module) and its results database; the fault ledger of
tests/faults/ (the ``fault`` fixture and the session plugin that prints and writes the ledger)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest

from airflow_stack import AirflowStack, celery_env, prepare_stack, redis_url, start_stack
from chaos.night import DAG_ID, HEARTBEAT_TIMEOUT_S, start_worker
from faults.conftest import fault  # noqa: F401 - pytest finds it here
from faults.private_pg import PrivatePostgres, running_private_pg


@pytest.fixture(scope="module")
def results_pg() -> Iterator[PrivatePostgres]:
    yield from running_private_pg()


@pytest.fixture(scope="module")
def task_heartbeat_timeout_s() -> int | None:
    """The scheduler's ``task_instance_heartbeat_timeout`` of a module's deployment: short, so that a killed
    worker's task is failed quickly. A module whose fault stops the task heartbeats of tasks that live on (the
    api-server's) overrides it with None: Airflow's default, 300 s, what docker-compose.yaml deploys."""
    return HEARTBEAT_TIMEOUT_S


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, module_metadata_url, results_pg, task_heartbeat_timeout_s) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("chaos") / "airflow"
    broker = redis_url()
    heartbeat = (
        {}
        if task_heartbeat_timeout_s is None
        else {
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(task_heartbeat_timeout_s),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
        }
    )
    stack = prepare_stack(
        home,
        module_metadata_url,
        results_pg.url,
        "dlperf",
        f"pw-{uuid.uuid4().hex[:10]}",
        extra_env={
            **celery_env(broker, module_metadata_url),
            **heartbeat,
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
