"""GPU memory and board power of a case run, sampled while it runs, with

    nvidia-smi --query-gpu=index,memory.used,power.draw --format=csv,noheader,nounits

(one sample is one call's output: one ``index, MiB, W`` line per GPU). One sampler for every runtime: the
docker runtime runs the query in each nvidia container, the local runtime on this machine; each hands
outputs to :meth:`GpuSamples.feed` through a :class:`GpuSampler` thread.

Only the case's GPUs are sampled (:func:`sampled_gpu_ids`): in a container, every GPU it sees, which are the
case's GPUs on that node and no other (its device request); on this machine (the local runtime), the case's
GPUs by index or UUID with ``--id``, as its processes see them through ``CUDA_VISIBLE_DEVICES``.

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


def query_command(gpu_ids: tuple[str, ...] = ()) -> tuple[str, ...]:
    """:data:`QUERY_COMMAND` for exactly ``gpu_ids`` (``--id=0,1``: indexes or UUIDs, as nvidia-smi takes them);
    empty: every GPU nvidia-smi sees."""
    return (*QUERY_COMMAND, f"--id={','.join(gpu_ids)}") if gpu_ids else QUERY_COMMAND


def sampled_gpu_ids(case_gpu_ids: tuple[str, ...], *, in_container: bool) -> tuple[str, ...]:
    """What :func:`query_command` is asked for to sample exactly a case's GPUs on one node (``case_gpu_ids``, as the
    inventory names them: :meth:`dlperf_core.cluster.inventory.Node.case_gpu_ids`).

    In the case's container (docker runtime): nothing named, i.e. every GPU it sees, which are ``case_gpu_ids``
    and no other (the container's device request); nvidia-smi there numbers them from 0, so a host index would
    name another GPU, or none. On the host (local runtime): ``case_gpu_ids`` themselves."""
    return () if in_container else case_gpu_ids


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


def local_query(gpu_ids: tuple[str, ...] = (), timeout_s: float = 10.0) -> str | None:
    """:func:`query_command` of ``gpu_ids`` (empty: every GPU) on this machine; None when there is no nvidia-smi
    (the sampler then stops)."""
    try:
        return subprocess.run(list(query_command(gpu_ids)), capture_output=True, text=True, timeout=timeout_s).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
