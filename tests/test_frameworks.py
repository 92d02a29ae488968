"""Framework adapter and container spec: exact commands per node, container needs from the inventory."""

from pathlib import Path

from dlperf_core.frameworks import LaunchContext, get_adapter
from dlperf_core.inventory import load_inventory
from dlperf_core.jobs import RunIds, build_job
from dlperf_core.plan import Case, CaseRun

REPO = Path(__file__).resolve().parents[1]
CASE = Case("pytorch_reference", "resnet50_v1.5", "amp", 256, 2, 8, 20, 100, extra_args=("--device", "cuda"))


def test_reference_launch_is_one_torchrun_per_node():
    inv = load_inventory(REPO / "inventories/example-cluster.yaml")
    ctx = LaunchContext(python="python3", workload_dir="/opt/dlperf/workload", master_port=29600)
    launches = get_adapter("pytorch_reference").launches(CASE, inv.first(2), ctx)
    assert [l.node.name for l in launches] == ["gpu-node-0", "gpu-node-1"]
    assert " ".join(launches[1].argv) == (
        "python3 -m torch.distributed.run --nnodes 2 --nproc_per_node 8 --node_rank 1 "
        "--master_addr 10.0.0.10 --master_port 29600 /opt/dlperf/workload/train.py --batch-size 256 "
        "--precision amp --warmup-iterations 20 --iterations 100 --device cuda"
    )


class FakeRuntime:
    name, python, workload_dir = "docker", "python3", "/opt/dlperf/workload"

    def cpu_threads_per_process(self, processes):
        return 1


def test_gpu_node_container_spec_has_gpus_infiniband_host_network_memlock(tmp_path):
    inv = load_inventory(REPO / "inventories/example-cluster.yaml")
    job = build_job(CaseRun(CASE, 3, 7, 10), inv, FakeRuntime(), RunIds("d", "r1"), timeout_s=60, watchdog_s=10, log_root=tmp_path)
    assert len(job.containers) == 2
    spec = job.containers[0]
    assert spec.gpus and spec.devices == ("/dev/infiniband",)
    assert spec.network == "host" and spec.hostname is None and spec.ipc_host
    assert spec.cap_add == ("IPC_LOCK",) and spec.memlock_unlimited
    assert spec.mounts[0].source == "/data/imagenet" and spec.mounts[0].read_only
    assert spec.mounts[1].source == "/var/log/dlperf" and spec.mounts[1].target == "/dlperf/logs"
    assert not spec.mounts[1].read_only and spec.environment["DLPERF_CASE_LOG_DIR"] == f"/dlperf/logs/{spec.name}"
    assert spec.image == "dlperf/pytorch-reference:cpu"  # the case names none: the adapter's default
    assert spec.labels["dlperf.run_id"] == "r1" and spec.labels["dlperf.repeat"] == "3"
    assert spec.labels["dlperf.case"] == CASE.key
    assert job.containers[0].name != job.containers[1].name
    assert "--threads" not in job.launches[0].argv  # GPU nodes: no CPU thread split


def test_cpu_standin_nodes_use_their_network_and_hostnames(tmp_path):
    inv = load_inventory(REPO / "inventories/docker-local.yaml")
    case = Case("pytorch_reference", "resnet50_v1.5", "fp32", 8, 2, 1, 3, 10)
    job = build_job(CaseRun(case, 0), inv, FakeRuntime(), RunIds("d", "r"), timeout_s=60, watchdog_s=None, log_root=tmp_path)
    a, b = job.containers
    assert (a.network, a.hostname, b.hostname) == ("dlperf-net", "node0", "node1")
    assert not a.gpus and not a.devices and not a.memlock_unlimited and not a.ipc_host and a.shm_size == "1g"
    assert "--master_addr" in a.command and a.command[a.command.index("--master_addr") + 1] == "node0"
    assert "--threads" in a.command
