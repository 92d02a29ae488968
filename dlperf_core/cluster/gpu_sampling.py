"""GPU memory and board power of a case run, sampled while it runs, with

    nvidia-smi --query-gpu=index,memory.used,power.draw --format=csv,noheader,nounits

(one sample is one call's output: one ``index, MiB, W`` line per GPU). One sampler for every runtime: the
docker runtime runs the query in each nvidia container, the local runtime on this machine; each hands
outputs to :meth:`GpuSamples.feed` through a :class:`GpuSampler` thread.

* memory: the peak used on any one GPU (the OneFlow seed's memory column, measured instead of read off a
  screen);
* power: per sample, the board power summed over the case's GPUs on that node, with its time, so the mean
  over the measured window gives the energy per sample (``dlperf_core.measure.efficiency``).
"""

from __future__ import annotations

import math
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: The command whose output :meth:`GpuSamples.feed` reads.
QUERY_COMMAND: tuple[str, ...] = (
    "nvidia-smi",
    "--query-gpu=index,memory.used,power.draw",
    "--format=csv,noheader,nounits",
)


@dataclass(frozen=True)
class GpuReading:
    """One GPU in one sample: memory used (MiB) and board power (W); None where nvidia-smi said [N/A]."""

    memory_mb: float | None
    power_w: float | None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value >= 0 and math.isfinite(value) else None


def parse_sample(text: str) -> dict[int, GpuReading]:
    """``{gpu index: reading}`` from one sample (``index, MiB`` or ``index, MiB, W`` lines); other lines are
    skipped (warnings, a driver error), and a GPU with neither figure is left out."""
    out: dict[int, GpuReading] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) not in (2, 3) or not parts[0].isdigit():
            continue
        reading = GpuReading(_number(parts[1]), _number(parts[2]) if len(parts) == 3 else None)
        if reading.memory_mb is not None or reading.power_w is not None:
            out[int(parts[0])] = reading
    return out


def parse_memory_sample(text: str) -> dict[int, float]:
    """``{gpu index: MiB used}`` of one sample."""
    return {i: r.memory_mb for i, r in parse_sample(text).items() if r.memory_mb is not None}


class GpuSamples:
    """What the samples of one node said: the peak memory per GPU (MiB) and the power over time. Thread-safe.

    ``gpus``: only count these indexes (the devices the case uses); None counts all."""

    def __init__(self, gpus: set[int] | None = None) -> None:
        self._gpus = gpus
        self._peaks: dict[int, float] = {}
        self._power: list[tuple[float, float]] = []  # (unix time, W summed over the GPUs that said)
        self.samples = 0
        self._lock = threading.Lock()

    def feed(self, text: str, at: float | None = None) -> bool:
        """Take one sample's output (taken at ``at``, default now); True when it held at least one reading."""
        readings = parse_sample(text)
        if self._gpus is not None:
            readings = {i: r for i, r in readings.items() if i in self._gpus}
        if not readings:
            return False
        watts = [r.power_w for r in readings.values() if r.power_w is not None]
        with self._lock:
            self.samples += 1
            for index, reading in readings.items():
                if reading.memory_mb is not None:
                    self._peaks[index] = max(reading.memory_mb, self._peaks.get(index, 0.0))
            if watts:
                self._power.append((time.time() if at is None else at, sum(watts)))
        return True

    @property
    def per_gpu_mb(self) -> dict[int, float]:
        """Peak MiB used per GPU index."""
        with self._lock:
            return dict(self._peaks)

    @property
    def peak_mb(self) -> float | None:
        """The highest memory used on any one GPU (MiB), or None when no sample had a reading."""
        with self._lock:
            return max(self._peaks.values()) if self._peaks else None

    @property
    def power(self) -> list[tuple[float, float]]:
        """(unix time, W summed over this node's GPUs) per sample that had a power reading."""
        with self._lock:
            return list(self._power)


def mean_power_w(
    series: list[tuple[float, float]], start: float | None = None, end: float | None = None
) -> float | None:
    """Mean of a node's power series over [start, end] (both given), else over all of it; None if empty.
    A window with no sample in it falls back to the whole series (a window shorter than the period)."""
    inside = [w for t, w in series if start is not None and end is not None and start <= t <= end]
    values = inside or [w for _, w in series]
    return sum(values) / len(values) if values else None


def case_power_w(
    series_by_node: dict[str, list[tuple[float, float]]], start: float | None = None, end: float | None = None
) -> float | None:
    """The case's GPUs' mean board power (W): each node's mean over [start, end], summed over the nodes;
    None when no node had a power reading."""
    means = [m for m in (mean_power_w(s, start, end) for s in series_by_node.values()) if m is not None]
    return sum(means) if means else None


class GpuSampler:
    """Calls ``query()`` every ``period_s`` and feeds its output to ``samples``; stops on :meth:`stop`, or when
    ``query`` returns None (the container ended, no nvidia-smi). Works for any runtime: the query is how to
    run :data:`QUERY_COMMAND` where the GPUs are."""

    def __init__(self, query: Callable[[], str | None], samples: GpuSamples, period_s: float = 1.0) -> None:
        self._query = query
        self._samples = samples
        self._period = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            output = self._query()
            if output is None:
                return
            self._samples.feed(output)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def local_query(timeout_s: float = 10.0) -> str | None:
    """:data:`QUERY_COMMAND` on this machine; None when there is no nvidia-smi (the sampler then stops)."""
    try:
        return subprocess.run(list(QUERY_COMMAND), capture_output=True, text=True, timeout=timeout_s).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
