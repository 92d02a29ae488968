"""Helpers for tests that drive the real CLI, Airflow and Docker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DLPERF_SHARED", REPO.parent / "shared"))  # seeds, reallogs, reference notes
DLPERF = [sys.executable, "-m", "dlperf_cli.main"]


def cli_env(tmp_path: Path, db_url: str, **extra: str) -> dict[str, str]:
    """Environment of a `dlperf` subprocess with its own AIRFLOW_HOME, log folder and results DB."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        DLPERF_LOG_DIR=str(tmp_path / "logs"),
        DLPERF_DB_URL=db_url,
        DLPERF_PROGRESS="1",
        **extra,
    )
    return env


def docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def image_present(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True).returncode == 0


def dlperf_containers(all_states: bool = True) -> list[str]:
    """Names of containers started by dlperf (label dlperf.run_id), running or not."""
    cmd = ["docker", "ps", "--filter", "label=dlperf.run_id", "--format", "{{.Names}}"]
    if all_states:
        cmd.insert(2, "-a")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def run_id_of(output: str) -> str:
    """The DAG run id `dlperf run` reports on its last line."""
    import re

    found = re.findall(r"^DAG run (\S+): ", output, flags=re.M)
    assert found, output[-2000:]
    return found[-1]


def docker_marks(image: str) -> list:
    """pytest marks of a test that runs containers of ``image`` on the local Docker Engine."""
    import pytest

    return [
        pytest.mark.docker,
        pytest.mark.postgres,
        pytest.mark.skipif(not docker_available(), reason="no Docker engine answers (make test starts one)"),
        pytest.mark.skipif(docker_available() and not image_present(image), reason=f"{image} not built (make images)"),
    ]
