"""End to end through Airflow's UI, as a user would: a real api-server, scheduler and dag-processor
(LocalExecutor, PostgreSQL metadata DB), Debian's chromium driven headless by Playwright.

Log in, open dlperf_benchmark's trigger form, pick runtime local, topology 1n1g and 1 repeat, trigger,
wait for the run to succeed (REST API with a JWT from /auth/token), then open the results page from the
UI's navigation and the page itself and find the new rows. Screenshots go to the test's tmp folder; the
last one is copied to docs/img/results-page.png. An unauthenticated request to the plugin API is refused.
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path

import pytest

from airflow_stack import AirflowStack, prepare_stack, start_stack
from dlperf_airflow.task_ids import CASE_RUNS_TASK
from dlperf_core.model import series_base
from dlperf_core.storage import ResultStore
from helpers import REPO

pytestmark = pytest.mark.postgres

CHROMIUM = Path("/usr/bin/chromium")
DAG_ID = "dlperf_benchmark"
SCREENSHOT = REPO / "docs" / "img" / "results-page.png"
RUN_TIMEOUT_S = 900


@pytest.fixture
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing and scripts/ensure-chromium.sh could not install Debian's chromium")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in requirements.lock")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def stack(tmp_path, metadata_url, pg_url):
    deployment = prepare_stack(tmp_path / "airflow", metadata_url, pg_url, "dlperf", f"pw-{uuid.uuid4().hex[:10]}")
    try:
        start_stack(deployment)
        yield deployment
    finally:
        deployment.stop()


def login(page, stack: AirflowStack) -> None:
    page.goto(f"{stack.url}/dags/{DAG_ID}")
    page.wait_for_url("**/auth/login**")
    page.fill('input[name="username"]', stack.username)
    page.fill('input[name="password"]', stack.password)
    page.click('button[type="submit"]')
    page.wait_for_url(f"**/dags/{DAG_ID}**", timeout=60_000)


def pick(dialog, field: str, typed: str) -> None:
    """Choose an option of a dropdown / multi-select (react-select) by typing and Enter."""
    box = dialog.locator(f"#element_{field} input").first
    box.click()
    box.fill(typed)
    box.press("Enter")


def open_section(dialog, title: str) -> None:
    dialog.get_by_text(title, exact=True).click()


def fill_trigger_form(page, shots: Path) -> None:
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("What to run", exact=True).wait_for()
    open_section(dialog, "What to run")
    pick(dialog, "runtime", "local:")
    open_section(dialog, "Filters")
    pick(dialog, "topologies", "1n1g")
    pick(dialog, "precisions", "fp32")
    open_section(dialog, "Measurement")
    repeats = dialog.locator('[id="number-input:element_repeats"] input')
    repeats.fill("1")
    repeats.press("Tab")
    page.screenshot(path=str(shots / "1-trigger-form.png"), full_page=True)
    trigger = dialog.get_by_role("button", name="Trigger")
    assert trigger.is_enabled(), "the trigger form refused the values the test filled in"
    trigger.click()
    dialog.wait_for(state="hidden", timeout=30_000)


def test_trigger_form_run_and_results_page(stack: AirflowStack, browser, tmp_path, pg_url):
    shots = tmp_path / "screenshots"
    shots.mkdir()

    # the plugin API refuses a request without Airflow credentials, and one with a forged token
    assert stack.request("GET", "/dlperf/api/summary")[0] == 401
    assert stack.request("GET", "/dlperf/api/summary", token="forged.jwt.token")[0] == 403

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    login(page, stack)
    fill_trigger_form(page, shots)

    token = stack.token()
    runs_path = f"/api/v2/dags/{DAG_ID}/dagRuns?order_by=-run_after&limit=5"

    def manual_run():
        status, body = stack.request("GET", runs_path, token=token)
        runs = [r for r in body.get("dag_runs", []) if r["run_type"] == "manual"] if status == 200 else []
        return runs[0] if runs else None

    run = stack.wait_until("the triggered run to appear", manual_run, timeout=60)
    # what the form sent is what the run got
    assert run["conf"]["topologies"] == ["1n1g"]
    assert run["conf"]["precisions"] == ["fp32"]
    assert run["conf"]["repeats"] == 1
    assert run["conf"]["runtime"] == "local"
    run_id = run["dag_run_id"]

    def finished():
        status, body = stack.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}", token=token)
        return body if status == 200 and body["state"] in ("success", "failed") else None

    final = stack.wait_until(f"run {run_id} to finish", finished, timeout=RUN_TIMEOUT_S, every=1)
    if final["state"] != "success":
        status, tis = stack.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances", token=token)
        states = {(t["task_id"], t["map_index"]): t["state"] for t in tis.get("task_instances", [])}
        pytest.fail(f"run {run_id} ended {final['state']}: {states}\n{stack.logs()}")

    rows = ResultStore(pg_url).results(run_id=run_id)
    assert [series_base(key) for key in rows["case_key"]] == ["pytorch_reference/resnet50_v1.5/fp32/b32/1n1g"]
    assert list(rows["status"]) == ["ok"]

    # the results page, as the UI's navigation shows it (an iframe in the UI)
    page.goto(f"{stack.url}/")
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="dlperf results").click()
    page.wait_for_url("**/plugin/dlperf-results**")
    frame = page.frame_locator("iframe").first
    frame.locator("#latest-any").wait_for(timeout=30_000)  # a run from the form: no night yet
    assert run_id in frame.locator("#runs").inner_text()
    page.screenshot(path=str(shots / "2-results-in-ui.png"), full_page=True)

    # the page itself: the new run's rows, and links back to the DAG run and its task logs
    page.goto(f"{stack.url}/dlperf/")
    assert page.locator("#summary").count() == 0 and "no nightly run yet" in page.content()  # it says which it shows
    summary = page.locator("#latest-any").inner_text()
    assert "1n1g" in summary and "pytorch_reference" in summary and "single repeat" in summary
    figure = f"{rows['throughput'].iloc[0]:,.2f}"
    assert figure in page.locator("#results").inner_text()
    links = page.locator("#runs a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    case_runs = re.escape(CASE_RUNS_TASK)  # case_run.store_result, whatever the routing
    assert any(re.search(rf"/dags/{DAG_ID}/runs/.+/tasks/{case_runs}/mapped$", href) for href in links), links
    assert page.locator("#speedup-plot").count() == 0  # 1n1g only: no speedup to plot yet, and it says so
    assert "no speedup to plot yet" in page.content()
    page.screenshot(path=str(shots / "3-results-page.png"), full_page=True)

    final_shot = shots / "2-results-in-ui.png"
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(final_shot, SCREENSHOT)
