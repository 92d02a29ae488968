"""The results page and a run's page as a person reads them, with realistic rows: the smoke suite's case keys with
their fingerprint, an NGC configuration with options, unreliable reasons, a failed repeat with a long reason, two
scheduled nights and an open regression. No internal name (a store method, a view or table, a task id) in their
text, nights shown as dates, and in Chromium at a 1,280 px wide window neither page wider than the window and no
table wider than its box.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from html import unescape
from pathlib import Path

import pytest

from dlperf_airflow.results_page import render_page
from dlperf_airflow.run_page import link_bar, with_link_bar
from dlperf_core.reporting import build_report, load_overview, report_dir
from dlperf_core.reporting.build import run_page_html
from dlperf_core.storage import ResultStore
from helpers import result_record, run_record

CHROMIUM = Path("/usr/bin/chromium")
DAG = "dlperf_benchmark"
NIGHTS = (datetime(2026, 11, 27, tzinfo=UTC), datetime(2026, 11, 28, tzinfo=UTC))
SMOKE = "pytorch_reference/resnet50_v1.5/fp32/b8/{}+args=1f0c9a2e"
NGC = "ngc_pytorch/resnet50_v1.5/amp/b256/{}+static_loss_scale=128+compile+args=2b7d0e11"
REPEATS = {
    # a noisy 1n1g: its CV is flagged, and measured against it 1n2g and 2n1g scale super-linearly
    SMOKE: {"1n1g": [59.0, 19.0], "1n2g": [170.0, 172.0], "2n1g": [150.0, 154.0]},
    NGC: {"1n1g": [2400.0, 2410.0], "1n2g": [4700.0, 4720.0], "2n1g": [4500.0, 4540.0], "2n2g": [8800.0, 8900.0]},
}
LONG_REASON = (
    "exit code 137 on node1 (killed: out of memory); log /var/log/dlperf/scheduled__2026-11-28T00:00:00+00:00/"
    "pytorch_reference/resnet50_v1.5/fp32/b8/2n1g+args=1f0c9a2e/r2/node1.log"
)
INTERNAL = ("ResultStore", "latest_summary", "benchmark_runs", "mlperf_scores", "make_report", "()")


def run_id(night: datetime) -> str:
    return f"scheduled__{night.isoformat()}"


def seed(url: str) -> ResultStore:
    """Two scheduled nights of both configurations (the second with a failed repeat) and a regression found on
    the second night."""
    from dlperf_core.measure.regression import Verdict
    from dlperf_core.storage.rows import Configuration

    store = ResultStore(url)
    store.ensure_schema()
    for night in NIGHTS:
        run = run_record(
            dag_id=DAG,
            run_id=run_id(night),
            trigger="scheduled",
            started_at=night,
            finished_at=night + timedelta(minutes=40),
            status="failed" if night == NIGHTS[-1] else "success",
        )
        store.upsert_run(run)
        rows = [
            result_record(
                case_key=key.format(topology),
                repeat=repeat,
                throughput=value,
                started_at=night + timedelta(minutes=repeat),
                benchmark_run=run,
            )
            for key, topologies in REPEATS.items()
            for topology, values in topologies.items()
            for repeat, value in enumerate(values)
        ]
        if night == NIGHTS[-1]:
            rows.append(
                result_record(
                    case_key=SMOKE.format("2n1g"),
                    repeat=2,
                    status="failed",
                    reason=LONG_REASON,
                    throughput=None,
                    started_at=night + timedelta(minutes=3),
                    benchmark_run=run,
                )
            )
        store.upsert_results(rows)
    configuration = Configuration(
        framework="ngc_pytorch",
        model="resnet50_v1.5",
        precision="amp",
        batch_size_per_device=256,
        variant="+static_loss_scale=128+compile+args=2b7d0e11",
        nodes=2,
        gpus_per_node=2,
    )
    verdict = Verdict(
        kind="new",
        night=NIGHTS[-1].date(),
        run_id=run_id(NIGHTS[-1]),
        median_throughput=8850.0,
        baseline_median=9800.0,
        baseline_mad=30.0,
        baseline_nights=1,
        change_pct=(8850.0 / 9800.0 - 1) * 100,
        robust_z=-21.4,
        direction="slower",
    )
    store.record_regression(DAG, run_id(NIGHTS[-1]), NGC.format("2n2g"), configuration, verdict)
    return store


@pytest.fixture
def store(sqlite_url):
    result_store = seed(sqlite_url)
    yield result_store
    result_store.dispose()


@pytest.fixture
def pages(store, tmp_path, monkeypatch) -> dict[str, str]:
    """The results page, and the latest run's page (the DAG run's tab) with its report files written."""
    reports = tmp_path / "reports"
    monkeypatch.setenv("DLPERF_REPORT_DIR", str(reports))
    latest = run_id(NIGHTS[-1])
    build_report(store, latest, dag_id=DAG, fmt=("html", "md", "json"), out_dir=report_dir(DAG, latest, reports))
    run_page = with_link_bar(run_page_html(store, latest, dag_id=DAG), link_bar(DAG, latest, "/dlperf/"))
    return {"results": render_page(load_overview(store), ui_base="/", db="sqlite://"), "run": run_page}


def text_of(page: str) -> str:
    """What a reader sees of ``page``: its text without markup, style or link targets."""
    page = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    page = re.sub(r'src="data:[^"]*"', "", page)
    return unescape(re.sub(r"<[^>]+>", " ", page))


def headers(page: str) -> list[str]:
    return [unescape(h) for h in re.findall(r"<th>(.*?)</th>", page, flags=re.S)]


def column(page: str, table_id: str, at: int = 0) -> list[str]:
    """The cells of column ``at`` of the page's table ``table_id``."""
    table = page[page.index(f'<table id="{table_id}">') :]
    table = table[: table.index("</table>")]
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S) for row in table.split("<tr")]
    return [unescape(cells[at]) for cells in rows if cells]


# --------------------------------------------------------------------------- what the pages say


def test_the_results_page_shows_no_internal_name(pages):
    page = pages["results"]
    seen = text_of(page)
    for name in INTERNAL:
        assert name not in seen, name
    for header in headers(page):  # the history, regressions and MLPerf tables show their query's columns
        assert "_" not in header, header
    assert {"case", "median samples/s", "DAG run", "night"} <= set(headers(page))


def test_the_run_page_shows_no_internal_name(pages):
    page = pages["run"]
    seen = text_of(page)
    for name in INTERNAL:
        assert name not in seen, name
    failed = page[page.index("<h2>Failed repeats</h2>") :]
    assert "<th>case</th><th>repeat</th><th>reason</th><th>log</th>" in failed
    regressions = page[page.index("<h2>Regressions found at this run</h2>") :]
    assert "<th>case</th><th>night</th><th>median samples/s</th>" in regressions
    # no report files yet: the link bar says so in words
    bare = link_bar(DAG, "manual__none", "/dlperf/")
    assert "make_report" not in bare and "none yet" in bare


def test_nights_are_shown_as_dates(pages, store, tmp_path):
    view = load_overview(store)
    nights = {"2026-11-27", "2026-11-28"}
    assert {r["night"] for r in view.history.rows} == nights  # the JSON the page and the API share
    assert [r["night"] for r in view.regressions.rows] == ["2026-11-28"]
    page = pages["results"]
    assert set(column(page, "history")) == nights
    assert column(page, "regressions") == ["2026-11-28"]
    for table in ("history", "regressions"):
        section = page[page.index(f'<table id="{table}">') :]
        assert "T00:00:00<" not in section[: section.index("</table>")]
    # the reports: the regression's night in the JSON and in the HTML page's table
    files = build_report(store, run_id(NIGHTS[-1]), dag_id=DAG, fmt=("json", "html"), out_dir=tmp_path / "out")
    report = json.loads(files.documents["json"].read_text())
    assert [r["night"] for r in report["regressions"]] == ["2026-11-28"]
    assert "<td>2026-11-28</td>" in files.documents["html"].read_text()


# --------------------------------------------------------------------------- the pages in a browser

LAYOUT = """() => ({
  page: document.documentElement.scrollWidth,
  boxes: [...document.querySelectorAll('table')].map(t => {
    const box = t.closest('div.table') || t;
    return {table: t.id || box.previousElementSibling?.textContent || '?', scroll: box.scrollWidth,
            width: box.clientWidth, overflow: getComputedStyle(box).overflowX,
            summary: t.querySelector('tr.summary-row') !== null};
  }),
})"""


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (scripts/ensure-chromium.sh installs Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in requirements.lock")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.mark.parametrize("name", ["results", "run"])
def test_the_pages_fit_1280_px(name, pages, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.set_content(pages[name], wait_until="load")
        layout = page.evaluate(LAYOUT)
        page.screenshot(path=str(tmp_path / f"{name}-1280.png"), full_page=True)
    finally:
        page.close()
    boxes = layout["boxes"]
    assert boxes, "no table on the page"
    assert layout["page"] <= 1280, layout  # the page is never wider than the window
    assert {box["overflow"] for box in boxes} == {"auto"}, boxes  # a table wider than the page scrolls in its box
    # with long keys, variants, run ids and reasons wrapped, every table fits but a summary's (18 columns: it
    # scrolls sideways in its own box, the page does not)
    too_wide = [box for box in boxes if box["scroll"] > box["width"] + 1 and not box["summary"]]
    assert not too_wide, too_wide
    assert all(box["width"] <= 1280 for box in boxes), boxes
