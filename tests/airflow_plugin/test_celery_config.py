"""dlperf's Celery settings (dlperf_airflow/celery_config.py): a worker imports dlperf's modules once, when it
starts, so that a task process forked from it does not import them again.

Each check runs in a fresh interpreter (``sys.modules`` of this test process is not a worker's). The effect on a
case's node tasks is measured by bench/growth_nodes.py (docs/benchmarks.md (h)), not asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from dlperf_core.plan.defaults import CELERY_CONFIG_OPTIONS
from helpers import REPO

HEAVY = ("pandas", "sqlalchemy", "alembic", "docker", "numpy", "dlperf_core", "dlperf_airflow", "paramiko")
"""Packages a task process must find imported: any of them imported by the DAG file after the preload is a module
the preload misses."""


def _python(code: str, tmp_path, **env: str) -> dict:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "plugins")]),
        "AIRFLOW_HOME": str(tmp_path),
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_worker_celery_app_imports_the_preload_on_start(tmp_path):
    """The Celery app Airflow's provider makes with dlperf's option keeps Airflow's settings and imports
    dlperf_airflow.worker_preload where a worker imports its modules (``loader.import_default_modules``)."""
    got = _python(
        "import json, sys\n"
        "from airflow.providers.celery.executors.celery_executor_utils import app\n"
        "before = 'dlperf_airflow.worker_preload' in sys.modules\n"
        "app.loader.import_default_modules()\n"
        "print(json.dumps({'imports': list(app.conf.imports), 'broker': app.conf.broker_url, 'before': before,\n"
        "  'after': 'dlperf_airflow.worker_preload' in sys.modules, 'pandas': 'pandas' in sys.modules}))",
        tmp_path,
        AIRFLOW__CORE__EXECUTOR="CeleryExecutor",
        AIRFLOW__CELERY__BROKER_URL="redis://127.0.0.1:6379/9",
        AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS=CELERY_CONFIG_OPTIONS,
    )
    assert got["imports"] == ["dlperf_airflow.worker_preload"]
    assert got["broker"] == "redis://127.0.0.1:6379/9"  # Airflow's own settings are kept under dlperf's
    assert not got["before"], "making the app (the scheduler does too) must not import the preload"
    assert got["after"] and got["pandas"]


def test_after_the_preload_the_dag_file_imports_nothing_heavy(tmp_path):
    """What a task process parses first, the DAG file, finds every heavy module imported by the worker."""
    got = _python(
        "import json, sys, importlib.util\n"
        "import dlperf_airflow.worker_preload\n"
        "before = set(sys.modules)\n"
        f"spec = importlib.util.spec_from_file_location('dag_file', {str(REPO / 'dags/dlperf_benchmark.py')!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))",
        tmp_path,
    )
    missed = [m for m in got if m.split(".")[0] in HEAVY or m.startswith("airflow.sdk.execution_time")]
    assert missed == [], f"the DAG file imported what the worker preload does not: {missed}"
