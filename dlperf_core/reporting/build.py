"""``build_report``: read one run from the results database and write its report (markdown, JSON or
HTML, with the PNG plots) into a folder. Every file is written under a temporary name and renamed, so a
failed report leaves no half-written file in place of a good one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dlperf_core.reporting.data import ReportData, ReportError, load_report_data
from dlperf_core.reporting.dlperf_json import render_json
from dlperf_core.reporting.html import render_html
from dlperf_core.reporting.markdown import render_markdown
from dlperf_core.reporting.nodes import without_sweeps
from dlperf_core.reporting.paths import FORMATS, safe_name
from dlperf_core.reporting.plots import Plot, plot_framework_comparison, plot_history, plot_node_heatmap, plot_scaling
from dlperf_core.reporting.tables import variant_label
from dlperf_core.storage import ResultStore

PLOT_GROUP: tuple[str, ...] = ("model", "precision", "batch_size_per_device", "variant")
"""Scaling and framework plots: one per value of these (frameworks side by side)."""

HISTORY_GROUP: tuple[str, ...] = ("framework", "model", "precision", "batch_size_per_device", "variant")
"""History plots: one per value of these (one panel per topology)."""


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`build_report` wrote: the documents by format, and the plots."""

    dag_id: str
    run_id: str
    out_dir: Path
    documents: dict[str, Path]
    plots: tuple[Plot, ...] = field(default=())

    @property
    def main(self) -> Path:
        """The document of the first format asked for."""
        return next(iter(self.documents.values()))


def _write(path: Path, text: str) -> Path:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    return path


def draw_plots(data: ReportData, plot_dir: Path) -> list[Plot]:
    """Every plot of the report, written into ``plot_dir``."""
    plots: list[Plot | None] = [plot_node_heatmap(data.nodes, plot_dir / "nodes.png")]  # None: nothing to draw
    summary = without_sweeps(data.summary)  # a per-node sweep's cases: the heat map, not a plot per node
    if not summary.empty:
        summary = summary.assign(variant=summary["variant"].fillna(""))
        for (model, precision, batch, variant), group in summary.groupby(list(PLOT_GROUP), sort=True):
            label = variant_label(variant, with_args=True)
            name = safe_name(f"{model}_{precision}_b{batch}" + (f"_{label}" if label else ""))
            title = f"{model} {precision} batch {batch}" + (f" ({label})" if label else "")
            plots.append(plot_scaling(group, title, plot_dir / f"scaling_{name}.png"))
            plots.append(plot_framework_comparison(group, title, plot_dir / f"frameworks_{name}.png"))
    history = without_sweeps(data.history)
    if not history.empty:
        regressions = data.regressions
        history = history.assign(variant=history["variant"].fillna(""))
        for key, group in history.groupby(list(HISTORY_GROUP), sort=True):
            framework, model, precision, batch, variant = key
            label = variant_label(variant, with_args=True)
            title = f"{framework} {model} {precision} batch {batch}" + (f" ({label})" if label else "")
            marks = regressions
            if not regressions.empty:
                same = (regressions[list(HISTORY_GROUP)] == pd.Series(dict(zip(HISTORY_GROUP, key)))).all(axis=1)
                marks = regressions[same]
            name = safe_name(f"{framework}_{model}_{precision}_b{batch}" + (f"_{label}" if label else ""))
            plots.append(plot_history(group, marks, title, plot_dir / f"history_{name}.png"))
    return [p for p in plots if p is not None]


def build_report(
    store: ResultStore,
    run: str | None = None,
    *,
    dag_id: str | None = None,
    fmt: str | Sequence[str] = "html",
    out_dir: str | Path,
) -> ReportFiles:
    """Write the report of run ``run`` (of ``dag_id`` if given; the latest run when ``run`` is None)
    into ``out_dir`` in the format(s) ``fmt`` (``md``, ``json``, ``html``). Markdown and HTML come with
    the PNG plots in ``out_dir/plots``; the HTML page embeds them and stands on its own.

    Raises :class:`ReportError` for an unknown format or run, before anything is written."""
    formats = [fmt] if isinstance(fmt, str) else list(fmt)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ReportError(f"unknown report format(s) {unknown or formats}; use one of {', '.join(FORMATS)}")
    data = load_report_data(store, run, dag_id)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    plots = draw_plots(data, out / "plots") if {"md", "html"} & set(formats) else []
    documents: dict[str, Path] = {}
    for name in formats:
        path = out / FORMATS[name]
        if name == "md":
            documents[name] = _write(path, render_markdown(data, plots, out))
        elif name == "json":
            documents[name] = _write(path, render_json(data))
        else:
            documents[name] = _write(path, render_html(data, plots))
    return ReportFiles(data.run.dag_id, data.run.run_id, out, documents, tuple(plots))


def run_page_html(store: ResultStore, run: str, *, dag_id: str | None = None) -> str:
    """The report of one run as it stands now, as one self-contained HTML page (the plots embedded): what
    the results page shows for a DAG run, also while it is still running and before ``make_report`` wrote its
    files. Raises :class:`ReportError` for an unknown run."""
    import tempfile

    data = load_report_data(store, run, dag_id)
    with tempfile.TemporaryDirectory(prefix="dlperf-run-page-") as scratch:
        return render_html(data, draw_plots(data, Path(scratch)))
