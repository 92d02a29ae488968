"""ResultStore: idempotent writes of benchmark runs and results; typed reads, and DataFrame reads for reports.

Writes are ``INSERT .. ON CONFLICT DO UPDATE`` (PostgreSQL and SQLite dialects), all values bound,
each in its own transaction, retried on ``OperationalError`` (3 tries, exponential backoff).

Reads come in two shapes over the same queries. The typed ones (``run_info``, ``open_regression`` and the
``*_rows`` methods) answer with the frozen rows of :mod:`dlperf_core.storage.rows` (NULL as None, numbers as
int/float, timestamps aware UTC): what the DAG's steps, the pure core and the CLI's commands work with. The
DataFrame ones (``summary``, ``results``, ``history``, ``regressions``, ...) are for the reporting edge only:
reports, printed tables, plots and analyses (:mod:`dlperf_core.reporting`, ``dlperf results``, ``dlperf compare``).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import pandas as pd
from sqlalchemy import Connection, Engine, Select, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import OperationalError

from dlperf_core.home import state_dir
from dlperf_core.storage import migrate
from dlperf_core.storage.engine import make_engine, write_transaction
from dlperf_core.storage.models import (
    CONFIGURATION_COLUMNS,
    REGRESSION_LABELS,
    RUN_STATUSES,
    BenchmarkRun,
    FabricProbe,
    FabricProbeSize,
    MaxBatchSearchResult,
    Regression,
    Result,
    StoredEnvironment,
    StoredMlperfRun,
    StoredMlperfScore,
    StoredMlperfSystem,
    case_summary,
    fabric_history,
    fabric_summary,
    latest_nightly_summary,
    latest_summary,
    mlperf_scores,
    nightly_history,
    open_regressions,
)
from dlperf_core.storage.records import (
    BenchmarkRunRecord,
    MaxBatchSearchRecord,
    ProbeRecord,
    ResultRecord,
)
from dlperf_core.storage.rows import (
    BenchmarkRunRow,
    CaseSummaryRow,
    Configuration,
    EnvironmentRow,
    FabricHistoryRow,
    FabricSummaryRow,
    HistoryRow,
    MaxBatchSearchRow,
    MlperfScoreRow,
    ProbeRow,
    RegressionRow,
    ResultRow,
    row_of,
)

if TYPE_CHECKING:
    from dlperf_core.environment import Environment
    from dlperf_core.mlperf import MlperfSystem, SubmittedRun
    from dlperf_core.regression import Verdict

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")

RETRIES = 3
"""Tries of a write before an OperationalError is re-raised."""
RETRY_BACKOFF_S = 0.25
"""Sleep before the second try; doubled before each further one."""

_RUN_KEY = ("dag_id", "run_id")
_RESULT_KEY = ("dag_id", "run_id", "case_key", "repeat")
_TIMESTAMP_COLUMNS = ("started_at", "finished_at", "created_at", "updated_at")
_SUMMARY_FLOATS = (
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


def default_db_url() -> str:
    """``$DLPERF_DB_URL``, else a SQLite file ``$DLPERF_HOME/.dlperf/dlperf.db`` (folder created; see
    :mod:`dlperf_core.home`), the same whatever the current directory."""
    url = os.environ.get("DLPERF_DB_URL")
    if url:
        return url
    return f"sqlite:///{state_dir(create=True) / 'dlperf.db'}"


def _retry(fn: Callable[P, T]) -> Callable[P, T]:
    """Retry ``fn`` on OperationalError (lost connection, locked database): RETRIES tries."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        for attempt in range(1, RETRIES + 1):
            try:
                return fn(*args, **kwargs)
            except OperationalError:
                if attempt == RETRIES:
                    raise
                time.sleep(RETRY_BACKOFF_S * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    return wrapper


def _utc(value: datetime | None) -> datetime | None:
    """``value`` in UTC (naive values are taken as UTC already)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _now() -> datetime:
    """The current time, aware, UTC."""
    return datetime.now(UTC)


def _of_run(stmt: Select[Any], columns: Any, run_id: str | None, dag_id: str | None) -> Select[Any]:
    """``stmt`` kept to the rows of ``run_id`` and of ``dag_id``, each when given (``columns``: the ``.c`` of
    the table or view read, which has both)."""
    if run_id is not None:
        stmt = stmt.where(columns.run_id == run_id)
    if dag_id is not None:
        stmt = stmt.where(columns.dag_id == dag_id)
    return stmt


def _insert(conn: Connection, table: Any) -> Any:
    """The dialect INSERT (with ON CONFLICT support) for ``table`` on ``conn``."""
    name = conn.dialect.name
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"dlperf storage supports postgresql and sqlite, not {name}")


def _run_values(run: BenchmarkRunRecord) -> dict[str, object]:
    """Column values of a run record."""
    values = asdict(run)
    values["started_at"] = _utc(run.started_at)
    values["finished_at"] = _utc(run.finished_at)
    return values


class ResultStore:
    """The dlperf results database at ``url`` (PostgreSQL or SQLite; default
    :func:`default_db_url`). Call :meth:`ensure_schema` before the first use of a database."""

    def __init__(self, url: str | None = None) -> None:
        self.url: str = url if url is not None else default_db_url()
        self.engine: Engine = make_engine(self.url)

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.dispose()

    def __repr__(self) -> str:
        return f"ResultStore({self.engine.url!r})"

    def dispose(self) -> None:
        """Close the pooled connections."""
        self.engine.dispose()

    @_retry
    def ensure_schema(self) -> None:
        """Upgrade the schema to the head migration; idempotent and serialised by a lock."""
        if self.engine.dialect.name != "postgresql":
            migrate.upgrade(self.engine)
            return
        before = migrate.current_revision(self.engine)
        migrate.upgrade(self.engine)
        if before != migrate.current_revision(self.engine):
            self.engine.dispose()  # new sessions pick up what a migration set for the database (jit = off)

    # ------------------------------------------------------------------ writes

    @_retry
    def upsert_run(self, run: BenchmarkRunRecord) -> int:
        """Insert or update (all fields) the run ``(dag_id, run_id)``; return its id."""
        values = _run_values(run)
        with write_transaction(self.engine) as conn:
            stmt = _insert(conn, BenchmarkRun).values(**values)
            keep = set(_RUN_KEY) | ({"report_path"} if run.report_path is None else set())
            stmt = stmt.on_conflict_do_update(
                index_elements=list(_RUN_KEY),
                set_={k: stmt.excluded[k] for k in values if k not in keep},
            )
            conn.execute(stmt)
            return self._run_pk(conn, run.dag_id, run.run_id)

    @_retry
    def finish_run(self, dag_id: str, run_id: str, status: str, finished_at: datetime | None = None) -> bool:
        """Set a run's final ``status`` and ``finished_at`` (default now). False if no such run."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {RUN_STATUSES}, got {status!r}")
        stmt = (
            update(BenchmarkRun)
            .where(BenchmarkRun.dag_id == dag_id, BenchmarkRun.run_id == run_id)
            .values(status=status, finished_at=_utc(finished_at or _now()))
        )
        with write_transaction(self.engine) as conn:
            return conn.execute(stmt).rowcount > 0

    @_retry
    def set_report_path(self, dag_id: str, run_id: str, path: str | None) -> bool:
        """Record where the run's report was written. False if no such run."""
        stmt = (
            update(BenchmarkRun)
            .where(BenchmarkRun.dag_id == dag_id, BenchmarkRun.run_id == run_id)
            .values(report_path=path)
        )
        with write_transaction(self.engine) as conn:
            return conn.execute(stmt).rowcount > 0

    @_retry
    def upsert_environment(self, environment: Environment, captured_at: datetime | None = None) -> int:
        """Store ``environment`` once (unique content hash) and return its id; an environment that is
        already stored keeps its row (and its first ``captured_at``)."""
        data = environment.to_json()
        values = {
            "content_hash": environment.content_hash,
            "captured_at": _utc(captured_at or _now()),
            "framework": environment.framework,
            "framework_version": environment.framework_version,
            "image": environment.image,
            "image_digest": environment.image_digest,
            "hostnames": ",".join(environment.hostnames) or None,
            "gpu_model": environment.gpu_model,
            "gpu_count": environment.gpu_count,
            "driver_version": environment.driver_version,
            "cuda_version": environment.cuda_version,
            "cudnn_version": environment.cudnn_version,
            "nccl_version": environment.nccl_version,
            "power_limit_w": environment.power_limit_w,
            "sm_clock_max_mhz": environment.sm_clock_max_mhz,
            "cpu_model": environment.cpu_model,
            "cpu_count": environment.cpu_count,
            "memory_total_mb": environment.memory_total_mb,
            "missing": "; ".join(environment.missing) or None,
            "data": data,
        }
        with write_transaction(self.engine) as conn:
            stmt = _insert(conn, StoredEnvironment).values(**values)
            conn.execute(stmt.on_conflict_do_nothing(index_elements=["content_hash"]))
            key = select(StoredEnvironment.id).where(StoredEnvironment.content_hash == values["content_hash"])
            return int(conn.execute(key).scalar_one())

    @_retry
    def upsert_mlperf_system(
        self, system: MlperfSystem, ruleset: str, environment_id: int | None, imported_at: datetime | None = None
    ) -> int:
        """Store (or update) an MLPerf system description of round ``ruleset``; return its id."""
        values = {
            "ruleset": ruleset,
            "submitter": system.submitter,
            "submitter_folder": system.submitter_folder,
            "system_folder": system.system_folder,
            "system_name": system.system_name,
            "division": system.division,
            "nodes": system.nodes,
            "accelerators_per_node": system.accelerators_per_node,
            "accelerators": system.accelerators,
            "accelerator_model": system.accelerator_model,
            "accelerator_memory": system.accelerator_memory,
            "host_processor_model": system.host_processor_model,
            "host_processors_per_node": system.host_processors_per_node,
            "framework": system.framework,
            "interconnect": system.interconnect,
            "environment_id": environment_id,
            "description": dict(system.description),
            "imported_at": _utc(imported_at or _now()),
        }
        keys = ["ruleset", "submitter_folder", "system_folder"]
        with write_transaction(self.engine) as conn:
            stmt = _insert(conn, StoredMlperfSystem).values(**values)
            update = {k: v for k, v in values.items() if k not in keys}
            conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=update))
            table = StoredMlperfSystem.__table__
            key = select(table.c.id).where(*(table.c[k] == values[k] for k in keys))
            return int(conn.execute(key).scalar_one())

    @_retry
    def upsert_mlperf_run(self, system_id: int, submitted: SubmittedRun) -> None:
        """Store (or update) one MLPerf run of a stored system: dlperf's reading and the compliance verdict."""
        run = submitted.run
        values = {
            "system_id": system_id,
            "benchmark": submitted.folder.benchmark,
            "result_file": submitted.result.name,
            "status": run.status,
            "reason": run.reason,
            "time_to_train_s": run.time_to_train_s,
            "converged": run.converged,
            "throughput": run.throughput,
            "reported_throughput": run.reported_throughput,
            "span_kind": run.span_kind,
            "spans_measured": len(run.measured),
            "global_batch_size": run.global_batch_size,
            "compliant": submitted.compliance.valid,
            "compliance_message": submitted.compliance.message,
            "hyperparameters": dict(run.hyperparameters),
        }
        keys = ["system_id", "benchmark", "result_file"]
        with write_transaction(self.engine) as conn:
            stmt = _insert(conn, StoredMlperfRun).values(**values)
            update = {k: v for k, v in values.items() if k not in keys}
            conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=update))

    @_retry
    def upsert_mlperf_score(self, system_id: int, benchmark: str, score_minutes: float | None) -> None:
        """Store (or update) a system's official score for ``benchmark`` (None: too many runs did not converge)."""
        values = {"system_id": system_id, "benchmark": benchmark, "score_minutes": score_minutes}
        with write_transaction(self.engine) as conn:
            stmt = _insert(conn, StoredMlperfScore).values(**values)
            keys = ["system_id", "benchmark"]
            conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_={"score_minutes": score_minutes}))

    def mlperf_throughputs(self, ruleset: str | None = None) -> dict[tuple[str, str, str], list[float]]:
        """The throughputs of the MLPerf runs that have one, by (submitter folder, system folder, benchmark)."""
        systems, runs = StoredMlperfSystem.__table__, StoredMlperfRun.__table__
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

    @_retry
    def upsert_result(self, result: ResultRecord) -> int:
        """Insert or update the result ``(dag_id, run_id, case_key, repeat)``; return its id.

        The benchmark run row is found, or created (from ``result.benchmark_run`` or as a
        placeholder) without touching an existing one.
        """
        with write_transaction(self.engine) as conn:
            return self._upsert_result(conn, result)

    @_retry
    def upsert_results(self, results: Iterable[ResultRecord]) -> list[int]:
        """:meth:`upsert_result` for many results in one transaction; return their ids."""
        with write_transaction(self.engine) as conn:
            return [self._upsert_result(conn, result) for result in results]

    def _upsert_result(self, conn: Connection, result: ResultRecord) -> int:
        """Upsert one result on ``conn`` (see :meth:`upsert_result`)."""
        values = asdict(result)
        del values["benchmark_run"]
        values["started_at"] = _utc(result.started_at)
        values["finished_at"] = _utc(result.finished_at)
        values["benchmark_run_id"] = self._ensure_run(
            conn, result.dag_id, result.run_id, result.started_at, result.benchmark_run
        )
        stmt = _insert(conn, Result).values(**values)
        set_: dict[str, object] = {k: stmt.excluded[k] for k in values if k not in _RESULT_KEY}
        set_["updated_at"] = _now()
        conn.execute(stmt.on_conflict_do_update(index_elements=list(_RESULT_KEY), set_=set_))
        key = select(Result.id).where(*(getattr(Result, k) == values[k] for k in _RESULT_KEY))
        return int(conn.execute(key).scalar_one())

    def _ensure_run(
        self, conn: Connection, dag_id: str, run_id: str, started_at: datetime, run: BenchmarkRunRecord | None = None
    ) -> int:
        """The id of the benchmark run ``(dag_id, run_id)``, creating the row (from ``run``, or as a
        placeholder) if it is missing, without touching an existing one."""
        run = run or BenchmarkRunRecord(
            dag_id=dag_id, run_id=run_id, suite="unknown", trigger="unknown", runtime="unknown", started_at=started_at
        )
        stmt = _insert(conn, BenchmarkRun).values(**_run_values(run))
        conn.execute(stmt.on_conflict_do_nothing(index_elements=list(_RUN_KEY)))
        return self._run_pk(conn, dag_id, run_id)

    @staticmethod
    def _run_pk(conn: Connection, dag_id: str, run_id: str) -> int:
        """The id of the run ``(dag_id, run_id)``, which must exist."""
        stmt = select(BenchmarkRun.id).where(BenchmarkRun.dag_id == dag_id, BenchmarkRun.run_id == run_id)
        return int(conn.execute(stmt).scalar_one())

    @_retry
    def upsert_max_batch_search(self, record: MaxBatchSearchRecord) -> int:
        """Insert or update the search ``(dag_id, run_id, search_key)`` (the run row is created if missing)."""
        values = asdict(record)
        values["probes"] = [probe.to_json() for probe in record.probes]  # the JSON column
        values["started_at"] = _utc(record.started_at)
        values["finished_at"] = _utc(record.finished_at)
        with write_transaction(self.engine) as conn:
            values["benchmark_run_id"] = self._ensure_run(conn, record.dag_id, record.run_id, record.started_at)
            stmt = _insert(conn, MaxBatchSearchResult).values(**values)
            key = ("dag_id", "run_id", "search_key")
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=list(key), set_={k: stmt.excluded[k] for k in values if k not in key}
                )
            )
            found = select(MaxBatchSearchResult.id).where(*(getattr(MaxBatchSearchResult, k) == values[k] for k in key))
            return int(conn.execute(found).scalar_one())

    @_retry
    def upsert_probe(self, record: ProbeRecord) -> int:
        """Insert or update the probe repeat ``(dag_id, run_id, probe_key, repeat)`` with its sizes (a retried
        task replaces them); the run row is created if missing. Returns the probe's id."""
        values = asdict(record)
        sizes = values.pop("sizes")
        values["started_at"] = _utc(record.started_at)
        values["finished_at"] = _utc(record.finished_at)
        key = ("dag_id", "run_id", "probe_key", "repeat")
        with write_transaction(self.engine) as conn:
            values["benchmark_run_id"] = self._ensure_run(conn, record.dag_id, record.run_id, record.started_at)
            stmt = _insert(conn, FabricProbe).values(**values)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=list(key), set_={k: stmt.excluded[k] for k in values if k not in key}
                )
            )
            probe_id = int(
                conn.execute(
                    select(FabricProbe.id).where(*(getattr(FabricProbe, k) == values[k] for k in key))
                ).scalar_one()
            )
            conn.execute(delete(FabricProbeSize).where(FabricProbeSize.probe_id == probe_id))
            if sizes:
                conn.execute(_insert(conn, FabricProbeSize).values([{"probe_id": probe_id, **size} for size in sizes]))
            return probe_id

    # ------------------------------------------------------------------ typed reads (module docstring)

    def _rows(self, stmt: Select[Any], cls: type[R]) -> list[R]:
        """Run a select into rows of ``cls`` (:func:`dlperf_core.storage.rows.row_of`)."""
        with self.engine.connect() as conn:
            return [row_of(cls, row._asdict()) for row in conn.execute(stmt)]

    def run_info(self, dag_id: str, run_id: str) -> BenchmarkRunRow | None:
        """The ``benchmark_runs`` row of ``(dag_id, run_id)``, or None."""
        stmt = select(BenchmarkRun.__table__).where(BenchmarkRun.dag_id == dag_id, BenchmarkRun.run_id == run_id)
        found = self._rows(stmt, BenchmarkRunRow)
        return found[0] if found else None

    def result_rows(self, run_id: str | None = None, dag_id: str | None = None) -> list[ResultRow]:
        """The ``results`` rows (of ``run_id``/``dag_id`` if given), ordered by run, case and repeat."""
        return self._rows(self._results_stmt(run_id, dag_id), ResultRow)

    def summary_rows(self, run_id: str | None = None, dag_id: str | None = None) -> list[CaseSummaryRow]:
        """The ``case_summary`` rows (of ``run_id``/``dag_id`` if given), in :meth:`summary`'s order."""
        return self._rows(self._summary_stmt(run_id, dag_id), CaseSummaryRow)

    def history_rows(
        self, configuration: Configuration, *, any_variant: bool = False, before: datetime | None = None
    ) -> list[HistoryRow]:
        """Every ``nightly_history`` row of ``configuration`` (with ``any_variant``: of its other fields in every
        variant), oldest first per case key; with ``before``, only runs started before it."""
        wanted: dict[str, object] = {c: getattr(configuration, c) for c in CONFIGURATION_COLUMNS}
        if any_variant:
            del wanted["variant"]
        return self._rows(self._history_stmt(wanted, before), HistoryRow)

    def environment_rows(self, ids: Iterable[int] | None = None) -> list[EnvironmentRow]:
        """The ``environments`` rows (those with ``ids`` if given) without their ``data``, ordered by id."""
        table = StoredEnvironment.__table__
        stmt = select(*(c for c in table.columns if c.name != "data")).order_by(table.c.id)
        if ids is not None:
            stmt = stmt.where(table.c.id.in_(sorted(set(ids))))
        return self._rows(stmt, EnvironmentRow)

    def search_rows(self, run_id: str | None = None, dag_id: str | None = None) -> list[MaxBatchSearchRow]:
        """The max batch size searches (of one run if given), oldest first."""
        return self._rows(self._searches_stmt(run_id, dag_id), MaxBatchSearchRow)

    def probe_rows(self, run_id: str | None = None, dag_id: str | None = None) -> list[ProbeRow]:
        """The ``fabric_probes`` rows (of one run if given), oldest first."""
        return self._rows(self._probes_stmt(run_id, dag_id), ProbeRow)

    def fabric_summary_rows(self, run_id: str | None = None, dag_id: str | None = None) -> list[FabricSummaryRow]:
        """The ``fabric_summary`` rows (of one run if given), by probe and message size."""
        return self._rows(self._fabric_summary_stmt(run_id, dag_id), FabricSummaryRow)

    def fabric_history_rows(
        self, nodes: int | None = None, gpus_per_node: int | None = None, before: datetime | None = None
    ) -> list[FabricHistoryRow]:
        """The ``fabric_history`` rows (scheduled runs) of one topology if given, oldest first per probe and
        size; with ``before``, only runs started before it."""
        return self._rows(self._fabric_history_stmt(nodes, gpus_per_node, before), FabricHistoryRow)

    def gpu_model(self, environment_id: int) -> str | None:
        """The GPU model environment capture read for ``environment_id`` (None: no GPU, or no such row)."""
        table = StoredEnvironment.__table__
        with self.engine.connect() as conn:
            model = conn.execute(select(table.c.gpu_model).where(table.c.id == environment_id)).scalar()
        return None if model is None else str(model)

    def open_regression(self, configuration: Configuration) -> RegressionRow | None:
        """The newest open regression of ``configuration``, or None."""
        table = Regression.__table__
        stmt = (
            select(table)
            .where(table.c.status == "open", *(table.c[c] == getattr(configuration, c) for c in CONFIGURATION_COLUMNS))
            .order_by(table.c.night.desc(), table.c.id.desc())
            .limit(1)
        )
        found = self._rows(stmt, RegressionRow)
        return found[0] if found else None

    def latest_run_id(self, dag_id: str | None = None) -> str | None:
        """run_id of the most recently started benchmark run (of ``dag_id`` if given), or None."""
        latest = self._latest_run(dag_id)
        return None if latest is None else latest[1]

    def _latest_run(self, dag_id: str | None = None) -> tuple[str, str] | None:
        """``(dag_id, run_id)`` of the most recently started run (of ``dag_id`` if given)."""
        stmt = select(BenchmarkRun.dag_id, BenchmarkRun.run_id)
        if dag_id is not None:
            stmt = stmt.where(BenchmarkRun.dag_id == dag_id)
        stmt = stmt.order_by(BenchmarkRun.started_at.desc(), BenchmarkRun.id.desc()).limit(1)
        with self.engine.connect() as conn:
            row = conn.execute(stmt).first()
        return None if row is None else (row[0], row[1])

    # ------------------------------------------------------------------ the queries both shapes share

    @staticmethod
    def _results_stmt(run_id: str | None, dag_id: str | None) -> Select[Any]:
        table = Result.__table__
        stmt = _of_run(select(table), table.c, run_id, dag_id)
        return stmt.order_by(*(table.c[k] for k in _RESULT_KEY))

    @staticmethod
    def _summary_stmt(run_id: str | None, dag_id: str | None) -> Select[Any]:
        view = case_summary.c
        return _of_run(select(case_summary), view, run_id, dag_id).order_by(
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

    @staticmethod
    def _history_stmt(wanted: dict[str, object], before: datetime | None) -> Select[Any]:
        """``nightly_history`` where each column of ``wanted`` has its value (None: any)."""
        view = nightly_history.c
        stmt = select(nightly_history)
        for column, value in wanted.items():
            if value is not None:
                stmt = stmt.where(view[column] == value)
        if before is not None:
            stmt = stmt.where(view.started_at < _utc(before))
        order = [view[c] for c in CONFIGURATION_COLUMNS]
        return stmt.order_by(*order, view.case_key, view.started_at, view.run_id)

    @staticmethod
    def _searches_stmt(run_id: str | None, dag_id: str | None) -> Select[Any]:
        table = MaxBatchSearchResult.__table__
        stmt = _of_run(select(*table.columns), table.c, run_id, dag_id)
        return stmt.order_by(table.c.started_at, table.c.id)

    @staticmethod
    def _probes_stmt(run_id: str | None, dag_id: str | None) -> Select[Any]:
        table = FabricProbe.__table__
        stmt = _of_run(select(table), table.c, run_id, dag_id)
        return stmt.order_by(table.c.started_at, table.c.id)

    @staticmethod
    def _fabric_summary_stmt(run_id: str | None, dag_id: str | None) -> Select[Any]:
        view = fabric_summary.c
        return _of_run(select(fabric_summary), view, run_id, dag_id).order_by(view.probe_key, view.size_bytes)

    @staticmethod
    def _fabric_history_stmt(nodes: int | None, gpus_per_node: int | None, before: datetime | None) -> Select[Any]:
        view = fabric_history.c
        stmt = select(fabric_history)
        if nodes is not None:
            stmt = stmt.where(view.nodes == nodes)
        if gpus_per_node is not None:
            stmt = stmt.where(view.gpus_per_node == gpus_per_node)
        if before is not None:
            stmt = stmt.where(view.started_at < _utc(before))
        return stmt.order_by(view.probe_key, view.size_bytes, view.started_at, view.run_id)

    # ------------------------------------------------------------------ DataFrame reads: the reporting edge

    def _frame(self, stmt: Select[Any]) -> pd.DataFrame:
        """Run a select into a DataFrame."""
        with self.engine.connect() as conn:
            return pd.read_sql(stmt, conn)

    def probes(self, run_id: str | None = None, dag_id: str | None = None) -> pd.DataFrame:
        """Rows of ``fabric_probes`` (of one run if given), oldest first (typed: :meth:`probe_rows`)."""
        return self._frame(self._probes_stmt(run_id, dag_id))

    def fabric_summary(self, run_id: str | None = None, dag_id: str | None = None) -> pd.DataFrame:
        """``fabric_summary``: per run, probe and message size, the median bandwidths over the ok repeats (typed:
        :meth:`fabric_summary_rows`)."""
        frame = self._frame(self._fabric_summary_stmt(run_id, dag_id))
        for column in ("busbw_gbs", "algbw_gbs", "time_us"):
            frame[column] = frame[column].astype("float64")
        return frame

    def max_batch_searches(self, run_id: str | None = None, dag_id: str | None = None) -> pd.DataFrame:
        """Max batch size searches (of one run if given), oldest first; ``probes`` as lists of dicts (typed:
        :meth:`search_rows`)."""
        with self.engine.connect() as conn:
            rows = conn.execute(self._searches_stmt(run_id, dag_id)).all()
        columns = [c.name for c in MaxBatchSearchResult.__table__.columns]
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
        frame = self._frame(self._summary_stmt(run_id, dag_id))
        for column in _SUMMARY_FLOATS:
            frame[column] = frame[column].astype("float64")
        frame["environment_id"] = frame["environment_id"].astype("Int64")
        return frame

    def results(self, run_id: str | None = None, dag_id: str | None = None) -> pd.DataFrame:
        """Rows of ``results`` (of ``run_id``/``dag_id`` if given), timestamps as UTC (typed: :meth:`result_rows`)."""
        frame = self._frame(self._results_stmt(run_id, dag_id))
        for column in _TIMESTAMP_COLUMNS:
            stamps = pd.to_datetime(frame[column], utc=True)
            frame[column] = stamps.astype("datetime64[us, UTC]")
        for column in ("throughput", "reported_throughput"):
            frame[column] = frame[column].astype("float64")
        frame["iterations"] = frame["iterations"].astype("Int64")
        frame["environment_id"] = frame["environment_id"].astype("Int64")
        frame["gpu_memory_peak_mb"] = frame["gpu_memory_peak_mb"].astype("float64")
        return frame

    def environments(self, ids: Iterable[int] | None = None) -> pd.DataFrame:
        """Rows of ``environments`` (those with ``ids`` if given), ordered by id (typed: :meth:`environment_rows`)."""
        table = StoredEnvironment.__table__
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
        for column in _SUMMARY_FLOATS:
            frame[column] = frame[column].astype("float64")
        frame["environment_id"] = frame["environment_id"].astype("Int64")
        frame["started_at"] = _utc_column(frame["started_at"])
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
        frame = self._frame(self._history_stmt(wanted, before))
        frame["started_at"] = _utc_column(frame["started_at"])
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
        source = open_regressions if open_only else Regression.__table__
        stmt = select(source)
        if run_id is not None:
            stmt = stmt.where(source.c.run_id == run_id)
        stmt = stmt.order_by(source.c.night, source.c.id)
        frame = self._frame(stmt)
        for column in ("closed_at", "created_at", *(("run_started_at",) if open_only else ())):
            frame[column] = _utc_column(frame[column])
        frame["environment_changed"] = frame["environment_changed"].astype(bool)
        return frame

    # ------------------------------------------------------------------ regressions

    @_retry
    def record_regression(
        self,
        dag_id: str,
        run_id: str,
        case_key: str,
        configuration: Configuration,
        verdict: Verdict,
        environment_id: int | None = None,
        label: str | None = None,
    ) -> int:
        """Store a new regression of the case ``case_key`` of ``configuration`` found in run ``(dag_id, run_id)``
        (``verdict``: a new one, with its baseline), with what it is put down to (``label``, one of
        REGRESSION_LABELS); idempotent on (run, case_key). Returns its id."""
        if label is not None and label not in REGRESSION_LABELS:
            raise ValueError(f"regression label must be one of {REGRESSION_LABELS}, got {label!r}")
        values = {
            "dag_id": dag_id,
            "run_id": run_id,
            **{c: getattr(configuration, c) for c in CONFIGURATION_COLUMNS},
            "case_key": case_key,
            "night": verdict.night,
            "median_throughput": verdict.median_throughput,
            "baseline_median": verdict.baseline_median,
            "baseline_mad": verdict.baseline_mad,
            "baseline_nights": verdict.baseline_nights,
            "change_pct": verdict.change_pct,
            "robust_z": verdict.robust_z,
            "direction": verdict.direction,
            "environment_changed": verdict.environment_changed,
            "environment_changes": "; ".join(verdict.environment_changes) or None,
            "environment_id": environment_id,
            "status": "open",
            "last_seen_run_id": run_id,
            "label": label,
        }
        with write_transaction(self.engine) as conn:
            values["benchmark_run_id"] = self._run_pk(conn, dag_id, run_id)
            stmt = _insert(conn, Regression).values(**values)
            keys = ["benchmark_run_id", "case_key"]
            set_ = {k: stmt.excluded[k] for k in values if k not in keys}
            conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=set_))
            key = select(Regression.id).where(
                Regression.benchmark_run_id == values["benchmark_run_id"],
                Regression.case_key == values["case_key"],
            )
            return int(conn.execute(key).scalar_one())

    @_retry
    def touch_regression(self, regression_id: int, run_id: str) -> None:
        """Note that run ``run_id`` still shows the open regression ``regression_id``."""
        stmt = update(Regression).where(Regression.id == regression_id).values(last_seen_run_id=run_id)
        with write_transaction(self.engine) as conn:
            conn.execute(stmt)

    @_retry
    def close_regression(self, regression_id: int, reason: str, closed_at: datetime | None = None) -> bool:
        """Close a regression (recovered, accepted, ...). False if there is no such open one."""
        stmt = (
            update(Regression)
            .where(Regression.id == regression_id, Regression.status == "open")
            .values(status="closed", closed_reason=reason, closed_at=_utc(closed_at or _now()))
        )
        with write_transaction(self.engine) as conn:
            return conn.execute(stmt).rowcount > 0


def _utc_column(values: pd.Series) -> pd.Series:
    """A timestamp column as UTC datetimes (SQLite hands back naive text, PostgreSQL aware values)."""
    return pd.to_datetime(values, utc=True).astype("datetime64[us, UTC]")
