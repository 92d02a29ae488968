"""THE one throughput rule: samples processed inside the measured window / wall time of that window.

The window is iterations ``warmup+1 .. warmup+measured`` (``measured`` None: up to the last record).
Iterations are iteration NUMBERS from the records, never line counts.

* Timestamps (preferred; needs a known global batch): the base is the last record with
  ``iteration <= warmup`` (if there is none, the first record inside the window becomes the base and is
  not counted); samples = (last_iter - base_iter) * global_batch, time = t_last - t_base.
* Printed rates (no timestamps, no batch, or unusable times): each record inside the window covers the
  iterations since the record before it; throughput = sum(iters_i) / sum(iters_i / rate_i), the
  iteration-weighted harmonic mean (with a batch: samples = iters * batch, time = sum(iters_i*batch/rate_i)).

An ok result is always finite and > 0; everything else is a short failure reason.

Fitted windows (``fit=True``, logs from elsewhere): when the log stops before ``warmup + measured``, the
window keeps the warm-up and ends at the log's last record, provided that leaves at least
``MIN_FITTED_MEASURED`` iterations; ``WindowResult.fitted`` says the window was shortened.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from operator import lt

from dlperf_core.parsing.records import IterationRecord, RecordColumns

TIMESTAMPS = "timestamps"
PRINTED_RATES = "printed_rates"
NO_TIMING = "no usable timing in the window"
MIN_FITTED_MEASURED = 10
"""The fewest iterations after warm-up that a fitted window measures; a shorter log is failed."""


@dataclass(frozen=True)
class WindowResult:
    """Throughput over one measured window and how it was obtained.

    ``iterations`` are the iterations counted; ``window`` is (first, last) iteration number counted;
    ``samples``/``seconds`` are the numerator and denominator (None for printed rates without a batch).
    """

    throughput: float
    iterations: int
    window: tuple[int, int]
    method: str
    samples: float | None
    seconds: float | None
    fitted: bool = False  # shortened to fit the log (fit=True and the log stops before warm-up + measured)


def too_few(got: int, need: int) -> str:
    """The failure reason for a log that does not reach iteration ``need`` (it stopped at ``got``)."""
    return f"too few iterations for the window (got {got}, need {need})"


def too_few_fitted(got: int, warmup: int) -> str:
    """The failure reason for a log too short even for a fitted window."""
    return (
        f"too few iterations for a fitted window (got {got}, need at least {warmup + MIN_FITTED_MEASURED}:"
        f" {warmup} warm-up + {MIN_FITTED_MEASURED})"
    )


def _usable(x: float | None) -> bool:
    return x is not None and x > 0 and math.isfinite(x)


def _order(iteration: Sequence[int]) -> Sequence[int]:
    """Positions of the records by iteration number, keeping the first record of each number (a parser's
    columns are almost always in order already: then the positions are a range, found in one pass)."""
    if all(map(lt, iteration, islice(iteration, 1, None))):
        return range(len(iteration))
    out: list[int] = []
    last: int | None = None
    for i in sorted(range(len(iteration)), key=iteration.__getitem__):  # stable: first of a number first
        if iteration[i] != last:
            out.append(i)
            last = iteration[i]
    return out


def measure(
    records: Sequence[IterationRecord],
    *,
    warmup: int,
    measured: int | None,
    global_batch: int | None,
    fit: bool = False,
) -> WindowResult | str:
    """Throughput of the measured window of ``records``, or a failure reason (a str); ``fit``: see the
    module docstring. Reads ``RecordColumns`` as they are (only the window's records are touched)."""
    if warmup < 0 or (measured is not None and measured < 1):
        raise ValueError(f"bad window: warmup={warmup}, measured={measured}")
    cols = RecordColumns.of(records if isinstance(records, Sequence) else tuple(records))
    order = _order(cols.iteration)
    its = cols.iteration if isinstance(order, range) else [cols.iteration[i] for i in order]
    end = warmup + measured if measured is not None else None
    last_iter = its[-1] if its else 0
    fitted = False
    if end is not None and last_iter < end:
        if not fit:
            return too_few(last_iter, end)
        if last_iter - warmup < MIN_FITTED_MEASURED:
            return too_few_fitted(last_iter, warmup)
        end, fitted = last_iter, True

    p = bisect_right(its, warmup)  # its[:p] are warm-up records, the last of them is the base
    q = bisect_right(its, end) if end is not None else len(its)
    inside = list(order[p:q])
    base = order[p - 1] if p > 0 else None
    if not inside:
        return too_few(last_iter, warmup + 1)
    if base is None:  # nothing printed in the warm-up: the first window record starts the clock
        base, inside = inside[0], inside[1:]
        if not inside:
            return too_few(last_iter, cols.iteration[base] + 1)
    last = inside[-1]
    iteration, time, rates = cols.iteration, cols.time, cols.samples_per_sec
    span = iteration[last] - iteration[base]
    window = (iteration[base] + 1, iteration[last])

    base_time, last_time = time[base], time[last]
    if global_batch is not None and global_batch > 0 and base_time is not None and last_time is not None:
        seconds = last_time - base_time
        samples = float(span * global_batch)
        if _usable(seconds) and _usable(samples / seconds):
            return WindowResult(samples / seconds, span, window, TIMESTAMPS, samples, seconds, fitted)

    iters, weighted = 0, 0.0  # sum(iters_i), sum(iters_i / rate_i)
    prev = iteration[base]
    isfinite = math.isfinite
    for i in inside:
        k, prev = iteration[i] - prev, iteration[i]
        rate = rates[i]
        if rate is not None and rate > 0 and isfinite(rate):  # (_usable, inline: a call a record costs more)
            iters += k
            weighted += k / rate
    if iters > 0 and _usable(weighted) and _usable(iters / weighted):
        rate = iters / weighted
        batch = global_batch if global_batch is not None and global_batch > 0 else None
        samples_or_none = float(iters * batch) if batch else None
        seconds_or_none = samples_or_none / rate if samples_or_none is not None else None
        return WindowResult(rate, iters, window, PRINTED_RATES, samples_or_none, seconds_or_none, fitted)
    return NO_TIMING
