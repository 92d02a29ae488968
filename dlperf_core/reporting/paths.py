"""Where reports are written: ``$DLPERF_REPORT_DIR/<dag_id>/<run_id-safe>/`` (default
``$DLPERF_HOME/.dlperf/reports``, see :mod:`dlperf_core.home`)."""

from __future__ import annotations

import re
from pathlib import Path

from dlperf_core.home import env_path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

FORMATS: dict[str, str] = {"md": "report.md", "json": "report.json", "html": "report.html"}
"""Report formats and the file each is written to, inside the report's folder."""


def safe_name(text: str) -> str:
    """``text`` usable as one file or folder name: runs of other characters become ``_``."""
    name = _UNSAFE.sub("_", text).strip("._")
    return name or "_"


def report_root() -> Path:
    """``$DLPERF_REPORT_DIR``, else ``$DLPERF_HOME/.dlperf/reports`` (absolute, not created)."""
    return env_path("DLPERF_REPORT_DIR", "reports")


def report_dir(dag_id: str, run_id: str, root: Path | None = None) -> Path:
    """The folder of one run's report: ``<root>/<dag_id>/<run_id-safe>/``."""
    return (root or report_root()) / safe_name(dag_id) / safe_name(run_id)
