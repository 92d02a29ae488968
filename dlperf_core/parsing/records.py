"""What the log parsers produce and consume: plain frozen data, no logic beyond ``to_dict``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any


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
    method: str | None  # "timestamps" | "printed_rates"
    records: tuple[IterationRecord, ...] = ()
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
