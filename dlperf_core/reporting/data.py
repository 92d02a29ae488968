"""What reports and the results page show, read from a :class:`~dlperf_core.storage.ResultStore` (the I/O
edge of :mod:`dlperf_core.reporting`).

* :func:`load_report_data`: one run's report (:class:`ReportData`, pandas frames);
* :func:`load_overview` and the ``load_*`` sections: what the results page and its JSON endpoints show
  (:class:`Section`: JSON-ready rows, where they came from, or why there are none). A database without the
  dlperf tables reads as empty; it is never migrated from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import inspect

from dlperf_core.json_form import IsoDatetime, JsonForm
from dlperf_core.measure.node_peers import NodePolicy, NodeScores
from dlperf_core.reporting.nodes import is_pinned, node_frame, scores_of
from dlperf_core.storage import CONFIGURATION_COLUMNS, BenchmarkRunRow, ResultStore
from dlperf_core.storage.frames import RUN_COLUMNS

JsonRow = dict[str, Any]
"""One row of a table as JSON (column -> value; NaN as None, times as ISO 8601, dates such as a night as
``YYYY-MM-DD``): what the report JSON, the results page and its JSON endpoints show (a JSON edge: the columns are
the query's)."""

CONFIG_COLUMNS: tuple[str, ...] = CONFIGURATION_COLUMNS
"""Columns that name one configuration (a case without its run)."""


class ReportError(ValueError):
    """A report that cannot be made from what was asked: unknown run, unknown format, empty database."""


@dataclass(frozen=True)
class RunInfo(JsonForm):
    """What the report JSON's ``run`` says of the benchmark run a report is about (:meth:`to_json`; times as
    ``isoformat`` writes them): the ``RUN_COLUMNS`` of its typed row (:meth:`of`; the store reads it,
    :meth:`~dlperf_core.storage.ResultStore.run_rows`)."""

    dag_id: str
    run_id: str
    suite: str
    trigger: str
    runtime: str
    status: str
    started_at: IsoDatetime | None
    finished_at: IsoDatetime | None

    @classmethod
    def of(cls, row: BenchmarkRunRow) -> RunInfo:
        """The report's view of the stored run ``row``."""
        return cls(
            dag_id=row.dag_id,
            run_id=row.run_id,
            suite=row.suite,
            trigger=row.trigger,
            runtime=row.runtime,
            status=row.status,
            started_at=row.started_at,
            finished_at=row.finished_at,
        )


@dataclass(frozen=True)
class ReportData:
    """Everything one run's report shows.

    ``history`` holds the nights up to this run of the run's configurations, ``regressions`` every
    regression of those configurations (open or not); empty frames when there is nothing to show."""

    run: RunInfo
    summary: pd.DataFrame
    results: pd.DataFrame
    history: pd.DataFrame
    regressions: pd.DataFrame
    max_batch: pd.DataFrame  # the run's max batch size searches
    fabric: pd.DataFrame  # the run's fabric benchmarks (all-reduce bus bandwidth), per topology and size
    mlperf: pd.DataFrame = field(default_factory=pd.DataFrame)  # beside the imported MLPerf systems (mlperf_beside)
    gpu_health: pd.DataFrame = field(default_factory=pd.DataFrame)  # each repeat's GPU health snapshot, if checked
    # how the nodes of a per-node sweep are judged (dlperf_core.measure.node_peers; DLPERF_SLOW_NODE_FRACTION)
    node_policy: NodePolicy = field(default_factory=NodePolicy.from_env)

    @property
    def nodes(self) -> NodeScores:
        """The run's per-node sweeps, each node against its peers (with two nodes: its own nights in ``history``)."""
        return scores_of(self.summary, self.history, self.run.run_id, self.node_policy)

    @property
    def failed_repeats(self) -> pd.DataFrame:
        """The run's failed repeats with their reasons."""
        if self.results.empty:
            return self.results
        failed = self.results[self.results["status"] != "ok"]
        return failed[["case_key", "repeat", "reason", "log_path"]].reset_index(drop=True)


def find_run(store: ResultStore, run_id: str | None = None, dag_id: str | None = None) -> RunInfo:
    """The run ``run_id`` (of ``dag_id`` if given), or the most recently started one when ``run_id`` is
    None. Raises :class:`ReportError` when there is no such run or the run id is ambiguous."""
    rows = store.run_rows(run_id=run_id, dag_id=dag_id, limit=2 if run_id is not None else 1)
    if not rows:
        where = f"run {run_id!r}" if run_id is not None else "any benchmark run"
        if dag_id is not None:
            where += f" of DAG {dag_id!r}"
        raise ReportError(f"no {where} in the results database; `dlperf results --all` lists what is there")
    if run_id is not None and len(rows) > 1:
        dags = ", ".join(sorted(r.dag_id for r in rows))
        raise ReportError(f"run id {run_id!r} exists in several DAGs ({dags}); name one with --dag-id")
    return RunInfo.of(rows[0])


def _of_run_configurations(frame: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``frame`` whose configuration appears in ``summary`` (case_key when both have it)."""
    if frame.empty or summary.empty:
        return frame.iloc[0:0]
    if "case_key" in frame.columns:
        return frame[frame["case_key"].isin(set(summary["case_key"]))].reset_index(drop=True)
    keys = [c for c in CONFIG_COLUMNS if c in frame.columns]
    wanted = summary[keys].drop_duplicates()
    return frame.merge(wanted, on=keys, how="inner")


def load_report_data(store: ResultStore, run_id: str | None = None, dag_id: str | None = None) -> ReportData:
    """Read one run's report data (the latest run when ``run_id`` is None)."""
    run = find_run(store, run_id, dag_id)
    summary = store.summary(run_id=run.run_id, dag_id=run.dag_id)
    results = store.results(run_id=run.run_id, dag_id=run.dag_id)
    before = run.started_at + timedelta(seconds=1) if run.started_at else None  # the nights up to this run
    history = _of_run_configurations(store.history(before=before), summary)
    regressions = _of_run_configurations(store.regressions(run_id=None, open_only=False), summary)
    max_batch = store.max_batch_searches(run_id=run.run_id, dag_id=run.dag_id)
    fabric = store.fabric_summary(run_id=run.run_id, dag_id=run.dag_id)
    health = store.gpu_health(run_id=run.run_id, dag_id=run.dag_id)
    return ReportData(
        run, summary, results, history, regressions, max_batch, fabric, mlperf_beside(store, summary), health
    )


def mlperf_beside(store: ResultStore, summary: pd.DataFrame) -> pd.DataFrame:
    """The run's configurations of an MLPerf model beside the imported MLPerf systems of the same accelerator and
    nearest count (``dlperf_core.importers.mlperf_comparison``): one row per system, or one row with the note saying there
    is none. Empty when the run has no such configuration or no MLPerf result was imported."""
    from dlperf_core.importers.mlperf_comparison import MLPERF_BENCHMARKS, beside_the_record, field_systems

    if summary.empty or not inspect(store.engine).has_table("mlperf_systems"):
        return pd.DataFrame()
    ours = summary[summary["model"].isin(list(MLPERF_BENCHMARKS)) & (summary["median_throughput"] > 0)]
    systems = field_systems(store) if not ours.empty else []
    if not systems:
        return pd.DataFrame()
    rows: list[dict[str, Any]] = []
    gpus: dict[int, str | None] = {}  # environment id -> its GPU model, read once
    for row in ours.itertuples(index=False):
        environment = getattr(row, "environment_id", None)
        gpu = None
        if environment is not None and not pd.isna(environment):
            if int(environment) not in gpus:
                gpus[int(environment)] = store.gpu_model(int(environment))
            gpu = gpus[int(environment)]
        beside = beside_the_record(
            accelerator_name=gpu,
            accelerators=int(row.total_gpus) if gpu else 0,  # no GPU seen: a CPU node, compared per node
            nodes=int(row.nodes),
            throughput=float(row.median_throughput),
            systems=systems,
            benchmark=MLPERF_BENCHMARKS[str(row.model)],
        )
        ours_cells = {
            "case_key": row.case_key,
            "accelerator": str(beside.accelerator) if beside.accelerator else "CPU only",
            "unit": beside.unit,
            "count": beside.count,
            "samples/s per unit": beside.per_unit,
        }
        if not beside.neighbours:
            rows.append({**ours_cells, "mlperf system": beside.note or "", "its count": None})
        for n in beside.neighbours:
            size = n.system.accelerators if beside.unit == "accelerator" else n.system.nodes
            rows.append(
                {
                    **ours_cells,
                    "mlperf system": f"{n.system.submitter} {n.system.system_folder}",
                    "its count": size,
                    "its samples/s per unit": n.per_unit,
                    "its score (minutes)": n.system.score_minutes,
                }
            )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- the results page's data

SUMMARY_COLUMNS = (
    "dag_id",
    "run_id",
    "case_key",
    *CONFIG_COLUMNS,
    "total_gpus",
    "n",
    "n_failed",
    "median_throughput",
    "speedup",
    "scaling_efficiency",
    "cv",
    "unreliable",
    "unreliable_reason",
    "single_repeat",
    "oversubscribed",
    "throttled",
    "baseline_of",
    "baseline_night",
    "baseline_dag_id",
    "baseline_run_id",
    "gpu_memory_peak_mb",
    "mfu",
    "energy_per_sample_j",
)
HISTORY_COLUMNS = (
    "night",
    "case_key",
    "median_throughput",
    "n",
    "n_failed",
    "speedup",
    "unreliable_reason",
    "run_status",
    "run_id",
)
REGRESSION_COLUMNS = (
    "night",
    "case_key",
    "median_throughput",
    "baseline_median",
    "change_pct",
    "robust_z",
    "label",
    "status",
    "run_id",
)
RESULT_COLUMNS = (
    "dag_id",
    "run_id",
    "case_key",
    "repeat",
    "status",
    "reason",
    "throughput",
    "reported_throughput",
    "figure_origin",
    "started_at",
)


def _is_date(value: object) -> bool:
    return isinstance(value, date) and not isinstance(value, datetime)


def dates_as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its date columns (a night: ``datetime.date`` values) as ``YYYY-MM-DD`` text, which pandas'
    JSON would write as a midnight timestamp (``2026-11-28T00:00:00``)."""
    dates = [
        c
        for c in frame.columns
        if frame[c].dtype == object and frame[c].notna().any() and all(map(_is_date, frame[c].dropna()))
    ]
    if not dates:
        return frame
    return frame.assign(**{c: [v.isoformat() if _is_date(v) else v for v in frame[c]] for c in dates})


def records(frame: pd.DataFrame | None, columns: tuple[str, ...] | None = None, date_unit: str = "ms") -> list[JsonRow]:
    """JSON-ready rows of ``frame`` (NaN -> None, timestamps ISO 8601 to ``date_unit``, dates ``YYYY-MM-DD``),
    ``columns`` first where present."""
    if frame is None or not len(frame):
        return []
    if columns:
        keep = [c for c in columns if c in frame.columns]
        frame = frame[keep + [c for c in frame.columns if c not in keep]] if keep else frame
    frame = dates_as_text(frame)
    rows: list[JsonRow] = json.loads(frame.to_json(orient="records", date_format="iso", date_unit=date_unit))
    return rows


def _rows(frame: pd.DataFrame, columns: tuple[str, ...] | None = None) -> list[JsonRow]:
    return records(frame, columns, date_unit="s")


@dataclass(frozen=True)
class Section:
    """One part of the results page: its rows, where they came from (in words: the page shows it), or why there are
    none."""

    rows: list[JsonRow] = field(default_factory=list)
    source: str = ""
    note: str = ""


@dataclass(frozen=True)
class ResultsOverview:
    """Everything the results page and its JSON endpoints show."""

    schema_ready: bool
    summary: Section  # the latest nightly summary (load_summary)
    runs: Section
    results: Section
    history: Section
    regressions: Section
    mlperf: Section = field(default_factory=Section)  # the latest summary beside the imported MLPerf systems
    latest_any: Section = field(default_factory=Section)  # the latest summary of any run (load_summary(nightly=False))
    nodes: Section = field(default_factory=Section)  # the latest per-node sweep, node by node (load_nodes)


NO_SCHEMA = Section(note="no results yet: the results database has no dlperf tables")


def schema_ready(store: ResultStore) -> bool:
    """Whether the database has the dlperf tables (it is never migrated from the results page)."""
    return inspect(store.engine).has_table("benchmark_runs")


def _unreadable(what: str, exc: Exception) -> Section:
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return Section(note=f"could not read {what}: {type(exc).__name__}: {first_line[:300]}")


def _section(read: Any, what: str, source: str, empty: str, columns: tuple[str, ...] | None = None) -> Section:
    """The rows of ``read()``; a database that cannot give them (e.g. one migration behind this code) reads
    as a note naming the error, never as a broken page."""
    try:
        rows = _rows(read(), columns)
    except Exception as exc:  # noqa: BLE001 - shown on the page instead
        return _unreadable(what, exc)
    return Section(rows=rows, source=source, note="" if rows else empty)


NIGHTLY_SOURCE = "latest nightly: each configuration as its latest scheduled run measured it"
ANY_SOURCE = "latest of any run: each configuration as its latest run measured it, nightly or on demand"
NO_NIGHTLY = (
    "no nightly run yet: the DAG's schedule (02:00 UTC) makes one, unpausing it starts the latest interval at once; "
    "until then the latest of any run is below"
)


def load_summary(store: ResultStore, nightly: bool = True) -> Section:
    """The latest summary per configuration: of the latest nightly (scheduled) run (``nightly``, what the page
    shows first: a one-repeat run on demand never replaces it), else of the latest run of any kind."""
    if not schema_ready(store):
        return NO_SCHEMA
    if nightly:
        return _section(
            lambda: store.latest_summary(nightly=True),
            "the latest nightly summary",
            NIGHTLY_SOURCE,
            NO_NIGHTLY,
            SUMMARY_COLUMNS,
        )
    return _section(store.latest_summary, "the latest summary of any run", ANY_SOURCE, "none yet", SUMMARY_COLUMNS)


def load_runs(store: ResultStore, limit: int = 20) -> Section:
    """The ``limit`` most recently started benchmark runs."""
    if not schema_ready(store):
        return NO_SCHEMA
    return _section(
        lambda: store.runs(limit),
        "the benchmark runs",
        "benchmark runs, newest first",
        "no runs yet",
        RUN_COLUMNS,
    )


HEALTH_KEY = ["dag_id", "run_id", "case_key", "repeat"]


def with_gpu_health(results: pd.DataFrame, health: pd.DataFrame) -> pd.DataFrame:
    """``results`` with each repeat's GPU health (``gpu_health``: the verdict, ``gpu_health_findings``: the
    findings; None where it was not checked)."""
    if health.empty:
        return results.assign(gpu_health=None, gpu_health_findings=None)
    mine = health[[*HEALTH_KEY, "verdict", "findings"]].rename(
        columns={"verdict": "gpu_health", "findings": "gpu_health_findings"}
    )
    return results.merge(mine, on=HEALTH_KEY, how="left")


def load_results(store: ResultStore, run_id: str | None = None) -> Section:
    """Every repeat of ``run_id`` (default: the latest run), with its GPU health."""
    if not schema_ready(store):
        return NO_SCHEMA
    try:
        run_id = run_id or store.latest_run_id()
        frame = with_gpu_health(store.results(run_id=run_id), store.gpu_health(run_id=run_id)) if run_id else None
        rows = _rows(frame, RESULT_COLUMNS) if frame is not None else []
    except Exception as exc:  # noqa: BLE001 - shown on the page instead
        return _unreadable("the results", exc)
    return Section(
        rows=rows, source=f"results of run {run_id}" if run_id else "", note="" if rows else "no results yet"
    )


def load_history(store: ResultStore) -> Section:
    """Nightly history (``ResultStore.history()``)."""
    if not schema_ready(store):
        return NO_SCHEMA
    return _section(store.history, "nightly history", "the last 30 nights of each configuration", "none yet")


def load_regressions(store: ResultStore) -> Section:
    """Open regressions (``ResultStore.regressions()``)."""
    if not schema_ready(store):
        return NO_SCHEMA
    return _section(store.regressions, "open regressions", "regressions still open", "none yet")


NO_MLPERF = (
    "no MLPerf result to compare with: import a round with `dlperf import <training_results folder>` "
    "(the latest summary's ResNet-50 configurations are then shown beside its systems)"
)


def load_mlperf(store: ResultStore) -> Section:
    """The latest summary's ResNet-50 configurations beside the imported MLPerf systems (``mlperf_beside``)."""
    if not schema_ready(store):
        return NO_SCHEMA
    return _section(
        lambda: mlperf_beside(store, store.latest_summary()),
        "the MLPerf comparison",
        "the latest summary beside the imported MLPerf systems",
        NO_MLPERF,
    )


NO_SWEEP = (
    "no per-node sweep yet: a suite benchmark with per_node: true runs its 1-node topologies on every node of the "
    "inventory, one case each, and each node's figure is scored against its peers here"
)


def load_node_scores(store: ResultStore, policy: NodePolicy | None = None) -> tuple[NodeScores, RunInfo | None]:
    """The per-node sweeps of the latest run that had one (of the latest nightly summary, else of the latest of any
    run), each node scored against its peers or its own nights (:func:`dlperf_core.reporting.nodes.scores_of`), and
    that run; empty scores and None when no run had a per-node sweep."""
    policy = policy or NodePolicy.from_env()
    empty = NodeScores(slower_than=policy.slower_than, rule=policy.rule())
    if not schema_ready(store):
        return empty, None
    for nightly in (True, False):
        latest = store.latest_summary(nightly=nightly)
        pinned = latest[is_pinned(latest)] if not latest.empty else latest
        if len(pinned):
            break
    else:
        return empty, None
    newest = pinned.sort_values("started_at").iloc[-1]
    run = find_run(store, str(newest["run_id"]), str(newest["dag_id"]))
    summary = store.summary(run_id=run.run_id, dag_id=run.dag_id)
    before = run.started_at + timedelta(seconds=1) if run.started_at else None
    history = _of_run_configurations(store.history(before=before), summary[is_pinned(summary)])
    return scores_of(summary, history, run.run_id, policy), run


def node_rows(scores: NodeScores) -> list[JsonRow]:
    """The rows of the results page's node table: :func:`dlperf_core.reporting.nodes.node_frame`'s, with each
    node's ``finding`` (:meth:`~dlperf_core.measure.node_peers.NodeScore.describe`)."""
    frame = node_frame(scores).assign(finding=[s.describe() for s in scores.scores])
    return _rows(frame)


def load_nodes(store: ResultStore) -> Section:
    """The latest per-node sweep, node by node (:func:`load_node_scores`), for the results page."""
    if not schema_ready(store):
        return NO_SCHEMA
    try:
        scores, run = load_node_scores(store)
    except Exception as exc:  # noqa: BLE001 - shown on the page instead
        return _unreadable("the per-node sweeps", exc)
    if run is None:
        return Section(note=NO_SWEEP)
    return Section(rows=node_rows(scores), source=f"per-node sweeps of run {run.run_id} ({run.trigger})")


def load_overview(store: ResultStore, run_id: str | None = None, runs_limit: int = 20) -> ResultsOverview:
    """Everything the results page shows: the latest nightly summary and the latest of any run, recent runs, the repeats of ``run_id``
    (default: the latest run), nightly history, open regressions, the MLPerf comparison and the latest per-node sweep."""
    if not schema_ready(store):
        return ResultsOverview(
            False, NO_SCHEMA, NO_SCHEMA, NO_SCHEMA, NO_SCHEMA, NO_SCHEMA, NO_SCHEMA, NO_SCHEMA, nodes=NO_SCHEMA
        )
    return ResultsOverview(
        schema_ready=True,
        summary=load_summary(store),
        latest_any=load_summary(store, nightly=False),
        runs=load_runs(store, runs_limit),
        results=load_results(store, run_id),
        history=load_history(store),
        regressions=load_regressions(store),
        mlperf=load_mlperf(store),
        nodes=load_nodes(store),
    )
