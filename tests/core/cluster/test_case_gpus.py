"""Exactly the case's GPUs: the inventory names a node's GPUs, a case's container gets only its own, the local runtime
sets CUDA_VISIBLE_DEVICES to them, the sampler is asked for them and the stored environment names them.

Pure: no GPU and no Docker Engine here (the engine's create kwargs are in tests/airflow_plugin/test_case_gpu_request.py).
"""

from __future__ import annotations

import pytest

from dlperf_core.cluster.container import container_spec_for, gpu_ids_for
from dlperf_core.cluster.environment_capture import (
    EnvironmentKey,
    ProbeCache,
    capture,
    case_gpu_ids,
    environment_key,
    environment_of,
    probe_spec,
)
from dlperf_core.cluster.gpu_sampling import QUERY_COMMAND, query_command, sampled_gpu_ids
from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.cluster.preflight import _check_gpus
from dlperf_core.errors import ConfigError
from dlperf_core.model import Case, CaseRun, RunIds
from dlperf_core.run.handoff import PlannedRun, ProbeOutput
from dlperf_core.run.jobs import build_job
from dlperf_core.run.launch_spec import ContainerSettings
from dlperf_core.run.runtime.local import LocalRuntime, case_gpus_here, visible_devices

UUIDS = ("GPU-3f0c1a2b-0000-1111-2222-333344445555", "GPU-9e8d7c6b-aaaa-bbbb-cccc-ddddeeeeffff")
IDS = RunIds("dlperf_test", "manual__gpus")


def case(nodes: int = 1, gpus_per_node: int = 1) -> Case:
    return Case("pytorch_reference", "resnet50_v1.5", "fp32", 32, nodes, gpus_per_node, 2, 5)


def eight_gpu_node(name: str = "gpu0", **kw: object) -> Node:
    return Node(name=name, gpus=8, accelerator="nvidia", **kw)  # type: ignore[arg-type]


def test_gpus_8_still_means_0_to_7_and_a_list_names_them():
    assert eight_gpu_node().gpu_ids == tuple(str(i) for i in range(8)) and eight_gpu_node().gpu_count == 8
    listed = Node(name="n", gpus=[4, 5, "6", 7], accelerator="nvidia")
    assert (listed.gpu_ids, listed.gpu_count) == (("4", "5", "6", "7"), 4)
    by_uuid = Node(name="n", gpus=list(UUIDS), accelerator="nvidia")
    assert by_uuid.gpu_ids == UUIDS and by_uuid.case_gpu_ids(1) == UUIDS[:1]
    assert Node(name="c", gpus=3).gpu_ids == ("0", "1", "2")  # a CPU node: its ranks
    for bad, said in (
        ([0, 0], "GPUs named twice: 0"),
        (["gpu0"], "a GPU is an index"),
        ([], "1 to 64 devices"),
        (0, "1 to 64 devices"),
        (65, "1 to 64 devices"),
    ):
        with pytest.raises(ValueError, match=said):
            Node(name="n", gpus=bad, accelerator="nvidia")
    with pytest.raises(ValueError, match="a list of GPUs is for accelerator: nvidia"):
        Node(name="n", gpus=[0, 1])


def test_an_inventory_file_names_gpus_by_index_or_uuid(tmp_path):
    from dlperf_core.cluster.inventory import load_inventory

    path = tmp_path / "inv.yaml"
    path.write_text(
        "nodes:\n"
        "  - {name: a, gpus: 8, accelerator: nvidia}\n"
        "  - {name: b, gpus: [2, 3], accelerator: nvidia}\n"
        f"  - {{name: c, gpus: [{UUIDS[0]}, {UUIDS[1]}], accelerator: nvidia}}\n"
    )
    a, b, c = load_inventory(path).nodes
    assert (a.gpu_count, b.gpu_ids, c.gpu_ids) == (8, ("2", "3"), UUIDS)
    path.write_text("nodes:\n  - {name: a, gpus: [0, 0], accelerator: nvidia}\n")
    with pytest.raises(ConfigError, match="GPUs named twice"):
        load_inventory(path)


def test_planned_run_round_trips_listed_gpus_and_reads_the_old_count():
    nodes = (Node(name="n0", gpus=list(UUIDS), accelerator="nvidia"), eight_gpu_node("n1"))
    planned = PlannedRun(CaseRun(case(2, 2), 0), "docker", "inv.yaml", 60.0, None, nodes=nodes)
    back = PlannedRun.deserialize(planned.serialize(), PlannedRun.__version__)
    assert back == planned and back.nodes[0].gpu_ids == UUIDS and back.nodes[1].gpu_ids[:2] == ("0", "1")
    old = planned.serialize()
    old["nodes"] = [{"name": "n0", "gpus": 8, "accelerator": "nvidia"}]  # as dlperf wrote it before: a count
    assert PlannedRun.deserialize(old, PlannedRun.__version__).nodes[0].gpu_ids == tuple(map(str, range(8)))


def test_a_1n1g_case_on_an_8_gpu_node_gets_one_gpu_and_samples_one(tmp_path):
    inventory = Inventory(name="gpus", nodes=(eight_gpu_node(),))
    job = build_job(
        CaseRun(case(1, 1), 0), inventory, LocalRuntime(), IDS, timeout_s=60, watchdog_s=None, log_root=tmp_path
    )
    (spec,) = job.containers
    assert spec.gpu_ids == ("0",)  # one GPU of the eight, not count=-1 (every GPU of the node)
    assert ContainerSettings.of(spec).gpus == "device=0"  # the launch spec says so, as docker run --gpus takes it
    # the docker runtime samples in the container, which has that one GPU only: every GPU it sees
    assert query_command(sampled_gpu_ids(spec.gpu_ids, in_container=True)) == QUERY_COMMAND
    # the local runtime: CUDA_VISIBLE_DEVICES is that GPU, and the sampler asks nvidia-smi for it alone
    argv, env = LocalRuntime().node_command(job, 0)
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    assert case_gpus_here(job) == ("0",)
    assert query_command(sampled_gpu_ids(case_gpus_here(job), in_container=False)) == (*QUERY_COMMAND, "--id=0")


def test_two_gpus_of_a_node_listed_by_uuid_give_those_uuids(tmp_path):
    node = Node(name="gpu0", gpus=[*UUIDS, "GPU-00000000-0000-0000-0000-000000000003"], accelerator="nvidia")
    job = build_job(
        CaseRun(case(1, 2), 0),
        Inventory(nodes=(node,)),
        LocalRuntime(),
        IDS,
        timeout_s=60,
        watchdog_s=None,
        log_root=tmp_path,
    )
    assert job.containers[0].gpu_ids == UUIDS
    settings = ContainerSettings.of(job.containers[0])
    assert settings.gpus == f"device={UUIDS[0]},{UUIDS[1]}"
    # docker's --gpus value is CSV: two devices go quoted, else docker would take the first one only
    flags = settings.run_flags(name="x", labels={})
    assert flags[flags.index("--gpus") + 1] == f'"device={UUIDS[0]},{UUIDS[1]}"'
    assert LocalRuntime().node_command(job, 0)[1]["CUDA_VISIBLE_DEVICES"] == ",".join(UUIDS)
    assert query_command(case_gpus_here(job))[-1] == f"--id={UUIDS[0]},{UUIDS[1]}"


def test_cpu_nodes_get_no_gpu_and_no_cuda_visible_devices(tmp_path):
    cpu = Node(name="cpu0", gpus=2, device_memory_mb=512)
    spec = container_spec_for(cpu, name="c", image="i", command=("true",), environment={}, labels={}, gpus=2)
    assert spec.gpu_ids == () and spec.memory_limit_mb == 1024  # the node's two "devices" x 512
    assert ContainerSettings.of(spec).gpus is None
    assert visible_devices(cpu, 2) == {}
    job = build_job(
        CaseRun(case(1, 2), 0),
        Inventory(nodes=(cpu,)),
        LocalRuntime(),
        IDS,
        timeout_s=60,
        watchdog_s=None,
        log_root=tmp_path,
    )
    assert "CUDA_VISIBLE_DEVICES" not in LocalRuntime().node_command(job, 0)[1] and case_gpus_here(job) == ()


def test_the_first_gpus_the_inventory_lists_are_the_case_s():
    node = Node(name="n", gpus=[6, 7, 2], accelerator="nvidia")
    assert gpu_ids_for(node, 2) == ("6", "7") and gpu_ids_for(node) == ("6", "7", "2")
    assert visible_devices(node, 1) == {"CUDA_VISIBLE_DEVICES": "6"}
    with pytest.raises(ValueError, match="has 3 devices, not 4"):
        gpu_ids_for(node, 4)


def test_preflight_checks_listed_gpus_by_index_or_uuid():
    smi = "\n".join(f"{i}, GPU-0000000{i}-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3" for i in range(8))
    assert _check_gpus(0, smi, 8) == ("8 GPUs", [])
    assert _check_gpus(0, smi, 4)[1] == ["8 GPUs found, 4 declared"]  # a count is every GPU of the node
    assert _check_gpus(0, smi, ("4", "5"))[1] == []  # a list: those are there, the others are left alone
    assert _check_gpus(0, smi, ("GPU-00000003-0000-0000-0000-000000000000",))[1] == []
    assert _check_gpus(0, smi, ("8", UUIDS[0]))[1] == [f"GPU 8, {UUIDS[0]} declared but not found (8 GPUs found)"]


def test_the_environment_is_probed_with_the_case_s_gpus_and_names_them():
    nodes = (eight_gpu_node("n0"), Node(name="n1", gpus=list(UUIDS), accelerator="nvidia"))
    planned = PlannedRun(CaseRun(case(2, 1), 0), "docker", "inv.yaml", 60.0, None, nodes=nodes, image="img:1")
    key = environment_key(planned)
    assert key == EnvironmentKey("pytorch_reference", "img:1", 2, 1)
    assert key != environment_key(
        PlannedRun(CaseRun(case(2, 2), 0), "docker", "i", 60.0, None, nodes=nodes, image="img:1")
    )
    assert case_gpu_ids(key, nodes) == (("0",), UUIDS[:1])
    assert probe_spec(nodes[1], "img:1", IDS, UUIDS[:1]).gpu_ids == UUIDS[:1]
    asked: list[tuple[str, str, tuple[str, ...]]] = []

    def probe(node: Node, image: str, gpus: tuple[str, ...]) -> ProbeOutput:
        asked.append((node.name, image, gpus))
        return ProbeOutput("", None)

    environment = capture(planned, ProbeCache(probe), lambda: "")
    assert asked == [("n0", "img:1", ("0",)), ("n1", "img:1", UUIDS[:1])]  # each node's probe sees the case's GPU
    assert environment.gpu_ids == (("0",), UUIDS[:1])
    assert type(environment).from_json(environment.to_json()).gpu_ids == environment.gpu_ids
    assert environment_of(key, [ProbeOutput("", None)] * 2).gpu_ids == ()  # what a caller did not say is not named


def test_an_environment_that_names_no_gpus_keeps_the_form_it_had_before():
    environment = environment_of(EnvironmentKey("f", "i", 1), [ProbeOutput("", None)])
    data = environment.to_json()
    assert "gpu_ids" not in data  # the form (and so the content hash) an environment had before gpu_ids existed
    assert type(environment).from_json(data) == environment
    named = environment_of(EnvironmentKey("f", "i", 1, 1), [ProbeOutput("", None)], (("3",),))
    assert named.to_json()["gpu_ids"] == [["3"]] and named.content_hash != environment.content_hash
