"""What a report is made of, read from a :class:`~dlperf_core.storage.ResultStore` (the I/O edge).

The history and regression reads need the store's migration 0002 methods (``history``,
``regressions``); on a store without them the report says there is no history yet rather than failing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import select

from dlperf_core.storage import BenchmarkRun, ResultStore

CONFIG_COLUMNS: tuple[str, ...] = (
    "framework", "model", "precision", "batch_size_per_device", "variant", "nodes", "gpus_per_node",
)
"""Columns that name one configuration (a case without its run)."""


class ReportError(ValueError):
    """A report that cannot be made from what was asked: unknown run, unknown format, empty database."""


@dataclass(frozen=True)
class RunInfo:
    """The benchmark run a report is about (a row of ``benchmark_runs``)."""

    dag_id: str
    run_id: str
    suite: str
    trigger: str
    runtime: str
    status: str
    started_at: datetime | None
    finished_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "suite": self.suite,
            "trigger": self.trigger,
            "runtime": self.runtime,
            "status": self.status,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }


@dataclass(frozen=True)
class ReportData:
    """Everything one run's report shows.

    ``history`` and ``regressions`` are None when the store cannot give them (no migration 0002 yet),
    and empty frames when it can but there is nothing to show."""

    run: RunInfo
    summary: pd.DataFrame
    results: pd.DataFrame
    history: pd.DataFrame | None
    regressions: pd.DataFrame | None
    max_batch: pd.DataFrame | None = None  # the run's max batch size searches (migration 0003)
    fabric: pd.DataFrame | None = None  # the run's all-reduce probes, per topology and size (migration 0007)

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
    table = BenchmarkRun.__table__
    columns = ("dag_id", "run_id", "suite", "trigger", "runtime", "status", "started_at", "finished_at")
    stmt = select(*(table.c[name] for name in columns))
    if dag_id is not None:
        stmt = stmt.where(table.c.dag_id == dag_id)
    if run_id is not None:
        stmt = stmt.where(table.c.run_id == run_id)
    stmt = stmt.order_by(table.c.started_at.desc(), table.c.id.desc())
    with store.engine.connect() as conn:
        rows = conn.execute(stmt.limit(2 if run_id is not None else 1)).mappings().all()
    if not rows:
        where = f"run {run_id!r}" if run_id is not None else "any benchmark run"
        if dag_id is not None:
            where += f" of DAG {dag_id!r}"
        raise ReportError(f"no {where} in the results database; `dlperf results --all` lists what is there")
    if run_id is not None and len(rows) > 1:
        dags = ", ".join(sorted(r["dag_id"] for r in rows))
        raise ReportError(f"run id {run_id!r} exists in several DAGs ({dags}); name one with --dag-id")
    row = rows[0]
    return RunInfo(
        dag_id=row["dag_id"],
        run_id=row["run_id"],
        suite=row["suite"],
        trigger=row["trigger"],
        runtime=row["runtime"],
        status=row["status"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


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
    history = None
    if hasattr(store, "history"):  # the nights up to this run (the last 30 of each configuration)
        before = run.started_at + timedelta(seconds=1) if run.started_at else None
        history = _of_run_configurations(store.history(before=before), summary)
    regressions = None
    if hasattr(store, "regressions"):
        found = store.regressions(run_id=None, open_only=False)
        regressions = _of_run_configurations(found, summary)
    max_batch = store.max_batch_searches(run_id=run.run_id, dag_id=run.dag_id) if hasattr(
        store, "max_batch_searches") else None
    fabric = store.fabric_summary(run_id=run.run_id, dag_id=run.dag_id)
    return ReportData(run, summary, results, history, regressions, max_batch, fabric)
