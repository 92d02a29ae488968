"""Where a result's throughput figure came from: who printed the log lines the parser reads.

dlperf measures every throughput by its own rule from a training log, but the lines it reads are printed by
different code per framework and per image: the benchmark's own logger (DeepLearningExamples' DLLogger for
PyTorch and its MXNet ``fit.py``, MXNet's ``Speedometer``, MindSpore's TimeMonitor, PLSC's logger,
OneFlow-Benchmark), a dlperf driver or workload that prints the seed's format itself (dlperf's reference
workload, the OneFlow CPU driver), or a log that ``dlperf import`` read from elsewhere. Each adapter says which
(:meth:`FrameworkAdapter.figure_origin
<dlperf_core.frameworks.base.FrameworkAdapter.figure_origin>`); the result row keeps it in
``results.figure_origin`` (migration 0009; NULL for rows stored before, meaning unknown).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FigureOrigin = Literal["framework", "dlperf", "imported"]
"""``framework``: the framework's (or its benchmark's) own code prints the lines; ``dlperf``: a dlperf driver or
workload prints them in the seed's format; ``imported``: a log from elsewhere, read by ``dlperf import``."""

FIGURE_ORIGINS: tuple[FigureOrigin, ...] = ("framework", "dlperf", "imported")
"""Allowed values of ``results.figure_origin`` (NULL: stored before migration 0009, unknown)."""

IMPORTED: FigureOrigin = "imported"

ORIGIN_WORDS: dict[str | None, str] = {
    "framework": "the framework's own logger",
    "dlperf": "a dlperf driver printing the seed's format",
    "imported": "a log imported from elsewhere (dlperf import)",
    None: "unknown (stored before dlperf recorded it)",
}
"""What each origin means, for people (the reports' ``figure:`` lines)."""


@dataclass(frozen=True)
class Figure:
    """Where one image's throughput lines come from: the origin, and who prints them in one line."""

    origin: FigureOrigin
    source: str  # e.g. "MindSpore's TimeMonitor in Model.train"


def check_origin(value: str | None) -> None:
    """Refuse a value that is not one of :data:`FIGURE_ORIGINS` (None, unknown, is allowed)."""
    if value is not None and value not in FIGURE_ORIGINS:
        raise ValueError(f"figure origin must be one of {FIGURE_ORIGINS} or None, got {value!r}")


def origin_words(values: list[str | None]) -> str:
    """The reports' line for the origins of one table's rows, e.g. ``figure: the framework's own logger``
    (several origins, e.g. a table whose topologies ran on CPU and on GPU nodes, joined by ``; ``)."""
    seen = list(dict.fromkeys(values)) or [None]
    return "figure: " + "; ".join(ORIGIN_WORDS.get(v, str(v)) for v in seen)
