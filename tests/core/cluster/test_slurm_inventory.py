"""An inventory's ``slurm:`` block (dlperf_core/cluster/inventory.py): what it accepts, what it refuses and why, its
nodes as slots whose address the batch script sets, and planning running its cases on the slurm runtime."""

from __future__ import annotations

import pytest
import yaml

from dlperf_core.cluster.inventory import (
    ApptainerImage,
    ContainerImage,
    Inventory,
    load_inventory,
    time_limit_seconds,
)
from dlperf_core.errors import ConfigError
from dlperf_core.plan.defaults import DeploymentDefaults
from dlperf_core.plan.trigger import plan_trigger, resolve_trigger
from dlperf_core.run.handoff import PlannedRun
from helpers import REPO

DATA = REPO / "tests" / "data" / "slurm"
SLURM = {"connection": "dlperf_slurm_login", "work_dir": "/shared/dlperf"}


def inventory(tmp_path, slurm: dict, nodes: list[dict] | None = None):
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "slurm": slurm, "nodes": nodes or [{"name": "slot0"}]}))
    return load_inventory(path)


def problems(tmp_path, slurm: dict, nodes: list[dict] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        inventory(tmp_path, slurm, nodes)
    return caught.value.problems


def test_the_smallest_block_and_its_defaults(tmp_path):
    inv = inventory(tmp_path, SLURM, [{"name": "slot0", "gpus": 2}, {"name": "slot1", "gpus": 2}])
    s = inv.slurm
    assert (s.exclusive, s.software, s.on_drained, s.poll_s, s.time_limit) == (True, "none", "wait", 15, None)
    assert inv.runtime == "slurm"
    assert [n.address for n in inv.nodes] == ["$DLPERF_NODE0_ADDR", "$DLPERF_NODE1_ADDR"]
    assert inv.nodes[0].reach_address == "$DLPERF_NODE0_ADDR"  # what torchrun's --master_addr and mpirun's -H get


def test_the_recorded_inventories_load():
    pyxis = load_inventory(DATA / "inventory-pyxis.yaml").slurm
    assert pyxis.software == ContainerImage(container_image="nvcr.io#nvidia/pytorch:24.01-py3")
    assert (pyxis.software_kind, pyxis.on_drained, pyxis.time_limit_s) == ("pyxis", "fail", 2 * 86400)
    apptainer = load_inventory(DATA / "inventory-apptainer.yaml").slurm
    assert apptainer.software == ApptainerImage(apptainer="/shared/images/ngc-mxnet-24.06.sif")
    assert (apptainer.software_kind, apptainer.exclusive, apptainer.time_limit_s) == ("apptainer", False, 5400)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 1800), ("05:30", 330), ("01:00:00", 3600), ("2-12", 216000), ("1-02:03", 93780), ("1-00:00:05", 86405)],
)
def test_time_limits_in_slurms_forms(text, seconds):
    assert time_limit_seconds(text) == seconds


def test_a_yaml_number_is_minutes(tmp_path):
    assert inventory(tmp_path, {**SLURM, "time_limit": 45}).slurm.time_limit_s == 2700


def test_a_zero_time_limit_is_refused(tmp_path):
    (problem,) = problems(tmp_path, {**SLURM, "time_limit": 0})
    assert "Slurm reads 0 as no limit at all" in problem


@pytest.mark.parametrize("bad", ["1:2:3:4", "1h", "-5", "UNLIMITED", "1-"])
def test_a_time_limit_slurm_does_not_take_is_refused(tmp_path, bad):
    (problem,) = problems(tmp_path, {**SLURM, "time_limit": bad})
    assert problem.startswith("slurm.time_limit:") and "is not a Slurm time" in problem


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"connection": None}, "slurm.connection"),
        ({"work_dir": "relative/dir"}, "slurm.work_dir"),
        ({"partition": "gpu; rm -rf /"}, "slurm.partition"),
        ({"on_drained": "ignore"}, "slurm.on_drained"),
        ({"software": "docker"}, "slurm.software"),
        ({"software": {"apptainer": "image.sif"}}, "slurm.software"),
        ({"poll_s": 0}, "slurm.poll_s"),
        ({"sbatch_args": "--mem=0"}, "slurm.sbatch_args"),
    ],
)
def test_bad_settings_are_refused_by_field(tmp_path, change, where):
    slurm = {k: v for k, v in {**SLURM, **change}.items() if v is not None}
    assert any(p.startswith(where) for p in problems(tmp_path, slurm))


def test_work_dir_is_required(tmp_path):
    assert any(p.startswith("slurm.work_dir: Field required") for p in problems(tmp_path, {"connection": "c"}))


@pytest.mark.parametrize(
    ("node", "says"),
    [
        ({"address": "10.0.0.1"}, "address '10.0.0.1': the nodes of a Slurm inventory are slots of the job"),
        ({"docker_url": "tcp://gpu1:2376"}, "docker_url is not for a Slurm inventory"),
        ({"network": "bench"}, "network is not for a Slurm inventory"),
        ({"queue": "node0"}, "queue is not for a Slurm inventory"),
        ({"ssh": {"user": "root"}}, "ssh is not for a Slurm inventory"),
        ({"cpu_quota": 0.5}, "cpu_quota is not for a Slurm inventory"),
        ({"mounts": [{"source": "/data", "target": "/data"}]}, "mounts are for a container"),
    ],
)
def test_docker_only_fields_on_a_slot_are_refused(tmp_path, node, says):
    (problem,) = problems(tmp_path, SLURM, [{"name": "slot0", **node}])
    assert says in problem and "slot0" in problem


def test_mounts_go_with_a_container(tmp_path):
    node = {"name": "slot0", "mounts": [{"source": "/data", "target": "/data"}]}
    inv = inventory(tmp_path, {**SLURM, "software": {"container_image": "nvcr.io#nvidia/pytorch:24.01-py3"}}, [node])
    assert inv.nodes[0].mounts[0].target == "/data"


def test_a_cases_nodes_are_numbered_from_zero_again():
    """PlannedRun.cluster makes the case's nodes an inventory again: the slots keep their settings and are numbered
    in the case's rank order (the batch script sets DLPERF_NODE<rank>_ADDR)."""
    inv = load_inventory(DATA / "inventory.yaml")
    again = Inventory(name=inv.name, nodes=inv.nodes[1:], slurm=inv.slurm)
    assert again.nodes[0].address == "$DLPERF_NODE0_ADDR" and again.nodes[0].name == "slot1"


def test_planning_runs_a_slurm_inventory_on_the_slurm_runtime():
    params = {
        "suite": "suites/smoke.yaml",
        "inventory": str(DATA / "inventory.yaml"),
        "frameworks": ["pytorch_reference"],
    }
    resolved = resolve_trigger(params, DeploymentDefaults())
    assert resolved.settings.runtime == "slurm"
    plan = plan_trigger(resolved)
    assert plan.settings.slurm == resolved.inventory.slurm and plan.cases
    planned = plan.cases[0]
    assert planned.runtime == "slurm" and planned.image is None and planned.cluster.slurm.work_dir == "/shared/dlperf"
    assert PlannedRun.from_json(planned.to_json()) == planned  # what XCom carries


def test_a_per_node_sweep_is_refused_on_slots():
    params = {"suite": "tests/data/node-sweep-suite.yaml", "inventory": str(DATA / "inventory.yaml")}
    resolved = resolve_trigger(params, DeploymentDefaults())
    with pytest.raises(ConfigError, match="slots of a job whose hosts Slurm chooses"):
        plan_trigger(resolved)


def test_a_trigger_may_name_the_slurm_runtime_with_a_slurm_inventory_only():
    """What ``dlperf reproduce --run`` asks for a stored Slurm case run: its launch spec's runtime, slurm."""
    params = {"suite": "suites/smoke.yaml", "runtime": "slurm", "inventory": str(DATA / "inventory.yaml")}
    assert resolve_trigger(params, DeploymentDefaults()).settings.runtime == "slurm"
    with pytest.raises(ConfigError, match="has no slurm: block"):
        resolve_trigger({**params, "inventory": "inventories/local.yaml"}, DeploymentDefaults())
