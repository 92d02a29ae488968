"""The results page: HTML (a Jinja2 template, autoescaped) of what :func:`dlperf_core.reporting.load_overview`
read, with links into Airflow's UI for each run and its tasks.

The links use the Airflow 3 UI's routes (``/dags/{dag_id}/runs/{run_id}`` for a run,
``.../tasks/{task_id}`` for a task and ``.../tasks/{task_id}/mapped`` for the instances of a mapped task) and
the DAG's own task ids from :mod:`dlperf_airflow.task_ids`, in the shape the DAG has here (node routing or
not). Numbers are formatted by :func:`dlperf_core.reporting.tables.format_cell`; the speedup plot is
:func:`dlperf_core.reporting.plots.speedup_png` and the per-node sweep's heat map
:func:`dlperf_core.reporting.plots.node_heatmap_png` (imported on use: matplotlib is not for every process that
loads plugins).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from dlperf_airflow.run_page import report_links, run_href
from dlperf_airflow.task_ids import CASE_RUNS_TASK, PLAN_CASES
from dlperf_core.measure.node_peers import NodePolicy
from dlperf_core.measure.noise import BASELINE_RULE, UNRELIABLE_RULE
from dlperf_core.reporting.data import (
    HISTORY_COLUMNS,
    REGRESSION_COLUMNS,
    JsonRow,
    ResultsOverview,
    Section,
    load_node_scores,
)
from dlperf_core.reporting.tables import baseline_label, column_label, format_cell
from dlperf_core.storage import ResultStore

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE = "results.html"
HEALTH_RULE = (
    "GPU health, read through NVML before the repeat (dlperf_core.cluster.gpu_health): flagged or refused by a "
    "check (a busy GPU, persistence off, ECC errors, a pending remap, a power limit off its default, a narrow or "
    "slow PCIe link)"
)
WRAP_COLUMNS = ("case_key", "run_id", "variant", "reason", "mlperf system")
"""Columns of the page's generic tables whose cells may break anywhere (long keys and names without spaces), so
that the tables fit a 1,280 px wide page."""


def run_url(ui_base: str, dag_id: str, run_id: str) -> str:
    """A DAG run in Airflow's UI (route ``dags/:dagId/runs/:runId``)."""
    return f"{ui_base.rstrip('/')}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def task_url(ui_base: str, dag_id: str, run_id: str, task_id: str, mapped: bool = False) -> str:
    """A task of a DAG run (route ``.../tasks/:taskId``), or with ``mapped`` the list of a mapped task's
    instances (route ``.../tasks/:taskId/mapped``)."""
    url = f"{run_url(ui_base, dag_id, run_id)}/tasks/{quote(task_id, safe='')}"
    return url + "/mapped" if mapped else url


def ui_links(ui_base: str, dag_id: str, run_id: str) -> dict[str, str]:
    """Links into Airflow's UI for a DAG run: the run, its case runs (the mapped task that stores each case, the
    same in both shapes of the DAG) and plan_cases."""
    return {
        "run": run_url(ui_base, dag_id, run_id),
        "case_logs": task_url(ui_base, dag_id, run_id, CASE_RUNS_TASK, mapped=True),
        "plan_logs": task_url(ui_base, dag_id, run_id, PLAN_CASES),
    }


def cell(value: Any, digits: int = 2) -> str:
    """A table cell of the page: numbers with thousands separators, missing values as an en dash."""
    return format_cell(value, digits, missing="–", grouped=True)


def display_columns(rows: list[JsonRow], preferred: tuple[str, ...], limit: int = 10) -> list[str]:
    """The columns a generic table shows: the ``preferred`` ones present, else the first ``limit``."""
    if not rows:
        return []
    present = list(rows[0].keys())
    chosen = [c for c in preferred if c in present]
    return chosen or present[:limit]


def plotted_summary(nightly: Section, any_run: Section) -> Section:
    """The summary the speedup plot draws: the latest nightly one, or before the first night the latest of any
    run (the page says which above the plot)."""
    return nightly if nightly.rows else any_run


def nodes_png(store: ResultStore) -> bytes | None:
    """The page's node x metric heat map of the latest per-node sweep (None when there is none)."""
    from dlperf_core.reporting.plots import node_heatmap_png

    scores, _run = load_node_scores(store)
    return node_heatmap_png(scores)


def speedup_png(summary_rows: list[JsonRow]) -> bytes | None:
    """The page's speedup plot of the latest summary's rows (None when there is no speedup to plot)."""
    from dlperf_core.reporting.plots import speedup_png as plot

    return plot(pd.DataFrame(summary_rows))


@lru_cache(maxsize=1)
def _template() -> Any:
    from jinja2 import Environment, FileSystemLoader

    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True)
    return env.get_template(TEMPLATE)


def render_page(view: ResultsOverview, ui_base: str, db: str) -> str:
    """The results page; links into Airflow's UI are made from ``ui_base`` (the UI's root URL path)."""
    from dlperf_core.reporting.plots import has_speedup

    plotted = plotted_summary(view.summary, view.latest_any)
    return _template().render(
        view=view,
        db=db,
        cell=cell,
        has_plot=has_speedup(pd.DataFrame(plotted.rows)),
        plot_source=plotted.source,
        baseline_rule=BASELINE_RULE,
        baseline_label=baseline_label,
        display_columns=display_columns,
        label=column_label,
        wrap_columns=WRAP_COLUMNS,
        unreliable_rule=UNRELIABLE_RULE,
        node_rule="Rule: " + NodePolicy.from_env().rule(),
        health_rule=HEALTH_RULE,
        history_cols=HISTORY_COLUMNS,
        regression_cols=REGRESSION_COLUMNS,
        links=lambda dag_id, run_id: ui_links(ui_base, dag_id, run_id),
        run_href=run_href,
        report_links=report_links,
    )
