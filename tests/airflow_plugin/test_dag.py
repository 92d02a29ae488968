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
    "pool": dag.get_task('case_run.run_case').pool if dag else None,
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
    assert info["dag_ids"] == ["dlperf_accept_regression", "dlperf_benchmark"]
    assert info["schedule"] == "0 2 * * *"
    assert {"suite", "runtime", "frameworks", "precisions", "topologies", "repeats"} <= set(info["params"])
    assert info["tasks"] == [
        "capture_environment",
        "case_run.run_case",  # a case run is the mapped group case_run, as under node routing
        "case_run.store_result",
        "detect_regressions",
        "finish_run",
        "make_report",
        "plan_cases",
        "plan_searches",
        "preflight",
        "remove_containers",
        "search_max_batch",
    ]
    assert info["pool"] == info["search_pool"] == "dlperf_cluster"  # probes and cases never share a device
    # every case run's store_result (each waits for its own run_case: one killed fails only its own store_result)
    assert info["finish_after"] == ["case_run.store_result", "search_max_batch"]
    assert info["teardown"] is True
    # a teardown (never decides the run state), after regression detection so the report shows its verdicts
    assert info["report"] == [True, ["detect_regressions", "finish_run", "plan_cases"]]
    # the trigger form refuses bad values itself (JSON schema), before any run starts
    assert all(v == "ParamValidationError" for v in info["refused"].values()), info["refused"]
    assert info["good"] == ["1n1g", "2n8g"]


SHAPE = r"""
import json, logging, sys
from dlperf_cli.embedded import prepare_environment, routing_off
prepare_environment()
if sys.argv[1] == "embedded":
    routing_off()  # what `dlperf run` does before it loads the DAG
from airflow.dag_processing.dagbag import DagBag
warned = []
class Warned(logging.Handler):
    def emit(self, record):
        warned.append(record.getMessage())
logging.getLogger("dlperf").addHandler(Warned())
bag = DagBag(dag_folder=sys.argv[2])
dag = bag.dags["dlperf_benchmark"]
print(json.dumps({"tasks": sorted(dag.task_ids), "warned": warned, "errors": list(bag.import_errors)}))
"""


def dag_shape(tmp_path, mode: str, cfg: str = "", **env_vars: str) -> tuple[dict, str]:
    """The DAG's tasks and warnings, parsed in a fresh process with ``cfg`` as its airflow.cfg and ``env_vars``
    (``mode`` "embedded": after `dlperf run`'s routing_off); and the process's stderr."""
    import os

    airflow_home = tmp_path / "airflow"
    airflow_home.mkdir(exist_ok=True)
    (airflow_home / "airflow.cfg").write_text(cfg)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "DLPERF_CLUSTER_INVENTORY"}
    env |= {"AIRFLOW_HOME": str(airflow_home), "DLPERF_HOME": str(REPO), "DLPERF_DB_URL": "sqlite://", **env_vars}
    out = subprocess.run(
        [sys.executable, "-c", SHAPE, mode, str(REPO / "dags")], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    shape = json.loads(out.stdout.strip().splitlines()[-1])
    assert shape["errors"] == []
    return shape, out.stderr


def test_node_routing_is_airflows_dlperf_cluster_inventory_option(tmp_path):
    """The DAG's shape follows Airflow's configuration option [dlperf] cluster_inventory (airflow.cfg here; the
    environment variable AIRFLOW__DLPERF__CLUSTER_INVENTORY in tests/airflow_plugin/test_node_routing.py), nothing
    else."""
    cfg = "[dlperf]\ncluster_inventory = inventories/docker-local.yaml\n"
    routed, _ = dag_shape(tmp_path, "dagbag", cfg)
    assert {"case_run.on_node0", "case_run.on_node1", "case_run.store_result", "route_cases"} <= set(routed["tasks"])
    assert "case_run.run_case" not in routed["tasks"]
    # set empty in the environment, it wins over airflow.cfg: the plain shape
    plain, _ = dag_shape(tmp_path, "dagbag", cfg, AIRFLOW__DLPERF__CLUSTER_INVENTORY="")
    assert "case_run.run_case" in plain["tasks"] and "case_run.on_node0" not in plain["tasks"]
    # the variable dlperf read before is not read any more: the plain shape, and a warning that says what to set
    old, _ = dag_shape(tmp_path, "dagbag", DLPERF_CLUSTER_INVENTORY="inventories/docker-local.yaml")
    assert old["tasks"] == plain["tasks"]
    assert any(
        "DLPERF_CLUSTER_INVENTORY is no longer read" in w and "[dlperf] cluster_inventory" in w for w in old["warned"]
    )
    assert plain["warned"] == routed["warned"] == []


def test_the_embedded_run_ignores_node_routing_and_says_so(tmp_path):
    """`dlperf run` (dag.test() in one process) can never gang per-node tasks: it drives every node from one task
    whether the option comes from airflow.cfg or the environment, and says it ignored it."""
    cfg = "[dlperf]\ncluster_inventory = inventories/docker-local.yaml\n"
    said = "node routing ignored ({} set): an in-process run drives every node from one task"
    sources = {
        "[dlperf] cluster_inventory in airflow.cfg": ({}, cfg),
        "AIRFLOW__DLPERF__CLUSTER_INVENTORY": ({"AIRFLOW__DLPERF__CLUSTER_INVENTORY": "inventories/local.yaml"}, cfg),
        "DLPERF_CLUSTER_INVENTORY": ({"DLPERF_CLUSTER_INVENTORY": "inventories/docker-local.yaml"}, ""),
    }
    for source, (env_vars, airflow_cfg) in sources.items():
        shape, stderr = dag_shape(tmp_path, "embedded", airflow_cfg, **env_vars)
        assert "case_run.run_case" in shape["tasks"] and "case_run.on_node0" not in shape["tasks"], source
        assert said.format(source) in stderr, stderr
        assert shape["warned"] == []  # the old variable is gone before the DAG is parsed: said once, here
    shape, stderr = dag_shape(tmp_path, "embedded", "")
    assert "case_run.run_case" in shape["tasks"] and "ignored" not in stderr


REFUSED = r"""
import json, sys
from urllib.parse import quote
from dlperf_cli.embedded import run_dag
from fastapi.testclient import TestClient
from dlperf_airflow.results_api import create_app
from dlperf_core.reporting.paths import read_refusal
from dlperf_core.storage import ResultStore, default_db_url

ResultStore(default_db_url()).ensure_schema()  # a deployment's results database has its schema (airflow-init)
async def anyone():  # the page's own route, without the api-server's login (tested in test_results_api.py)
    return None
client = TestClient(create_app(auth=anyone))
out = {}
for name, conf in json.loads(sys.argv[1]).items():
    run = run_dag(conf)
    tab = client.get(f"/runs/{run.dag_id}/{quote(run.run_id, safe='')}")
    out[name] = {
        "state": str(run.state),
        "tasks": {ti.task_id: str(ti.state) for ti in run.get_task_instances()},
        "kept": read_refusal(run.dag_id, run.run_id),
        "tab": [tab.status_code, tab.text],
    }
print("PROBE:" + json.dumps(out))
"""


def test_a_refused_trigger_fails_at_planning_and_its_tab_says_why(tmp_path):
    """Through Airflow (dag.test(), whose run is made as the REST trigger makes one: conf merged into the DAG's
    Params, each checked by its JSON schema): Airflow accepts a misspelt key and a suite name that is no file, and
    plan_cases refuses both in words before any case runs; the run's "dlperf results" tab shows that reason
    instead of an empty report and "no run ... in the results database"."""
    import os
    from html import unescape

    from dlperf_core.plan.trigger import TRIGGER_KEYS

    confs = {
        "key": {"suite": "suites/smoke.yaml", "runtime": "local", "topology": ["1n1g"], "repeats": 1},
        "suite": {"suite": "smoke", "runtime": "local"},
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")} | {
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "DLPERF_HOME": str(REPO),
        "DLPERF_DB_URL": f"sqlite:///{tmp_path / 'dlperf.db'}",
        "DLPERF_REPORT_DIR": str(tmp_path / "reports"),
        "DLPERF_LOG_DIR": str(tmp_path / "logs"),
    }
    out = subprocess.run(
        [sys.executable, "-c", REFUSED, json.dumps(confs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("PROBE:")]
    assert out.returncode == 0 and lines, (out.stdout[-3000:], out.stderr[-5000:])
    got = json.loads(lines[-1].removeprefix("PROBE:"))
    said = {
        "key": "trigger form: unknown key 'topology' (did you mean 'topologies'?); the known keys are "
        + ", ".join(TRIGGER_KEYS),
        "suite": "trigger form: suite: unknown suite 'smoke' (did you mean 'suites/smoke.yaml'?); known suites: ",
    }
    for name, run in got.items():
        assert run["state"].endswith("failed"), run
        assert run["tasks"]["plan_cases"].endswith("failed"), run["tasks"]
        # nothing ran after the refused plan: no case, no search, no report
        for task in ("preflight", "capture_environment", "case_run.run_case", "case_run.store_result", "make_report"):
            assert not run["tasks"].get(task, "").endswith("success"), (task, run["tasks"])
        assert run["kept"].startswith("invalid trigger form (1 problem(s)):\n  " + said[name]), run["kept"]
        status, tab = run["tab"]
        text = unescape(tab)
        assert status == 200 and 'id="dlperf-refused"' in tab, tab[-3000:]
        assert said[name] in text and "Refused at planning: no case ran" in text, text[-3000:]
        assert "report files: <i>none (planning refused the run: no case ran)</i>" in tab
        assert "in the results database" not in text and "none yet" not in text, text[-3000:]
    assert said["key"] in out.stdout + out.stderr  # the task's log says it too
