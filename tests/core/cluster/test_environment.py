"""Environment capture: the probe's parsers on GPU-node output, the real probe on this GPU-less machine,
storage once per content hash (PostgreSQL), and the GPU memory peak. The DAG's capture_environment step:
tests/airflow_plugin/test_environment_step.py."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from dlperf_core.cluster.environment import (
    PYTHON_PROBE,
    capture_local,
    combine,
    environment_changes,
    parse_gpu_csv,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_probe,
    parse_topology,
    run_probe_locally,
)
from dlperf_core.cluster.gpu_sampling import GpuSamples, parse_memory_sample
from dlperf_core.storage import ResultStore

DATA = Path(__file__).resolve().parents[2] / "data" / "environment"


def section(name: str, body: str) -> str:
    return f"@@dlperf:{name}@@\n{body}\n"


def gpu_node_probe(hostname: str = "gpu-node-0", driver: str | None = None, ib: str = "ibstat") -> str:
    """A whole probe output of an A100 node, assembled from the documented formats in tests/data."""
    csv = (DATA / "nvidia-smi-query.csv").read_text()
    if driver:
        csv = csv.replace("535.104.05", driver)
    python = {
        "python": "3.10.12",
        "frameworks": {"torch": "2.5.0a0+e000cf0"},
        "env": {"CUDA_VERSION": "12.6.3.004", "CUDNN_VERSION": "9.6.0.74", "NCCL_VERSION": "2.23.4"},
        "torch_cuda": "12.6",
        "torch_cudnn": 90600,
        "torch_nccl": "2.23.4",
    }
    return "".join(
        [
            section("hostname", hostname),
            section("gpus", csv),
            section("smi_header", (DATA / "nvidia-smi-header.txt").read_text()),
            section("topology", (DATA / "topo-8gpu-mlx5.txt").read_text()),
            section("ibstat", (DATA / "ibstat.txt").read_text() if ib == "ibstat" else "@@missing@@ ibstat not found"),
            section("ibv_devinfo", (DATA / "ibv_devinfo.txt").read_text()),
            section(
                "cpuinfo",
                "processor\t: 0\nmodel name\t: AMD EPYC 7742 64-Core Processor\n\n"
                "processor\t: 1\nmodel name\t: AMD EPYC 7742 64-Core Processor\n",
            ),
            section("meminfo", "MemTotal:       2113664000 kB\nMemFree:        1000 kB\n"),
            section("python", json.dumps(python)),
            section("end", ""),
        ]
    )


# --------------------------------------------------------------------------- parsers


def test_gpu_csv_keeps_unsupported_fields_as_none():
    gpus = parse_gpu_csv("warning: something\n" + (DATA / "nvidia-smi-query.csv").read_text())
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert {g.name for g in gpus} == {"NVIDIA A100-SXM4-80GB"}
    assert gpus[0].power_limit_w == 400.0 and gpus[0].sm_clock_max_mhz == 1410
    assert gpus[2].power_limit_w is None and gpus[2].app_clock_mhz is None
    assert gpus[3].memory_total_mb == 81920 and gpus[3].pci_bus_id == "00000000:4E:00.0"


def test_topology_drops_the_legend():
    topo = parse_topology((DATA / "topo-8gpu-mlx5.txt").read_text())
    assert topo is not None and topo.splitlines()[1].startswith("GPU0")
    assert "Legend" not in topo and "mlx5_0" in topo and len(topo.splitlines()) == 10
    assert parse_topology("NVIDIA-SMI has failed because it couldn't communicate with the driver") is None


def test_infiniband_from_ibstat_and_ibv_devinfo():
    ports = parse_ibstat((DATA / "ibstat.txt").read_text())
    assert [(p.device, p.port, p.state, p.rate) for p in ports] == [
        ("mlx5_0", 1, "Active", "200"),
        ("mlx5_1", 1, "Down", "10"),
    ]
    assert ports[0].link_layer == "InfiniBand"
    devinfo = parse_ibv_devinfo((DATA / "ibv_devinfo.txt").read_text())
    assert [(p.device, p.port, p.state) for p in devinfo] == [("mlx5_0", 1, "PORT_ACTIVE")]


def test_gpu_node_probe_becomes_an_environment():
    probe = parse_probe(gpu_node_probe())
    assert probe.hostname == "gpu-node-0" and len(probe.gpus) == 4
    assert probe.cuda_driver_version == "12.2" and probe.cpu_count == 2
    assert probe.memory_total_mb == pytest.approx(2113664000 / 1024, abs=0.1)
    assert probe.missing == ()
    env = combine(
        [probe],
        framework="ngc_pytorch",
        image="nvcr.io/nvidia/pytorch:24.12-py3",
        image_digest="nvcr.io/nvidia/pytorch@sha256:abc",
    )
    assert (env.gpu_model, env.gpu_count, env.driver_version) == ("NVIDIA A100-SXM4-80GB", 4, "535.104.05")
    assert (env.cuda_version, env.cudnn_version, env.nccl_version) == ("12.6.3.004", "9.6.0.74", "2.23.4")
    assert env.framework_version == "2.5.0a0+e000cf0"
    assert env.power_limit_w == 400.0 and env.sm_clock_max_mhz == 1410
    assert env.topology is not None and env.topology.splitlines()[0].split()[:2] == ["GPU0", "GPU1"]
    assert [p.state for p in env.infiniband] == ["Active", "Down"]
    assert env.missing == ()


def test_ibv_devinfo_is_used_when_ibstat_is_missing():
    probe = parse_probe(gpu_node_probe(ib="none"))
    assert [(p.device, p.state) for p in probe.infiniband] == [("mlx5_0", "PORT_ACTIVE")]
    assert probe.missing == ()


def test_content_hash_is_stable_and_tells_a_driver_change():
    first = combine([parse_probe(gpu_node_probe())], framework="ngc_pytorch")
    again = combine([parse_probe(gpu_node_probe())], framework="ngc_pytorch")
    newer = combine([parse_probe(gpu_node_probe(driver="550.54.15"))], framework="ngc_pytorch")
    assert first.content_hash == again.content_hash
    assert newer.content_hash != first.content_hash
    assert environment_changes(first.infrastructure(), newer.infrastructure()) == [
        "driver_version: 535.104.05 -> 550.54.15"
    ]


STORED_ENVIRONMENTS = Path(__file__).resolve().parents[2] / "data" / "json_forms" / "environments.json"
"""Environments as ``environments.data`` held them, with their ``content_hash``, when the form was still
``json.loads(json.dumps(asdict(env)))``: made from the probes below."""
NO_TOOLS_PROBE = "@@dlperf:hostname@@\ncpu-box\n@@dlperf:gpus@@\n@@missing@@ nvidia-smi not found\n@@dlperf:end@@\n"


def test_the_generated_form_and_content_hash_are_the_stored_ones():
    """The ``data`` column and the content hash (an environment is stored once under it) come from the generated
    JSON form now: the same probes give the same JSON and the same hash as before."""
    stored = json.loads(STORED_ENVIRONMENTS.read_text())
    one = parse_probe(gpu_node_probe())
    made = {
        "a100": combine(
            [one],
            framework="ngc_pytorch",
            image="nvcr.io/nvidia/pytorch:24.12-py3",
            image_digest="nvcr.io/nvidia/pytorch@sha256:abc",
        ),
        "two_drivers": combine(
            [one, parse_probe(gpu_node_probe("gpu-node-1", driver="550.54.15"))], framework="ngc_pytorch"
        ),
        "no_tools": combine([parse_probe(NO_TOOLS_PROBE)], framework="pytorch_reference"),
    }
    assert set(made) == set(stored)
    for name, env in made.items():
        assert json.dumps(env.to_json()) == json.dumps(stored[name]["data"]), name
        assert env.content_hash == stored[name]["content_hash"], name
        assert type(env).from_json(env.to_json()) == env


def test_two_nodes_with_different_drivers_show_both():
    env = combine(
        [parse_probe(gpu_node_probe("a")), parse_probe(gpu_node_probe("b", driver="550.54.15"))],
        framework="ngc_pytorch",
    )
    assert env.hostnames == ("a", "b") and env.gpu_count == 8 and env.cpu_count == 4
    assert env.driver_version == "535.104.05,550.54.15"


def test_a_probe_without_gpu_tools_says_what_is_missing():
    text = "".join(
        [
            section("hostname", "cpu-box"),
            section("gpus", "@@missing@@ nvidia-smi not found"),
            section("topology", "@@missing@@ nvidia-smi not found"),
            section("ibstat", "@@missing@@ ibstat not found"),
            section("ibv_devinfo", "@@missing@@ ibv_devinfo not found"),
            section("cpuinfo", "processor : 0\nmodel name : Some CPU\n"),
            section("meminfo", "MemTotal: 1048576 kB\n"),
            section("python", json.dumps({"python": "3.11.2", "frameworks": {}, "env": {}})),
        ]
    )
    env = combine([parse_probe(text)], framework="pytorch_reference")
    assert env.gpu_count == 0 and env.gpu_model is None and env.driver_version is None
    assert env.memory_total_mb == 1024.0
    missing = "\n".join(env.missing)
    for expected in (
        "gpus: nvidia-smi not found",
        "infiniband: no port found",
        "framework_version: pytorch_reference (torch) not installed",
        "cuda_version: not found",
    ):
        assert expected in missing


def test_python_probe_quoting_survives_the_shell():
    assert "'" not in PYTHON_PROBE  # the probe embeds it in single quotes


# --------------------------------------------------------------------------- this machine


@pytest.fixture(scope="module")
def local_probe_output() -> str:
    return run_probe_locally()


def test_capture_on_this_machine_records_what_exists(local_probe_output):
    env = capture_local("pytorch_reference", local_probe_output)
    assert env.hostnames and env.hostnames[0]
    assert env.cpu_count and env.cpu_count >= 1 and env.memory_total_mb and env.memory_total_mb > 0
    assert env.framework_version == torch.__version__
    if shutil.which("nvidia-smi") is None:  # this machine: no GPU, so it says so instead of failing
        assert env.gpu_count == 0 and env.driver_version is None
        assert any("gpus: nvidia-smi not found" in m for m in env.missing)
    assert capture_local("pytorch_reference", local_probe_output).content_hash == env.content_hash


@pytest.mark.postgres
def test_environment_is_stored_once_per_content_hash(pg_url, local_probe_output):
    env = capture_local("pytorch_reference", local_probe_output)
    store = ResultStore(pg_url)
    store.ensure_schema()
    first = store.upsert_environment(env)
    assert store.upsert_environment(env) == first
    other = store.upsert_environment(replace(env, framework_version="0.0-other"))
    assert other != first
    rows = store.environments()
    assert len(rows) == 2
    row = rows.set_index("id").loc[first]
    assert row["content_hash"] == env.content_hash
    assert row["gpu_count"] == env.gpu_count and row["framework_version"] == torch.__version__
    assert row["data"]["hostnames"] == list(env.hostnames)
    if env.gpu_count == 0:
        assert "nvidia-smi" in row["missing"]
    store.dispose()


# --------------------------------------------------------------------------- GPU memory


def test_gpu_memory_peak_over_samples():
    peak = GpuSamples()
    assert peak.peak_mb is None
    assert peak.feed("0, 1024\n1, 2048\n")
    assert peak.feed("0, 30000\n1, 512\n")
    assert not peak.feed("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")
    assert peak.feed("0, [N/A]\n1, 4096\n")
    assert peak.per_gpu_mb == {0: 30000.0, 1: 4096.0}
    assert peak.peak_mb == 30000.0 and peak.samples == 3


def test_gpu_memory_peak_only_counts_the_case_devices():
    peak = GpuSamples(gpus={1})
    peak.feed("0, 70000\n1, 100\n")
    assert peak.peak_mb == 100.0
    assert parse_memory_sample("  3 ,  12.5 \nbad line\n") == {3: 12.5}
