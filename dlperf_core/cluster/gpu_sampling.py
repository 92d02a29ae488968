"""GPU memory, board power and clock events of a case run, sampled while it runs, with

    nvidia-smi --query-gpu=index,memory.used,power.draw,clocks.sm,temperature.gpu,pcie.link.gen.current,
                           clocks_event_reasons.active --format=csv,noheader,nounits

(one sample is one call's output: one line per GPU). One sampler for every runtime: the docker runtime runs the
query in each nvidia container, the local runtime on this machine; each hands outputs to :meth:`GpuSamples.feed`
through a :class:`GpuSampler` thread. The query is the richest the nvidia-smi there knows (:class:`SampleQuery`):
drivers before 535 call the reasons ``clocks_throttle_reasons.active``, and one that knows neither (nor the clock
fields) is asked :data:`QUERY_COMMAND`, memory and power alone, as before.

Only the case's GPUs are sampled (:func:`sampled_gpu_ids`): in a container, every GPU it sees, which are the
case's GPUs on that node and no other (its device request); on this machine (the local runtime), the case's
GPUs by index or UUID with ``--id``, as its processes see them through ``CUDA_VISIBLE_DEVICES``.

* memory: the peak used on any one GPU (the OneFlow seed's memory column, measured instead of read off a
  screen);
* power: per sample, the board power summed over the case's GPUs on that node, with its time, so the mean
  over the measured window gives the energy per sample (``dlperf_core.measure.efficiency``);
* clocks: per sample and GPU, the clock-event reasons (NVML's bit mask, which nvidia-smi prints in hex), the SM
  clock, the temperature and the PCIe link generation (:class:`~dlperf_core.cluster.clock_events.ClockSample`):
  whether the case was throttled in its measured window, and whether each GPU's link reached its maximum
  generation under load (:mod:`dlperf_core.cluster.clock_events`, :mod:`dlperf_core.cluster.gpu_health`).

NVIDIA calls nvidia-smi's text no stable interface (NVML is); the sampler keeps it because it runs in the case's own
container, which need not carry NVML's Python bindings, and reads only ``--format=csv,noheader,nounits`` values.
"""

from __future__ import annotations

import math
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from dlperf_core.cluster.clock_events import ClockSample

#: The command of nvidia-smi's memory and power (the fields every driver knows), the last :class:`SampleQuery` tries.
QUERY_COMMAND: tuple[str, ...] = (
    "nvidia-smi",
    "--query-gpu=index,memory.used,power.draw",
    "--format=csv,noheader,nounits",
)

BASIC_FIELDS = ("index", "memory.used", "power.draw")
CLOCK_FIELDS = ("clocks.sm", "temperature.gpu", "pcie.link.gen.current")
SAMPLE_FIELDS: tuple[tuple[str, ...], ...] = (
    (*BASIC_FIELDS, *CLOCK_FIELDS, "clocks_event_reasons.active"),  # NVIDIA driver 535 and later
    (*BASIC_FIELDS, *CLOCK_FIELDS, "clocks_throttle_reasons.active"),  # the older name of the same bit mask
    BASIC_FIELDS,
)
"""The queries :class:`SampleQuery` tries, richest first (nvidia-smi refuses the whole query for one unknown field)."""

UNKNOWN_FIELD = "is not a valid field"
"""What nvidia-smi prints for a field it does not know (``Field "x" is not a valid field to query.``)."""


def query_command(gpu_ids: tuple[str, ...] = (), fields: tuple[str, ...] = BASIC_FIELDS) -> tuple[str, ...]:
    """The query of ``fields`` (default :data:`QUERY_COMMAND`'s) for exactly ``gpu_ids`` (``--id=0,1``: indexes or
    UUIDs, as nvidia-smi takes them); empty: every GPU nvidia-smi sees."""
    command = ("nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits")
    return (*command, f"--id={','.join(gpu_ids)}") if gpu_ids else command


class SampleQuery:
    """One sample where the GPUs are: ``run(command)`` runs a command there (None: it cannot, the sampler stops).
    Asks the richest query of :data:`SAMPLE_FIELDS` the nvidia-smi there knows, and keeps asking that one."""

    def __init__(self, run: Callable[[tuple[str, ...]], str | None], gpu_ids: tuple[str, ...] = ()) -> None:
        self._run = run
        self._commands = [query_command(gpu_ids, fields) for fields in SAMPLE_FIELDS]

    def __call__(self) -> str | None:
        while True:
            output = self._run(self._commands[0])
            if output is None or UNKNOWN_FIELD not in output or len(self._commands) == 1:
                return output
            self._commands.pop(0)  # this nvidia-smi does not know a field of it: the next query


def sampled_gpu_ids(case_gpu_ids: tuple[str, ...], *, in_container: bool) -> tuple[str, ...]:
    """What :func:`query_command` is asked for to sample exactly a case's GPUs on one node (``case_gpu_ids``, as the
    inventory names them: :meth:`dlperf_core.cluster.inventory.Node.case_gpu_ids`).

    In the case's container (docker runtime): nothing named, i.e. every GPU it sees, which are ``case_gpu_ids``
    and no other (the container's device request); nvidia-smi there numbers them from 0, so a host index would
    name another GPU, or none. On the host (local runtime): ``case_gpu_ids`` themselves."""
    return () if in_container else case_gpu_ids


@dataclass(frozen=True)
class GpuReading:
    """One GPU in one sample: memory used (MiB), board power (W) and, from a query with them
    (:data:`SAMPLE_FIELDS`), its clocks; None where nvidia-smi said [N/A] or was not asked."""

    memory_mb: float | None
    power_w: float | None
    sm_mhz: float | None = None
    temperature_c: float | None = None
    pcie_gen: int | None = None
    reasons: int | None = None  # clock-event reasons (dlperf_core.cluster.clock_events)

    @property
    def has_clocks(self) -> bool:
        return any(v is not None for v in (self.sm_mhz, self.temperature_c, self.pcie_gen, self.reasons))


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value >= 0 and math.isfinite(value) else None


def _mask(text: str) -> int | None:
    """A bit mask as nvidia-smi prints it (``0x0000000000000004``), None for anything else ([N/A])."""
    try:
        return int(text, 16) if text.lower().startswith("0x") else None
    except ValueError:
        return None


def _reading(parts: list[str]) -> GpuReading:
    memory, power = _number(parts[1]), _number(parts[2]) if len(parts) > 2 else None
    if len(parts) < 7:
        return GpuReading(memory, power)
    gen = _number(parts[5])
    return GpuReading(memory, power, _number(parts[3]), _number(parts[4]), int(gen) if gen else None, _mask(parts[6]))


def parse_sample(text: str) -> dict[int, GpuReading]:
    """``{gpu index: reading}`` from one sample (lines of the fields of :data:`SAMPLE_FIELDS`: ``index, MiB``,
    ``index, MiB, W`` or those and the clock fields); other lines are skipped (warnings, a driver error), and a GPU
    with no figure is left out."""
    out: dict[int, GpuReading] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) not in (2, 3, 7) or not parts[0].isdigit():
            continue
        reading = _reading(parts)
        if reading.memory_mb is not None or reading.power_w is not None or reading.has_clocks:
            out[int(parts[0])] = reading
    return out


def parse_memory_sample(text: str) -> dict[int, float]:
    """``{gpu index: MiB used}`` of one sample."""
    return {i: r.memory_mb for i, r in parse_sample(text).items() if r.memory_mb is not None}


class GpuSamples:
    """What the samples of one node said: the peak memory per GPU (MiB), the power over time and each GPU's clocks
    over time. Thread-safe.

    ``gpus``: only count these indexes (the devices the case uses); None counts all."""

    def __init__(self, gpus: set[int] | None = None) -> None:
        self._gpus = gpus
        self._peaks: dict[int, float] = {}
        self._power: list[tuple[float, float]] = []  # (unix time, W summed over the GPUs that said)
        self._clocks: list[ClockSample] = []
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
        now = time.time() if at is None else at
        with self._lock:
            self.samples += 1
            for index, reading in readings.items():
                if reading.memory_mb is not None:
                    self._peaks[index] = max(reading.memory_mb, self._peaks.get(index, 0.0))
                if reading.has_clocks:
                    self._clocks.append(
                        ClockSample(
                            now, index, reading.reasons, reading.sm_mhz, reading.temperature_c, reading.pcie_gen
                        )
                    )
            if watts:
                self._power.append((now, sum(watts)))
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

    @property
    def clocks(self) -> list[ClockSample]:
        """Each GPU's clocks per sample that had them, in time order."""
        with self._lock:
            return list(self._clocks)


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
    sample where the GPUs are (a :class:`SampleQuery`)."""

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


def local_run(command: tuple[str, ...], timeout_s: float = 10.0) -> str | None:
    """``command``'s output (stdout, then stderr: nvidia-smi names an unknown field there) on this machine; None
    when it cannot run (no nvidia-smi: the sampler then stops)."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout + done.stderr


def local_query(gpu_ids: tuple[str, ...] = ()) -> SampleQuery:
    """The sample query of ``gpu_ids`` (empty: every GPU) on this machine (:class:`SampleQuery` over
    :func:`local_run`)."""
    return SampleQuery(local_run, gpu_ids)
