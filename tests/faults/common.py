"""Helpers shared by the fault tests: run `dlperf run` as a subprocess, find a run's containers/processes."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from helpers import DLPERF, REPO, cli_env, docker_available

DATA = Path(__file__).resolve().parent / "data"


def run_cli(tmp_path: Path, db_url: str, *args: str, timeout: float = 900, **env: str) -> subprocess.CompletedProcess:
    """`dlperf run ARGS` (a real dag.test()) with its own AIRFLOW_HOME, logs and results DB."""
    return subprocess.run(
        [*DLPERF, "run", *args],
        cwd=REPO,
        env=cli_env(tmp_path, db_url, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def containers_of_run(run_id: str) -> list[str]:
    """Names of the containers (any state) labelled with this DAG run id, on the local engine."""
    if not docker_available():
        return []
    out = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label=dlperf.run_id={run_id}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def processes_with_env(marker: str) -> list[int]:
    """PIDs of live processes whose environment holds ``marker`` (KEY=VALUE): what a run left behind."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except (OSError, IndexError):
            continue
        if state != "Z" and needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def wait_until_visible(marker: str, pid: int, timeout_s: float = 10.0) -> list[int]:
    """``processes_with_env(marker)`` once ``pid`` shows in it, or after ``timeout_s``. A process that has just
    been started may read as an empty environment for a moment: the parent of a vfork resumes before the
    kernel has set up the child's new environment (seen in CI under load)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pids = processes_with_env(marker)
        if pid in pids or time.monotonic() > deadline:
            return pids
        time.sleep(0.05)


def processes_left(marker: str, grace_s: float = 15.0) -> dict[int, str]:
    """``{pid: command line}`` of processes with ``marker`` still alive after ``grace_s`` seconds (a process
    SIGKILLed a moment ago, or a multiprocessing helper whose parent just exited, may take a while to go)."""
    deadline = time.monotonic() + grace_s
    while True:
        pids = processes_with_env(marker)
        if not pids or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    left = {}
    for pid in pids:
        try:
            left[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:300]
        except OSError:
            continue  # gone meanwhile
    return left
