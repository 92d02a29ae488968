"""One DAG run's results in the UI: the "dlperf results" tab of a DAG run (the plugin's ``dag_run`` view), and
the files of its report (HTML, markdown, JSON, plots) served from the reports folder.

The page is the run's report as it stands now (:func:`dlperf_core.reporting.build.run_page_html`, so it shows
a run that is still going, or whose ``make_report`` has not run), with a bar of links on top: the files
``make_report`` wrote for the run, and the results page. Report files are served only from inside the run's
own report folder (``$DLPERF_REPORT_DIR/<dag_id>/<run_id-safe>/``).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path
from urllib.parse import quote

from dlperf_core.reporting import FORMATS, report_dir

REPORT_ROUTE = "reports"
"""Report files: ``<prefix>/reports/<dag_id>/<run_id>/<file>``."""
RUN_ROUTE = "runs"
"""A run's page: ``<prefix>/runs/<dag_id>/<run_id>``."""


@dataclass(frozen=True)
class ReportLink:
    """One file of a run's report, with the path the results app serves it at (relative to the app's root)."""

    label: str  # "HTML", "markdown", "JSON", or a plot's file name
    href: str


def run_href(dag_id: str, run_id: str) -> str:
    """A run's page, relative to the results app's root."""
    return f"{RUN_ROUTE}/{quote(dag_id, safe='')}/{quote(run_id, safe='')}"


def report_file(dag_id: str, run_id: str, name: str) -> Path | None:
    """The report file ``name`` (a path inside the run's report folder) of a run, or None when there is no such
    file or the name leads outside that folder."""
    folder = report_dir(dag_id, run_id).resolve()
    path = (folder / name).resolve()
    return path if path.is_relative_to(folder) and path.is_file() else None


def report_links(dag_id: str, run_id: str) -> list[ReportLink]:
    """The files ``make_report`` wrote for a run (none before it ran): its documents, then its plots."""
    folder = report_dir(dag_id, run_id)
    base = f"{REPORT_ROUTE}/{quote(dag_id, safe='')}/{quote(run_id, safe='')}"
    labels = {"html": "HTML", "md": "markdown", "json": "JSON"}
    links = [ReportLink(labels[fmt], f"{base}/{name}") for fmt, name in FORMATS.items() if (folder / name).is_file()]
    plots = sorted((folder / "plots").glob("*.png")) if (folder / "plots").is_dir() else []
    links += [ReportLink(p.name, f"{base}/plots/{quote(p.name)}") for p in plots]
    return links


def link_bar(dag_id: str, run_id: str, root: str, refused: str | None = None) -> str:
    """The bar on top of a run's page: the results page, and the run's report files (``root``: the results
    app's own path, e.g. ``/dlperf/``); for a run that planning refused (``refused``: why,
    :func:`dlperf_core.reporting.paths.read_refusal`), that reason below it (:func:`refusal_html`)."""
    root = root.rstrip("/") + "/"
    files = report_links(dag_id, run_id)
    shown = " · ".join(f'<a href="{escape(root + link.href)}">{escape(link.label)}</a>' for link in files)
    none = (
        "<i>none yet (the run writes them when it ends)</i>"
        if refused is None
        else "<i>none (planning refused the run: no case ran)</i>"
    )
    return (
        '<nav id="dlperf-run-links" style="font: .9rem system-ui, sans-serif; margin-bottom: 1rem">'
        f'<a href="{escape(root)}" target="_top">all results</a> · report files: '
        + (shown or none)
        + "</nav>"
        + (refusal_html(refused) if refused is not None else "")
    )


def refusal_html(reason: str) -> str:
    """Why planning refused a run, as its page shows it (such a run has no report and no row to show)."""
    return (
        '<section id="dlperf-refused" style="font: 1rem system-ui, sans-serif">'
        "<h2>Refused at planning: no case ran</h2>"
        f'<pre style="white-space: pre-wrap">{escape(reason)}</pre>'
        "<p>Fix what it names, then trigger a new run.</p>"
        "</section>"
    )


def with_link_bar(page: str, bar: str) -> str:
    """``page`` (a whole HTML document) with ``bar`` as the first thing in its body."""
    at = page.find("<body>")
    return page[: at + 6] + bar + page[at + 6 :] if at >= 0 else bar + page
