"""Planning resolves every fact of a case run once: the inventory file is read by ``plan_cases`` and by no task
after it (a planned run carries its nodes, image and figure origin), counted over one real ``dag.test()`` run of one
case run (before: run_case read it twice, store_result once)."""

import json
import subprocess
import sys

from helpers import REPO, cli_env

COUNT = r"""
import json, sys, collections
from dlperf_core.cluster.inventory import Inventory

reads = collections.Counter()
validate = Inventory.model_validate.__func__

def counting(cls, raw, *args, **kwargs):
    # a file read: called from load_inventory (an Inventory built from data in memory is not one)
    if sys._getframe(1).f_code.co_name == "load_inventory":
        try:
            from airflow.sdk import get_current_context
            where = get_current_context()["ti"].task_id
        except Exception:
            where = "<no task: the DAG file or the CLI>"
        reads[where] += 1
    return validate(cls, raw, *args, **kwargs)

Inventory.model_validate = classmethod(counting)
from dlperf_cli.embedded import run_dag
run = run_dag(json.loads(sys.argv[1]))
print("COUNT:" + json.dumps({
    "state": str(run.state),
    "tasks": sorted({ti.task_id for ti in run.get_task_instances()}),
    "reads": dict(reads),
}))
"""


def test_the_inventory_is_read_once_per_dag_run_by_plan_cases(tmp_path):
    conf = {"suite": "suites/smoke.yaml", "runtime": "local", "topologies": ["1n1g"], "repeats": 1}
    db = f"sqlite:///{tmp_path / 'dlperf.db'}"
    env = cli_env(tmp_path, db, DLPERF_HOME=str(REPO), DLPERF_REPORT_DIR=str(tmp_path / "reports"))
    out = subprocess.run(
        [sys.executable, "-c", COUNT, json.dumps(conf)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("COUNT:")]
    assert out.returncode == 0 and lines, (out.stdout[-3000:], out.stderr[-5000:])
    got = json.loads(lines[-1].removeprefix("COUNT:"))
    assert got["state"].endswith("success"), got
    # every task of the case runs' path ran, and none of them read the inventory: plan_cases did, once
    for task in ("plan_cases", "preflight", "capture_environment", "case_run.run_case", "case_run.store_result"):
        assert task in got["tasks"], got["tasks"]
    assert {task: n for task, n in got["reads"].items() if not task.startswith("<")} == {"plan_cases": 1}, got
