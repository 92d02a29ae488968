"""The report as markdown: the run, the seed tables, failed repeats, regressions, links to the PNGs."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from dlperf_core.measure.noise import BASELINE_RULE, UNRELIABLE_RULE
from dlperf_core.reporting.data import ReportData
from dlperf_core.reporting.nodes import nodes_markdown, without_sweeps
from dlperf_core.reporting.plots import Plot
from dlperf_core.reporting.tables import (
    fabric_markdown,
    format_cell,
    gpu_health_markdown,
    markdown_table,
    max_batch_markdown,
    mlperf_markdown,
    seed_table_frames,
    table_markdown,
    table_note,
)

PLOT_SECTIONS: tuple[tuple[str, str], ...] = (
    ("scaling", "Scaling: throughput and speedup against GPU count"),
    ("frameworks", "Frameworks at each topology"),
    ("history", "Nightly history"),
)
"""Plot kinds in the order the report shows them, with their section headings."""

REGRESSION_COLUMNS: tuple[str, ...] = (
    "case_key",
    "night",
    "median_throughput",
    "baseline_median",
    "change_pct",
    "robust_z",
    "direction",
    "label",
    "environment_changed",
    "status",
)


def run_regressions(data: ReportData) -> pd.DataFrame:
    """The regressions found at this run."""
    if data.regressions.empty:
        return data.regressions
    found = data.regressions[data.regressions["run_id"] == data.run.run_id]
    return found[[c for c in REGRESSION_COLUMNS if c in found.columns]].reset_index(drop=True)


def no_history_note(data: ReportData) -> str | None:
    """Why there is no history plot, or None when there is history."""
    if data.history.empty:
        return "No history yet: none of this run's configurations has a scheduled (nightly) run."
    return None


def run_lines(data: ReportData) -> list[tuple[str, str]]:
    """(label, value) lines describing the run."""
    run = data.run
    ok = int((data.results["status"] == "ok").sum()) if not data.results.empty else 0
    return [
        ("DAG run", f"{run.dag_id} / {run.run_id}"),
        ("suite", run.suite),
        ("trigger", run.trigger),
        ("runtime", run.runtime),
        ("status", run.status),
        ("started", run.started_at.isoformat(timespec="seconds") if run.started_at else "-"),
        ("finished", run.finished_at.isoformat(timespec="seconds") if run.finished_at else "-"),
        ("repeats", f"{ok} ok, {len(data.results) - ok} failed, {len(data.summary)} cases"),
    ]


def nodes_section(data: ReportData, plots: list[Plot], out_dir: Path) -> str:
    """The Nodes section (:func:`dlperf_core.reporting.nodes.nodes_markdown`: the rule, a line per node named slow,
    the table) and the heat map; '' when the run has no per-node sweep."""
    section = nodes_markdown(data.nodes)
    if not section:
        return ""
    parts = [section]
    for plot in (p for p in plots if p.kind == "nodes"):
        parts += ["", f"![{plot.title}]({Path(os.path.relpath(plot.path, out_dir)).as_posix()})"]
    return "\n".join(parts)


def frame_markdown(frame: pd.DataFrame) -> str:
    rows = [[format_cell(v) for v in row] for row in frame.astype(object).itertuples(index=False)]
    return markdown_table([str(c) for c in frame.columns], rows)


def render_markdown(data: ReportData, plots: list[Plot], out_dir: Path) -> str:
    """The markdown report; images are linked relative to ``out_dir`` (where the report is written)."""
    parts = [f"# dlperf report: {data.run.suite} ({data.run.run_id})", ""]
    parts += [f"- **{label}**: {value}" for label, value in run_lines(data)]
    failed = data.failed_repeats
    if len(failed):
        parts += ["", "## Failed repeats", "", frame_markdown(failed)]
    parts += ["", "## Results (samples/s: median of repeats; speedup: vs the 1n1g that speedup_vs names)", ""]
    parts += [f"speedup_vs: {BASELINE_RULE}", ""]
    parts += [f"cv(%): stdev / mean of the ok repeats, in percent. {UNRELIABLE_RULE}.", ""]
    tables = seed_table_frames(without_sweeps(data.summary))  # a per-node sweep's cases: the Nodes section
    parts += ["\n\n".join(table_markdown(t, table_note(t, data.results)) for t in tables) if tables else "(no results)"]
    if nodes := nodes_section(data, plots, out_dir):
        parts += ["", nodes]
    if searched := max_batch_markdown(data.max_batch):
        parts += ["", searched]
    if fabric := fabric_markdown(data.fabric):
        parts += ["", fabric]
    if beside := mlperf_markdown(data.mlperf):
        parts += ["", beside]
    if health := gpu_health_markdown(data.gpu_health):
        parts += ["", health]
    for kind, heading in PLOT_SECTIONS:
        shown = [p for p in plots if p.kind == kind]
        if shown or kind == "history":
            parts += ["", f"## {heading}", ""]
        if kind == "history" and (note := no_history_note(data)):
            parts += [note]
        for plot in shown:
            parts += [f"![{plot.title}]({Path(os.path.relpath(plot.path, out_dir)).as_posix()})", ""]
    regressions = run_regressions(data)
    parts += ["", "## Regressions found at this run", ""]
    parts += [frame_markdown(regressions) if len(regressions) else "None."]
    return "\n".join(parts).rstrip() + "\n"
