"""A per-node sweep (a suite benchmark's ``per_node: true``): refused before any work when it is not 1 node x G GPUs,
planned as one case per inventory node pinned to it (its key naming the node, its fingerprint the sweep's), run on
that node only, its nodes all checked by preflight; and an inventory node's ``cpu_quota`` as the container's CPU
limit (``docker run --cpus``). The scoring of the nodes' figures: tests/core/measure/test_node_peers.py; on stand-in
nodes: tests/e2e/test_node_sweep.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from dlperf_core.cluster.container import container_spec_for
from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.errors import ConfigError
from dlperf_core.model import Case, CaseRun, RunIds, pinned_node, unpinned
from dlperf_core.plan.cases import PlanFilters, expand_cases, missing_case_keys, nodes_used, plan_suite
from dlperf_core.plan.form_overrides import apply_form
from dlperf_core.plan.suite import load_suite, parse_suite
from dlperf_core.plan.trigger_form import TriggerForm
from dlperf_core.run.commands import suite_commands
from dlperf_core.run.handoff import PlannedRun, RunSettings
from dlperf_core.run.jobs import build_job
from dlperf_core.run.launch_spec import ContainerSettings

THREE = Inventory(
    name="three",
    nodes=tuple(
        Node(name=f"n{i}", gpus=2, network="sweep-net", env={"IFACE": f"eth{i}"}, cpu_quota=0.5 if i == 2 else None)
        for i in range(3)
    ),
)


def sweep_suite(**bench) -> dict:
    return {
        "name": "sweep",
        "repeats": 2,
        "benchmarks": [
            {
                "framework": "pytorch_reference",
                "model": "resnet50_v1.5",
                "batch_size_per_device": 8,
                "topologies": ["1n1g", "1n2g"],
                "per_node": True,
                **bench,
            },
            {"framework": "pytorch_reference", "model": "resnet50_v1.5", "batch_size_per_device": 8},
        ],
    }


class FakeRuntime:
    name, python, workload_dir = "docker", "python3", "/opt/dlperf/workload"

    def host_cores(self, _node):
        return None


def test_a_sweep_is_one_case_per_node_pinned_to_it_with_the_sweeps_fingerprint():
    runs = plan_suite(parse_suite(sweep_suite()), THREE)
    keys = [r.case.key for r in runs if r.repeat == 0]
    plain = next(r.case for r in runs if r.case.node is None)  # the other benchmark's 1n1g: the same configuration
    assert keys[:3] == [plain.key.replace("/1n1g+", f"/1n1g+node=n{i}+") for i in range(3)]
    assert [pinned_node(k) for k in keys] == ["n0", "n1", "n2", "n0", "n1", "n2", None]
    assert all(unpinned(k) == plain.key for k in keys[:3]) and keys[-1] == plain.key  # the unpinned 1n1g benchmark
    assert len(runs) == 7 * 2  # 3 nodes x 2 topologies, and the other benchmark's 1n1g; 2 repeats each
    case = runs[0].case
    assert case.node == "n0" and case.configuration["node"] == "n0" and "node" not in plain.configuration
    assert case.fingerprint == plain.fingerprint  # where it ran is not what it trained
    assert case.readable_options == "+node=n0" and case.options_key == f"+node=n0+args={plain.fingerprint}"


def test_a_pinned_case_runs_on_its_node_only():
    runs = plan_suite(parse_suite(sweep_suite(topologies=["1n2g"])), THREE)
    settings = RunSettings("s.yaml", "docker", "inv.yaml", 60.0, None)
    for run, node in zip(runs[::2], ("n0", "n1", "n2")):
        planned = PlannedRun.of(run, settings, THREE)
        assert planned.node_names == [node] and planned.nodes[0].env["IFACE"] == f"eth{node[-1]}"
        back = PlannedRun.from_json(json.loads(json.dumps(planned.to_json())))
        assert back == planned and back.resolved_on(back.cluster) == planned
        job = build_job(run, planned.cluster, FakeRuntime(), RunIds("d", "r"), timeout_s=60, watchdog_s=None)
        assert [launch.node.name for launch in job.launches] == [node]
        assert [c.hostname for c in job.containers] == [node]
        assert job.containers[0].cpu_quota == (0.5 if node == "n2" else None)
        full = build_job(run, THREE, FakeRuntime(), RunIds("d", "r"), timeout_s=60, watchdog_s=None)
        assert [launch.node.name for launch in full.launches] == [node]  # the whole inventory: the same node
    described = suite_commands(parse_suite(sweep_suite(topologies=["1n1g"])), THREE)
    assert "## node 0: n2 (launcher)" in described and "cpus=0.5" in described


def test_preflight_checks_every_node_a_sweep_uses():
    cases = [case for case, _ in expand_cases(parse_suite(sweep_suite(topologies=["1n1g"])), inventory=THREE)]
    assert [n.name for n in nodes_used(cases, THREE)] == ["n0", "n1", "n2"]
    assert [n.name for n in nodes_used([cases[1]], THREE)] == ["n1"]
    assert [n.name for n in nodes_used([replace(cases[0], node=None, nodes=2)], THREE)] == ["n0", "n1"]


def test_filters_and_case_keys_select_a_nodes_case():
    suite = parse_suite(sweep_suite())
    only = plan_suite(suite, THREE, PlanFilters(topologies=("1n2g",), repeats=1))
    assert [r.case.node for r in only] == ["n0", "n1", "n2"]
    key = only[1].case.key
    assert missing_case_keys(suite, PlanFilters(case_keys=(key,))) == []  # no inventory yet: the sweep has it
    assert apply_form(suite, TriggerForm(case_keys=(key,), repeats=1)) is not None  # dlperf reproduce --run's check
    (again,) = plan_suite(suite, THREE, PlanFilters(case_keys=(key,), repeats=1))
    assert again.case == only[1].case
    gone = key.replace("+node=n1+", "+node=n7+")
    with pytest.raises(ConfigError, match="runs on node n7, which inventory 'three' does not have"):
        plan_suite(suite, THREE, PlanFilters(case_keys=(gone,)))
    other = key.replace("/b8/", "/b16/")
    assert missing_case_keys(suite, PlanFilters(case_keys=(other,)))  # not a case of the suite, pinned or not
    templates = [case.key for case, _ in expand_cases(suite)]  # no inventory: what the sweep measures, unpinned
    assert all(pinned_node(k) is None for k in templates) and unpinned(key) in templates


def test_a_node_with_too_few_devices_is_named_before_anything_runs():
    small = THREE.model_copy(update={"nodes": (*THREE.nodes[:2], THREE.nodes[2].model_copy(update={"gpus": 1}))})
    with pytest.raises(ConfigError, match=r"1n2g\+node=n2\+args=\w+: needs 2 devices per node; too few on n2"):
        plan_suite(parse_suite(sweep_suite()), small)


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("bench", "top", "said"),
    [
        ({"topologies": ["1n1g", "2n1g"]}, {}, "topology 2n1g spans 2 nodes"),
        ({"topologies": None}, {"topologies": ["2n4g"]}, "topology 2n4g spans 2 nodes (the suite's topologies"),
        ({"per_node": "yes"}, {}, "benchmarks[0].per_node: give true or false, got 'yes'"),
        ({"per_node": 1}, {}, "benchmarks[0].per_node: give true or false, got 1"),
    ],
)
def test_a_sweep_over_more_than_one_node_is_refused_by_the_suite_loader(tmp_path, bench, top, said):
    data = sweep_suite(**bench) | top
    data["benchmarks"][0] = {k: v for k, v in data["benchmarks"][0].items() if v is not None}
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert str(path) in str(info.value) and said in str(info.value)
    assert "per_node" in str(info.value)


def test_the_cpu_quota_is_the_containers_cpu_limit():
    """(The engine's NanoCpus from it: tests/airflow_plugin/test_case_gpu_request.py.)"""
    spec = container_spec_for(THREE.nodes[2], name="c", image="i", command=("true",), environment={}, labels={})
    plain = container_spec_for(THREE.nodes[0], name="c", image="i", command=("true",), environment={}, labels={})
    assert (spec.cpu_quota, plain.cpu_quota) == (0.5, None)
    settings = ContainerSettings.of(spec)
    assert settings.cpus == 0.5 and settings.run_flags(name="c", labels={})[-2:] == ["--cpus", "0.5"]
    assert settings.to_json()["cpus"] == 0.5 and ContainerSettings.from_json(settings.to_json()) == settings
    assert "cpus" not in ContainerSettings.of(plain).to_json()  # a spec without one is written as before
    with pytest.raises(ValueError, match="cpu_quota"):
        Node(name="x", cpu_quota=0)


def test_a_case_run_with_a_pinned_node_reads_back_from_its_json_form():
    run = CaseRun(Case("pytorch_reference", "resnet50_v1.5", "fp32", 8, 1, 1, 5, 100, node="n1"), 0)
    assert CaseRun.from_json(json.loads(json.dumps(run.to_json()))) == run
    old = run.to_json()
    old["case"].pop("node")  # a form written before pinned nodes
    assert CaseRun.from_json(old).case.node is None
