"""Reports of benchmark runs: seed-shaped tables, the DLPerf result JSON, PNG plots and a self-contained
HTML page, built from the results database; and the data of the results page (:func:`load_overview`), which
the Airflow plugin renders. No Airflow import here.

``build_report`` and ``ReportFiles`` are imported on first use, so that callers that only
print tables (``dlperf run``, ``dlperf results``) do not load matplotlib."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dlperf_core.reporting.data import (
    ReportData,
    ReportError,
    ResultsOverview,
    RunInfo,
    Section,
    load_overview,
    load_report_data,
)
from dlperf_core.reporting.paths import FORMATS, report_dir, report_root, safe_name
from dlperf_core.reporting.tables import SeedTable, markdown_table, seed_table_frames, seed_tables

if TYPE_CHECKING:
    from dlperf_core.reporting.build import ReportFiles, build_report

_BUILD_NAMES = ("ReportFiles", "build_report")


def __getattr__(name: str) -> Any:
    if name in _BUILD_NAMES:
        from dlperf_core.reporting import build

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FORMATS",
    "ReportData",
    "ReportError",
    "ReportFiles",
    "ResultsOverview",
    "RunInfo",
    "Section",
    "SeedTable",
    "build_report",
    "load_overview",
    "load_report_data",
    "markdown_table",
    "report_dir",
    "report_root",
    "safe_name",
    "seed_table_frames",
    "seed_tables",
]
