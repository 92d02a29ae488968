"""The typed hand-offs between DAG tasks: each survives its JSON form (what XCom carries) unchanged, and the
plan the DAG computes once holds everything the later tasks used to re-read from the trigger form."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from dlperf_core.handoff import ExecutedRun, Plan, PlannedRun, RunSettings
from dlperf_core.inventory import load_inventory
from dlperf_core.measure import Measurement
from dlperf_core.model import CaseOutcome, CaseRun, NodeOutcome
from dlperf_core.plan import plan_searches, plan_suite
from dlperf_core.storage.records import ResultRecord
from dlperf_core.suite import load_suite
from helpers import REPO

SETTINGS = RunSettings("suites/smoke.yaml", "docker", "inventories/docker-local.yaml", 600.0, None)


def _json_round_trip(data: dict) -> dict:
    return json.loads(json.dumps(data))


def test_every_hand_off_survives_its_json_form():
    suite = load_suite(REPO / "tests/data/maxbatch/suite.yaml")
    inventory = load_inventory(REPO / "inventories/docker-local.yaml")
    runs = plan_suite(suite, inventory, allow_empty=True)
    searches = plan_searches(suite, inventory)
    assert searches, "the fixture suite has a max batch search"
    plan = Plan(
        SETTINGS,
        cases=[PlannedRun.of(r, SETTINGS) for r in runs],
        searches=[PlannedRun.of(CaseRun(s.case, 0, 9000 + s.index), SETTINGS, s) for s in searches],
    )
    assert Plan.from_dict(_json_round_trip(plan.to_dict())) == plan

    now = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    outcome = CaseOutcome(
        now, now, [NodeOutcome("node0", 0, 0, "/logs/node0.log")], None, 812.5, {"node0": [(1.0, 300.0), (2.0, 310.5)]}
    )
    routed = PlannedRun.of(CaseRun(searches[0].case, 1, 3, 4), SETTINGS).with_environment(7)
    routed = PlannedRun.from_dict({**routed.to_dict(), "nodes": ["node0", "node1"]})
    executed = ExecutedRun(routed, outcome)
    back = ExecutedRun.from_dict(_json_round_trip(executed.to_dict()))
    assert back == executed
    assert back.planned.nodes == ("node0", "node1") and back.planned.environment_id == 7
    assert back.outcome.log_path == "/logs/node0.log"
    assert plan.searches[0].label.startswith("max batch ") and routed.label.endswith(" r1")


def test_a_result_row_is_filled_from_the_case_the_measurement_and_the_outcome():
    case = plan_suite(load_suite(REPO / "suites/smoke.yaml"), load_inventory(REPO / "inventories/local.yaml"))[0].case
    now = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
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
