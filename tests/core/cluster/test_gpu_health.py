"""A clean bill of health per GPU (issue 36): NVML's readings through a fake NVML with every fault injected, the
checks over them, the gate a case run passes before any training, and the probe that reads them where the driver
is. No GPU was lent: the fake NVML (tests/fake_nvml.py) stands in, with pynvml's own errors and constants."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pynvml
import pytest
from pydantic import TypeAdapter

from dlperf_core.cluster import nvml_readings
from dlperf_core.cluster.clock_events import GpuWindow
from dlperf_core.cluster.gpu_health import (
    CHECKS,
    IDLE_MEMORY_MB,
    GpuHealth,
    check_under_load,
    gate,
    judge,
    merged,
    named_as_case,
    readings_of_output,
)
from dlperf_core.cluster.gpu_health_probe import PROBE_DIR, health_probe_spec
from dlperf_core.cluster.inventory import Node, load_inventory
from dlperf_core.cluster.nvml_readings import GpuReadings, NodeReadings, read_node
from dlperf_core.model import CaseOutcome, RunIds
from dlperf_core.plan.cases import PlanFilters, plan_suite
from dlperf_core.plan.suite import load_suite
from dlperf_core.run.case_run import CaseRunner, execute_case, read_in_process
from dlperf_core.run.handoff import PlannedRun, RunSettings
from fake_nvml import MIB, NOT_SUPPORTED, fake_nvml, healthy
from helpers import REPO

GPU0 = healthy(0)


def read(*gpus, ids=("0",), node="node0", **kwargs) -> NodeReadings:
    return read_node(fake_nvml(*gpus, **kwargs), ids, node)


def findings(health: GpuHealth, outcome: str | None = None) -> list[tuple[str, str, str, str]]:
    return [(f.node, f.gpu, f.check, f.value) for f in health.findings if outcome is None or f.outcome == outcome]


# --------------------------------------------------------------------------- readings through NVML


def test_a_healthy_gpu_reads_every_value_and_passes():
    readings = read(GPU0)
    gpu = readings.gpus[0]
    assert (gpu.gpu, gpu.index, gpu.uuid, gpu.compute_processes, gpu.persistence_mode) == ("0", 0, GPU0.uuid, 0, True)
    assert (gpu.power_limit_w, gpu.power_default_limit_w) == (300.0, 300.0)  # NVML's milliwatts, in W
    assert (gpu.pcie_link_width, gpu.pcie_link_width_max, gpu.pcie_link_gen_max) == (16, 16, 4)
    assert gpu.unsupported == ("retired_pages_pending",) and gpu.errors == {}
    health = judge([readings])
    assert health.verdict == "ok" and health.refusal is None
    # not supported is reported as such: neither a pass (it is listed) nor a failure (the case is not flagged)
    assert [(f.check, f.outcome) for f in health.findings] == [("retired_pages_pending", "not supported")]
    assert health.findings[0].line() == f"node0 GPU 0 ({GPU0.uuid}): retired_pages_pending not supported"


FAULTS = [  # (what is wrong, the GPU, the check that finds it, the value it names)
    ("another compute process", healthy(0, processes=(4242,)), "compute_processes", "1"),
    ("memory in use", healthy(0, memory_used=4096 * MIB), "memory_used", "4096 MiB"),
    ("persistence mode off", healthy(0, persistence=pynvml.NVML_FEATURE_DISABLED), "persistence_mode", "off"),
    ("uncorrected ECC since boot", healthy(0, ecc_volatile=2, ecc_aggregate=2), "ecc_uncorrected", "2"),
    ("a pending row remap", healthy(0, remapped_rows=(0, 1, 1, 0)), "row_remap_pending", "pending"),
    ("a failed row remap", healthy(0, remapped_rows=(0, 1, 0, 1)), "row_remap_failure", "failed"),
    (
        "retired pages pending (a GPU that retires pages, not rows)",
        healthy(0, remapped_rows=NOT_SUPPORTED, retired_pending=pynvml.NVML_FEATURE_ENABLED),
        "retired_pages_pending",
        "pending",
    ),
    ("a PCIe link narrower than its maximum", healthy(0, pcie_width=8), "pcie_link_width", "x8"),
]


@pytest.mark.parametrize(("fault", "gpu", "check", "value"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_refuses_the_case_naming_node_gpu_check_and_value(fault, gpu, check, value):
    health = judge([read(gpu)])
    assert (("node0", "0", check, value)) in findings(health, "refuse"), fault
    assert health.verdict == "refused"
    assert health.refusal is not None and health.refusal.startswith(f"gpu health: node0 GPU 0 ({gpu.uuid}): {check}")
    assert f"{check} {value}, wanted" in health.refusal
    flagged = judge([read(gpu)], "flag")  # the suite's health: flag runs it, flagged
    assert flagged.verdict == "flagged" and flagged.refusal is None
    assert findings(flagged, "refuse") == findings(health, "refuse")


def test_memory_below_the_idle_threshold_is_idle():
    assert judge([read(healthy(0, memory_used=int(IDLE_MEMORY_MB - 1) * MIB))]).verdict == "ok"
    assert judge([read(healthy(0, memory_used=int(IDLE_MEMORY_MB) * MIB))]).verdict == "refused"


def test_a_power_limit_off_its_default_is_flagged_never_refused():
    health = judge([read(healthy(0, power_limit_mw=250_000))])
    assert health.verdict == "flagged" and health.refusal is None
    (finding,) = [f for f in health.findings if f.check == "power_limit"]
    assert (finding.value, finding.limit, finding.outcome) == ("250 W", "the default 300 W", "flag")
    assert finding.line().endswith("power_limit 250 W, wanted the default 300 W [flag]")


def test_ecc_errors_before_boot_do_not_refuse_and_no_ecc_is_not_supported():
    assert judge([read(healthy(0, ecc_volatile=0, ecc_aggregate=3))]).verdict == "ok"  # an old error: since boot, 0
    consumer = judge([read(healthy(0, ecc_volatile=NOT_SUPPORTED, ecc_aggregate=NOT_SUPPORTED))])
    assert consumer.verdict == "ok"
    assert ("node0", "0", "ecc_uncorrected", "not supported") in findings(consumer, "not supported")
    assert {"ecc_uncorrected", "ecc_uncorrected_aggregate"} <= set(consumer.nodes[0].gpus[0].unsupported)


def test_no_driver_library_flags_the_node_and_reads_nothing():
    readings = read(GPU0, library=False)
    assert readings.gpus == () and readings.error == "NVML: NVML Shared Library Not Found"
    health = judge([readings])
    assert health.verdict == "flagged" and findings(health) == [("node0", "", "nvml", f"unreadable ({readings.error})")]


def test_a_gpu_nvml_cannot_find_refuses_the_case():
    health = judge([read(GPU0, ids=("GPU-not-there",))])
    assert health.verdict == "refused"
    assert health.refusal == "gpu health: node0 GPU GPU-not-there: gpu not found by NVML (Not Found), wanted found"


def test_clock_event_reasons_through_the_older_call_where_the_bindings_lack_the_new_one():
    nvml = fake_nvml(healthy(0, reasons=0x4), event_reasons=False)
    assert read_node(nvml, ("0",)).gpus[0].clock_event_reasons == 0x4
    assert "ThrottleReasons" in nvml.calls
    nvml = fake_nvml(healthy(0, reasons=0x4))
    assert read_node(nvml, ("0",)).gpus[0].clock_event_reasons == 0x4 and "EventReasons" in nvml.calls
    assert nvml.calls[0] == "nvmlInit" and nvml.calls[-1] == "nvmlShutdown"


def test_every_gpu_when_none_is_named_and_by_uuid():
    two = (GPU0, healthy(1, processes=(7,)))
    readings = read_node(fake_nvml(*two), ())
    assert [g.gpu for g in readings.gpus] == ["0", "1"]
    by_uuid = read_node(fake_nvml(*two), (two[1].uuid,), "node1")
    assert [(g.gpu, g.index, g.compute_processes) for g in by_uuid.gpus] == [(two[1].uuid, 1, 1)]


# --------------------------------------------------------------------------- the PCIe generation under load


def _window(gen: int | None, gpu: int = 0) -> GpuWindow:
    return GpuWindow("node0", gpu, 10, 0x4, 1400.0, 70.0, gen)


def test_a_pcie_link_below_its_maximum_generation_under_load_refuses():
    health = judge([read(healthy(0, pcie_gen=1))])  # idle: Gen1, not judged before the case
    assert health.verdict == "ok"
    (slow,) = check_under_load(health.nodes, [_window(3)])
    assert (slow.check, slow.value, slow.limit, slow.outcome) == ("pcie_link_gen_under_load", "Gen3", "Gen4", "refuse")
    assert health.with_findings([slow]).verdict == "refused"
    assert check_under_load(health.nodes, [_window(4)]) == []  # at its maximum under load
    (unknown,) = check_under_load(health.nodes, [_window(None)])  # an nvidia-smi without the field
    assert unknown.outcome == "not supported"


# --------------------------------------------------------------------------- the gate


def test_cpu_nodes_have_no_gpus_and_are_never_read():
    def never(_node, _gpus):
        raise AssertionError("a CPU node's GPUs were read")

    health = gate([Node(name="node0", gpus=2), Node(name="node1", gpus=2)], 2, never)
    assert health.verdict == "no_gpus" and health.findings == () and health.gpus == 0
    assert [n.node for n in health.nodes] == ["node0", "node1"]


def test_the_gate_reads_exactly_the_case_gpus_of_each_node():
    asked = []

    def reader(node, gpus):
        asked.append((node.name, gpus))
        return read_node(fake_nvml(healthy(4), healthy(5), healthy(6)), gpus, node.name)

    nodes = [Node(name="a", gpus=("4", "5", "6"), accelerator="nvidia"), Node(name="b", gpus=8, accelerator="nvidia")]
    gate(nodes, 2, reader)
    assert asked == [("a", ("4", "5")), ("b", ("0", "1"))]


def test_a_probe_that_raises_flags_its_node():
    def broken(_node, _gpus):
        raise OSError("engine gone")

    health = gate([Node(name="n", accelerator="nvidia")], 1, broken)
    assert health.verdict == "flagged" and "probe failed: OSError: engine gone" in health.findings[0].value


def _planned(health: str = "refuse") -> PlannedRun:
    inventory = load_inventory(REPO / "inventories/gpu-local.yaml")
    run = plan_suite(load_suite(REPO / "suites/gpu-single.yaml"), inventory, PlanFilters())[0]
    settings = RunSettings("suites/gpu-single.yaml", "local", "inventories/gpu-local.yaml", 60, None, health=health)
    return PlannedRun.of(run, settings, inventory)


def test_a_refused_case_fails_before_any_training_with_the_finding():
    started = []

    def make_runtime(name, _inventory):
        started.append(name)
        raise AssertionError("the runtime was made for a refused case")

    def busy(_planned, _ids):
        return lambda node, gpus: read_node(fake_nvml(healthy(0, processes=(99,))), gpus, node.name)

    done = execute_case(_planned(), RunIds("dag", "run"), CaseRunner(make_runtime, lambda *_: "x", busy))
    assert started == [] and done.outcome.nodes == []
    assert done.outcome.failure == (f"gpu health: gpu0 GPU 0 ({healthy(0).uuid}): compute_processes 1, wanted 0")
    assert done.outcome.gpu_health is not None and done.outcome.gpu_health.verdict == "refused"
    assert CaseOutcome.from_json(done.outcome.to_json()) == done.outcome  # through XCom and back


def test_health_flag_runs_the_case_flagged():
    made = []

    def make_runtime(name, _inventory):
        made.append(name)
        raise RuntimeError("no runtime in this test")

    def busy(_planned, _ids):
        return lambda node, gpus: read_node(fake_nvml(healthy(0, processes=(99,))), gpus, node.name)

    done = execute_case(_planned("flag"), RunIds("dag", "run"), CaseRunner(make_runtime, lambda *_: "runtime", busy))
    assert made == ["local"]  # it went on to run
    assert done.outcome.failure == "runtime" and done.outcome.gpu_health.verdict == "flagged"


def test_the_suite_says_refuse_or_flag_and_planning_keeps_it():
    assert load_suite(REPO / "suites/smoke.yaml").health == "refuse"  # the default
    assert _planned("flag").health == "flag"
    assert PlannedRun.from_json(_planned("flag").to_json()).health == "flag"


def test_the_local_runtime_reads_in_this_process_and_docker_needs_the_deployments_probe():
    from dlperf_core.cluster.gpu_health import read_here

    planned = _planned()
    assert read_in_process(planned, RunIds("d", "r")) is read_here
    docker = dataclasses.replace(planned, runtime="docker")
    (node,) = docker.nodes
    assert "no GPU health probe" in (read_in_process(docker, RunIds("d", "r"))(node, ("0",)).error or "")


def test_node_routing_merges_each_nodes_snapshot():
    a = judge([read(GPU0, node="a")])
    b = judge([read(healthy(0, persistence=0), node="b")])
    both = merged([a, b])
    assert [n.node for n in both.nodes] == ["a", "b"] and both.verdict == "refused"


# --------------------------------------------------------------------------- the probe


def test_the_probe_module_runs_on_the_oldest_framework_python_with_the_standard_library_only():
    tree = ast.parse(Path(nvml_readings.__file__).read_text(), feature_version=(3, 7))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {*sys.stdlib_module_names, "pynvml"}, imported - set(sys.stdlib_module_names)


def test_the_probe_prints_the_readings_the_gate_reads_back():
    readings = read(healthy(0, processes=(1, 2)), healthy(1), ids=())
    printed = f"warning: something on stderr\n{nvml_readings.to_json(readings)}\n"
    assert readings_of_output("node0", printed) == readings
    # the printed form is the generated JSON form
    assert json.loads(nvml_readings.to_json(readings)) == TypeAdapter(NodeReadings).dump_python(readings, mode="json")
    broken = readings_of_output("node3", "python3: can't open file\n")
    assert broken.error == "the probe printed no readings: python3: can't open file"


def test_a_containers_gpus_are_named_as_the_inventory_names_them():
    inside = read(healthy(0), healthy(1, processes=(3,)), ids=())  # the container numbers its GPUs from 0
    by_index = named_as_case(inside, ("6", "4"))
    assert [(g.gpu, g.index) for g in by_index.gpus] == [("4", 0), ("6", 1)]  # host order is PCI order
    uuids = (healthy(1).uuid, healthy(0).uuid)
    assert [g.gpu for g in named_as_case(inside, uuids).gpus] == list(uuids)
    assert named_as_case(inside, ("4",)) == inside  # not the case's GPUs: left as read


def test_the_probe_container_is_the_case_image_with_the_case_gpus_and_the_two_files():
    node = Node(name="node0", accelerator="nvidia", gpus=8)
    spec = health_probe_spec(node, "nvcr.io/nvidia/pytorch:24.01-py3", RunIds("dag", "run"), ("0", "1"))
    assert spec.gpu_ids == ("0", "1") and spec.image == "nvcr.io/nvidia/pytorch:24.01-py3"
    assert spec.command == ("python3", f"{PROBE_DIR}/nvml_readings.py", "--node", "node0")
    assert {f.path for f in spec.files} == {f"{PROBE_DIR}/nvml_readings.py", f"{PROBE_DIR}/pynvml.py"}
    assert spec.labels["dlperf.run_id"] == "run" and spec.labels["dlperf.health"] == "node0"


def test_python_m_gpu_health_on_a_machine_without_nvidia_driver():
    """This machine has no GPU and no driver: NVML's LibraryNotFound, said as such (never a GPU figure)."""
    run = [sys.executable, "-m", "dlperf_core.cluster.gpu_health", "--gpus", "0,1"]
    printed = subprocess.run([*run, "--json"], capture_output=True, text=True, check=True, cwd=REPO).stdout
    readings = TypeAdapter(NodeReadings).validate_python(json.loads(printed))
    assert readings.gpus == () and readings.error == "NVML: NVML Shared Library Not Found"
    text = subprocess.run(run, capture_output=True, text=True, check=False, cwd=REPO)
    assert text.returncode == 0 and "localhost: flagged (0 GPUs read)" in text.stdout
    assert "nvml unreadable (NVML: NVML Shared Library Not Found)" in text.stdout


# --------------------------------------------------------------------------- what is stored


def test_every_check_has_a_row_in_the_docs():
    docs = (REPO / "docs" / "cluster-guide.md").read_text()
    for check in CHECKS:
        assert f"`{check.name}`" in docs, check.name


def test_the_snapshot_record_of_a_health():
    from dlperf_core.storage.records import GpuHealthRecord

    health = judge([read(healthy(0, power_limit_mw=250_000))])
    record = GpuHealthRecord.of(health, (GpuWindow("node0", 0, 5, 0x44, 1200.0, 88.0, 4),))
    assert (record.verdict, record.gpus, record.clock_event_reasons, record.temperature_max_c) == (
        "flagged",
        1,
        0x44,
        88.0,
    )
    assert record.findings == health.summary and record.checked_at is not None
    assert record.checked_at.tzinfo is UTC or record.checked_at.utcoffset().total_seconds() == 0
    assert GpuHealthRecord.from_json(record.to_json()) == record
    assert isinstance(record.checked_at, datetime)
    assert isinstance(record.readings[0].gpus[0], GpuReadings)
