"""The typed hand-offs between DAG tasks: each survives its JSON form (what XCom carries) unchanged, also through
Airflow's own serde as a task's return value is stored and read back, and the plan the DAG computes once holds
everything the later tasks used to re-read from the trigger form."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime

import pydantic
import pytest

from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.cluster.preflight import NodeHealth, PreflightReport
from dlperf_core.json_form import ALLOWED_DESERIALIZATION_CLASSES
from dlperf_core.measure.maxbatch import SearchResult, Trial
from dlperf_core.measure.measurement import Measurement
from dlperf_core.measure.regression import DetectionReport, NewRegression
from dlperf_core.model import Case, CaseOutcome, CaseRun, NodeOutcome
from dlperf_core.plan.cases import plan_searches, plan_suite
from dlperf_core.plan.suite import load_suite
from dlperf_core.run.handoff import ExecutedRun, NodeReport, Plan, PlannedRun, ProbeOutput, RunSettings
from dlperf_core.run.launch_spec import ContainerSettings, ImageRef, LaunchSpec, NodeSpec
from dlperf_core.run.run_status import RunCounts
from dlperf_core.run.runtime.gang import NodeShare
from dlperf_core.storage.records import ResultRecord
from helpers import REPO

INVENTORY = load_inventory(REPO / "inventories/docker-local.yaml")
SETTINGS = RunSettings(
    "suites/smoke.yaml",
    "docker",
    "inventories/docker-local.yaml",
    600.0,
    None,
    inventory_name=INVENTORY.name,
    nodes=INVENTORY.nodes,
)
NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def _json_round_trip(data: dict) -> dict:
    return json.loads(json.dumps(data))


def every_hand_off() -> list[object]:
    """One value of every type a DAG task returns, filled as the DAG fills it."""
    suite = load_suite(REPO / "tests/data/maxbatch/suite.yaml")
    inventory = load_inventory(REPO / "inventories/docker-local.yaml")
    runs = plan_suite(suite, inventory, allow_empty=True)
    searches = plan_searches(suite, inventory)
    assert searches, "the fixture suite has a max batch search"
    plan = Plan(
        SETTINGS,
        cases=[PlannedRun.of(r, SETTINGS, inventory) for r in runs],
        searches=[PlannedRun.of(CaseRun(s.case, 0, 9000 + s.index), SETTINGS, inventory, s) for s in searches],
    )
    outcome = CaseOutcome(
        NOW, NOW, [NodeOutcome("node0", 0, 0, "/logs/node0.log")], None, 812.5, {"node0": [(1.0, 300.0), (2.0, 310.5)]}
    )
    routed = PlannedRun.of(CaseRun(searches[0].case, 1, 3, 4), SETTINGS, inventory).with_environment(7)
    node = NodeSpec(
        node="node0",
        address="10.0.0.1",
        rank=0,
        runtime="docker",
        argv=("python", "train.py"),
        env={"NCCL_DEBUG": "INFO"},
        dlperf_version="0.1",
        image=ImageRef("dlperf/pytorch-reference:cpu", "sha256:ab"),
        container=ContainerSettings("dlperf-x-n0", "host", devices=("/dev/infiniband:/dev/infiniband:rwm",)),
    )
    spec = LaunchSpec(case_key=routed.run.case.key, repeat=1, nodes=(node,), suite="suites/smoke.yaml")
    share = NodeShare("node1", 1, 0, "/logs/node1.log", None, False, NOW.isoformat(), NOW.isoformat())
    return [
        plan,
        ExecutedRun(routed, outcome, spec),
        ExecutedRun(plan.searches[0], CaseOutcome(NOW, NOW, [], "preflight: node0: disk full")),
        PreflightReport(
            "checked: 1 ok, 1 failed", (NodeHealth("a", True), NodeHealth("b", False, ("disk",), {"disk": "1 GB"}))
        ),
        NodeReport(
            "node1", share, ran_on="node1", gpu_power=((1.0, 250.0),), launch_spec=spec, probe=ProbeOutput("x", None)
        ),
        NodeReport("node0", skipped="the case runs on node1"),
        Measurement("ok", None, 123.4, 120.0, 100, 6, 105, 0.31),
        SearchResult("found", 64, 128, None, (Trial(32, "ok", None, 10.0), Trial(128, "failed", "out of memory"))),
        RunCounts(3, 1, 1, 0),
        DetectionReport("manual", False, 2, {"new": 1, "steady": 1}, (NewRegression("k", "k: 5% slower", None),), 0),
    ]


def test_every_hand_off_survives_its_json_form():
    for value in every_hand_off():
        back = type(value).from_json(_json_round_trip(value.to_json()))  # type: ignore[attr-defined]
        assert back == value, type(value).__name__
    plan, executed = every_hand_off()[:2]
    assert executed.planned.node_names == ["node0"] and executed.planned.environment_id == 7  # type: ignore[union-attr]
    assert executed.planned.nodes == INVENTORY.nodes[:1] and executed.planned.image  # type: ignore[union-attr]
    assert executed.outcome.log_path == "/logs/node0.log"  # type: ignore[union-attr]
    assert plan.searches[0].label.startswith("max batch ") and executed.label.endswith(" r1")  # type: ignore[union-attr]


def test_every_planned_case_keeps_its_identity_through_its_json_form():
    """A case's JSON form is generated (options as [name, value] pairs, extra arguments as a list): what comes back
    is the same case, with the same key, configuration and fingerprint (the stored identity of its results)."""
    inventory = load_inventory(REPO / "inventories/docker-local.yaml")
    cases = {
        run.case
        for name in ("seeds-cpu.yaml", "smoke.yaml", "gpu-single.yaml")
        for run in plan_suite(load_suite(REPO / "suites" / name), inventory, allow_empty=True)
    }
    assert any(c.options for c in cases) and any(c.extra_args for c in cases) and any(c.compile for c in cases)
    for case in cases:
        data = _json_round_trip(case.to_json())
        assert data["options"] == [list(option) for option in case.options]
        back = Case.from_json(data)
        assert back == case and (back.key, back.fingerprint) == (case.key, case.fingerprint)
        assert back.configuration == case.configuration


VERSION_1_FORMS = [
    (
        SearchResult("found", 64, 128, None, (Trial(32, "ok", None, 10.0), Trial(128, "failed", "out of memory"))),
        "dlperf_core.maxbatch.SearchResult",
        {
            "status": "found",
            "max_batch": 64,
            "first_oom_batch": 128,
            "reason": None,
            "probes": [
                {"batch": 32, "status": "ok", "reason": None, "throughput": 10.0},
                {"batch": 128, "status": "failed", "reason": "out of memory", "throughput": None},
            ],
        },
    ),
    (
        RunCounts(3, 1, 1, 2),
        "dlperf_core.run_status.RunCounts",
        {"results": 3, "failed": 1, "max_batch_searches": 1, "fabric_probes": 2},
    ),
    (
        Measurement("ok", None, 123.4, 120.0, 100, 6, 105, 0.31),
        "dlperf_core.measure.Measurement",
        {
            "status": "ok",
            "reason": None,
            "throughput": 123.4,
            "reported_throughput": 120.0,
            "iterations": 100,
            "window_first": 6,
            "window_last": 105,
            "mfu": 0.31,
            "energy_per_sample_j": None,
            "gpu_power_mean_w": None,
        },
    ),
]
"""Hand-offs as version 1 wrote them (before ``probes`` became ``trials``, ``fabric_probes`` became
``fabric_benchmarks`` and a fabric benchmark's GB/s moved out of ``throughput``): (value now, class, its form)."""


def test_a_version_1_form_reads_back_as_the_value_it_was():
    """What Airflow calls for an XCom written by an older dlperf: ``deserialize(data, 1)``; the current version
    refuses nothing it wrote, and a newer one is refused by name."""
    for value, _, data in VERSION_1_FORMS:
        cls = type(value)
        assert cls.__version__ == 2, cls.__name__
        assert cls.deserialize(_json_round_trip(data), 1) == value, cls.__name__
        assert cls.deserialize(_json_round_trip(value.to_json()), 2) == value, cls.__name__
        with pytest.raises(TypeError, match="newer"):
            cls.deserialize(value.to_json(), 3)
    assert SearchResult.deserialize(VERSION_1_FORMS[0][2], 1).trials == VERSION_1_FORMS[0][0].trials  # "probes" then


def test_a_wrong_shape_is_refused_by_name():
    data = every_hand_off()[0].to_json()  # type: ignore[attr-defined]
    del data["settings"]["runtime"]
    with pytest.raises(pydantic.ValidationError, match="runtime"):
        Plan.from_json(data)


SERDE_ROUND_TRIP = """
import json, sys
from airflow.sdk.serde import deserialize, serialize
sys.path.insert(0, "tests/core/run")
from test_handoff import every_hand_off
for value in every_hand_off():
    stored = json.loads(json.dumps(serialize(value)))  # what the XCom table holds
    assert stored["__classname__"].startswith("dlperf_core."), stored
    assert deserialize(stored) == value, type(value).__name__
    assert deserialize(serialize([value])) == [value]  # a mapped task's input: a list of them
from test_handoff import VERSION_1_FORMS
for value, classname, data in VERSION_1_FORMS:  # an XCom an older dlperf wrote
    assert deserialize({"__classname__": classname, "__version__": 1, "__data__": data}) == value, classname
print("ok", len(every_hand_off()))
"""


@pytest.mark.parametrize("allowed", [ALLOWED_DESERIALIZATION_CLASSES, "airflow.*"])
def test_airflow_serde_carries_every_hand_off_only_where_allowed(tmp_path, allowed):
    """Airflow's serde (what XCom uses) stores each hand-off as its class and JSON form and gives the type back,
    once ``allowed_deserialization_classes`` names dlperf_core (as compose, the embedded runtime and the tests'
    stacks set it); with Airflow's default it refuses by name."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env |= {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__ALLOWED_DESERIALIZATION_CLASSES": allowed}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests")])
    proc = subprocess.run(
        [sys.executable, "-c", SERDE_ROUND_TRIP], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    if allowed == "airflow.*":
        assert proc.returncode != 0 and "was not found in allow list" in proc.stderr, proc.stderr[-2000:]
    else:
        assert proc.returncode == 0 and proc.stdout.startswith("ok 10"), proc.stderr[-3000:]


def test_a_result_row_is_filled_from_the_case_the_measurement_and_the_outcome():
    case = plan_suite(load_suite(REPO / "suites/smoke.yaml"), load_inventory(REPO / "inventories/local.yaml"))[0].case
    now = NOW
    outcome = CaseOutcome(now, now, [NodeOutcome("node0", 0, 0, "/logs/node0.log")], None, 512.0)
    measurement = Measurement("ok", None, 123.4, 120.0, 100, 6, 105)
    record = ResultRecord.from_run("d", "r", case, 2, measurement, outcome, environment_id=5)
    assert (record.case_key, record.repeat, record.throughput, record.window_first, record.window_last) == (
        case.key,
        2,
        123.4,
        6,
        105,
    )
    assert (record.log_path, record.gpu_memory_peak_mb, record.environment_id, record.compile) == (
        "/logs/node0.log",
        512.0,
        5,
        case.compile,
    )


def test_a_plan_written_before_planning_resolved_the_nodes_reads_with_them():
    """A plan (and the planned runs in an executed run) as version 1 wrote them, naming only the inventory file:
    read back, each planned run has what planning now resolves (its nodes, image, figure origin), read from that
    file once, as the newer dlperf would have planned it."""
    plan = every_hand_off()[0]
    assert isinstance(plan, Plan)
    old = plan.to_json()
    for key in ("inventory_name", "nodes"):
        del old["settings"][key]
    for item in [*old["cases"], *old["searches"]]:
        for key in ("inventory_name", "image", "figure_origin"):
            del item[key]
        item["nodes"] = []
    assert Plan.deserialize(_json_round_trip(old), 1) == plan
    executed = ExecutedRun(plan.searches[0], CaseOutcome(NOW, NOW, [], None))
    data = executed.to_json()
    data["planned"] = old["searches"][0] | {"nodes": ["node0"]}  # node routing wrote the node names
    assert ExecutedRun.deserialize(_json_round_trip(data), 1) == executed
