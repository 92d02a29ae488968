"""Where reports are written: ``$DLPERF_REPORT_DIR/<dag_id>/<run_id-safe>/`` (default
``$DLPERF_HOME/.dlperf/reports``, see :mod:`dlperf_core.home`); and, in the same folder, why planning refused a
run (:data:`REFUSAL_FILE`), which the run's page shows where a refused run has no report and no row."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from dlperf_core.home import env_path

log = logging.getLogger("dlperf")

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


REFUSAL_FILE = "refused.txt"
"""In a run's report folder: why planning refused the run (the refusal's text as the task raised it), written by
``plan_cases`` and removed when a later try of it plans the run; the run's "dlperf results" tab shows it."""


def write_refusal(dag_id: str, run_id: str, reason: str, root: Path | None = None) -> Path | None:
    """Keep why planning refused the run ``run_id``; returns the file, or None where it cannot be written (logged:
    the refusal itself must still reach the task's log, so this never raises)."""
    path = report_dir(dag_id, run_id, root) / REFUSAL_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{REFUSAL_FILE}.tmp")
        tmp.write_text(reason.rstrip("\n") + "\n")
        tmp.replace(path)
    except OSError as exc:
        log.warning("could not keep the refusal of run %s in %s: %s", run_id, path, exc)
        return None
    return path


def read_refusal(dag_id: str, run_id: str, root: Path | None = None) -> str | None:
    """Why planning refused the run ``run_id`` (:func:`write_refusal`), or None when it was not refused."""
    try:
        return (report_dir(dag_id, run_id, root) / REFUSAL_FILE).read_text().rstrip("\n")
    except (OSError, UnicodeDecodeError):
        return None


def clear_refusal(dag_id: str, run_id: str, root: Path | None = None) -> None:
    """Forget an earlier refusal of the run ``run_id`` (a later try of its planning succeeded)."""
    try:
        (report_dir(dag_id, run_id, root) / REFUSAL_FILE).unlink(missing_ok=True)
    except OSError as exc:
        log.warning("could not remove the refusal of run %s: %s", run_id, exc)
