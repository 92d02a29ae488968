"""What the log parsers produce and consume: plain frozen data, no logic beyond ``to_dict``.

Records may be kept as columns (``RecordColumns``: one list per field, as a parser's ``re.finditer`` pass
fills them), which read as a sequence of ``IterationRecord`` made only when read: measuring a window
(``window.measure``) and checking losses (``failures.loss_failure``) read the columns directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from itertools import repeat
from typing import Any, overload


@dataclass(frozen=True, slots=True)
class IterationRecord:
    """One logged training step.

    ``iteration`` is the run's global iteration NUMBER (a per-epoch counter is turned into a running one;
    with a print frequency of N there is one record every N iterations). ``time`` is unix seconds read
    from the line's timestamp (timestamps without a zone are read as UTC: only differences matter), None
    when the line has none. ``samples_per_sec`` is the rate the framework printed for the whole job (all
    ranks); ``loss`` the printed training loss. ``rank`` comes from an mpirun ``[job,rank]`` prefix.
    """

    iteration: int
    time: float | None
    samples_per_sec: float | None
    loss: float | None
    rank: int | None = None
    epoch: int | None = None


class RecordColumns(Sequence[IterationRecord]):
    """Records as columns: ``iteration[i]``, ``time[i]``, ... are record i's fields. A sequence of
    ``IterationRecord`` to its readers (built on access, equal to any sequence of equal records), kept as
    lists so that a parser fills it in one pass and the window rule reads only what it needs.

    ``rank`` and ``epoch`` may be None: every record's is None. All given columns have one length."""

    __slots__ = ("epoch", "iteration", "loss", "rank", "samples_per_sec", "time")

    def __init__(
        self,
        iteration: Sequence[int],
        time: Sequence[float | None],
        samples_per_sec: Sequence[float | None],
        loss: Sequence[float | None],
        rank: Sequence[int | None] | None = None,
        epoch: Sequence[int | None] | None = None,
    ) -> None:
        n = len(iteration)
        for name, column in (
            ("time", time),
            ("samples_per_sec", samples_per_sec),
            ("loss", loss),
            ("rank", rank),
            ("epoch", epoch),
        ):
            if column is not None and len(column) != n:
                raise ValueError(f"column {name} has {len(column)} values, iteration has {n}")
        self.iteration, self.time, self.samples_per_sec, self.loss = iteration, time, samples_per_sec, loss
        self.rank, self.epoch = rank, epoch

    @classmethod
    def of(cls, records: Sequence[IterationRecord]) -> RecordColumns:
        """The columns of ``records`` (itself when it already is columns)."""
        if isinstance(records, RecordColumns):
            return records
        return cls(
            [r.iteration for r in records],
            [r.time for r in records],
            [r.samples_per_sec for r in records],
            [r.loss for r in records],
            [r.rank for r in records],
            [r.epoch for r in records],
        )

    def __len__(self) -> int:
        return len(self.iteration)

    def _record(self, i: int) -> IterationRecord:
        return IterationRecord(
            self.iteration[i],
            self.time[i],
            self.samples_per_sec[i],
            self.loss[i],
            self.rank[i] if self.rank is not None else None,
            self.epoch[i] if self.epoch is not None else None,
        )

    @overload
    def __getitem__(self, index: int) -> IterationRecord: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[IterationRecord, ...]: ...
    def __getitem__(self, index: int | slice) -> IterationRecord | tuple[IterationRecord, ...]:
        if isinstance(index, slice):
            return tuple(self._record(i) for i in range(*index.indices(len(self))))
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("record index out of range")
        return self._record(index)

    def __iter__(self) -> Iterator[IterationRecord]:
        n = len(self)
        rank = self.rank if self.rank is not None else repeat(None, n)
        epoch = self.epoch if self.epoch is not None else repeat(None, n)
        return map(IterationRecord, self.iteration, self.time, self.samples_per_sec, self.loss, rank, epoch)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)) or len(other) != len(self):
            return NotImplemented if not isinstance(other, Sequence) else False
        return all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RecordColumns({len(self)} records)"


@dataclass(frozen=True)
class ParsedRun:
    """One training run found in a log: status, our throughput and the framework's own figure.

    ``throughput`` follows our one rule (``window.measure``) and is None unless status is "ok";
    ``reported_throughput`` is what the framework printed as its final figure (None if it printed none).
    ``iterations`` counts the iterations inside the measured ``window`` = (first, last) iteration number;
    ``method`` says whether the window was timed from timestamps or from the printed rates.
    """

    file: str
    format: str
    status: str  # "ok" | "failed"
    reason: str | None
    throughput: float | None
    reported_throughput: float | None
    iterations: int
    gpus: int | None
    batch_size_per_device: int | None
    window: tuple[int, int] | None
    method: str | None  # "timestamps" | "printed_rates" | "spans" (MLLOG: samples over the steady spans' time)
    records: Sequence[IterationRecord] = ()  # a tuple, or RecordColumns (read the same)
    window_fitted: bool = False  # the measured window was shortened to fit a foreign log (ParseOptions.fit)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field except ``records`` (``window`` as a list)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "records"}
        out["window"] = list(self.window) if self.window is not None else None
        return out


@dataclass(frozen=True)
class ParseOptions:
    """The measured window a parser applies: skip ``warmup`` iterations, then measure ``measured``
    iterations (None = up to the last record). Both already resolved against the format's defaults.

    ``fit`` is the window policy for logs dlperf did not launch (``dlperf parse``, ``dlperf import``): a run
    its authors stopped before its planned end, or before warm-up + measured, is not a failure; the window
    keeps the warm-up and measures every complete iteration after it (at least
    ``window.MIN_FITTED_MEASURED``), and the run says so (``ParsedRun.window_fitted``). Without it (runs
    dlperf launched: it asked for that many iterations) a short or stopped log is a failed run."""

    warmup: int
    measured: int | None = None
    fit: bool = False


@dataclass(frozen=True)
class LogFormat:
    """A log format as registry data: its name, a cheap ``detect(text)``, a ``parse(text, file, options)``
    that never raises on any text, and the window used when the caller gives none: the one the log says it
    was run with (``configured``), else the format's defaults."""

    name: str
    detect: Callable[[str], bool]
    parse: Callable[[str, str, ParseOptions], list[ParsedRun]]
    default_warmup: int = 0
    default_measured: int | None = None
    # The window a log says it was run with, (warm-up, measured) with None for "not said", or None: used
    # instead of the defaults when the caller gives no window ("warm-up as configured").
    configured: Callable[[str], tuple[int | None, int | None] | None] | None = None
