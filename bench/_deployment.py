"""The tests' CeleryExecutor deployment for a benchmark (bench/growth.py --executor celery, bench/growth_nodes.py):
api-server, scheduler and dag-processor of tests/airflow_stack.py, Celery workers on the queues asked for (Redis
broker), Airflow's metadata and dlperf's results in fresh PostgreSQL databases of the local server, dropped after."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from _common import REPO

sys.path.insert(0, str(REPO / "tests"))

from airflow_stack import CELERY_WORKER, AirflowStack, celery_env, prepare_stack, start_stack  # noqa: E402

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
DAG_ID = "dlperf_benchmark"


@dataclass(frozen=True)
class Worker:
    """A Celery worker of the deployment: its queue, how many tasks it runs at once, what is set in its
    environment (``DLPERF_NODE`` on a node's worker)."""

    name: str
    queue: str
    concurrency: int = 1
    env: tuple[tuple[str, str], ...] = ()


def _admin(sql: str) -> None:
    import psycopg2

    conn = psycopg2.connect(PG_ADMIN)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
    finally:
        conn.close()


@contextmanager
def _database(prefix: str) -> Iterator[str]:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    _admin(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
    finally:
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class Deployment:
    stack: AirflowStack
    metadata_url: str
    results_url: str

    def trigger(self, conf: dict) -> str:
        status, body = self.stack.request(
            "POST", f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": conf}, token=self.stack.token()
        )
        if status != 200:
            raise RuntimeError(f"trigger refused: {status} {body}")
        return body["dag_run_id"]  # type: ignore[index]

    def wait(self, run_id: str, timeout: float) -> str:
        def ended() -> str | None:
            path = f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}"
            state = self.stack.request("GET", path, token=self.stack.token())[1]["state"]  # type: ignore[index]
            return state if state in ("success", "failed") else None

        return self.stack.wait_until(f"DAG run {run_id}", ended, timeout, every=3)

    def task_instances(self, run_id: str) -> pd.DataFrame:
        """The run's task instances from the metadata database (every try's latest state)."""
        from sqlalchemy import create_engine

        engine = create_engine(self.metadata_url)
        try:
            frame = pd.read_sql(
                "select task_id, map_index, rendered_map_index as label, state, queued_dttm, start_date, end_date, "
                "duration, queue from task_instance where run_id = %(run_id)s order by start_date",
                engine,
                params={"run_id": run_id},
            )
        finally:
            engine.dispose()
        for column in ("queued_dttm", "start_date", "end_date"):
            frame[column] = pd.to_datetime(frame[column], utc=True).dt.as_unit("us")
        return frame

    def xcom_values(self, run_id: str, task_id: str, key: str = "return_value") -> dict[int, object]:
        """map index -> the value a task pushed (as the api-server reads it back), for every mapped instance."""
        import json

        from sqlalchemy import create_engine, text

        engine = create_engine(self.metadata_url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    text("select map_index, value from xcom where run_id = :r and task_id = :t and key = :k"),
                    {"r": run_id, "t": task_id, "k": key},
                ).all()
        finally:
            engine.dispose()
        return {int(i): json.loads(v) if isinstance(v, str) else v for i, v in rows}

    def database_bytes(self, url: str) -> int:
        from sqlalchemy import create_engine, text

        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                return int(conn.execute(text("select pg_database_size(current_database())")).scalar_one())
        finally:
            engine.dispose()


@contextmanager
def celery_deployment(
    home: Path, workers: list[Worker], extra_env: dict[str, str] | None = None, inventory: str | None = None
) -> Iterator[Deployment]:
    """A running deployment with ``workers``; ``inventory``: node routing on (``[dlperf] cluster_inventory``, its
    pools made by ``dlperf cluster sync``)."""
    broker = f"redis://127.0.0.1:6379/{uuid.uuid4().int % 14 + 1}"
    with _database("dlperf_bench_airflow") as metadata_url, _database("dlperf_bench_results") as results_url:
        env = {**celery_env(broker, metadata_url), "AIRFLOW__CORE__PARALLELISM": "32", **(extra_env or {})}
        if inventory:
            env["AIRFLOW__DLPERF__CLUSTER_INVENTORY"] = inventory
        stack = prepare_stack(home, metadata_url, results_url, "dlperf", f"pw-{uuid.uuid4().hex[:10]}", env)
        try:
            if inventory:
                sync = subprocess.run(
                    [sys.executable, "-m", "dlperf_cli.main", "cluster", "sync", "--inventory", inventory],
                    env=stack.env,
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                )
                if sync.returncode != 0:
                    raise RuntimeError(f"dlperf cluster sync failed: {sync.stderr[-2000:]}")
            start_stack(stack)
            for w in workers:
                args = (*CELERY_WORKER[:2], "--concurrency", str(w.concurrency), *CELERY_WORKER[4:])
                stack.start(w.name, *args, "--queues", w.queue, "--celery-hostname", f"{w.name}@%h", env=dict(w.env))
            token = stack.token()
            stack.request("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False}, token=token)
            time.sleep(5)  # the workers connect to the broker
            yield Deployment(stack, metadata_url, results_url)
        finally:
            stack.stop()
            subprocess.run(["redis-cli", "-u", broker, "flushdb"], capture_output=True)
