"""A fake NVML: the part of nvidia-ml-py's ``pynvml`` that the GPU health gate calls
(:mod:`dlperf_core.cluster.nvml_readings`), over GPUs described here, with pynvml's own semantics: its constants
and its error classes (``pynvml.NVMLError(code)`` is the subclass of that code, ``NVMLError_NotSupported`` for a
query the GPU does not support, ``NVMLError_LibraryNotFound`` from ``nvmlInit`` where no driver library is).

No GPU was lent to capture real values (issue 36): every value below is a test's, chosen to inject one fault at a
time into an otherwise healthy GPU (:func:`healthy`), never a measured figure of a real GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import pynvml

NOT_SUPPORTED = "not supported"
"""A GPU field set to this answers ``NVMLError_NotSupported`` (e.g. ECC on a consumer GPU)."""

MIB = 1024 * 1024


@dataclass(frozen=True)
class FakeGpu:
    """One GPU as the fake NVML answers for it (memory in bytes and power in mW, as NVML gives them)."""

    index: int
    uuid: str
    name: str = "Test GPU"
    processes: tuple[int, ...] = ()  # PIDs with a compute context
    memory_used: int = 0
    memory_total: int = 16 * 1024 * MIB
    persistence: int = pynvml.NVML_FEATURE_ENABLED
    ecc_volatile: int | str = 0
    ecc_aggregate: int | str = 0
    remapped_rows: tuple[int, int, int, int] | str = (0, 0, 0, 0)  # corrected, uncorrected, pending, failure
    retired_pending: int | str = NOT_SUPPORTED  # GPUs that remap rows do not retire pages
    power_limit_mw: int = 300_000
    power_default_mw: int = 300_000
    pcie_width: int = 16
    pcie_width_max: int = 16
    pcie_gen: int = 1  # idle: downshifted
    pcie_gen_max: int = 4
    reasons: int = 0x1  # idle
    sm_clock: int = 210
    temperature: int = 30


def healthy(index: int = 0, **changes: Any) -> FakeGpu:
    """A GPU every check passes on (retired pages: not supported, as on GPUs that remap rows), with ``changes``."""
    return replace(FakeGpu(index, f"GPU-00000000-0000-0000-0000-00000000000{index}"), **changes)


def _fail(code: int) -> None:
    raise pynvml.NVMLError(code)


@dataclass
class FakeNvml:
    """A stand-in for the ``pynvml`` module (hand it where the module goes). ``library``: False makes ``nvmlInit``
    fail as on a machine without the driver's library; ``event_reasons``: False drops
    ``nvmlDeviceGetCurrentClocksEventReasons``, as bindings older than driver 535's do."""

    gpus: list[FakeGpu]
    library: bool = True
    event_reasons: bool = True
    calls: list[str] = field(default_factory=list)
    initialised: bool = False

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("NVML_", "NVMLError")):  # constants and error classes: pynvml's own
            return getattr(pynvml, name)
        if name == "nvmlDeviceGetCurrentClocksEventReasons" and not self.event_reasons:
            raise AttributeError(name)
        raise AttributeError(name)

    # ------------------------------------------------------------------ the library

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if not self.library:
            _fail(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.calls.append("nvmlShutdown")
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return "000.00.00"  # a test's, not a real driver's

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def _gpu(self, handle: FakeGpu) -> FakeGpu:
        if not self.initialised:
            _fail(pynvml.NVML_ERROR_UNINITIALIZED)
        return handle

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        found = [g for g in self.gpus if g.index == index]
        if not found:
            _fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._gpu(found[0])

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> FakeGpu:
        found = [g for g in self.gpus if g.uuid == uuid]
        if not found:
            _fail(pynvml.NVML_ERROR_NOT_FOUND)
        return self._gpu(found[0])

    # ------------------------------------------------------------------ per GPU

    @staticmethod
    def _value(value: Any) -> Any:
        if value == NOT_SUPPORTED:
            _fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return value

    def nvmlDeviceGetIndex(self, handle: FakeGpu) -> int:
        return self._gpu(handle).index

    def nvmlDeviceGetUUID(self, handle: FakeGpu) -> str:
        return self._gpu(handle).uuid

    def nvmlDeviceGetName(self, handle: FakeGpu) -> str:
        return self._gpu(handle).name

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeGpu) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=512 * MIB) for p in self._gpu(handle).processes]

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu) -> SimpleNamespace:
        g = self._gpu(handle)
        return SimpleNamespace(total=g.memory_total, used=g.memory_used, free=g.memory_total - g.memory_used)

    def nvmlDeviceGetPersistenceMode(self, handle: FakeGpu) -> int:
        return self._gpu(handle).persistence

    def nvmlDeviceGetTotalEccErrors(self, handle: FakeGpu, error_type: int, counter_type: int) -> int:
        g = self._gpu(handle)
        assert error_type == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        return self._value(g.ecc_volatile if counter_type == pynvml.NVML_VOLATILE_ECC else g.ecc_aggregate)

    def nvmlDeviceGetRemappedRows(self, handle: FakeGpu) -> tuple[int, int, int, int]:
        return self._value(self._gpu(handle).remapped_rows)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: FakeGpu) -> int:
        return self._value(self._gpu(handle).retired_pending)

    def nvmlDeviceGetPowerManagementLimit(self, handle: FakeGpu) -> int:
        return self._gpu(handle).power_limit_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: FakeGpu) -> int:
        return self._gpu(handle).power_default_mw

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: FakeGpu) -> int:
        return self._gpu(handle).pcie_width

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: FakeGpu) -> int:
        return self._gpu(handle).pcie_width_max

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: FakeGpu) -> int:
        return self._gpu(handle).pcie_gen

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: FakeGpu) -> int:
        return self._gpu(handle).pcie_gen_max

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeGpu) -> int:
        self.calls.append("ThrottleReasons")
        return self._gpu(handle).reasons

    def nvmlDeviceGetClockInfo(self, handle: FakeGpu, clock: int) -> int:
        assert clock == pynvml.NVML_CLOCK_SM
        return self._gpu(handle).sm_clock

    def nvmlDeviceGetTemperature(self, handle: FakeGpu, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu(handle).temperature


def _event_reasons(self: FakeNvml, handle: FakeGpu) -> int:
    self.calls.append("EventReasons")
    return self._gpu(handle).reasons


class _WithEvents(FakeNvml):
    nvmlDeviceGetCurrentClocksEventReasons = _event_reasons


def fake_nvml(*gpus: FakeGpu, library: bool = True, event_reasons: bool = True) -> FakeNvml:
    """The fake NVML over ``gpus`` (default: one healthy GPU); see :class:`FakeNvml`."""
    cls = _WithEvents if event_reasons else FakeNvml
    return cls(list(gpus) or [healthy()], library=library, event_reasons=event_reasons)
