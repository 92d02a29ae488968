"""Planning says which nodes preflight cannot check (dlperf_core.plan.trigger.unchecked_by_preflight): preflight
reaches a node over SSH only, so on the docker runtime a used node without ``ssh`` is named in a warning when the
run is planned, instead of being skipped without a word. The example inventory is one that preflight checks."""

from __future__ import annotations

import logging

import yaml

from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.plan.defaults import DeploymentDefaults
from dlperf_core.plan.trigger import plan_trigger, resolve_trigger, unchecked_by_preflight
from helpers import REPO

SSH = {"user": "dlperf", "key_file": "/home/airflow/.ssh/id_ed25519"}


def inventory_file(tmp_path, ssh_on: tuple[str, ...]) -> str:
    """Three stand-in nodes; those named in ``ssh_on`` have an ssh block."""
    nodes = [
        {"name": name, "gpus": 2, "accelerator": "cpu", "network": "dlperf-net", "ipc_host": False}
        | ({"ssh": SSH} if name in ssh_on else {})
        for name in ("node0", "node1", "node2")
    ]
    path = tmp_path / "three.yaml"
    path.write_text(yaml.safe_dump({"name": "three", "nodes": nodes}))
    return str(path)


def planned_warnings(tmp_path, caplog, monkeypatch, runtime: str, topologies: list[str], ssh_on=()) -> list[str]:
    monkeypatch.setenv("DLPERF_HOME", str(REPO))
    form = {
        "suite": "suites/smoke.yaml",
        "runtime": runtime,
        "inventory": inventory_file(tmp_path, ssh_on),
        "topologies": topologies,
        "repeats": 1,
    }
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dlperf"):
        plan = plan_trigger(resolve_trigger(form, DeploymentDefaults()))
    assert plan.cases
    return [r.getMessage() for r in caplog.records if r.name == "dlperf" and r.levelno == logging.WARNING]


def test_the_nodes_a_docker_plan_uses_without_ssh_are_named_when_it_is_planned(tmp_path, caplog, monkeypatch):
    (two,) = planned_warnings(tmp_path, caplog, monkeypatch, "docker", ["1n1g", "2n1g"])
    assert two.startswith("preflight will not check nodes node0, node1 of inventory three: they have no ssh block")
    assert "node2" not in two  # not used by a 2-node plan
    assert "ssh: {user, key_file, host_key}" in two
    (one,) = planned_warnings(tmp_path, caplog, monkeypatch, "docker", ["2n1g"], ssh_on=("node0",))
    assert one.startswith("preflight will not check node node1 of inventory three: it has no ssh block")


def test_no_warning_when_every_used_node_has_ssh_or_the_runtime_is_local(tmp_path, caplog, monkeypatch):
    assert planned_warnings(tmp_path, caplog, monkeypatch, "docker", ["2n1g"], ssh_on=("node0", "node1")) == []
    assert planned_warnings(tmp_path, caplog, monkeypatch, "docker", ["1n2g"], ssh_on=("node0",)) == []
    assert planned_warnings(tmp_path, caplog, monkeypatch, "local", ["2n1g"]) == []  # this machine's processes


def test_the_example_cluster_is_preflighted():
    inventory = load_inventory(REPO / "inventories" / "example-cluster.yaml")
    assert all(n.ssh is not None and n.ssh.key_file for n in inventory.nodes)
    assert unchecked_by_preflight(inventory.nodes, inventory.name) is None
