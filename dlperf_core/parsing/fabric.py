"""The fabric benchmark's output (the all-reduce bus bandwidth of ``dlperf_core/workload/allreduce.py``,
nccl-tests' table), read into one :class:`FabricResult`. Not a training log, so not in the format registry: a
fabric benchmark has bandwidths per message size, not a throughput.

Lines (rank 0; an mpirun ``[1,0]<stdout>:`` tag in front is allowed)::

    # dlperf all_reduce probe: ranks 2 backend gloo dtype float32 warmup 2 iters 5
    #       size         count      type   redop    time(us)  algbw(GB/s)  busbw(GB/s)
         1048576        262144     float     sum      2266.1        0.463        0.463
    # Avg bus bandwidth    : 0.894
    # dlperf all_reduce probe: ranks 1 backend gloo: a single rank reduces nothing (no fabric to measure)

nccl-tests' own ``all_reduce_perf`` table (out-of-place and in-place columns) is read too: the out-of-place
figures are taken. A run is ``ok`` when it printed its closing ``Avg bus bandwidth`` line (or the single-rank
line), else ``failed`` with the reason (no table header, stopped after N sizes, a text failure such as out of
memory). A busbw that is not a finite number >= 0 fails the run: a fabric benchmark never stores a made-up zero.
The workload's header line still says ``all_reduce probe`` and the failure reasons still say ``probe``: logs
already written are read the same way, and the reasons are stored in ``fabric_probes.reason`` as before.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dlperf_core.parsing.failures import text_failure

_TAG = r"(?:\[\d{1,9},\d{1,9}\]<std(?:out|err)>:)?"
_HEADER = re.compile(
    r"^" + _TAG + r"# dlperf all_reduce probe: ranks (\d{1,9}) backend (\w{1,20})(?: dtype (\w{1,20}))?", re.M
)
_ROW = re.compile(  # size count type redop time algbw busbw [in-place time algbw busbw [#wrong]]
    r"^" + _TAG + r"[ \t]{0,40}(\d{1,15})[ \t]{1,40}(\d{1,15})[ \t]{1,40}(\w{1,20})[ \t]{1,40}(\w{1,10})"
    r"(?:[ \t]{1,40}-?\d{1,3})?"  # nccl-tests' root column
    r"[ \t]{1,40}(\S{1,30})[ \t]{1,40}(\S{1,30})[ \t]{1,40}(\S{1,30})",
    re.M,
)
_AVG = re.compile(r"^" + _TAG + r"#\s{0,10}Avg bus bandwidth\s{0,10}:\s{0,10}(\S{1,30})", re.M)
_SINGLE = "a single rank reduces nothing"


@dataclass(frozen=True)
class FabricSize:
    """One message size: its time and bandwidths (GB/s = 1e9 bytes/s)."""

    size_bytes: int
    time_us: float
    algbw_gbs: float
    busbw_gbs: float


@dataclass(frozen=True)
class FabricResult:
    """What one fabric benchmark run measured, or why it failed."""

    status: str  # "ok" | "failed"
    reason: str | None
    ranks: int | None
    backend: str | None
    dtype: str | None
    sizes: tuple[FabricSize, ...] = ()
    avg_busbw_gbs: float | None = None

    @property
    def largest(self) -> FabricSize | None:
        """The largest message measured (its busbw is the link bandwidth a regression is judged on)."""
        return max(self.sizes, key=lambda s: s.size_bytes) if self.sizes else None


def _num(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def parse_fabric_table(text: str) -> FabricResult:
    """The fabric benchmark's result from its log text (never raises)."""
    header = _HEADER.search(text)
    ranks = int(header.group(1)) if header else None
    backend = header.group(2) if header else None
    dtype = header.group(3) if header else None

    def failed(reason: str, sizes: tuple[FabricSize, ...] = ()) -> FabricResult:
        return FabricResult("failed", reason, ranks, backend, dtype, sizes)

    if (why := text_failure(text)) is not None:
        return failed(why)
    if header is None:
        return failed("no probe output")
    if _SINGLE in text[header.start() : header.start() + 300]:
        return FabricResult("ok", None, ranks, backend, dtype)
    sizes: list[FabricSize] = []
    for m in _ROW.finditer(text, header.end()):
        size, _count, _type, _op, time_us, algbw, busbw = m.groups()
        values = [_num(v) for v in (time_us, algbw, busbw)]
        if any(v is None for v in values):
            return failed(f"probe: a bandwidth that is not a number at {size} bytes", tuple(sizes))
        sizes.append(FabricSize(int(size), *values))  # type: ignore[arg-type]
    avg = _AVG.search(text, header.end())
    if avg is None:
        return failed(f"truncated probe: stopped after {len(sizes)} message sizes", tuple(sizes))
    if not sizes:
        return failed("probe printed no message size")
    return FabricResult("ok", None, ranks, backend, dtype, tuple(sizes), _num(avg.group(1)))
