"""The report's and the results page's Nodes section from a real results database (SQLite): a run's per-node sweeps
scored node by node (four nodes, one 10 % slower: named; two nodes: each against its own nights), shown as a table,
a line per slow node and a heat map, and kept out of the seed tables and the scaling and history plots. The rule:
tests/core/measure/test_node_peers.py; the page's HTML: tests/airflow_plugin/test_results_page_nodes.py."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from PIL import Image

from dlperf_core.measure.node_peers import NodePolicy
from dlperf_core.reporting import build_report, load_report_data
from dlperf_core.reporting.data import NO_SWEEP, load_node_scores, load_nodes
from dlperf_core.reporting.nodes import heat_map_frame, node_frame, without_sweeps
from dlperf_core.reporting.plots import node_heatmap_png
from dlperf_core.storage import ResultStore
from helpers import result_record, run_record

DAG = "dlperf_benchmark"
NIGHT0 = datetime(2026, 4, 1, 2, 0, tzinfo=UTC)
FOUR = "pytorch_reference/resnet50_v1.5/fp32/b32/1n8g"  # swept over n0..n3; n2 is 10 % slower tonight
TWO = "pytorch_reference/resnet50_v1.5/amp/b64/1n8g"  # swept over n0, n1; n1 is 20 % slower tonight
PLAIN = "pytorch_reference/resnet50_v1.5/fp32/b32/1n1g"
ARGS = "+args=0badc0de"


def pinned(base: str, node: str) -> tuple[str, str]:
    """(case key, variant) of ``base``'s case pinned to ``node``."""
    variant = f"+node={node}{ARGS}"
    return base + variant, variant


def night(store: ResultStore, k: int, *, tonight: bool) -> str:
    """Scheduled night ``k``: the two-node sweep every night; tonight also the four-node sweep and a plain case."""
    started = NIGHT0 + timedelta(days=k)
    run = run_record(
        dag_id=DAG,
        run_id=f"scheduled__{started.isoformat()}",
        suite="sweep",
        trigger="scheduled",
        started_at=started,
        finished_at=started + timedelta(hours=1),
        status="success",
    )
    store.upsert_run(run)
    figures = {pinned(TWO, "n0"): 2000.0 + k, pinned(TWO, "n1"): (1600.0 if tonight else 2001.0 - k)}
    if tonight:
        figures |= {pinned(FOUR, n): v for n, v in zip(("n0", "n1", "n2", "n3"), (1000.0, 1006.0, 900.0, 997.0))}
        figures[(PLAIN + ARGS, ARGS)] = 130.0
    rows = [
        result_record(
            case_key=key,
            variant=variant,
            repeat=repeat,
            throughput=value * (1 + 0.001 * repeat),
            started_at=started + timedelta(minutes=repeat),
            benchmark_run=run,
        )
        for (key, variant), value in figures.items()
        for repeat in range(2)
    ]
    store.upsert_results(rows)
    return run.run_id


@pytest.fixture
def swept(sqlite_url):
    store = ResultStore(sqlite_url)
    store.ensure_schema()
    for k in range(6):
        night(store, k, tonight=False)
    run_id = night(store, 6, tonight=True)
    yield store, run_id
    store.dispose()


def test_the_runs_sweeps_are_scored_node_by_node(swept):
    store, run_id = swept
    data = load_report_data(store, run_id, DAG)
    scores = data.nodes
    assert [(s.node, s.basis) for s in scores.slow] == [("n1", "history"), ("n2", "peers")]
    slow = {s.node: s for s in scores.slow}
    assert slow["n2"].reference == 1000.0 * 1.0005 and slow["n2"].change == pytest.approx(-0.1, abs=1e-3)
    assert slow["n1"].count == 6 and slow["n1"].change == pytest.approx(1600.0 / 1998.5 - 1, abs=1e-3)
    assert len(scores.scores) == 6 and not [s for s in scores.scores if s.reference is None]
    frame = node_frame(scores)
    assert list(frame["verdict"]).count("SLOW") == 2 and set(frame["against"]) == {
        "median of 3 peers",
        "own last 6 nights",
    }
    change, value, slow_cells = heat_map_frame(scores)
    assert change.shape == (4, 2) and int(slow_cells.to_numpy().sum()) == 2
    assert change.isna().sum().sum() == 2 and value.loc["n2"].notna().sum() == 1  # n2, n3 are in one sweep only
    assert list(without_sweeps(data.summary)["case_key"]) == [PLAIN + ARGS]
    strict = load_report_data(store, run_id, DAG)
    assert [s.node for s in replace(strict, node_policy=NodePolicy(0.25)).nodes.slow] == []


def test_the_report_names_the_slow_nodes_with_a_table_and_a_heat_map(swept, tmp_path):
    store, run_id = swept
    files = build_report(store, run_id, dag_id=DAG, fmt=["md", "html", "json"], out_dir=tmp_path)
    md = files.documents["md"].read_text()
    assert "## Nodes: per-node sweeps" in md and "Rule: a node is named slow when" in md
    assert "- slow node: node n2, pytorch_reference resnet50_v1.5 fp32 b32 1n8g: 900.45 samples/s, 10.0% slower" in md
    assert "than the median of its 3 peers (1000.50" in md
    assert "- slow node: node n1, pytorch_reference resnet50_v1.5 amp b64 1n8g" in md and "own last 6 nights" in md
    assert "![Nodes: each node's figure against its reference](plots/nodes.png)" in md
    assert "node=n" not in md.split("## Nodes")[0]  # the seed tables have the plain case only
    with Image.open(tmp_path / "plots" / "nodes.png") as image:
        assert image.size[0] > 300 and image.size[1] > 150
    assert [p.kind for p in files.plots].count("nodes") == 1
    assert not [p for p in files.plots if "node=" in p.path.name]  # no scaling or history plot per node
    html = files.documents["html"].read_text()
    assert '<h2 id="nodes">Nodes: per-node sweeps</h2>' in html and html.count('<li class="slow-node">') == 2
    report = json.loads(files.documents["json"].read_text())
    assert [s["node"] for s in report["nodes"]["slow"]] == ["n1", "n2"] and report["nodes"]["slower_than"] == 0.05
    assert len(report["nodes"]["scores"]) == 6


def test_a_run_without_a_sweep_has_no_nodes_section(sqlite_url, tmp_path):
    store = ResultStore(sqlite_url)
    store.ensure_schema()
    run = run_record(dag_id=DAG, run_id="r", started_at=NIGHT0, finished_at=NIGHT0, status="success")
    store.upsert_run(run)
    store.upsert_results([result_record(case_key=PLAIN + ARGS, variant=ARGS, benchmark_run=run)])
    files = build_report(store, "r", dag_id=DAG, fmt=["md", "json"], out_dir=tmp_path)
    assert "Nodes" not in files.documents["md"].read_text()
    assert json.loads(files.documents["json"].read_text())["nodes"]["scores"] == []
    assert load_nodes(store).note == NO_SWEEP and node_heatmap_png(load_node_scores(store)[0]) is None
    store.dispose()


def test_the_results_page_shows_the_latest_sweep(swept):
    store, run_id = swept
    scores, run = load_node_scores(store)
    assert run is not None and run.run_id == run_id and [s.node for s in scores.slow] == ["n1", "n2"]
    section = load_nodes(store)
    assert section.source == f"per-node sweeps of run {run_id} (scheduled)" and len(section.rows) == 6
    slow = [r for r in section.rows if r["verdict"] == "SLOW"]
    assert [r["node"] for r in slow] == ["n1", "n2"] and slow[1]["finding"].startswith("slow node: node n2")
    png = node_heatmap_png(scores)
    assert png is not None and Image.open(io.BytesIO(png)).format == "PNG"
