"""What NVML says about a node's GPUs before a case: one :class:`GpuReadings` per GPU, read through nvidia-ml-py's
``pynvml`` (the module is handed in, so a fake NVML stands in for it in tests).

This module is the part of the GPU health gate (:mod:`dlperf_core.cluster.gpu_health`) that runs where the NVIDIA
driver's library is: on the worker itself (the local runtime), or copied with ``pynvml.py`` into a one-shot container
of the case's image on the node (the docker runtime; the NVIDIA container runtime mounts the driver's NVML into
every GPU container). So it imports the standard library only and runs as a script::

    python3 nvml_readings.py --gpus 0,1 --node node0     # prints NodeReadings as JSON, one line

NVML's answers are kept as they are, with what it could not answer: a reading NVML answers ``NotSupported`` for
(ECC on a consumer GPU, retired pages on a GPU that remaps rows) is None and named in ``unsupported``; any other NVML
error is None and named in ``errors`` with NVML's words. Nothing here judges: the checks are pure functions over
these readings (:mod:`dlperf_core.cluster.gpu_health`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

MIB = 1024 * 1024

# NVML's constants (nvml.h; pynvml has the same names), used when a module handed in lacks one
_CONSTANTS = {
    "NVML_FEATURE_ENABLED": 1,
    "NVML_MEMORY_ERROR_TYPE_UNCORRECTED": 1,
    "NVML_VOLATILE_ECC": 0,
    "NVML_AGGREGATE_ECC": 1,
    "NVML_CLOCK_SM": 1,
    "NVML_TEMPERATURE_GPU": 0,
}


@dataclass(frozen=True)
class GpuReadings:
    """One GPU as NVML saw it at ``taken_at`` (None: not read; ``unsupported`` and ``errors`` say why)."""

    gpu: str  # the GPU as the case names it: the inventory's index or UUID (the host's index where NVML read it)
    index: int | None = None  # NVML's index where it was read (in a container: among the container's GPUs)
    uuid: str | None = None
    name: str | None = None
    compute_processes: int | None = None  # processes with a compute context on it (any container's: host PIDs)
    memory_used_mb: float | None = None
    memory_total_mb: float | None = None
    persistence_mode: bool | None = None
    ecc_uncorrected_volatile: int | None = None  # uncorrected ECC errors since the driver loaded (boot)
    ecc_uncorrected_aggregate: int | None = None  # uncorrected ECC errors over the GPU's life (kept, not judged)
    row_remap_pending: bool | None = None  # a row remap waits for the next GPU reset
    row_remap_failure: bool | None = None  # a remap failed: no spare row was left
    retired_pages_pending: bool | None = None  # a page waits to be retired at the next reset (pre-Ampere)
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    pcie_link_width: int | None = None
    pcie_link_width_max: int | None = None  # the widest this GPU and this system allow
    pcie_link_gen: int | None = None  # idle: often below the maximum (the link downshifts to save power)
    pcie_link_gen_max: int | None = None  # the highest generation this GPU and this system allow
    clock_event_reasons: int | None = None  # bit mask (dlperf_core.cluster.clock_events)
    sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    unsupported: tuple[str, ...] = ()  # readings NVML answered NotSupported for
    errors: dict[str, str] = field(default_factory=dict)  # reading -> NVML's error, for the other failures


@dataclass(frozen=True)
class NodeReadings:
    """Every GPU of a case on one node, read once; ``error``: NVML could not be used at all (no driver library, no
    driver), nothing was read. A node without GPUs (``accelerator: cpu``) has none and no error."""

    node: str
    gpus: tuple[GpuReadings, ...] = ()
    error: str | None = None
    driver_version: str | None = None
    taken_at: float | None = None  # unix time


def _constant(nvml: ModuleType, name: str) -> int:
    value: int = getattr(nvml, name, _CONSTANTS[name])
    return value


class _Reader:
    """One GPU's readings, each NVML call on its own: a call that fails leaves its reading None and says why."""

    def __init__(self, nvml: ModuleType) -> None:
        self.nvml = nvml
        self.unsupported: list[str] = []
        self.errors: dict[str, str] = {}

    def get(self, name: str, call: Callable[[], Any]) -> Any:
        nvml = self.nvml
        try:
            return call()
        except nvml.NVMLError as exc:
            if isinstance(exc, getattr(nvml, "NVMLError_NotSupported", ())):
                if name not in self.unsupported:
                    self.unsupported.append(name)
            else:
                self.errors[name] = str(exc)
            return None


def _text(value: object) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _handle(nvml: ModuleType, gpu: str) -> Any:
    """NVML's handle of ``gpu``: by index (digits) or by UUID (``GPU-...``, ``MIG-...``)."""
    if gpu.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(gpu))
    return nvml.nvmlDeviceGetHandleByUUID(gpu)


def _clock_event_reasons(nvml: ModuleType, handle: Any) -> int:
    """The clock-event reasons (NVML 535+ names them so), through the older throttle-reasons call where the driver
    or the bindings lack the new one."""
    new = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if new is not None:
        try:
            return int(new(handle))
        except nvml.NVMLError as exc:
            if not isinstance(exc, getattr(nvml, "NVMLError_FunctionNotFound", ())):
                raise
    return int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


def read_gpu(nvml: ModuleType, gpu: str) -> GpuReadings:
    """Every reading of ``gpu`` (index or UUID) through ``nvml`` (initialised); a GPU NVML cannot find has only
    ``errors["handle"]``."""
    try:
        handle = _handle(nvml, gpu)
    except nvml.NVMLError as exc:
        return GpuReadings(gpu, errors={"handle": str(exc)})
    r = _Reader(nvml)

    def c(name: str) -> int:
        return _constant(nvml, name)

    memory = r.get("memory", lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
    remap = r.get("row_remap", lambda: nvml.nvmlDeviceGetRemappedRows(handle))
    processes = r.get("compute_processes", lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle))
    persistence = r.get("persistence_mode", lambda: nvml.nvmlDeviceGetPersistenceMode(handle))
    retired = r.get("retired_pages_pending", lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle))
    limit = r.get("power_limit", lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle))
    default = r.get("power_default_limit", lambda: nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle))
    uncorrected = c("NVML_MEMORY_ERROR_TYPE_UNCORRECTED")
    return GpuReadings(
        gpu=gpu,
        index=r.get("index", lambda: int(nvml.nvmlDeviceGetIndex(handle))),
        uuid=_text(r.get("uuid", lambda: nvml.nvmlDeviceGetUUID(handle))),
        name=_text(r.get("name", lambda: nvml.nvmlDeviceGetName(handle))),
        compute_processes=None if processes is None else len(processes),
        memory_used_mb=None if memory is None else memory.used / MIB,
        memory_total_mb=None if memory is None else memory.total / MIB,
        persistence_mode=None if persistence is None else persistence == c("NVML_FEATURE_ENABLED"),
        ecc_uncorrected_volatile=r.get(
            "ecc_uncorrected",
            lambda: int(nvml.nvmlDeviceGetTotalEccErrors(handle, uncorrected, c("NVML_VOLATILE_ECC"))),
        ),
        ecc_uncorrected_aggregate=r.get(
            "ecc_uncorrected_aggregate",
            lambda: int(nvml.nvmlDeviceGetTotalEccErrors(handle, uncorrected, c("NVML_AGGREGATE_ECC"))),
        ),
        row_remap_pending=None if remap is None else bool(remap[2]),
        row_remap_failure=None if remap is None else bool(remap[3]),
        retired_pages_pending=None if retired is None else retired == c("NVML_FEATURE_ENABLED"),
        power_limit_w=None if limit is None else limit / 1000.0,
        power_default_limit_w=None if default is None else default / 1000.0,
        pcie_link_width=r.get("pcie_link_width", lambda: int(nvml.nvmlDeviceGetCurrPcieLinkWidth(handle))),
        pcie_link_width_max=r.get("pcie_link_width_max", lambda: int(nvml.nvmlDeviceGetMaxPcieLinkWidth(handle))),
        pcie_link_gen=r.get("pcie_link_gen", lambda: int(nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle))),
        pcie_link_gen_max=r.get("pcie_link_gen_max", lambda: int(nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle))),
        clock_event_reasons=r.get("clock_event_reasons", lambda: _clock_event_reasons(nvml, handle)),
        sm_clock_mhz=r.get("sm_clock", lambda: float(nvml.nvmlDeviceGetClockInfo(handle, c("NVML_CLOCK_SM")))),
        temperature_c=r.get(
            "temperature", lambda: float(nvml.nvmlDeviceGetTemperature(handle, c("NVML_TEMPERATURE_GPU")))
        ),
        unsupported=tuple(r.unsupported),
        errors=r.errors,
    )


def read_node(
    nvml: ModuleType, gpus: Sequence[str] = (), node: str = "", clock: Callable[[], float] = time.time
) -> NodeReadings:
    """``gpus`` (indexes or UUIDs; empty: every GPU NVML sees) on this machine, through ``nvml``. NVML that cannot
    start (``NVMLError_LibraryNotFound`` where no driver library is, ``DriverNotLoaded``) is the node's ``error``."""
    taken = clock()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return NodeReadings(node, error=f"NVML: {exc}", taken_at=taken)
    try:
        driver = None
        with contextlib.suppress(nvml.NVMLError):
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        try:
            ids = list(gpus) or [str(i) for i in range(int(nvml.nvmlDeviceGetCount()))]
        except nvml.NVMLError as exc:
            return NodeReadings(node, error=f"NVML: no GPU count: {exc}", driver_version=driver, taken_at=taken)
        return NodeReadings(node, tuple(read_gpu(nvml, g) for g in ids), driver_version=driver, taken_at=taken)
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def to_json(readings: NodeReadings) -> str:
    """The one-line JSON a probe prints (the dataclasses' fields, as :meth:`JsonForm.to_json` writes them)."""
    return json.dumps(dataclasses.asdict(readings), sort_keys=False)


def main(argv: Sequence[str] | None = None) -> int:
    """``--gpus 0,1`` (indexes or UUIDs; default every GPU), ``--node NAME``: print the readings as JSON."""
    parser = argparse.ArgumentParser(description="GPU health readings through NVML, as JSON (dlperf)")
    parser.add_argument("--gpus", default="", help="GPU indexes or UUIDs, comma-separated (default: every GPU)")
    parser.add_argument("--node", default="", help="the node's name, as the inventory says it")
    args = parser.parse_args(argv)
    try:
        import pynvml  # beside this file in a probe container; nvidia-ml-py on a node or a worker
    except ImportError as exc:
        print(json.dumps(dataclasses.asdict(NodeReadings(args.node, error=f"no pynvml: {exc}", taken_at=time.time()))))
        return 0
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    print(to_json(read_node(pynvml, gpus, args.node)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
