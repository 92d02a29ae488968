"""The store's DataFrame reads, for the reporting edge only: reports, printed tables, plots and analyses
(:mod:`dlperf_core.reporting`, ``dlperf results``, ``dlperf compare``). Code that decides something reads the typed
rows of :mod:`dlperf_core.storage.reads` instead; both run the same queries (:mod:`dlperf_core.storage.queries`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import Select, select

from dlperf_core.storage import queries
from dlperf_core.storage.models import (
    CONFIGURATION_COLUMNS,
    MaxBatchSearchResult,
    Regression,
    StoredEnvironment,
    case_summary,
    latest_nightly_summary,
    latest_summary,
    open_regressions,
)
from dlperf_core.storage.reads import StoreReads
from dlperf_core.storage.sql import table_of

TIMESTAMP_COLUMNS = ("started_at", "finished_at", "created_at", "updated_at")
SUMMARY_FLOATS = (
    "median_throughput",
    "mean_throughput",
    "min_throughput",
    "max_throughput",
    "speedup",
    "scaling_efficiency",
    "stdev_throughput",
    "cv",
    "gpu_memory_peak_mb",
)
RUN_COLUMNS = ("dag_id", "run_id", "suite", "trigger", "runtime", "status", "started_at", "finished_at")
"""The columns of :meth:`StoreFrames.runs`."""


def utc_column(values: pd.Series) -> pd.Series:
    """A timestamp column as UTC datetimes (SQLite hands back naive text, PostgreSQL aware values)."""
    return pd.to_datetime(values, utc=True).astype("datetime64[us, UTC]")


class StoreFrames(StoreReads):
    """The DataFrame reads of :class:`~dlperf_core.storage.store.ResultStore` (module docstring)."""

    def _frame(self, stmt: Select[Any]) -> pd.DataFrame:
        """Run a select into a DataFrame."""
        with self.engine.connect() as conn:
            return pd.read_sql(stmt, conn)

    def runs(self, limit: int | None = None) -> pd.DataFrame:
        """The ``limit`` most recently started benchmark runs (all when None), newest first: ``RUN_COLUMNS``
        (typed: :meth:`run_rows`)."""
        stmt = queries.runs(None, None, RUN_COLUMNS)
        return self._frame(stmt if limit is None else stmt.limit(limit))

    def fabric_benchmarks(self, run_id: str | None = None, dag_id: str | None = None) -> pd.DataFrame:
        """Rows of ``fabric_probes``, the fabric benchmark repeats (of one run if given), oldest first (typed:
        :meth:`fabric_rows`)."""
        return self._frame(queries.fabric(run_id, dag_id))

    def fabric_summary(self, run_id: str | None = None, dag_id: str | None = None) -> pd.DataFrame:
        """``fabric_summary``: per run, case and message size, the median bandwidths over the ok repeats (typed:
        :meth:`fabric_summary_rows`)."""
        frame = self._frame(queries.fabric_summary_of(run_id, dag_id))
        for column in ("busbw_gbs", "algbw_gbs", "time_us"):
            frame[column] = frame[column].astype("float64")
        return frame

    def max_batch_searches(self, run_id: str | None = None, dag_id: str | None = None) -> pd.DataFrame:
        """Max batch size searches (of one run if given), oldest first; ``probes`` as lists of dicts (typed:
        :meth:`search_rows`)."""
        with self.engine.connect() as conn:
            rows = conn.execute(queries.searches(run_id, dag_id)).all()
        columns = [c.name for c in table_of(MaxBatchSearchResult).columns]
        return pd.DataFrame([dict(zip(columns, row, strict=True)) for row in rows], columns=columns)

    def summary(self, run_id: str | None = None, dag_id: str | None = None, latest: bool = False) -> pd.DataFrame:
        """Rows of the ``case_summary`` view, filtered by ``run_id``/``dag_id``; with
        ``latest=True`` only the most recent benchmark run (of ``dag_id`` if given) (typed: :meth:`summary_rows`)."""
        if latest:
            if run_id is not None:
                raise ValueError("pass either run_id or latest=True, not both")
            found = self._latest_run(dag_id)
            if found is None:
                return pd.DataFrame(columns=[c.name for c in case_summary.columns])
            dag_id, run_id = found
        frame = self._frame(queries.summary(run_id, dag_id))
        for column in SUMMARY_FLOATS:
            frame[column] = frame[column].astype("float64")
        frame["environment_id"] = frame["environment_id"].astype("Int64")
        return frame

    def results(self, run_id: str | None = None, dag_id: str | None = None) -> pd.DataFrame:
        """Rows of ``results`` (of ``run_id``/``dag_id`` if given), timestamps as UTC (typed: :meth:`result_rows`)."""
        frame = self._frame(queries.results(run_id, dag_id))
        for column in TIMESTAMP_COLUMNS:
            frame[column] = utc_column(frame[column])
        for column in ("throughput", "reported_throughput"):
            frame[column] = frame[column].astype("float64")
        frame["iterations"] = frame["iterations"].astype("Int64")
        frame["environment_id"] = frame["environment_id"].astype("Int64")
        frame["gpu_memory_peak_mb"] = frame["gpu_memory_peak_mb"].astype("float64")
        return frame

    def gpu_health(self, run_id: str | None = None, dag_id: str | None = None) -> pd.DataFrame:
        """Each result's GPU health snapshot with its key, status and throttling (of ``run_id``/``dag_id`` if given;
        typed: :meth:`health_rows`)."""
        frame = self._frame(queries.gpu_health(run_id, dag_id))
        frame["checked_at"] = utc_column(frame["checked_at"])
        return frame

    def environments(self, ids: Iterable[int] | None = None) -> pd.DataFrame:
        """Rows of ``environments`` (those with ``ids`` if given), ordered by id (typed: :meth:`environment_rows`)."""
        table = table_of(StoredEnvironment)
        stmt = select(table).order_by(table.c.id)
        if ids is not None:
            stmt = stmt.where(table.c.id.in_(sorted(set(ids))))
        return self._frame(stmt)

    def latest_summary(self, nightly: bool = False) -> pd.DataFrame:
        """``latest_summary``: per configuration, the summary of the run that measured it last (any run); with
        ``nightly``, ``latest_nightly_summary``: of the latest scheduled run."""
        source = latest_nightly_summary if nightly else latest_summary
        view = source.c
        stmt = select(source).order_by(*(view[c] for c in CONFIGURATION_COLUMNS), view.case_key)
        frame = self._frame(stmt)
        for column in SUMMARY_FLOATS:
            frame[column] = frame[column].astype("float64")
        frame["environment_id"] = frame["environment_id"].astype("Int64")
        frame["started_at"] = utc_column(frame["started_at"])
        return frame

    def history(
        self,
        framework: str | None = None,
        model: str | None = None,
        precision: str | None = None,
        batch: int | None = None,
        nodes: int | None = None,
        gpus_per_node: int | None = None,
        nights: int | None = 30,
        before: datetime | None = None,
        variant: str | None = None,
    ) -> pd.DataFrame:
        """``nightly_history`` of the matching configurations: per configuration its last ``nights``
        scheduled runs (None: all), oldest first; with ``before``, only runs started before it.
        ``variant`` '' selects the configurations without options; None any variant (typed, one configuration:
        :meth:`history_rows`)."""
        wanted: dict[str, object] = {
            "framework": framework,
            "model": model,
            "precision": precision,
            "batch_size_per_device": batch,
            "variant": variant,
            "nodes": nodes,
            "gpus_per_node": gpus_per_node,
        }
        frame = self._frame(queries.history(wanted, before))
        frame["started_at"] = utc_column(frame["started_at"])
        frame["night"] = pd.to_datetime(frame["night"]).dt.date
        for column in ("median_throughput", "speedup", "scaling_efficiency"):
            frame[column] = frame[column].astype("float64")
        frame["environment_id"] = frame["environment_id"].astype("Int64")
        if nights is not None and len(frame):
            keys = [*CONFIGURATION_COLUMNS, "case_key"]
            frame = frame.groupby(keys, sort=False, dropna=False).tail(nights).reset_index(drop=True)
        return frame

    def regressions(self, run_id: str | None = None, open_only: bool = True) -> pd.DataFrame:
        """Stored regression verdicts (of ``run_id`` if given; only open ones by default)."""
        source = open_regressions if open_only else table_of(Regression)
        stmt = select(source)
        if run_id is not None:
            stmt = stmt.where(source.c.run_id == run_id)
        stmt = stmt.order_by(source.c.night, source.c.id)
        frame = self._frame(stmt)
        for column in ("closed_at", "created_at", *(("run_started_at",) if open_only else ())):
            frame[column] = utc_column(frame[column])
        frame["environment_changed"] = frame["environment_changed"].astype(bool)
        return frame
