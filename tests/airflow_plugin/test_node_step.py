"""The node tasks of node routing (dlperf_airflow.node_step) around the core: the board the nodes of a case meet
on is XCom (XComBoard, here over a stand-in task instance that keeps JSON as XCom does; the gang itself:
tests/core/run/runtime/test_gang.py, the real board across Celery workers: test_node_routing.py), and collect_case
merges what each node's task said it launched into the case's launch spec (the merge rule:
tests/core/plan/test_reproduce.py)."""

from __future__ import annotations

import json

from dlperf_airflow.node_step import STATE_KEY, XComBoard, merged_launch_spec
from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.model import RunIds
from dlperf_core.plan.cases import plan_suite
from dlperf_core.plan.suite import load_suite
from dlperf_core.run.commands import DryRunDocker
from dlperf_core.run.handoff import NodeReport
from dlperf_core.run.jobs import build_job
from dlperf_core.run.launch_spec import ImageRef, LaunchSpec, docker_node
from dlperf_core.run.runtime.gang import STARTED, NodeState
from helpers import REPO

IMAGE = "dlperf/pytorch-reference:cpu"


class FakeTaskInstance:
    """What XComBoard uses of Airflow's task instance: push under its own task, pull another's (same map index);
    what XCom holds must be JSON."""

    map_index = 3

    def __init__(self, task: str, xcom: dict, failing: list[bool] | None = None):
        self.task, self.xcom, self.failing = task, xcom, failing or []

    def xcom_push(self, key: str, value: object) -> None:
        self.xcom[(self.task, key, self.map_index)] = json.loads(json.dumps(value))

    def xcom_pull(self, task_ids: str, key: str, map_indexes: int) -> object:
        if self.failing and self.failing.pop(0):
            raise ConnectionError("api-server busy")
        return self.xcom.get((task_ids, key, map_indexes))


def test_the_xcom_board_keeps_json_and_reads_states_back():
    xcom: dict = {}
    node0 = XComBoard(FakeTaskInstance("case_run.on_node0", xcom))
    node1 = XComBoard(FakeTaskInstance("case_run.on_node1", xcom, failing=[False, True]), patience_s=60)
    assert node1.read("node0") is None  # nothing posted yet
    state = NodeState(STARTED, beat=2, client_pub="ssh-ed25519 AAAA c", host_pub="ssh-ed25519 BBBB h")
    node0.post(state)
    assert xcom[("case_run.on_node0", STATE_KEY, 3)] == state.to_json()  # plain JSON on XCom
    assert node1.read("node0") is None  # the read failed: the last state known (none yet), not an error
    assert node1.read("node0") == state


def test_collect_case_merges_what_each_node_saw_itself():
    """The smoke suite's ResNet-50 at 2n1g on the two stand-in nodes: node1's own task saw the image's id."""
    inventory = load_inventory(REPO / "inventories/docker-local.yaml")
    runs = plan_suite(load_suite(REPO / "suites/smoke.yaml"), inventory)
    run = next(r for r in runs if r.case.framework == "pytorch_reference" and r.case.topology == "2n1g")
    ids = RunIds("dlperf_benchmark", "manual__merge")
    job = build_job(run, inventory, DryRunDocker(), ids, timeout_s=60, watchdog_s=None)
    tags = [docker_node(launch, spec, ImageRef(IMAGE)) for launch, spec in zip(job.launches, job.containers)]
    first, second = (tag.node for tag in tags)
    base = LaunchSpec(case_key=run.case.key, repeat=0, nodes=tuple(tags))
    seen_by_second = LaunchSpec(
        case_key=run.case.key,
        repeat=0,
        nodes=(tags[0], docker_node(job.launches[1], job.containers[1], ImageRef(IMAGE, "sha256:1"))),
    )
    reports = {first: NodeReport(first, launch_spec=base), second: NodeReport(second, launch_spec=seen_by_second)}
    merged = merged_launch_spec(reports)
    assert merged == base.merged({first: base, second: seen_by_second})
    assert merged is not None and [n.image.id if n.image else None for n in merged.nodes] == [None, "sha256:1"]
    assert merged_launch_spec({second: NodeReport(second)}) is None  # no node task said what it launched
