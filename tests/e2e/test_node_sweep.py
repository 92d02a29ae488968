"""The bad node named on stand-in nodes (issue 36): ``dlperf run tests/data/node-sweep-suite.yaml`` sweeps dlperf's
reference ResNet-50 over the four stand-in nodes (containers on this machine's Docker Engine) of
tests/data/node-sweep-inventory.yaml, one case per node pinned to it, through the real DAG, into PostgreSQL; the
last node is slowed on purpose (its containers get 0.15 of a core's time, the others half a core: cpu_quota). The
slowed node is named (the regression step's log, `dlperf run`'s Nodes section, the report, its JSON) and no other;
the three clean nodes' figures, a clean sweep of their own, name none.

The thresholds are the stand-ins' (DLPERF_SLOW_NODE_FRACTION=0.5, DLPERF_SLOW_NODE_Z=2), not a GPU cluster's 5 % and 3.5: on this project's 2-core
machine, beside other sessions' tests, a clean node fell up to 35 % below the other nodes' median in 27 clean sweeps
of these nodes (the quota's 100 ms period cuts a one-second window unevenly, and half a core protects a node's
figure against one neighbour on its core, not two), while the slowed node was 77-80 % below it
(docs/benchmarks.md, "(k) The bad node named"; bench/node_sweeps.py, about a minute a sweep, runs them). The z is
lowered because the MAD of three peers is itself noisy: in one CI run (where the report read back here still judged at
the defaults: the thresholds were set only in the CLI's environment, now in both) the clean nodes spread +-16 % and
the slowed node, 68 % below their median, stood at robust z -3.3; the fraction (50 %) is what keeps a clean node from
being named."""

from __future__ import annotations

import json
from pathlib import Path

from dlperf_core.measure.node_peers import NodePolicy, node_figures, score_sweeps
from dlperf_core.reporting import load_report_data
from dlperf_core.storage import ResultStore
from e2e_helpers import run_ok
from helpers import DLPERF, REPO, cli_env, dlperf_containers, docker_marks, network_of, run_id_of

IMAGE = "dlperf/pytorch-reference:cpu"
pytestmark = docker_marks(IMAGE)

SUITE = REPO / "tests" / "data" / "node-sweep-suite.yaml"
INVENTORY = REPO / "tests" / "data" / "node-sweep-inventory.yaml"
SLOWED = "sweep-node3"
STAND_IN_FRACTION = "0.5"
STAND_IN_Z = "2"


def test_the_slowed_stand_in_node_is_named_and_no_other(tmp_path: Path, pg_url: str, monkeypatch):
    # the stand-ins' thresholds in the CLI's environment and in this process (load_report_data reads them here)
    monkeypatch.setenv("DLPERF_SLOW_NODE_FRACTION", STAND_IN_FRACTION)
    monkeypatch.setenv("DLPERF_SLOW_NODE_Z", STAND_IN_Z)
    env = cli_env(
        tmp_path,
        pg_url,
        DLPERF_SLOW_NODE_FRACTION=STAND_IN_FRACTION,
        DLPERF_SLOW_NODE_Z=STAND_IN_Z,
        DLPERF_REPORT_DIR=str(tmp_path / "r"),
    )
    out = run_ok([*DLPERF, "run", str(SUITE)], env=env, timeout=600)
    store = ResultStore(pg_url)
    run_id = run_id_of(out.stdout)
    rows = store.results(run_id=run_id)
    assert len(rows) == 4 and set(rows["status"]) == {"ok"}, rows[["case_key", "reason"]]
    by_node = {key.split("+node=")[1].split("+")[0]: row for key, row in zip(rows["case_key"], rows.itertuples())}
    assert sorted(by_node) == ["sweep-node0", "sweep-node1", "sweep-node2", SLOWED]
    for node, row in by_node.items():  # each case ran on its node alone, the slowed one under its quota
        (spec,) = row.launch_spec["nodes"]
        assert spec["node"] == node and spec["container"]["cpus"] == (0.15 if node == SLOWED else 0.5)
        assert row.configuration["node"] == node

    scores = load_report_data(store, run_id).nodes
    assert [s.node for s in scores.slow] == [SLOWED], [s.describe() for s in scores.scores]
    slowed = scores.slow[0]
    assert slowed.basis == "peers" and slowed.count == 3 and slowed.change is not None and slowed.change < -0.5
    assert f"slow node: node {SLOWED}" in out.stdout + out.stderr  # detect_regressions' log line
    printed = out.stdout.split("## Nodes: per-node sweeps")[1]
    assert f"- slow node: node {SLOWED}, pytorch_reference resnet50_v1.5 fp32 b8 1n1g" in printed
    assert "(node=sweep-node" not in out.stdout  # no seed table per node
    report = json.loads(next((tmp_path / "r").rglob("report.json")).read_text())
    assert [s["node"] for s in report["nodes"]["slow"]] == [SLOWED]

    # the clean nodes' figures are a clean sweep of their own: it names none
    clean = [f for f in node_figures(zip(rows["case_key"], rows["throughput"])) if f.node != SLOWED]
    assert score_sweeps(clean, policy=NodePolicy(float(STAND_IN_FRACTION), float(STAND_IN_Z))).slow == ()
    assert dlperf_containers(network=network_of(INVENTORY)) == []
    store.dispose()
