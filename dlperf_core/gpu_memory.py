"""Peak GPU memory of a case run, from samples of

    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits

taken while the run is going (one sample is one call's output: one ``index, MiB`` line per GPU).
Pure: whoever samples (a thread in the runtime) hands each output to :meth:`GpuMemoryPeak.feed`.
"""

from __future__ import annotations

import threading

#: The command whose output :meth:`GpuMemoryPeak.feed` reads.
QUERY_COMMAND: tuple[str, ...] = (
    "nvidia-smi",
    "--query-gpu=index,memory.used",
    "--format=csv,noheader,nounits",
)


def parse_memory_sample(text: str) -> dict[int, float]:
    """``{gpu index: MiB used}`` from one sample; lines that are not ``<int>, <number>`` are skipped
    (warnings, ``[N/A]``, a driver error message)."""
    used: dict[int, float] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        try:
            value = float(parts[1])
        except ValueError:
            continue
        if value >= 0:
            used[int(parts[0])] = value
    return used


class GpuMemoryPeak:
    """The running peak of memory used, per GPU and over all GPUs (MiB). Thread-safe."""

    def __init__(self, gpus: set[int] | None = None) -> None:
        """``gpus``: only count these indexes (the devices the case uses); None counts all."""
        self._gpus = gpus
        self._peaks: dict[int, float] = {}
        self.samples = 0
        self._lock = threading.Lock()

    def feed(self, text: str) -> bool:
        """Take one sample's output; True when it held at least one reading."""
        used = parse_memory_sample(text)
        if self._gpus is not None:
            used = {i: v for i, v in used.items() if i in self._gpus}
        if not used:
            return False
        with self._lock:
            self.samples += 1
            for index, value in used.items():
                self._peaks[index] = max(value, self._peaks.get(index, 0.0))
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
