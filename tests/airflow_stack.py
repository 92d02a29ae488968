"""A real Airflow 3 deployment for end-to-end UI tests: api-server, scheduler and dag-processor as
subprocesses on a free port, with a private AIRFLOW_HOME whose dags/plugins folders are the repository's,
a PostgreSQL metadata database (LocalExecutor), the SimpleAuthManager with one user whose password the
test sets, the ``dlperf_cluster`` pool and a dlperf results database (``DLPERF_DB_URL``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from dlperf_core.json_form import ALLOWED_DESERIALIZATION_CLASSES
from dlperf_core.plan.defaults import (
    CELERY_CONFIG_OPTIONS,
    EXECUTION_API_RETRIES,
    MAX_CASE_RUNS,
    TASK_SUPERVISOR_WAKE_S,
)
from helpers import REPO

AIRFLOW = [sys.executable, "-m", "airflow"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class AirflowStack:
    """The running deployment: where it answers, who may log in, and its processes."""

    home: Path
    port: int
    username: str
    password: str
    env: dict[str, str]
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self, name: str, tail: int = 4000) -> str:
        path = self.home / f"{name}.out"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"===== {name}\n{self.log(name)}" for name in self.processes)

    def airflow(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        out = subprocess.run(
            [*AIRFLOW, *args], env=self.env, cwd=self.home, capture_output=True, text=True, timeout=timeout
        )
        if out.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
        return out

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> None:
        """Start ``airflow ARGS`` in the background (``env``: added to the stack's environment)."""
        with (self.home / f"{name}.out").open("wb") as out:  # the process keeps its own handle of the file
            self.processes[name] = subprocess.Popen(
                [*AIRFLOW, *args],
                env={**self.env, **(env or {})},
                cwd=self.home,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() ends it and its workers, nothing else
            )

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def check_alive(self) -> None:
        dead = {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}
        if dead:
            raise RuntimeError(f"Airflow processes exited: {dead}\n{self.logs()}")

    # ------------------------------------------------------------------ REST API

    def request(
        self, method: str, path: str, body: dict | None = None, token: str | None = None, timeout: float = 30
    ) -> tuple[int, object]:
        """(status, parsed JSON or text) of a request to the api-server."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

    def token(self) -> str:
        status, body = self.request("POST", "/auth/token", {"username": self.username, "password": self.password})
        if status != 201:
            raise RuntimeError(f"login failed: {status} {body}")
        return body["access_token"]  # type: ignore[index]

    def wait_until(self, what: str, check, timeout: float, every: float = 0.5):
        """Poll ``check()`` until it returns something truthy; fail with the servers' logs after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            try:
                found = check()
            except (OSError, urllib.error.URLError):
                found = None
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}\n{self.logs()}")
            time.sleep(every)


def redis_url() -> str:
    """A Redis database of its own on the local Redis (scripts/ensure-redis.sh starts one if none answers), for a
    CeleryExecutor deployment's broker."""
    import pytest

    if subprocess.run(["bash", str(REPO / "scripts/ensure-redis.sh")], capture_output=True).returncode != 0:
        pytest.skip("no Redis server answers on 127.0.0.1:6379 and scripts/ensure-redis.sh could not start one")
    # Deployments of parallel test workers (pytest-xdist) run at once: each claims a database with SET NX (the
    # claim expires after 2 h; the deployment's FLUSHDB at its end drops it) instead of drawing a number that
    # another may have drawn (two schedulers on one broker take each other's tasks).
    claim = f"dlperf-test-{uuid.uuid4().hex}"
    for db in range(1, 16):
        url = f"redis://127.0.0.1:6379/{db}"
        got = subprocess.run(
            ["redis-cli", "-u", url, "SET", "dlperf-test-claim", claim, "NX", "EX", "7200"],
            capture_output=True,
            text=True,
        )
        if got.stdout.strip() == "OK":
            return url
    raise RuntimeError("every Redis database 1-15 on 127.0.0.1:6379 is claimed by a test deployment")


def celery_env(broker: str, metadata_url: str) -> dict[str, str]:
    """The CeleryExecutor's settings of a test deployment (``prepare_stack``'s ``extra_env``)."""
    return {
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CELERY__BROKER_URL": broker,
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + metadata_url,
        "AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS": CELERY_CONFIG_OPTIONS,
        "AIRFLOW__OPERATORS__DEFAULT_QUEUE": "default",
    }


CELERY_WORKER = ("celery", "worker", "--concurrency", "2", "--without-mingle", "--without-gossip")
"""``airflow`` arguments of a test deployment's Celery worker (add ``--queues`` and ``--celery-hostname``)."""


def prepare_stack(
    home: Path,
    metadata_url: str,
    results_url: str,
    username: str,
    password: str,
    extra_env: dict[str, str] | None = None,
) -> AirflowStack:
    """Configure (environment, passwords file), migrate the metadata DB and create the pool.

    ``extra_env`` overrides the defaults (another executor, node routing)."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    passwords = home / "simple_auth_manager_passwords.json"
    passwords.write_text(json.dumps({username: password}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__ALLOWED_DESERIALIZATION_CLASSES": ALLOWED_DESERIALIZATION_CLASSES,
            "AIRFLOW__CORE__MAX_MAP_LENGTH": str(MAX_CASE_RUNS),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": str(TASK_SUPERVISOR_WAKE_S),
            "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": str(EXECUTION_API_RETRIES),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_url,
            "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{username}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__API_AUTH__JWT_SECRET": "dlperf-e2e-secret-" + home.name,
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",  # no nightly run on unpause: only the test's run
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "DLPERF_DB_URL": results_url,
            "DLPERF_HOME": str(REPO),
            "DLPERF_LOG_DIR": str(home / "dlperf-logs"),
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO), str(REPO / "plugins"), os.environ.get("PYTHONPATH")])
            ),
            **(extra_env or {}),
        }
    )
    stack = AirflowStack(home=home, port=port, username=username, password=password, env=env)
    stack.airflow("db", "migrate")
    stack.airflow(
        "pools", "set", "--include-deferred", "dlperf_cluster", "1", "one benchmark case at a time on the cluster"
    )
    return stack


def start_stack(stack: AirflowStack) -> None:
    """Start the three servers and wait until the api-server answers and the DAG is parsed."""
    stack.start("api-server", "api-server", "--host", "127.0.0.1", "--port", str(stack.port), "--workers", "1")
    stack.start("dag-processor", "dag-processor")
    stack.start("scheduler", "scheduler")
    stack.wait_until("the api-server", lambda: stack.request("GET", "/api/v2/monitor/health")[0] == 200, 240)
    token = stack.token()
    stack.wait_until(
        "dlperf_benchmark to be parsed",
        lambda: stack.request("GET", "/api/v2/dags/dlperf_benchmark", token=token)[0] == 200,
        300,
    )
