"""What the results page shows, read from the results database: no web framework, no Airflow.

:func:`load_results_view` is the I/O edge (one :class:`ResultStore`, read only: a database without the
dlperf schema reads as empty, it is never migrated from here). Everything else is pure: JSON-ready
records from DataFrames, the speedup plot as PNG bytes, and the HTML page (Jinja2, autoescaped).

The store's ``latest_summary()``, ``history()`` and ``regressions()`` are used where the store has them
(feature-detected); without them the summary is the latest run's and history/regressions read "none yet".
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pandas as pd
from sqlalchemy import inspect, select

from dlperf_core.storage import BenchmarkRun, ResultStore

RUN_COLUMNS = ("dag_id", "run_id", "suite", "trigger", "runtime", "status", "started_at", "finished_at")
SUMMARY_COLUMNS = (
    "dag_id", "run_id", "case_key", "framework", "model", "precision", "batch_size_per_device", "variant",
    "nodes", "gpus_per_node", "total_gpus", "n", "n_failed", "median_throughput", "speedup",
    "scaling_efficiency", "gpu_memory_peak_mb", "mfu", "energy_per_sample_j",
)
HISTORY_COLUMNS = ("night", "case_key", "median_throughput", "n", "n_failed", "speedup", "run_status", "run_id")
REGRESSION_COLUMNS = (
    "night", "case_key", "median_throughput", "baseline_median", "change_pct", "robust_z", "label", "status",
    "run_id",
)
RESULT_COLUMNS = (
    "dag_id", "run_id", "case_key", "repeat", "status", "reason", "throughput", "reported_throughput",
    "started_at",
)


@dataclass(frozen=True)
class Section:
    """One optional part of the page: its rows, where they came from, or why there are none."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""
    note: str = ""


@dataclass(frozen=True)
class ResultsView:
    """Everything the results page and its JSON endpoints show."""

    schema_ready: bool
    summary: Section
    runs: Section
    results: Section
    history: Section
    regressions: Section


def records(frame: pd.DataFrame | None, columns: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """JSON-ready rows of ``frame`` (NaN -> None, timestamps ISO 8601), ``columns`` first if present."""
    if frame is None or not len(frame):
        return []
    if columns:
        keep = [c for c in columns if c in frame.columns]
        frame = frame[keep + [c for c in frame.columns if c not in keep]] if keep else frame
    return json.loads(frame.to_json(orient="records", date_format="iso", date_unit="s"))


def _runs_frame(store: ResultStore, limit: int) -> pd.DataFrame:
    table = BenchmarkRun.__table__
    stmt = select(*(table.c[c] for c in RUN_COLUMNS)).order_by(table.c.started_at.desc(), table.c.id.desc())
    with store.engine.connect() as conn:
        return pd.read_sql(stmt.limit(limit), conn)


def display_columns(rows: list[dict[str, Any]], preferred: tuple[str, ...], limit: int = 10) -> list[str]:
    """The columns a generic table shows: the ``preferred`` ones present, else the first ``limit``."""
    if not rows:
        return []
    present = list(rows[0].keys())
    chosen = [c for c in preferred if c in present]
    return chosen or present[:limit]


def _unreadable(what: str, exc: Exception) -> Section:
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return Section(note=f"could not read {what}: {type(exc).__name__}: {first_line[:300]}")


def optional_section(store: ResultStore, method: str, what: str) -> Section:
    """Rows of ``store.<method>()`` if the store has it; else a "none yet" note."""
    read = getattr(store, method, None)
    if read is None:
        return Section(note=f"none yet: the results store has no {what} (ResultStore.{method}) in this version")
    try:
        rows = records(read())
    except Exception as exc:  # a view not migrated yet, ...: shown, never a broken page
        return _unreadable(what, exc)
    return Section(rows=rows, source=f"ResultStore.{method}()", note="" if rows else "none yet")


def schema_ready(store: ResultStore) -> bool:
    """Whether the database has the dlperf tables (it is never migrated from the results page)."""
    return inspect(store.engine).has_table("benchmark_runs")


NO_SCHEMA = Section(note="no results yet: the results database has no dlperf tables")


def load_summary(store: ResultStore) -> Section:
    """The latest summary per framework and topology: ``ResultStore.latest_summary()`` where the store
    has it, else the ``case_summary`` rows of the latest run."""
    if not schema_ready(store):
        return NO_SCHEMA
    if hasattr(store, "latest_summary"):
        return optional_section(store, "latest_summary", "latest summary")
    try:
        rows = records(store.summary(latest=True), SUMMARY_COLUMNS)
    except Exception as exc:  # e.g. a database one migration behind this code: shown, never a broken page
        return _unreadable("the latest summary", exc)
    return Section(rows=rows, source="case_summary of the latest run", note="" if rows else "no results yet")


def load_runs(store: ResultStore, limit: int = 20) -> Section:
    """The ``limit`` most recently started benchmark runs."""
    if not schema_ready(store):
        return NO_SCHEMA
    try:
        rows = records(_runs_frame(store, limit), RUN_COLUMNS)
    except Exception as exc:
        return _unreadable("the benchmark runs", exc)
    return Section(rows=rows, source="benchmark_runs", note="" if rows else "no runs yet")


def load_results(store: ResultStore, run_id: str | None = None) -> Section:
    """Every repeat of ``run_id`` (default: the latest run)."""
    if not schema_ready(store):
        return NO_SCHEMA
    try:
        run_id = run_id or store.latest_run_id()
        rows = records(store.results(run_id=run_id), RESULT_COLUMNS) if run_id else []
    except Exception as exc:
        return _unreadable("the results", exc)
    return Section(rows=rows, source=f"results of run {run_id}" if run_id else "", note="" if rows else "no results yet")


def load_history(store: ResultStore) -> Section:
    return optional_section(store, "history", "nightly history") if schema_ready(store) else NO_SCHEMA


def load_regressions(store: ResultStore) -> Section:
    return optional_section(store, "regressions", "open regressions") if schema_ready(store) else NO_SCHEMA


def load_results_view(store: ResultStore, run_id: str | None = None, runs_limit: int = 20) -> ResultsView:
    """Everything the page shows: the latest summary, recent runs, the repeats of ``run_id`` (default:
    the latest run), nightly history and open regressions."""
    if not schema_ready(store):
        return ResultsView(False, NO_SCHEMA, NO_SCHEMA, NO_SCHEMA, NO_SCHEMA, NO_SCHEMA)
    return ResultsView(
        schema_ready=True,
        summary=load_summary(store),
        runs=load_runs(store, runs_limit),
        results=load_results(store, run_id),
        history=load_history(store),
        regressions=load_regressions(store),
    )


# ----------------------------------------------------------------------------------------- plot


def has_speedup_plot(summary_rows: list[dict[str, Any]]) -> bool:
    """Whether there is a speedup to plot: a case on more than one device with a speedup."""
    return any(
        r.get("speedup") is not None and (r.get("nodes") or 0) * (r.get("gpus_per_node") or 0) > 1
        for r in summary_rows
    )


def speedup_png(summary_rows: list[dict[str, Any]]) -> bytes | None:
    """Speedup against total devices, one line per framework/model/precision/batch, with the ideal
    (linear) line; None when no case on more than one device has a speedup."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    if not has_speedup_plot(summary_rows):
        return None
    frame = pd.DataFrame(summary_rows)
    needed = {"speedup", "nodes", "gpus_per_node", "framework", "model", "precision", "batch_size_per_device"}
    if frame.empty or not needed <= set(frame.columns) or frame["speedup"].notna().sum() == 0:
        return None
    frame = frame[frame["speedup"].notna()].copy()
    frame["total_gpus"] = (frame["nodes"] * frame["gpus_per_node"]).astype(int)
    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.subplots()
    frame["variant"] = frame["variant"].fillna("") if "variant" in frame else ""
    keys = ["framework", "model", "precision", "batch_size_per_device", "variant"]
    for (framework, model, precision, batch, variant), group in frame.groupby(keys, sort=True):
        group = group.sort_values(["total_gpus", "nodes"])
        labels = [f"{n}n{g}g" for n, g in zip(group["nodes"], group["gpus_per_node"])]
        label = f"{framework} {model} {precision}{variant} b{batch}"
        ax.plot(group["total_gpus"], group["speedup"], marker="o", label=label)
        for x, y, label in zip(group["total_gpus"], group["speedup"], labels):
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    top = int(frame["total_gpus"].max())
    ax.plot([1, top], [1, top], linestyle="--", color="grey", label="ideal (linear)")
    ax.set_xlabel("devices (nodes x devices per node)")
    ax.set_ylabel("speedup vs 1n1g")
    ax.set_xticks(sorted(frame["total_gpus"].unique()))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    return out.getvalue()


# ----------------------------------------------------------------------------------------- page


def ui_links(ui_base: str, dag_id: str, run_id: str) -> dict[str, str]:
    """Links into Airflow's UI for a DAG run: the run, and the mapped run_case task (its logs)."""
    run = f"{ui_base.rstrip('/')}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"
    return {"run": run, "case_logs": f"{run}/tasks/run_case/mapped", "plan_logs": f"{run}/tasks/plan_cases"}


def fmt(value: Any, digits: int = 2) -> str:
    """A table cell: numbers rounded, missing values as an en dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dlperf results</title>
<style>
 body { font-family: system-ui, sans-serif; margin: 1.2rem; color: #1b1b1b; }
 h1 { font-size: 1.4rem; margin: 0 0 .2rem; } h2 { font-size: 1.1rem; margin: 1.4rem 0 .4rem; }
 table { border-collapse: collapse; font-size: .85rem; } td, th { border: 1px solid #ccc; padding: .2rem .5rem; }
 th { background: #f2f4f7; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
 .note { color: #666; font-style: italic; } .failed { color: #b42318; } .success, .ok { color: #067647; }
 .src { color: #888; font-size: .75rem; }
</style></head><body>
<h1>dlperf results</h1>
<div class="src">results database: {{ db }} · <a href="api/summary">JSON</a></div>

<h2>Latest summary per framework and topology</h2>
{% if view.summary.rows %}
<div class="src">{{ view.summary.source }}</div>
<table id="summary"><tr><th>framework</th><th>model</th><th>precision</th><th>variant</th><th>batch/device</th>
<th>topology</th><th>n</th><th>failed</th><th>median samples/s</th><th>speedup</th><th>efficiency</th>
<th>GPU memory (MiB)</th><th>MFU (%)</th><th>J/sample</th><th>DAG run</th></tr>
{% for r in view.summary.rows %}<tr class="summary-row"><td>{{ r.framework }}</td><td>{{ r.model }}</td>
<td>{{ r.precision }}</td><td>{{ r.variant or "" }}</td><td class="num">{{ r.batch_size_per_device }}</td>
<td>{{ r.nodes }}n{{ r.gpus_per_node }}g</td><td class="num">{{ r.n }}</td><td class="num">{{ r.n_failed }}</td>
<td class="num">{{ fmt(r.median_throughput) }}</td><td class="num">{{ fmt(r.speedup) }}</td>
<td class="num">{{ fmt(r.scaling_efficiency, 3) }}</td><td class="num">{{ fmt(r.gpu_memory_peak_mb, 0) }}</td>
<td class="num">{{ fmt(r.mfu * 100 if r.mfu is not none else none, 1) }}</td>
<td class="num">{{ fmt(r.energy_per_sample_j, 3) }}</td>
<td><a target="_top" href="{{ links(r.dag_id, r.run_id).run }}">{{ r.run_id }}</a></td></tr>
{% endfor %}</table>
{% else %}<p class="note">{{ view.summary.note }}</p>{% endif %}

<h2>Speedup</h2>
{% if has_plot %}<img id="speedup-plot" src="api/plots/speedup.png" alt="speedup against devices">
{% else %}<p class="note">no speedup to plot yet (needs a 1n1g case and a larger one)</p>{% endif %}

<h2>Recent benchmark runs</h2>
{% if view.runs.rows %}
<table id="runs"><tr><th>run</th><th>suite</th><th>trigger</th><th>runtime</th><th>status</th><th>started</th>
<th>finished</th><th>logs</th></tr>
{% for r in view.runs.rows %}{% set l = links(r.dag_id, r.run_id) %}<tr><td><a target="_top" href="{{ l.run }}">{{ r.run_id }}</a></td>
<td>{{ r.suite }}</td><td>{{ r.trigger }}</td><td>{{ r.runtime }}</td><td class="{{ r.status }}">{{ r.status }}</td>
<td>{{ r.started_at }}</td><td>{{ r.finished_at or "–" }}</td>
<td><a target="_top" href="{{ l.case_logs }}">case runs</a> · <a target="_top" href="{{ l.plan_logs }}">plan</a></td></tr>
{% endfor %}</table>
{% else %}<p class="note">{{ view.runs.note }}</p>{% endif %}

<h2>Repeats of the latest run</h2>
{% if view.results.rows %}<div class="src">{{ view.results.source }}</div>
<table id="results"><tr><th>case</th><th>repeat</th><th>status</th><th>samples/s</th><th>framework's figure</th><th>reason</th></tr>
{% for r in view.results.rows %}<tr class="result-row"><td>{{ r.case_key }}</td><td class="num">{{ r.repeat }}</td>
<td class="{{ r.status }}">{{ r.status }}</td><td class="num">{{ fmt(r.throughput) }}</td>
<td class="num">{{ fmt(r.reported_throughput) }}</td><td>{{ r.reason or "" }}</td></tr>
{% endfor %}</table>
{% else %}<p class="note">{{ view.results.note }}</p>{% endif %}

{% for title, section, id, preferred in [("Nightly history", view.history, "history", history_cols),
                                          ("Open regressions", view.regressions, "regressions", regression_cols)] %}
<h2>{{ title }}</h2>
{% if section.rows %}{% set cols = display_columns(section.rows, preferred) %}
<table id="{{ id }}"><tr>{% for c in cols %}<th>{{ c }}</th>{% endfor %}</tr>
{% for r in section.rows %}<tr>{% for c in cols %}<td>{{ fmt(r[c]) }}</td>{% endfor %}</tr>{% endfor %}</table>
{% else %}<p class="note" id="{{ id }}-none">{{ section.note or "none yet" }}</p>{% endif %}
{% endfor %}
</body></html>
"""


def render_page(view: ResultsView, ui_base: str, db: str) -> str:
    """The results page; links into Airflow's UI are made from ``ui_base`` (the UI's root URL path)."""
    from jinja2 import Environment

    env = Environment(autoescape=True)
    template = env.from_string(_PAGE)
    has_plot = has_speedup_plot(view.summary.rows)
    return template.render(
        view=view, db=db, fmt=fmt, has_plot=has_plot, display_columns=display_columns,
        history_cols=HISTORY_COLUMNS, regression_cols=REGRESSION_COLUMNS,
        links=lambda dag_id, run_id: ui_links(ui_base, dag_id, run_id),
    )
