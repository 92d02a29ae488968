"""The results page's Nodes section (dlperf_airflow.results_page, its template and results_api's routes) from a real
results database (SQLite and PostgreSQL): the latest per-node sweep as a node x metric heat map (a PNG the page
links), a table of every node, and a line naming each slow node; "No node named slow." after a clean sweep; a note
before any sweep. The scores themselves: tests/core/reporting/test_node_report.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from fastapi.testclient import TestClient

from dlperf_airflow.results_api import create_app
from dlperf_airflow.results_page import render_page
from dlperf_core.reporting import load_overview
from dlperf_core.reporting.data import NO_SWEEP
from dlperf_core.storage import ResultStore
from helpers import node_sweep_results, run_record

DAG = "dlperf_benchmark"
SWEEP = "pytorch_reference/resnet50_v1.5/fp32/b32/1n1g"
ARGS = "+args=0badc0de"
T0 = datetime(2026, 6, 1, 2, 0, tzinfo=UTC)


@pytest.fixture
def store(dialect_url: str, monkeypatch) -> Iterator[ResultStore]:
    monkeypatch.setenv("DLPERF_DB_URL", dialect_url)
    monkeypatch.delenv("DLPERF_SLOW_NODE_FRACTION", raising=False)
    monkeypatch.delenv("DLPERF_SLOW_NODE_Z", raising=False)
    result_store = ResultStore(dialect_url)
    result_store.ensure_schema()
    yield result_store
    result_store.dispose()


def sweep(store: ResultStore, k: int, figures: dict[str, float]) -> str:
    started = T0 + timedelta(days=k)
    run = run_record(
        dag_id=DAG, run_id=f"scheduled__{k}", trigger="scheduled", started_at=started, status="success"
    )  # fmt: skip
    store.upsert_run(run)
    store.upsert_results(node_sweep_results(run, SWEEP, figures, ARGS))
    return run.run_id


async def anyone() -> None:  # the routes alone; their login is test_results_api.py's
    return None


def test_the_page_names_the_slow_node_of_the_latest_sweep(store):
    sweep(store, 0, {"n0": 50.0, "n1": 50.5, "n2": 49.8})  # an earlier, clean sweep
    run_id = sweep(store, 1, {"n0": 50.0, "n1": 50.5, "n2": 30.0, "n3": 49.9})
    view = load_overview(store)
    assert view.nodes.source == f"per-node sweeps of run {run_id} (scheduled)" and len(view.nodes.rows) == 4
    page = unescape(render_page(view, ui_base="/", db="x"))
    section = page.split("<h2>Nodes: per-node sweeps</h2>")[1].split("<h2>")[0]
    assert '<img id="nodes-plot" src="api/plots/nodes.png"' in section
    assert 'id="node-rule">Rule: a node is named slow when its figure is at least 5% below' in section
    assert section.count('class="failed slow-node"') == 1
    assert (
        "⚠ slow node: node n2, pytorch_reference resnet50_v1.5 fp32 b32 1n1g: 30.00 samples/s, 40.0% slower" in section
    )
    assert section.count('<tr class="node-row') == 4 and section.count('<tr class="node-row failed">') == 1
    assert "median of 3 peers" in section and "no-slow-node" not in section
    client = TestClient(create_app(auth=anyone))
    png = client.get("/api/plots/nodes.png")
    assert png.status_code == 200 and png.headers["content-type"] == "image/png" and png.content[:4] == b"\x89PNG"
    rows = client.get("/api/nodes").json()["rows"]
    assert [(r["node"], r["verdict"]) for r in rows] == [("n0", "ok"), ("n1", "ok"), ("n2", "SLOW"), ("n3", "ok")]


def test_a_clean_sweep_names_nobody_and_no_sweep_says_how_to_make_one(store):
    client = TestClient(create_app(auth=anyone))
    assert client.get("/api/plots/nodes.png").status_code == 404
    assert client.get("/api/nodes").json()["note"] == NO_SWEEP
    page = unescape(render_page(load_overview(store), ui_base="/", db="x"))
    assert f'<p class="note" id="nodes-none">{NO_SWEEP}</p>' in page
    sweep(store, 0, {"n0": 50.0, "n1": 50.5, "n2": 49.8})
    page = unescape(render_page(load_overview(store), ui_base="/", db="x"))
    assert '<p class="ok" id="no-slow-node">No node named slow.</p>' in page and 'slow-node">⚠' not in page
