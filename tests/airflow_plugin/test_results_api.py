"""The results page plugin: its FastAPI app mounted by Airflow's own api-server app (plugins loaded from
the repository's plugins/), behind Airflow's authentication, reading a real PostgreSQL results database.

The Airflow part runs in a subprocess (Airflow reads its configuration once per process): it builds
``airflow.api_fastapi.app.create_app()`` with the SimpleAuthManager and a user whose password the test
sets, and drives it with FastAPI's TestClient: no token, a forged token, a Bearer token from
``POST /auth/token``, and the UI's ``_token`` cookie.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from html import unescape
from pathlib import Path
from urllib.parse import unquote

import pytest

from dlperf_airflow.results_page import render_page, speedup_png
from dlperf_cli.embedded import airflow_settings
from dlperf_core.reporting import load_overview
from dlperf_core.reporting.data import NO_MLPERF
from dlperf_core.storage import ResultStore
from helpers import DLPERF, REPO, SHARED, result_record, run_record

DAG_ID = "dlperf_benchmark"
T0 = datetime(2026, 11, 20, 2, 0, tzinfo=UTC)
# median throughput per topology of the seeded run (two ok repeats each, one failed repeat at 2n1g)
SEEDED = {"1n1g": [100.0, 102.0], "1n2g": [190.0, 194.0], "2n1g": [150.0, 154.0]}


def seed(url: str, run_id: str = "manual__2026-11-20T02:00:00+00:00") -> ResultStore:
    """A finished benchmark run with 1n1g/1n2g/2n1g cases, two ok repeats each and one failed repeat."""
    store = ResultStore(url)
    store.ensure_schema()
    finished = T0 + timedelta(minutes=3)
    run = run_record(
        dag_id=DAG_ID, run_id=run_id, trigger="manual", started_at=T0, finished_at=finished, status="failed"
    )
    store.upsert_run(run)
    case = "pytorch_reference/resnet50_v1.5/fp32/b8/"
    rows = [
        result_record(
            case_key=case + topo,
            repeat=repeat,
            throughput=figure,
            reported_throughput=figure * 0.97,
            iterations=10,
            started_at=T0 + timedelta(seconds=10 * repeat),
            benchmark_run=run,
        )
        for topo, figures in SEEDED.items()
        for repeat, figure in enumerate(figures)
    ]
    rows.append(
        result_record(
            case_key=case + "2n1g",
            repeat=2,
            status="failed",
            reason="timeout after 600 s",
            throughput=None,
            started_at=T0,
            benchmark_run=run,
        )
    )
    store.upsert_results(rows)
    return store


# ------------------------------------------------------------------- the view, without Airflow


def test_view_of_an_empty_database_says_so(sqlite_url):
    view = load_overview(ResultStore(sqlite_url))  # no tables: read as empty, never migrated from here
    assert not view.schema_ready
    assert "no dlperf tables" in view.summary.note
    page = render_page(view, ui_base="/", db="sqlite://")
    assert "no results yet" in page and "<table" not in page


def test_view_summary_plot_and_page(pg_url):
    store = seed(pg_url)
    view = load_overview(store)
    assert view.summary.rows == [] and "no nightly run yet" in view.summary.note  # a manual run: not a night
    by_topo = {f"{r['nodes']}n{r['gpus_per_node']}g": r for r in view.latest_any.rows}
    assert set(by_topo) == set(SEEDED)
    for topo, figures in SEEDED.items():
        assert by_topo[topo]["median_throughput"] == pytest.approx(sum(figures) / 2)
    assert by_topo["1n2g"]["speedup"] == pytest.approx(192.0 / 101.0)
    assert by_topo["2n1g"]["n_failed"] == 1
    assert [r["run_id"] for r in view.runs.rows] == [view.latest_any.rows[0]["run_id"]]
    assert len(view.results.rows) == 7
    png = speedup_png(view.latest_any.rows)
    assert png is not None and png.startswith(b"\x89PNG")
    page = render_page(view, ui_base="/", db="postgresql://…")
    run_link = "/dags/dlperf_benchmark/runs/manual__2026-11-20T02%3A00%3A00%2B00%3A00"
    assert f'href="{run_link}"' in page and f'href="{run_link}/tasks/case_run.store_result/mapped"' in page
    assert "timeout after 600 s" in page
    assert page.count('class="summary-row"') == 3
    # history and regressions: read from the store; a manual run makes no night and no regression
    for section in (view.history, view.regressions):
        assert section.rows == [] and section.note == "none yet", section
    assert "ResultStore" not in view.summary.source and "()" not in view.summary.source  # words, not a method


MLPERF_V1 = SHARED / "mlperf" / "training_v1.0"


@pytest.mark.skipif(not MLPERF_V1.is_dir(), reason=f"no MLPerf results at {MLPERF_V1}")
def test_the_page_shows_the_latest_summary_beside_the_imported_mlperf_systems(sqlite_url):
    store = seed(sqlite_url)
    before = load_overview(store)
    assert before.mlperf.rows == [] and before.mlperf.note == NO_MLPERF
    assert 'id="mlperf-none"' in render_page(before, ui_base="/", db="x")
    imported = subprocess.run(
        [*DLPERF, "import", str(MLPERF_V1), "--db", sqlite_url], capture_output=True, text=True, cwd=REPO
    )
    assert imported.returncode == 0, imported.stderr[-3000:]
    view = load_overview(store)
    # the seeded CPU cases (no GPU captured) beside the CPU-only systems of the nearest node count, per node
    by_case = {r["case_key"].rsplit("/", 1)[-1]: r for r in view.mlperf.rows}
    assert set(by_case) == set(SEEDED)
    assert (
        by_case["2n1g"]["mlperf system"] == "Intel 2-nodes-16s-8376H-tensorflow" and by_case["2n1g"]["unit"] == "node"
    )
    assert by_case["1n1g"]["mlperf system"] == "Intel 1-node-8s-8380H-tensorflow"
    page = render_page(view, ui_base="/", db="x")
    assert 'id="mlperf"' in page and "Intel 2-nodes-16s-8376H-tensorflow" in page


def test_page_escapes_what_it_shows(sqlite_url):
    store = seed(sqlite_url, run_id="<script>alert(1)</script>")
    page = render_page(load_overview(store), ui_base="/", db="x")
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page


# ------------------------------------------------------------------- links into Airflow's UI


def ui_routes() -> list[str]:
    """The installed Airflow UI's routes under a DAG run (``dags/:dagId/runs/:runId/...``), read from its
    router in the UI bundle: the routes the page's links have to hit."""
    import airflow

    bundle = Path(airflow.__file__).parent / "ui" / "dist" / "assets"
    routes = set()
    for js in bundle.glob("index-*.js"):
        routes.update(re.findall(r"path:[`'\"](dags/:dagId/runs/:runId(?:/[^`'\"]*)?)[`'\"]", js.read_text()))
    assert "dags/:dagId/runs/:runId/tasks/:taskId/mapped/:mapIndex" in routes, sorted(routes)  # the router, found
    return sorted(routes)


def route_of(path: str, routes: list[str]) -> tuple[str, dict[str, str]] | None:
    """The UI route ``path`` (without the UI's base) matches, with its parameters (URL-decoded)."""
    for route in routes:
        pattern = "^" + re.sub(r":(\w+)", r"(?P<\1>[^/]+)", route) + "$"
        hit = re.match(pattern, path)
        if hit:
            return route, {k: unquote(v) for k, v in hit.groupdict().items()}
    return None


LINKS_PROBE = r"""
import json, sys
from dlperf_cli.embedded import prepare_environment
prepare_environment()
from airflow.dag_processing.dagbag import DagBag
from dlperf_airflow.results_page import render_page
from dlperf_core.reporting import load_overview
from dlperf_core.storage import ResultStore
bag = DagBag(dag_folder=sys.argv[1])
errors = {k: str(v) for k, v in bag.import_errors.items()}
if errors:
    sys.exit("DAG import errors: " + json.dumps(errors))
dag = bag.dags["dlperf_benchmark"]
def mapped(task):
    return bool(getattr(task, "is_mapped", False)) or task.get_closest_mapped_task_group() is not None
store = ResultStore(sys.argv[2])
page = render_page(load_overview(store), ui_base="/ui/", db="x")  # the DAG's shape as this process builds it
print("PROBE:" + json.dumps({
    "tasks": {t.task_id: mapped(t) for t in dag.tasks},
    "page": page,
}))
"""


@pytest.fixture
def routed_cluster(tmp_path) -> str:
    """docker-local's two stand-in nodes, each with a queue of its own (as
    tests/airflow_plugin/test_node_routing.py)."""
    import yaml

    inventory = yaml.safe_load((REPO / "inventories/docker-local.yaml").read_text())
    inventory["name"] = "routed-local"
    for node in inventory["nodes"]:
        node["queue"] = f"queue-{node['name']}"
    path = tmp_path / "routed-local.yaml"
    path.write_text(yaml.safe_dump(inventory))
    return str(path)


@pytest.mark.parametrize("routed", [False, True], ids=["plain", "node-routing"])
def test_every_task_link_names_a_task_of_the_dag_in_its_shape(routed, routed_cluster, sqlite_url, tmp_path):
    """Render the page for a stored run in the process that builds the DAG (with and without
    Airflow's option [dlperf] cluster_inventory, as a deployment sets it on every component), then follow each link:
    it hits a route of the installed Airflow UI, for this DAG, and every task it names exists in the DAG built in that
    shape (a mapped-instances link: a mapped task)."""
    run_id = "manual__2026-11-20T02:00:00+00:00"
    seed(sqlite_url, run_id=run_id).dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "DLPERF_CLUSTER_INVENTORY"}
    env |= {"AIRFLOW_HOME": str(tmp_path / "airflow"), "DLPERF_DB_URL": "sqlite://"}
    if routed:
        env["AIRFLOW__DLPERF__CLUSTER_INVENTORY"] = routed_cluster
    out = subprocess.run(
        [sys.executable, "-c", LINKS_PROBE, str(REPO / "dags"), sqlite_url],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("PROBE:")]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    got = json.loads(lines[-1].removeprefix("PROBE:"))
    tasks = got["tasks"]
    assert "case_run.store_result" in tasks  # a case run is the group case_run in both shapes
    assert ("case_run.collect_case" in tasks) is routed and ("case_run.run_case" in tasks) is not routed

    routes = ui_routes()
    hrefs = re.findall(r'href="([^"]*)"', got["page"])
    ui = [unescape(h).removeprefix("/ui/") for h in hrefs if h.startswith("/ui/")]
    # all but the page's own JSON link and each run's own page (served by this app) go into Airflow's UI
    own = [h for h in hrefs if h in ("api/summary", "api/summary?of=any") or h.startswith("runs/")]
    assert len(own) == 3 and len(ui) == len(hrefs) - len(own), hrefs
    named = set()
    for path in ui:
        hit = route_of(path, routes)
        assert hit, f"{path} is no route of Airflow's UI ({routes})"
        route, params = hit
        assert params["dagId"] == DAG_ID and params["runId"] == run_id, path
        if "taskId" in params:
            task_id = params["taskId"]
            assert task_id in tasks, f"{path}: no task {task_id!r} in the {'routed' if routed else 'plain'} DAG"
            assert tasks[task_id] is route.endswith("/mapped"), f"{path}: {task_id} mapped={tasks[task_id]}"
            named.add(task_id)
    # the run's case runs and its plan, in the DAG's own ids
    assert named == {"case_run.store_result", "plan_cases"}


def test_the_page_and_the_dag_share_their_task_ids():
    """The names node routing uses for XCom (node_step) are those the DAG gives its tasks (task_ids): node_step
    takes them from task_ids rather than keeping copies."""
    from dlperf_airflow import node_step, task_ids

    assert node_step.cluster_inventory is task_ids.cluster_inventory  # the DAG's shape and the page's: one reading
    assert node_step.node_task_id is task_ids.node_task_id and node_step.in_case_run is task_ids.in_case_run
    dag_source = (REPO / "dags" / "dlperf_benchmark.py").read_text()
    for name in ("PLAN_CASES", "RUN_CASE", "STORE_RESULT", "COLLECT_CASE", "CASE_RUN_GROUP"):
        assert re.search(rf"(task|group)_id={name}\b", dag_source), f"the DAG does not name a task with {name}"


def test_the_page_template_ships_with_the_package():
    """The Airflow image pip-installs dlperf (docker/airflow/Dockerfile): the page's template must be package
    data of dlperf_airflow, or the installed plugin has no page."""
    import fnmatch
    import tomllib

    from dlperf_airflow.results_page import TEMPLATES

    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"].get("package-data", {})
    globs = data.get("dlperf_airflow", [])
    for template in TEMPLATES.iterdir():
        name = template.relative_to(TEMPLATES.parent).as_posix()
        assert any(fnmatch.fnmatch(name, g) for g in globs), (
            f'{name} is not package data: add "dlperf_airflow" = ["templates/*.html"] under '
            "[tool.setuptools.package-data] in pyproject.toml"
        )


# ------------------------------------------------------------------- mounted in Airflow's api-server app

PROBE = r"""
import json, sys
from airflow.utils.db import upgradedb
upgradedb()
from fastapi.testclient import TestClient
from airflow.api_fastapi.app import create_app
client = TestClient(create_app())
out = {}
def grab(name, response, body=True):
    entry = {"status": response.status_code}
    if body:
        try:
            entry["json"] = response.json()
        except ValueError:
            entry["text"] = response.text[:20000]
    out[name] = entry
grab("anonymous_summary", client.get("/dlperf/api/summary"))
grab("anonymous_page", client.get("/dlperf/"))
html = {"Accept": "text/html,application/xhtml+xml"}
browser = client.get("/dlperf/?run_id=x", headers=html, follow_redirects=False)
out["browser_page"] = {"status": browser.status_code, "location": browser.headers.get("location")}
out["browser_api"] = {"status": client.get("/dlperf/api/summary", headers=html, follow_redirects=False).status_code}
run = sys.argv[2]
out["anonymous_report"] = client.get(f"/dlperf/reports/dlperf_benchmark/{run}/report.json").status_code
grab("anonymous_plot", client.get("/dlperf/api/plots/speedup.png"), body=False)
grab("forged_token", client.get("/dlperf/api/summary", headers={"Authorization": "Bearer not.a.jwt"}))
grab("wrong_password", client.post("/auth/token", json={"username": "dlperf", "password": "wrong"}))
login = client.post("/auth/token", json={"username": "dlperf", "password": sys.argv[1]})
out["login_status"] = login.status_code
token = login.json()["access_token"]
bearer = {"Authorization": f"Bearer {token}"}
for name in ("summary", "runs", "results", "history", "regressions"):
    grab(name, client.get(f"/dlperf/api/{name}", headers=bearer))
grab("summary_any", client.get("/dlperf/api/summary", params={"of": "any"}, headers=bearer))
grab("summary_bad", client.get("/dlperf/api/summary", params={"of": "nope"}, headers=bearer))
grab("results_unknown_run", client.get("/dlperf/api/results", params={"run_id": "nope"}, headers=bearer))
grab("report_json", client.get(f"/dlperf/reports/dlperf_benchmark/{run}/report.json", headers=bearer))
out["report_escape"] = client.get(f"/dlperf/reports/dlperf_benchmark/{run}/..%2F..%2F..%2Fpasswords.json", headers=bearer).status_code
out["report_missing"] = client.get(f"/dlperf/reports/dlperf_benchmark/{run}/nope.md", headers=bearer).status_code
grab("run_page", client.get(f"/dlperf/runs/dlperf_benchmark/{run}", headers=bearer))
grab("run_page_unknown", client.get("/dlperf/runs/dlperf_benchmark/nope", headers=bearer))
plot = client.get("/dlperf/api/plots/speedup.png", headers=bearer)
out["plot"] = {"status": plot.status_code, "type": plot.headers.get("content-type"), "png": plot.content[:4] == b"\x89PNG"}
client.cookies.set("_token", token)
grab("page_with_cookie", client.get("/dlperf/"))
client.cookies.clear()
grab("plugins", client.get("/api/v2/plugins", headers=bearer))
print("PROBE:" + json.dumps(out))
"""


def airflow_env(tmp_path: Path, results_url: str, password: str) -> dict[str, str]:
    """A private Airflow home: SQLite metadata DB, the repo's dags/ and plugins/, one SimpleAuthManager user."""
    home = tmp_path / "airflow"
    home.mkdir()
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({"dlperf": password}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    return (
        env
        | airflow_settings(home)
        | {  # the embedded Airflow's settings, plus a login
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "dlperf:viewer",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__API_AUTH__JWT_SECRET": "dlperf-test-secret-not-for-production",
            "DLPERF_DB_URL": results_url,
            "DLPERF_HOME": str(REPO),
        }
    )


def test_plugin_app_behind_airflow_auth(tmp_path, pg_url):
    from urllib.parse import quote

    from dlperf_core.reporting import build_report, report_dir

    store = seed(pg_url)
    run_id = store.latest_run_id(DAG_ID)
    reports = tmp_path / "reports"
    build_report(store, run_id, dag_id=DAG_ID, fmt=("html", "md", "json"), out_dir=report_dir(DAG_ID, run_id, reports))
    password = "s3cret-" + tmp_path.name
    out = subprocess.run(
        [sys.executable, "-c", PROBE, password, quote(run_id, safe="")],
        capture_output=True,
        text=True,
        timeout=420,
        env=airflow_env(tmp_path, pg_url, password) | {"DLPERF_REPORT_DIR": str(reports)},
        cwd=tmp_path,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("PROBE:")]
    assert out.returncode == 0 and lines, (out.stdout[-3000:], out.stderr[-5000:])
    got = json.loads(lines[-1].removeprefix("PROBE:"))

    # refused without valid credentials, like Airflow's own API: 401 without a token, 403 with a bad one
    assert got["anonymous_summary"]["status"] == 401
    assert got["anonymous_page"]["status"] == 401
    # a browser without a session asking for a page is sent to the UI's login page, which brings it back
    assert got["browser_page"]["status"] == 303
    assert got["browser_page"]["location"].startswith("/auth/login?next=")
    assert unquote(got["browser_page"]["location"]).endswith("/dlperf/?run_id=x")
    assert got["browser_api"]["status"] == 401  # the JSON API still answers 401
    assert got["anonymous_report"] == 401
    assert got["anonymous_plot"]["status"] == 401
    assert got["forged_token"]["status"] == 403
    assert got["wrong_password"]["status"] == 401
    assert got["login_status"] == 201

    nightly = got["summary"]  # the default: the latest nightly summary, empty (the seeded run is a manual one)
    assert nightly["status"] == 200 and nightly["json"]["rows"] == [], nightly
    assert got["summary_bad"]["status"] == 422
    summary = got["summary_any"]
    assert summary["status"] == 200, summary
    topologies = {f"{r['nodes']}n{r['gpus_per_node']}g": r for r in summary["json"]["rows"]}
    assert set(topologies) == set(SEEDED)
    assert topologies["1n1g"]["median_throughput"] == pytest.approx(101.0)
    assert topologies["2n1g"]["n_failed"] == 1
    assert got["runs"]["json"]["rows"][0]["status"] == "failed"
    assert len(got["results"]["json"]["rows"]) == 7
    assert got["results_unknown_run"]["status"] == 404
    for name in ("history", "regressions"):
        body = got[name]["json"]
        assert got[name]["status"] == 200 and (body["rows"] or body["note"]), body
    assert got["plot"] == {"status": 200, "type": "image/png", "png": True}

    page = got["page_with_cookie"]
    assert page["status"] == 200
    assert "pytorch_reference/resnet50_v1.5/fp32/b8/2n1g" in page["text"]
    assert 'href="/dags/dlperf_benchmark/runs/' in page["text"]
    # each run links to its own page and to the report files make_report wrote
    quoted = quote(run_id, safe="")
    assert f'href="runs/dlperf_benchmark/{quoted}"' in page["text"]
    assert f'href="reports/dlperf_benchmark/{quoted}/report.md"' in page["text"]

    # the run's report files, from the reports folder, and only from inside the run's own folder
    assert got["report_json"]["status"] == 200 and got["report_json"]["json"], got["report_json"]
    assert got["report_escape"] == 404 and got["report_missing"] == 404
    # the run's page (the DAG run's "dlperf results" tab): its tables now, and links to its report files
    run_page = got["run_page"]
    assert run_page["status"] == 200
    assert 'id="dlperf-run-links"' in run_page["text"]
    for name in ("report.html", "report.md", "report.json"):
        assert f'href="/dlperf/reports/dlperf_benchmark/{quote(run_id, safe="")}/{name}"' in run_page["text"], name
    assert "pytorch_reference resnet50_v1.5 fp32 batch 8" in run_page["text"]
    assert got["run_page_unknown"]["status"] == 200 and "nope" in got["run_page_unknown"]["text"]

    plugins = got["plugins"]["json"]["plugins"]
    ours = next(p for p in plugins if p["name"] == "dlperf_results")
    assert ours["fastapi_apps"][0]["url_prefix"] == "/dlperf"
    assert ours["external_views"][0]["url_route"] == "dlperf-results"
    run_view = ours["external_views"][1]
    assert run_view["destination"] == "dag_run" and run_view["href"] == "dlperf/runs/{DAG_ID}/{RUN_ID}"


# ------------------------------------------------------------------- a run that planning refused


def test_a_run_refused_at_planning_shows_why_on_its_page(sqlite_url, tmp_path, monkeypatch):
    """plan_cases keeps its refusal in the run's report folder (dlperf_core.reporting.paths); the run's page (its
    "dlperf results" tab) shows it, escaped, instead of "no run ... in the results database" and "none yet"; a
    later try of plan_cases that plans the run forgets it. (Through Airflow: tests/airflow_plugin/test_dag.py.)"""
    from urllib.parse import quote

    from fastapi.testclient import TestClient

    from dlperf_airflow import steps
    from dlperf_airflow.results_api import create_app
    from dlperf_core.errors import ConfigError
    from dlperf_core.model import RunIds
    from dlperf_core.reporting.paths import read_refusal

    monkeypatch.setenv("DLPERF_HOME", str(REPO))
    monkeypatch.setenv("DLPERF_DB_URL", sqlite_url)
    monkeypatch.setenv("DLPERF_REPORT_DIR", str(tmp_path / "reports"))
    ResultStore(sqlite_url).ensure_schema()
    ids = RunIds(DAG_ID, "manual__2026-11-28T23:00:00+00:00")
    smoke = {"suite": "suites/smoke.yaml", "runtime": "local"}
    with pytest.raises(ConfigError) as refused:
        steps.plan_step({**smoke, "topology": ["1n1g"], "repeats": 1}, ids, "manual")
    assert read_refusal(ids.dag_id, ids.run_id) == str(refused.value)

    async def anyone() -> None:  # the route alone; its login is test_plugin_app_behind_airflow_auth's
        return None

    client = TestClient(create_app(auth=anyone))
    url = f"/runs/{DAG_ID}/{quote(ids.run_id, safe='')}"
    page = client.get(url)
    assert page.status_code == 200
    assert "<h2>Refused at planning: no case ran</h2>" in page.text
    assert "unknown key &#x27;topology&#x27; (did you mean &#x27;topologies&#x27;?)" in page.text  # escaped
    assert "report files: <i>none (planning refused the run: no case ran)</i>" in page.text
    assert "in the results database" not in page.text and "none yet" not in page.text

    steps.plan_step({**smoke, "topologies": ["1n1g"], "repeats": 1}, ids, "manual")  # a later try plans it
    assert read_refusal(ids.dag_id, ids.run_id) is None
    page = client.get(url)
    assert page.status_code == 200 and "dlperf-refused" not in page.text and "none yet" in page.text
