"""Why a GPU's clocks were held down while a case ran: NVML's clock-event reasons (formerly "clocks throttle
reasons"), sampled with the SM clock, the temperature and the PCIe link generation (:mod:`dlperf_core.cluster.gpu_sampling`),
and what the measured window makes of them.

The reasons are one bit mask (nvml.h ``nvmlClocksEventReason*``, the same bits as ``nvmlClocksThrottleReason*``):

======  ===========================  ===========================================================
bit     reason                       counts as throttling
======  ===========================  ===========================================================
0x1     GPU idle                     no: nothing ran
0x2     applications clocks setting  no: a clock someone set
0x4     SW power cap                 no: the power limit at work (every busy GPU meets it)
0x8     HW slowdown                  **yes**: the hardware halved its clocks (heat, power brake)
0x10    sync boost                   no
0x20    SW thermal slowdown          **yes**: the driver slowed it down for heat
0x40    HW thermal slowdown          **yes**: the hardware slowed it down for heat
0x80    HW power brake slowdown      **yes**: an external power brake (the PSU or the system)
0x100   display clock setting        no
======  ===========================  ===========================================================

A case whose GPUs showed one of the **throttling** bits (:data:`THROTTLING`) in a sample of its measured window is
**throttled** (:func:`throttled_reason`): its figure says how hot or starved the node was, not how fast the
framework is; it is shown like an unreliable one and left out of regression baselines. A sample is taken once a
second, so an event shorter than that may be missed. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "GPU idle"),
    (0x2, "applications clocks setting"),
    (0x4, "SW power cap"),
    (0x8, "HW slowdown"),
    (0x10, "sync boost"),
    (0x20, "SW thermal slowdown"),
    (0x40, "HW thermal slowdown"),
    (0x80, "HW power brake slowdown"),
    (0x100, "display clock setting"),
)
"""NVML's clock-event reason bits and their names (nvml.h)."""

HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x8, 0x20, 0x40, 0x80
THROTTLING = HW_SLOWDOWN | SW_THERMAL | HW_THERMAL | HW_POWER_BRAKE
"""The bits that make a case throttled (module docstring)."""


def reason_names(mask: int) -> list[str]:
    """Each bit of ``mask`` in words with its value (``HW thermal slowdown (0x40)``), low bits first; a bit NVML
    added later than this table is named by its value alone."""
    known = dict(REASONS)
    names = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            names.append(f"{known[bit]} ({bit:#x})" if bit in known else f"{bit:#x}")
        bit <<= 1
    return names


class ClockSample(NamedTuple):
    """One GPU in one sample: when, which GPU (its index where it was sampled: in a container, among the case's GPUs
    there), and what it said (None: nvidia-smi gave N/A, or an older query without the field)."""

    at: float  # unix time
    gpu: int
    reasons: int | None  # clock-event reasons, bit mask
    sm_mhz: float | None
    temperature_c: float | None
    pcie_gen: int | None  # the PCIe link generation now (under load: its maximum, unless the link is degraded)


@dataclass(frozen=True)
class GpuWindow:
    """One GPU over a case's measured window (every sample inside it; where none is, every sample of the run)."""

    node: str
    gpu: int  # the index it was sampled by (ClockSample.gpu)
    samples: int
    reasons: int  # every reason seen, OR-ed
    sm_clock_min_mhz: float | None
    temperature_max_c: float | None
    pcie_gen_max: int | None  # the highest link generation seen: under load, where the link should be at its maximum

    @property
    def throttling(self) -> int:
        """The throttling bits seen (:data:`THROTTLING`), 0 when none."""
        return self.reasons & THROTTLING


def _inside(samples: Sequence[ClockSample], start: float | None, end: float | None) -> list[ClockSample]:
    """The samples in [start, end] when both are known and one is there, else all (as the power's mean)."""
    inside = [s for s in samples if start is not None and end is not None and start <= s.at <= end]
    return inside or list(samples)


def _max(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _min(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def windows_of(
    clocks: Mapping[str, Sequence[ClockSample]], start: float | None = None, end: float | None = None
) -> tuple[GpuWindow, ...]:
    """Per node and GPU, its samples over the measured window [start, end] (unix times; None: the whole run)."""
    out = []
    for node, samples in clocks.items():
        for gpu in sorted({s.gpu for s in samples}):
            mine = _inside([s for s in samples if s.gpu == gpu], start, end)
            gens = [s.pcie_gen for s in mine if s.pcie_gen is not None]
            reasons = 0
            for s in mine:
                reasons |= s.reasons or 0
            out.append(
                GpuWindow(
                    node,
                    gpu,
                    len(mine),
                    reasons,
                    _min(s.sm_mhz for s in mine),
                    _max(s.temperature_c for s in mine),
                    max(gens) if gens else None,
                )
            )
    return tuple(out)


def throttled_reason(windows: Iterable[GpuWindow], names: Mapping[tuple[str, int], str] | None = None) -> str | None:
    """Why a case is throttled: each GPU that showed a throttling reason in the window, with the reasons
    (``node0 GPU 1: HW thermal slowdown (0x40)``), joined by ``; ``; None when none did. ``names``: how to call a
    sampled GPU (``{(node, sampled index): "GPU 4 (GPU-3f0c...)"}``, the inventory's names); default ``GPU <index>``."""
    parts = [
        f"{w.node} {(names or {}).get((w.node, w.gpu), f'GPU {w.gpu}')}: {', '.join(reason_names(w.throttling))}"
        for w in windows
        if w.throttling
    ]
    return "; ".join(parts) or None
