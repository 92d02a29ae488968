"""The cluster's settings on every rank (``env:`` of a suite, a benchmark and an inventory node) and fp32 without
TF32: the merge (the node wins), what each adapter launches with, mpirun's exports and interfaces, the shell that
hands a node's environment to the ranks sshd starts (run here with bash), the planned run's JSON form and the
stored environment. The e2e check on two stand-in nodes is tests/e2e/test_seeds_cpu.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dlperf_core.cluster.environment import capture_local, environment_changes
from dlperf_core.cluster.environment_capture import environment_key, settings_of, with_settings
from dlperf_core.cluster.inventory import Inventory, Node, load_inventory
from dlperf_core.errors import ConfigError
from dlperf_core.frameworks import LaunchContext, get_adapter
from dlperf_core.frameworks.rank_env import (
    ENVIRONMENT_FILE,
    RANK_ENV_LOG,
    RANK_ENV_MARK,
    mpi_interface_env,
    mpi_rank_prefix,
    per_node_logging,
    rank_environments,
    sshd_with_environment,
)
from dlperf_core.model import Case, CaseRun, RunIds
from dlperf_core.plan.cases import plan_suite
from dlperf_core.plan.suite import parse_suite
from dlperf_core.run.handoff import PlannedRun, RunSettings
from dlperf_core.run.jobs import build_job
from helpers import REPO

CPU = load_inventory(REPO / "inventories/docker-local.yaml")
GPU = load_inventory(REPO / "inventories/example-cluster.yaml")
SEEDS = ("ngc_pytorch", "ngc_mxnet", "mindspore", "oneflow", "paddle_plsc")
MODEL = {"paddle_plsc": "arcface_iresnet50"}


class FakeRuntime:
    name, python, workload_dir = "docker", "python3", "/opt/dlperf/workload"

    def host_cores(self, _node):
        return None


def with_env(inventory: Inventory, *envs: dict[str, str]) -> Inventory:
    nodes = tuple(node.model_copy(update={"env": env}) for node, env in zip(inventory.nodes, envs))
    return inventory.model_copy(update={"nodes": nodes + inventory.nodes[len(nodes) :]})


def suite(**extra) -> dict:
    return {
        "name": "s",
        "env": {"NCCL_DEBUG": "INFO", "SHARED": "suite", "RETRIES": 3},
        "benchmarks": [
            {"framework": "pytorch_reference", "model": "resnet50_v1.5", "env": {"SHARED": "bench", "B": "1"}}
        ],
        **extra,
    }


# ------------------------------------------------------------------ where settings are written, and the merge
def test_suite_benchmark_and_node_take_env_and_refuse_a_bad_name():
    parsed = parse_suite(suite())
    assert parsed.env == {"NCCL_DEBUG": "INFO", "SHARED": "suite", "RETRIES": "3"}  # a number kept as text
    assert parsed.env_for(parsed.benchmarks[0]) == {"NCCL_DEBUG": "INFO", "SHARED": "bench", "RETRIES": "3", "B": "1"}
    with pytest.raises(ConfigError, match="not a variable name"):
        parse_suite(suite(env={"1BAD": "x"}))
    with pytest.raises(ConfigError, match="must be a string or a number"):
        parse_suite(suite(env={"A": {"nested": 1}}))
    with pytest.raises(ConfigError, match="envs"):  # unknown fields are still refused
        parse_suite(suite(envs={"A": "1"}))
    assert Node(name="n", env={"NCCL_SOCKET_IFNAME": "eth0", "ON": True}).env == {
        "NCCL_SOCKET_IFNAME": "eth0",
        "ON": "true",
    }


def test_the_node_wins_and_planning_keeps_each_nodes_settings():
    inventory = with_env(CPU, {"SHARED": "node0", "IFACE": "eth0"}, {"IFACE": "eth1"})
    (run, *_) = plan_suite(parse_suite(suite(repeats=1, topologies=["2n1g"])), inventory)
    assert dict(run.case.env) == {"NCCL_DEBUG": "INFO", "SHARED": "bench", "RETRIES": "3", "B": "1"}
    assert "env" not in run.case.configuration  # not the configuration's identity
    assert (
        run.case.key == replace(run.case, env=()).key and run.case.fingerprint == replace(run.case, env=()).fingerprint
    )
    settings = RunSettings("s.yaml", "docker", "inv.yaml", 60.0, None)
    planned = PlannedRun.of(run, settings, inventory)
    node0, node1 = (n.env for n in planned.nodes)
    assert node0 == {"NCCL_DEBUG": "INFO", "SHARED": "node0", "RETRIES": "3", "B": "1", "IFACE": "eth0"}
    assert node1 == {"NCCL_DEBUG": "INFO", "SHARED": "bench", "RETRIES": "3", "B": "1", "IFACE": "eth1"}
    back = PlannedRun.from_json(json.loads(json.dumps(planned.to_json())))
    assert back == planned and back.run.case.env == run.case.env
    assert back.resolved_on(back.cluster) == planned  # resolving again changes nothing
    # a form written before settings existed (no env anywhere) still reads, with none
    old = planned.to_json()
    old["run"]["case"].pop("env")
    for node in old["nodes"]:
        node.pop("env")
    assert PlannedRun.from_json(old).nodes[0].env == {} and PlannedRun.from_json(old).run.case.env == ()


# ------------------------------------------------------------------ what every adapter launches with
def launch_env(framework: str, inventory: Inventory, precision: str = "fp32", nodes: int = 2):
    on_cpu = inventory.nodes[0].accelerator == "cpu"
    model = MODEL.get(framework, "resnet50_v1.5") if on_cpu else {"paddle_plsc": "arcface_resnet50"}.get(framework)
    case = Case(framework, model or "resnet50_v1.5", precision, 8, nodes, 1, 2, 3, env=(("S", "suite"),))
    return build_job(
        CaseRun(case, 0), inventory, FakeRuntime(), RunIds("d", "r"), timeout_s=60, watchdog_s=None, log_root=Path("/x")
    )


@pytest.mark.parametrize("framework", [*SEEDS, "pytorch_reference", "pytorch_reference_mpi"])
@pytest.mark.parametrize("inventory", [CPU, GPU], ids=["cpu", "gpu"])
def test_every_adapter_gives_every_node_its_settings(framework, inventory):
    inv = with_env(inventory, {"N": "zero", "NCCL_SOCKET_IFNAME": "ib0"}, {"N": "one", "NCCL_SOCKET_IFNAME": "ib1"})
    job = launch_env(framework, inv)
    for spec, own in zip(job.containers, ("zero", "one")):
        assert spec.environment["S"] == "suite" and spec.environment["N"] == own  # sshd nodes too
    for launch in job.launches:
        assert launch.env["PYTHONUNBUFFERED"] == "1"  # the adapter's own are kept
    if get_adapter(framework).launcher == "mpirun":
        mpirun = job.launches[0].argv[-1]
        for name in ("S", "N", "NCCL_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include", "PATH"):
            assert f"-x {name} " in mpirun
        assert job.containers[1].environment["OMPI_MCA_btl_tcp_if_include"] == "ib1"  # node 1's own interface


def test_an_adapters_own_variables_go_over_the_clusters():
    inv = with_env(GPU, {"NVIDIA_TF32_OVERRIDE": "1", "NCCL_DEBUG": "INFO"})
    job = launch_env("ngc_mxnet", inv)
    assert job.launches[0].env["NVIDIA_TF32_OVERRIDE"] == "0" and job.launches[0].env["NCCL_DEBUG"] == "WARN"


# ------------------------------------------------------------------ fp32 is fp32
TF32 = {
    "ngc_pytorch": {"NVIDIA_TF32_OVERRIDE": "0"},
    "ngc_mxnet": {"NVIDIA_TF32_OVERRIDE": "0"},
    "mindspore": {"NVIDIA_TF32_OVERRIDE": "0"},
    "paddle_plsc": {"NVIDIA_TF32_OVERRIDE": "0"},
    "oneflow": {"NVIDIA_TF32_OVERRIDE": "0", "ONEFLOW_EP_CUDA_ENABLE_TF32_EXECUTION": "0"},
}


@pytest.mark.parametrize("framework", SEEDS)
def test_fp32_turns_tf32_off_on_gpus_and_amp_leaves_it(framework):
    adapter = get_adapter(framework)
    ctx = LaunchContext(python="python3", workload_dir="/w")
    model = "arcface_resnet50" if framework == "paddle_plsc" else "resnet50_v1.5"
    for nodes in (1, 2):
        fp32 = adapter.launches(Case(framework, model, "fp32", 8, nodes, 2, 2, 3), GPU.first(nodes), ctx)
        amp = adapter.launches(Case(framework, model, "amp", 8, nodes, 2, 2, 3), GPU.first(nodes), ctx)
        launcher = [launch for launch in fp32 if launch.role == "launcher"]
        for launch in launcher:
            assert TF32[framework].items() <= launch.env.items()
        for launch in amp:
            assert launch.env.get("ONEFLOW_EP_CUDA_ENABLE_TF32_EXECUTION") is None
            assert launch.env.get("NVIDIA_TF32_OVERRIDE") in (None, "1")
        if adapter.launcher == "mpirun" and nodes == 2:  # and mpirun hands them to every rank
            assert all(f"-x {name} " in fp32[0].argv[-1] for name in TF32[framework])
    # CPU nodes: no TF32 there, nothing set
    cpu_model = MODEL.get(framework, "resnet50_v1.5")
    for launch in adapter.launches(Case(framework, cpu_model, "fp32", 8, 1, 1, 2, 3), CPU.first(1), ctx):
        assert "NVIDIA_TF32_OVERRIDE" not in launch.env


# ------------------------------------------------------------------ mpirun: exports, interfaces, the sshd side
def test_interfaces_for_open_mpi_come_from_nccls_setting():
    assert mpi_interface_env({"NCCL_SOCKET_IFNAME": "eth0"}) == {
        "OMPI_MCA_btl_tcp_if_include": "eth0",
        "OMPI_MCA_oob_tcp_if_include": "eth0",
    }
    assert mpi_interface_env({"NCCL_SOCKET_IFNAME": "=ib0,ib1"})["OMPI_MCA_btl_tcp_if_include"] == "ib0,ib1"
    assert mpi_interface_env({"NCCL_SOCKET_IFNAME": "^docker0,lo"}) == {}
    assert mpi_interface_env({"NCCL_SOCKET_IFNAME": "eth0", "OMPI_MCA_btl_tcp_if_include": "10.0.0.0/24"}) == {
        "OMPI_MCA_oob_tcp_if_include": "eth0"
    }
    assert mpi_interface_env({}) == {}


def test_the_ranks_sshd_starts_get_their_nodes_environment_back(tmp_path):
    """The sshd container writes its environment at start (image + node settings); a rank started with node 0's
    exports (mpirun's -x) reads it back: node 1's values win, the image's PATH and LD_LIBRARY_PATH are there."""
    ssh_dir = tmp_path / "ssh"
    ssh_dir.mkdir()
    sshd = sshd_with_environment(str(ssh_dir), ("true",))
    image = {"PATH": f"/image/bin:{os.environ['PATH']}", "LD_LIBRARY_PATH": "/image/lib", "HOME": str(tmp_path)}
    node1 = {**image, "NCCL_SOCKET_IFNAME": "ib1", "QUOTED": "a 'b' \"c\" $d"}
    subprocess.run(sshd, env=node1, check=True)
    assert (ssh_dir / ENVIRONMENT_FILE).exists()
    # what orted hands a rank: sshd's bare environment plus node 0's exports
    rank_env = {"PATH": "/usr/bin:/bin", "NCCL_SOCKET_IFNAME": "ib0", "OMPI_COMM_WORLD_RANK": "1", RANK_ENV_LOG: "1"}
    argv = [
        *mpi_rank_prefix(str(ssh_dir), log=True),
        sys.executable,
        "-c",
        "import os, json; print(json.dumps(dict(os.environ)))",
    ]
    done = subprocess.run(argv, env=rank_env, capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["NCCL_SOCKET_IFNAME"] == "ib1" and seen["LD_LIBRARY_PATH"] == "/image/lib"
    assert seen["PATH"].startswith("/image/bin:") and seen["QUOTED"] == "a 'b' \"c\" $d"
    assert seen["OMPI_COMM_WORLD_RANK"] == "1"  # what Open MPI set for the rank stays
    assert f"{RANK_ENV_MARK} 1 NCCL_SOCKET_IFNAME=ib1" in done.stdout.splitlines()
    # node 0 has no file: its ranks keep what mpirun gave them
    done = subprocess.run(
        [*mpi_rank_prefix(str(tmp_path / "none"), log=False), "sh", "-c", "echo $NCCL_SOCKET_IFNAME"],
        env=rank_env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "ib0"


def test_rank_environments_are_read_whole_where_mpirun_tagged_a_line_twice():
    """mpirun --tag-output tags what each read of a rank's output brings: a line written in two pieces came out as
    below (a CI run's MindSpore 2n1g log, 2026-11-29), which a reader must join again."""
    log = (
        "[1,1]<stdout>:dlperf-rank-env 1 HOSTNAME=node1\n"
        "[1,1]<stdout>:dlperf-ra[1,1]<stdout>:nk-env 1 ONEDNN_MAX_CPU_ISA=AVX2\n"
        "[1,0]<stdout>:dlperf-rank-env 0 ONEDNN_MAX_CPU_ISA=AVX2\n"
        "dlperf-rank-env 2 A=b=c\n"  # a per-node launcher's rank: no tag
        "epoch: 1 step: 5, loss is 2.3\n"
    )
    assert rank_environments(log) == {
        "1": {"HOSTNAME": "node1", "ONEDNN_MAX_CPU_ISA": "AVX2"},
        "0": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
        "2": {"A": "b=c"},
    }


def test_per_node_launchers_ranks_print_their_environment_and_the_images_sitecustomize_still_runs(tmp_path):
    image_site = tmp_path / "site"
    image_site.mkdir()
    (image_site / "sitecustomize.py").write_text("import os\nos.environ['IMAGE_SITE'] = 'ran'\n")
    program = "import os; print('image site', os.environ.get('IMAGE_SITE'))"
    launcher = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {program!r}], env={{**__import__('os').environ, 'RANK': '3'}}, check=True)"
    argv = per_node_logging((sys.executable, "-c", launcher))
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(image_site), "S": "suite"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert f"{RANK_ENV_MARK} 3 S=suite" in lines and "image site ran" in lines
    assert not any(line.startswith(f"{RANK_ENV_MARK} ?") for line in lines)  # the launcher itself prints nothing


def test_logging_wraps_per_node_launchers_only_when_asked():
    inv = with_env(CPU, {RANK_ENV_LOG: "1"}, {RANK_ENV_LOG: "1"})
    torch = launch_env("pytorch_reference", inv)
    assert torch.launches[0].argv[:2] == ("bash", "-c") and "sitecustomize.py" in torch.launches[0].argv[2]
    assert launch_env("pytorch_reference", CPU).launches[0].argv[0] != "bash"
    mpi = launch_env("ngc_mxnet", inv, nodes=1)  # one node: mpirun still prefixes the ranks to print
    assert RANK_ENV_MARK in mpi.launches[0].argv[-1]


# ------------------------------------------------------------------ the stored environment
PROBE = '@@dlperf:hostname@@\nnode0\n@@dlperf:python@@\n{"frameworks": {"torch": "2.5.0"}}\n'


def test_a_change_of_settings_is_an_environment_change():
    inventory = with_env(CPU, {"NCCL_SOCKET_IFNAME": "eth0", "API_TOKEN": "secret"})
    case = Case("pytorch_reference", "resnet50_v1.5", "fp32", 8, 2, 1, 2, 3, env=(("NCCL_DEBUG", "WARN"),))
    settings = RunSettings("s.yaml", "docker", "inv.yaml", 60.0, None)
    planned = PlannedRun.of(CaseRun(case, 0), settings, inventory)
    assert settings_of(planned) == {
        "node0": {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "eth0"},  # the token is left out
        "node1": {"NCCL_DEBUG": "WARN"},
    }
    base = capture_local("pytorch_reference", PROBE)
    before = with_settings(base, planned)
    changed = with_settings(
        base, PlannedRun.of(CaseRun(replace(case, env=(("NCCL_DEBUG", "INFO"),)), 0), settings, inventory)
    )
    assert before.content_hash != changed.content_hash  # another environments row, another environment_id
    other = PlannedRun.of(CaseRun(replace(case, env=(("NCCL_DEBUG", "INFO"),)), 0), settings, inventory)
    assert environment_key(planned) != environment_key(other)  # captured apart, not shared by key
    assert environment_key(planned) == environment_key(PlannedRun.of(CaseRun(case, 1), settings, inventory))
    assert environment_changes(before.infrastructure(), changed.infrastructure()) == [
        "cluster_env: node0: NCCL_DEBUG=WARN NCCL_SOCKET_IFNAME=eth0; node1: NCCL_DEBUG=WARN -> "
        "node0: NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0; node1: NCCL_DEBUG=INFO"
    ]
    unset = PlannedRun.of(CaseRun(replace(case, env=()), 0), settings, CPU)  # no settings anywhere: none recorded
    assert with_settings(base, unset) == base and base.cluster_env is None
    assert type(before).from_json(json.loads(json.dumps(before.to_json()))) == before


def test_the_store_reads_the_settings_back_for_the_regression_detector(sqlite_url):
    from dlperf_core.storage import ResultStore

    store = ResultStore(sqlite_url)
    store.ensure_schema()
    try:
        case = Case("pytorch_reference", "resnet50_v1.5", "fp32", 8, 1, 1, 2, 3, env=(("NCCL_DEBUG", "WARN"),))
        planned = PlannedRun.of(CaseRun(case, 0), RunSettings("s", "docker", "i", 60.0, None), CPU)
        env = with_settings(capture_local("pytorch_reference", PROBE), planned)
        plain = capture_local("pytorch_reference", PROBE)
        ids = store.upsert_environment(env), store.upsert_environment(plain)
        found = store.environment_infrastructure(ids)
        assert found[ids[0]] == env.infrastructure() and found[ids[0]]["cluster_env"] == "node0: NCCL_DEBUG=WARN"
        assert found[ids[1]]["cluster_env"] is None and ids[0] != ids[1]
        assert store.environment_infrastructure([]) == {}
    finally:
        store.dispose()


def test_the_docs_say_how_settings_reach_the_ranks():
    text = (REPO / "docs" / "suites.md").read_text()
    for words in ("env:", "-x", RANK_ENV_LOG, "OMPI_MCA_btl_tcp_if_include", "environment changed"):
        assert words in text


def test_the_metrics_page_names_each_frameworks_tf32_switches_as_the_adapters_set_them():
    rows = {
        line.split("|")[1].strip().strip("`"): line
        for line in (REPO / "docs" / "metrics.md").read_text().splitlines()
        if line.startswith("| `")
    }
    for framework, switches in TF32.items():
        for name, value in switches.items():
            assert f"`{name}={value}`" in rows[framework], framework
    assert "`NVIDIA_TF32_OVERRIDE=1`" in rows["ngc_pytorch"]  # its tf32 and amp cases
    assert "ONEFLOW_EP_CUDA_ENABLE_TF32_EXECUTION" not in "".join(v for k, v in rows.items() if k != "oneflow")
