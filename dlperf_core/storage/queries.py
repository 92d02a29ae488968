"""The selects that the store's typed reads (:mod:`dlperf_core.storage.reads`) and its DataFrame reads
(:mod:`dlperf_core.storage.frames`) share: one query, two shapes of answer."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Select, select

from dlperf_core.storage.models import (
    CONFIGURATION_COLUMNS,
    BenchmarkRun,
    FabricBenchmark,
    GpuHealthSnapshot,
    MaxBatchSearchResult,
    Result,
    case_summary,
    fabric_history,
    fabric_summary,
    nightly_history,
)
from dlperf_core.storage.sql import of_run, table_of, utc

RESULT_KEY: tuple[str, ...] = ("dag_id", "run_id", "case_key", "repeat")
"""The unique key of a result."""


def runs(run_id: str | None, dag_id: str | None, columns: tuple[str, ...] | None = None) -> Select[Any]:
    """``benchmark_runs`` (its ``columns``, all when None; of ``run_id``/``dag_id`` if given), most recently
    started first."""
    table = table_of(BenchmarkRun)
    stmt = select(table) if columns is None else select(*(table.c[name] for name in columns))
    return of_run(stmt, table.c, run_id, dag_id).order_by(table.c.started_at.desc(), table.c.id.desc())


def results(run_id: str | None, dag_id: str | None) -> Select[Any]:
    """``results`` (of one run if given), by run, case and repeat."""
    table = table_of(Result)
    return of_run(select(table), table.c, run_id, dag_id).order_by(*(table.c[k] for k in RESULT_KEY))


HEALTH_COLUMNS: tuple[str, ...] = (
    "checked_at",
    "policy",
    "verdict",
    "findings",
    "gpus",
    "clock_event_reasons",
    "sm_clock_min_mhz",
    "temperature_max_c",
)
"""The columns of a GPU health snapshot a report shows (its readings and windows stay in the table)."""


def gpu_health(run_id: str | None, dag_id: str | None) -> Select[Any]:
    """Each result's GPU health snapshot (of one run if given), with the result's key, status and throttling, by
    run, case and repeat."""
    r, h = table_of(Result), table_of(GpuHealthSnapshot)
    columns = (r.c.dag_id, r.c.run_id, r.c.case_key, r.c.repeat, r.c.status, r.c.throttled)
    stmt = select(*columns, *(h.c[name] for name in HEALTH_COLUMNS)).join_from(h, r, h.c.result_id == r.c.id)
    return of_run(stmt, r.c, run_id, dag_id).order_by(*(r.c[k] for k in RESULT_KEY))


def summary(run_id: str | None, dag_id: str | None) -> Select[Any]:
    """``case_summary`` (of one run if given), by run and configuration."""
    view = case_summary.c
    return of_run(select(case_summary), view, run_id, dag_id).order_by(
        view.dag_id,
        view.run_id,
        view.framework,
        view.model,
        view.precision,
        view.batch_size_per_device,
        view.total_gpus,
        view.nodes,
        view.case_key,
    )


def history(wanted: Mapping[str, object], before: datetime | None) -> Select[Any]:
    """``nightly_history`` where each column of ``wanted`` has its value (None: any), oldest first per case."""
    view = nightly_history.c
    stmt = select(nightly_history)
    for column, value in wanted.items():
        if value is not None:
            stmt = stmt.where(view[column] == value)
    if before is not None:
        stmt = stmt.where(view.started_at < utc(before))
    order = [view[c] for c in CONFIGURATION_COLUMNS]
    return stmt.order_by(*order, view.case_key, view.started_at, view.run_id)


def searches(run_id: str | None, dag_id: str | None) -> Select[Any]:
    """``max_batch_searches`` (of one run if given), oldest first."""
    table = table_of(MaxBatchSearchResult)
    stmt = of_run(select(*table.columns), table.c, run_id, dag_id)
    return stmt.order_by(table.c.started_at, table.c.id)


def fabric(run_id: str | None, dag_id: str | None) -> Select[Any]:
    """``fabric_probes``, the fabric benchmark repeats (of one run if given), oldest first."""
    table = table_of(FabricBenchmark)
    stmt = of_run(select(table), table.c, run_id, dag_id)
    return stmt.order_by(table.c.started_at, table.c.id)


def fabric_summary_of(run_id: str | None, dag_id: str | None) -> Select[Any]:
    """``fabric_summary`` (of one run if given), by case and message size."""
    view = fabric_summary.c
    return of_run(select(fabric_summary), view, run_id, dag_id).order_by(view.probe_key, view.size_bytes)


def fabric_history_of(nodes: int | None, gpus_per_node: int | None, before: datetime | None) -> Select[Any]:
    """``fabric_history`` of one topology if given, oldest first per case and size."""
    view = fabric_history.c
    stmt = select(fabric_history)
    if nodes is not None:
        stmt = stmt.where(view.nodes == nodes)
    if gpus_per_node is not None:
        stmt = stmt.where(view.gpus_per_node == gpus_per_node)
    if before is not None:
        stmt = stmt.where(view.started_at < utc(before))
    return stmt.order_by(view.probe_key, view.size_bytes, view.started_at, view.run_id)
