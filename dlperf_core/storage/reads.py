"""The store's typed reads: frozen rows of :mod:`dlperf_core.storage.rows` (NULL as None, numbers as int/float,
timestamps aware UTC), what the DAG's steps, the pure core and the CLI's commands work with."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from typing import Any, TypeVar

from sqlalchemy import Engine, Select, func, select

from dlperf_core.cluster.environment import (
    INFRASTRUCTURE_COLUMNS,
    SCHEDULER_FIELD,
    SETTINGS_FIELD,
    scheduler_text,
    settings_text,
)
from dlperf_core.storage import queries
from dlperf_core.storage.models import (
    CONFIGURATION_COLUMNS,
    Regression,
    StoredEnvironment,
    StoredMlperfRun,
    StoredMlperfSystem,
    mlperf_scores,
)
from dlperf_core.storage.rows import (
    BenchmarkRunRow,
    CaseHealthRow,
    CaseSummaryRow,
    Configuration,
    EnvironmentRow,
    FabricHistoryRow,
    FabricRow,
    FabricSummaryRow,
    HistoryRow,
    MaxBatchSearchRow,
    MlperfScoreRow,
    RegressionRow,
    ResultRow,
    row_of,
)
from dlperf_core.storage.sql import table_of

R = TypeVar("R")


def configuration_values(configuration: Configuration) -> dict[str, object]:
    """``{column: value}`` of the ``CONFIGURATION_COLUMNS`` of ``configuration``."""
    return {
        "framework": configuration.framework,
        "model": configuration.model,
        "precision": configuration.precision,
        "batch_size_per_device": configuration.batch_size_per_device,
        "variant": configuration.variant,
        "nodes": configuration.nodes,
        "gpus_per_node": configuration.gpus_per_node,
    }


class StoreReads:
    """The typed reads of :class:`~dlperf_core.storage.store.ResultStore` (over its ``engine``)."""

    engine: Engine

    def _rows(self, stmt: Select[Any], cls: type[R]) -> list[R]:
        """Run a select into rows of ``cls`` (:func:`dlperf_core.storage.rows.row_of`)."""
        with self.engine.connect() as conn:
            return [row_of(cls, row._asdict()) for row in conn.execute(stmt)]

    def run_info(self, dag_id: str, run_id: str) -> BenchmarkRunRow | None:
        """The ``benchmark_runs`` row of ``(dag_id, run_id)``, or None."""
        found = self.run_rows(run_id=run_id, dag_id=dag_id, limit=1)
        return found[0] if found else None

    def run_rows(
        self, run_id: str | None = None, dag_id: str | None = None, limit: int | None = None
    ) -> list[BenchmarkRunRow]:
        """The ``benchmark_runs`` rows (of ``run_id``/``dag_id`` if given; at most ``limit``), most recently
        started first."""
        stmt = queries.runs(run_id, dag_id)
        return self._rows(stmt if limit is None else stmt.limit(limit), BenchmarkRunRow)

    def latest_run_id(self, dag_id: str | None = None) -> str | None:
        """run_id of the most recently started benchmark run (of ``dag_id`` if given), or None."""
        latest = self._latest_run(dag_id)
        return None if latest is None else latest[1]

    def _latest_run(self, dag_id: str | None = None) -> tuple[str, str] | None:
        """``(dag_id, run_id)`` of the most recently started run (of ``dag_id`` if given)."""
        found = self.run_rows(dag_id=dag_id, limit=1)
        return (found[0].dag_id, found[0].run_id) if found else None

    def result_rows(self, run_id: str | None = None, dag_id: str | None = None) -> list[ResultRow]:
        """The ``results`` rows (of ``run_id``/``dag_id`` if given), ordered by run, case and repeat."""
        return self._rows(queries.results(run_id, dag_id), ResultRow)

    def health_rows(self, run_id: str | None = None, dag_id: str | None = None) -> list[CaseHealthRow]:
        """Each result's GPU health snapshot (of ``run_id``/``dag_id`` if given), in :meth:`result_rows`' order."""
        return self._rows(queries.gpu_health(run_id, dag_id), CaseHealthRow)

    def summary_rows(self, run_id: str | None = None, dag_id: str | None = None) -> list[CaseSummaryRow]:
        """The ``case_summary`` rows (of ``run_id``/``dag_id`` if given), in :meth:`summary`'s order."""
        return self._rows(queries.summary(run_id, dag_id), CaseSummaryRow)

    def history_rows(
        self, configuration: Configuration, *, any_variant: bool = False, before: datetime | None = None
    ) -> list[HistoryRow]:
        """Every ``nightly_history`` row of ``configuration`` (with ``any_variant``: of its other fields in every
        variant), oldest first per case key; with ``before``, only runs started before it."""
        wanted = configuration_values(configuration)
        if any_variant:
            del wanted["variant"]
        return self._rows(queries.history(wanted, before), HistoryRow)

    def environment_rows(self, ids: Iterable[int] | None = None) -> list[EnvironmentRow]:
        """The ``environments`` rows (those with ``ids`` if given) without their ``data``, ordered by id."""
        table = table_of(StoredEnvironment)
        stmt = select(*(c for c in table.columns if c.name != "data")).order_by(table.c.id)
        if ids is not None:
            stmt = stmt.where(table.c.id.in_(sorted(set(ids))))
        return self._rows(stmt, EnvironmentRow)

    def environment_infrastructure(self, ids: Iterable[int]) -> dict[int, dict[str, object]]:
        """The infrastructure fields (``INFRASTRUCTURE_FIELDS``, what a regression is compared by) of the environments
        ``ids``: their columns, and the cluster's settings and the scheduler read from their ``data`` (not columns)."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        table = table_of(StoredEnvironment)
        with self.engine.connect() as conn:
            data = {
                row[0]: row[1] for row in conn.execute(select(table.c.id, table.c.data).where(table.c.id.in_(wanted)))
            }
        return {
            row.id: {
                **row.fields_of(INFRASTRUCTURE_COLUMNS),
                SETTINGS_FIELD: settings_text(_settings(data[row.id])),
                SCHEDULER_FIELD: scheduler_text(_scheduler(data[row.id])),
            }
            for row in self.environment_rows(wanted)
        }

    def search_rows(self, run_id: str | None = None, dag_id: str | None = None) -> list[MaxBatchSearchRow]:
        """The max batch size searches (of one run if given), oldest first."""
        return self._rows(queries.searches(run_id, dag_id), MaxBatchSearchRow)

    def fabric_rows(self, run_id: str | None = None, dag_id: str | None = None) -> list[FabricRow]:
        """The fabric benchmark repeats, rows of ``fabric_probes`` (of one run if given), oldest first."""
        return self._rows(queries.fabric(run_id, dag_id), FabricRow)

    def fabric_summary_rows(self, run_id: str | None = None, dag_id: str | None = None) -> list[FabricSummaryRow]:
        """The ``fabric_summary`` rows (of one run if given), by case and message size."""
        return self._rows(queries.fabric_summary_of(run_id, dag_id), FabricSummaryRow)

    def fabric_history_rows(
        self, nodes: int | None = None, gpus_per_node: int | None = None, before: datetime | None = None
    ) -> list[FabricHistoryRow]:
        """The ``fabric_history`` rows (scheduled runs) of one topology if given, oldest first per case and
        size; with ``before``, only runs started before it."""
        return self._rows(queries.fabric_history_of(nodes, gpus_per_node, before), FabricHistoryRow)

    def gpu_model(self, environment_id: int) -> str | None:
        """The GPU model environment capture read for ``environment_id`` (None: no GPU, or no such row)."""
        table = table_of(StoredEnvironment)
        with self.engine.connect() as conn:
            model = conn.execute(select(table.c.gpu_model).where(table.c.id == environment_id)).scalar()
        return None if model is None else str(model)

    def open_regression(self, configuration: Configuration) -> RegressionRow | None:
        """The newest open regression of ``configuration``, or None."""
        table = table_of(Regression)
        wanted = configuration_values(configuration)
        stmt = (
            select(table)
            .where(table.c.status == "open", *(table.c[c] == wanted[c] for c in CONFIGURATION_COLUMNS))
            .order_by(table.c.night.desc(), table.c.id.desc())
            .limit(1)
        )
        found = self._rows(stmt, RegressionRow)
        return found[0] if found else None

    def accepted_from(self, configuration: Configuration) -> date | None:
        """The night the baseline of ``configuration`` starts on: the latest ``accepted_from`` of its regressions
        accepted as the new normal (None: none was accepted)."""
        table = table_of(Regression)
        wanted = configuration_values(configuration)
        stmt = select(func.max(table.c.accepted_from)).where(*(table.c[c] == wanted[c] for c in CONFIGURATION_COLUMNS))
        with self.engine.connect() as conn:
            found = conn.execute(stmt).scalar()
        return found if found is None or isinstance(found, date) else date.fromisoformat(str(found))

    def mlperf_throughputs(self, ruleset: str | None = None) -> dict[tuple[str, str, str], list[float]]:
        """The throughputs of the MLPerf runs that have one, by (submitter folder, system folder, benchmark)."""
        systems, runs = table_of(StoredMlperfSystem), table_of(StoredMlperfRun)
        stmt = (
            select(systems.c.submitter_folder, systems.c.system_folder, runs.c.benchmark, runs.c.throughput)
            .join(systems, systems.c.id == runs.c.system_id)
            .where(runs.c.throughput.is_not(None))
        )
        if ruleset is not None:
            stmt = stmt.where(systems.c.ruleset == ruleset)
        found: dict[tuple[str, str, str], list[float]] = {}
        with self.engine.connect() as conn:
            for submitter, system, benchmark, throughput in conn.execute(stmt):
                found.setdefault((submitter, system, benchmark), []).append(float(throughput))
        return found

    def mlperf_score_rows(self, ruleset: str | None = None) -> list[MlperfScoreRow]:
        """The ``mlperf_scores`` rows (of one round if given), by submitter folder, system folder and benchmark."""
        stmt = select(mlperf_scores)
        if ruleset is not None:
            stmt = stmt.where(mlperf_scores.c.ruleset == ruleset)
        order = (mlperf_scores.c.submitter_folder, mlperf_scores.c.system_folder, mlperf_scores.c.benchmark)
        return self._rows(stmt.order_by(*order), MlperfScoreRow)


def _scheduler(data: object) -> dict[str, str] | None:
    """The scheduler's job in a stored environment's ``data`` (None: none, or stored before it was recorded)."""
    found = data.get("scheduler") if isinstance(data, dict) else None
    return found if isinstance(found, dict) else None


def _settings(data: object) -> dict[str, dict[str, str]] | None:
    """The cluster's settings in a stored environment's ``data`` (None: stored before they were recorded)."""
    found = data.get("settings") if isinstance(data, dict) else None
    return found if isinstance(found, dict) else None
