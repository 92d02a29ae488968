"""The DAG file loads in a real DagBag, with its schedule, params and pool as users expect."""

import json
import subprocess
import sys

from helpers import REPO

PROBE = r"""
import json, time
from dlperf_cli.embedded import prepare_environment
prepare_environment()
t0 = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=str(__import__('pathlib').Path('REPO') / 'dags'))
dag = bag.dags.get('dlperf_benchmark')
import copy
refused = {}
for key, bad in [("precisions", ["fp8"]), ("topologies", ["3n3g"]), ("repeats", 500), ("runtime", "kubernetes"), ("repeats", "five")]:
    params = copy.deepcopy(dag.params)
    try:
        params[key] = bad
        refused[f"{key}={bad!r}"] = False
    except Exception as exc:
        refused[f"{key}={bad!r}"] = type(exc).__name__
params = copy.deepcopy(dag.params)
params["precisions"] = ["amp"]; params["topologies"] = ["1n1g", "2n8g"]; params["repeats"] = 3
print(json.dumps({
    "refused": refused,
    "good": params.validate()["topologies"],
    "errors": {k: str(v) for k, v in bag.import_errors.items()},
    "dag_ids": sorted(bag.dag_ids),
    "schedule": getattr(dag.timetable, "_expression", None) or str(dag.schedule),
    "params": sorted(dag.params.keys()) if dag else [],
    "tasks": sorted(dag.task_ids) if dag else [],
    "pool": dag.get_task('run_case').pool if dag else None,
    "search_pool": dag.get_task('search_max_batch').pool if dag else None,
    "finish_after": sorted(dag.get_task('finish_run').upstream_task_ids) if dag else [],
    "teardown": dag.get_task('remove_containers').is_teardown if dag else None,
    "report": [dag.get_task('make_report').is_teardown, sorted(dag.get_task('make_report').upstream_task_ids)],
}))
"""


def test_dagbag_loads_without_import_errors(tmp_path):
    env_home = {"AIRFLOW_HOME": str(tmp_path / "airflow")}
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")} | env_home
    out = subprocess.run(
        [sys.executable, "-c", PROBE.replace("REPO", str(REPO))], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["errors"] == {}
    assert info["dag_ids"] == ["dlperf_benchmark"]
    assert info["schedule"] == "0 2 * * *"
    assert {"suite", "runtime", "frameworks", "precisions", "topologies", "repeats"} <= set(info["params"])
    assert info["tasks"] == [
        "capture_environment",
        "detect_regressions",
        "finish_run",
        "make_report",
        "plan_cases",
        "plan_searches",
        "preflight",
        "remove_containers",
        "run_case",
        "search_max_batch",
        "store_result",
    ]
    assert info["pool"] == info["search_pool"] == "dlperf_cluster"  # probes and cases never share a device
    assert info["finish_after"] == ["search_max_batch", "store_result"]
    assert info["teardown"] is True
    # a teardown (never decides the run state), after regression detection so the report shows its verdicts
    assert info["report"] == [True, ["detect_regressions", "finish_run", "plan_cases"]]
    # the trigger form refuses bad values itself (JSON schema), before any run starts
    assert all(v == "ParamValidationError" for v in info["refused"].values()), info["refused"]
    assert info["good"] == ["1n1g", "2n8g"]
