"""One case run, two strategies, one outcome builder: a case run in phases on real local processes, and the routed
strategy's collection of its nodes' reports built by the same :func:`case_outcome` as the central one."""

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from dlperf_core.cluster.inventory import Node, load_inventory
from dlperf_core.model import CaseJob, NodeLaunch, RunIds
from dlperf_core.plan.cases import PlanFilters, plan_suite
from dlperf_core.plan.suite import load_suite
from dlperf_core.run.case_run import collect_case
from dlperf_core.run.handoff import NodeReport, PlannedRun, RunSettings
from dlperf_core.run.runtime.base import NodeEnd, case_outcome, run_to_end
from dlperf_core.run.runtime.gang import NodeShare
from dlperf_core.run.runtime.local import LocalRuntime
from helpers import REPO

NOW = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)


def _job(tmp_path, *scripts: str) -> CaseJob:
    launches = tuple(
        NodeLaunch(node=Node(name=f"node{i}"), node_rank=i, argv=(sys.executable, "-c", s))
        for i, s in enumerate(scripts)
    )
    return CaseJob("t", launches, (), tmp_path / "logs", 60, None, oversubscription="2 ranks on 1 core")


def test_a_case_runs_in_phases_submit_poll_collect(tmp_path):
    job = _job(tmp_path, "import time; time.sleep(0.5); print('a')", "print('b')")
    running = LocalRuntime().submit(job)
    assert not (tmp_path / "logs").exists()  # nothing started before submit
    running.submit()
    polls = 1
    while not running.poll():  # the caller's time between two looks (a deferred task's, under a scheduler)
        polls += 1
        assert polls < 500
        time.sleep(running.poll_s)
    outcome = running.collect()
    assert polls > 1  # node 0 still ran after the first look: the caller had the time between polls
    assert outcome.failure is None and [n.exit_code for n in outcome.nodes] == [0, 0]
    assert (tmp_path / "logs" / "node0.log").read_text() == "a\n"
    assert outcome.oversubscription == "2 ranks on 1 core"  # the job's, through the one builder


def test_a_node_that_fails_ends_the_case_at_the_next_poll(tmp_path):
    outcome = run_to_end(LocalRuntime().submit(_job(tmp_path, "import time; time.sleep(300)", "raise SystemExit(3)")))
    assert outcome.failure == "node1 exited with code 3"
    assert outcome.nodes[0].exit_code not in (None, 0)  # stopped, not left running


def _planned() -> PlannedRun:
    inventory = load_inventory(REPO / "inventories/docker-local.yaml")
    run = plan_suite(load_suite(REPO / "suites/smoke.yaml"), inventory, PlanFilters(topologies=("2n1g",)))[0]
    settings = RunSettings("suites/smoke.yaml", "docker", "inventories/docker-local.yaml", 60, None)
    return PlannedRun.of(run, settings, inventory)


def test_the_routed_strategy_builds_the_outcome_the_central_one_does(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_LOG_DIR", str(tmp_path / "central"))
    planned = _planned()
    first, second = planned.node_names
    at = NOW.isoformat()
    reports = {
        first: NodeReport(
            first,
            NodeShare(first, 0, 0, "/on/node0/node0.log", None, False, at, at),
            gpu_memory_peak_mb=812.0,
            log="rank 0 printed this\n",
            oversubscription="2 ranks on 1 core",
        ),
        second: NodeReport(
            second,
            NodeShare(second, 1, 0, "/on/node1/node1.log", None, False, at, at),
            gpu_power=((1.0, 300.0),),
            disk_full="log disk full: No space left on device (ENOSPC) writing in /on/node1",
        ),
    }
    outcome, _ = collect_case(planned, reports, RunIds("d", "r"))
    central_log = outcome.nodes[0].log_path
    assert Path(central_log).read_text() == "rank 0 printed this\n"  # node 0's log, where the parser reads it

    class Readings:
        def __init__(self, peak, power):
            self.peak_mb, self.power, self.clocks = peak, power, []

    central = case_outcome(
        [NodeEnd(first, 0, 0, central_log), NodeEnd(second, 1, 0, "/on/node1/node1.log")],
        None,
        NOW,
        NOW,
        oversubscription="2 ranks on 1 core",
        disk_full="log disk full: No space left on device (ENOSPC) writing in /on/node1",
        samples={first: Readings(812.0, []), second: Readings(None, [(1.0, 300.0)])},
    )
    assert outcome == central
    assert outcome.failure.startswith("log disk full")  # the routed path names a full log disk too
    # a node whose task never reported fails the case by name, and is in the outcome without an exit code
    lost, _ = collect_case(planned, {first: reports[first]}, RunIds("d", "r"))
    assert lost.failure == f"{second}: the node's task did not report (worker lost, or the task never ran)"
    assert [(n.node, n.exit_code) for n in lost.nodes] == [(first, 0), (second, None)]
