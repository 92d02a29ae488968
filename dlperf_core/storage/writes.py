"""The store's writes: each one :func:`~dlperf_core.storage.sql.upsert` (``INSERT .. ON CONFLICT``), all values
bound, in its own transaction, retried on ``OperationalError`` (:func:`~dlperf_core.storage.sql.retry`). A record's
columns are its fields (:func:`~dlperf_core.storage.shape.column_values`; the record type is checked against its
table when it is defined)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, delete, select, update

from dlperf_core.storage.engine import write_transaction
from dlperf_core.storage.models import (
    ACCEPTED,
    REGRESSION_LABELS,
    RUN_STATUSES,
    BenchmarkRun,
    FabricBenchmark,
    FabricBenchmarkSize,
    GpuHealthSnapshot,
    MaxBatchSearchResult,
    Regression,
    Result,
    StoredEnvironment,
    StoredMlperfRun,
    StoredMlperfScore,
    StoredMlperfSystem,
)
from dlperf_core.storage.queries import RESULT_KEY
from dlperf_core.storage.reads import configuration_values
from dlperf_core.storage.records import (
    BenchmarkRunRecord,
    FabricRecord,
    GpuHealthRecord,
    MaxBatchSearchRecord,
    ResultRecord,
)
from dlperf_core.storage.shape import column_values
from dlperf_core.storage.sql import id_of, now, retry, table_of, upsert, utc

if TYPE_CHECKING:
    from dlperf_core.cluster.environment import Environment
    from dlperf_core.importers.mlperf import MlperfSystem, SubmittedRun
    from dlperf_core.measure.regression import Verdict
    from dlperf_core.storage.rows import Configuration

RUN_KEY = ("dag_id", "run_id")
SEARCH_KEY = ("dag_id", "run_id", "search_key")
FABRIC_KEY = ("dag_id", "run_id", "probe_key", "repeat")
ENVIRONMENT_KEY = ("content_hash",)
MLPERF_SYSTEM_KEY = ("ruleset", "submitter_folder", "system_folder")
MLPERF_RUN_KEY = ("system_id", "benchmark", "result_file")
MLPERF_SCORE_KEY = ("system_id", "benchmark")
REGRESSION_KEY = ("benchmark_run_id", "case_key")
HEALTH_KEY = ("result_id",)


def run_values(run: BenchmarkRunRecord) -> dict[str, object]:
    """Column values of a run record (times in UTC)."""
    return column_values(run, BenchmarkRun) | {"started_at": utc(run.started_at), "finished_at": utc(run.finished_at)}


def health_values(health: GpuHealthRecord, result_id: int) -> dict[str, object]:
    """Column values of a result's health snapshot (the readings and windows as their JSON forms)."""
    form = health.to_json()
    return column_values(health, GpuHealthSnapshot) | {
        "result_id": result_id,
        "checked_at": utc(health.checked_at),
        "readings": form["readings"],
        "windows": form["windows"],
    }


class StoreWrites:
    """The writes of :class:`~dlperf_core.storage.store.ResultStore` (over its ``engine``)."""

    engine: Engine

    # ------------------------------------------------------------------ benchmark runs

    @retry
    def upsert_run(self, run: BenchmarkRunRecord) -> int:
        """Insert or update (all fields) the run ``(dag_id, run_id)``; return its id. A ``report_path`` of None
        keeps the stored one."""
        values = run_values(run)
        with write_transaction(self.engine) as conn:
            upsert(conn, BenchmarkRun, values, RUN_KEY, keep=("report_path",) if run.report_path is None else ())
            return self._run_pk(conn, run.dag_id, run.run_id)

    @retry
    def finish_run(self, dag_id: str, run_id: str, status: str, finished_at: datetime | None = None) -> bool:
        """Set a run's final ``status`` and ``finished_at`` (default now). False if no such run."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status must be one of {RUN_STATUSES}, got {status!r}")
        stmt = (
            update(BenchmarkRun)
            .where(BenchmarkRun.dag_id == dag_id, BenchmarkRun.run_id == run_id)
            .values(status=status, finished_at=utc(finished_at or now()))
        )
        with write_transaction(self.engine) as conn:
            return conn.execute(stmt).rowcount > 0

    @retry
    def set_report_path(self, dag_id: str, run_id: str, path: str | None) -> bool:
        """Record where the run's report was written. False if no such run."""
        stmt = (
            update(BenchmarkRun)
            .where(BenchmarkRun.dag_id == dag_id, BenchmarkRun.run_id == run_id)
            .values(report_path=path)
        )
        with write_transaction(self.engine) as conn:
            return conn.execute(stmt).rowcount > 0

    def _ensure_run(
        self, conn: Connection, dag_id: str, run_id: str, started_at: datetime, run: BenchmarkRunRecord | None = None
    ) -> int:
        """The id of the benchmark run ``(dag_id, run_id)``, creating the row (from ``run``, or as a
        placeholder) if it is missing, without touching an existing one."""
        run = run or BenchmarkRunRecord(
            dag_id=dag_id, run_id=run_id, suite="unknown", trigger="unknown", runtime="unknown", started_at=started_at
        )
        upsert(conn, BenchmarkRun, run_values(run), RUN_KEY, update=False)
        return self._run_pk(conn, dag_id, run_id)

    @staticmethod
    def _run_pk(conn: Connection, dag_id: str, run_id: str) -> int:
        """The id of the run ``(dag_id, run_id)``, which must exist."""
        return id_of(conn, BenchmarkRun, {"dag_id": dag_id, "run_id": run_id}, RUN_KEY)

    # ------------------------------------------------------------------ environments, MLPerf imports

    @retry
    def upsert_environment(self, environment: Environment, captured_at: datetime | None = None) -> int:
        """Store ``environment`` once (unique content hash) and return its id; an environment that is
        already stored keeps its row (and its first ``captured_at``)."""
        values = {
            "content_hash": environment.content_hash,
            "captured_at": utc(captured_at or now()),
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
            "data": environment.to_json(),
        }
        with write_transaction(self.engine) as conn:
            upsert(conn, StoredEnvironment, values, ENVIRONMENT_KEY, update=False)
            return id_of(conn, StoredEnvironment, values, ENVIRONMENT_KEY)

    @retry
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
            "imported_at": utc(imported_at or now()),
        }
        with write_transaction(self.engine) as conn:
            upsert(conn, StoredMlperfSystem, values, MLPERF_SYSTEM_KEY)
            return id_of(conn, StoredMlperfSystem, values, MLPERF_SYSTEM_KEY)

    @retry
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
        with write_transaction(self.engine) as conn:
            upsert(conn, StoredMlperfRun, values, MLPERF_RUN_KEY)

    @retry
    def upsert_mlperf_score(self, system_id: int, benchmark: str, score_minutes: float | None) -> None:
        """Store (or update) a system's official score for ``benchmark`` (None: too many runs did not converge)."""
        values = {"system_id": system_id, "benchmark": benchmark, "score_minutes": score_minutes}
        with write_transaction(self.engine) as conn:
            upsert(conn, StoredMlperfScore, values, MLPERF_SCORE_KEY)

    # ------------------------------------------------------------------ results, searches, fabric benchmarks

    @retry
    def upsert_result(self, result: ResultRecord) -> int:
        """Insert or update the result ``(dag_id, run_id, case_key, repeat)``; return its id.

        The benchmark run row is found, or created (from ``result.benchmark_run`` or as a
        placeholder) without touching an existing one.
        """
        with write_transaction(self.engine) as conn:
            return self._upsert_result(conn, result)

    @retry
    def upsert_results(self, results: Iterable[ResultRecord]) -> list[int]:
        """:meth:`upsert_result` for many results in one transaction; return their ids."""
        with write_transaction(self.engine) as conn:
            return [self._upsert_result(conn, result) for result in results]

    def _upsert_result(self, conn: Connection, result: ResultRecord) -> int:
        """Upsert one result on ``conn`` (see :meth:`upsert_result`), and its GPU health snapshot when it has one."""
        values = column_values(result, Result) | {
            "started_at": utc(result.started_at),
            "finished_at": utc(result.finished_at),
            "benchmark_run_id": self._ensure_run(
                conn, result.dag_id, result.run_id, result.started_at, result.benchmark_run
            ),
        }
        upsert(conn, Result, values, RESULT_KEY, also={"updated_at": now()})
        result_id = id_of(conn, Result, values, RESULT_KEY)
        if result.gpu_health is not None:
            upsert(conn, GpuHealthSnapshot, health_values(result.gpu_health, result_id), HEALTH_KEY)
        return result_id

    @retry
    def upsert_max_batch_search(self, record: MaxBatchSearchRecord) -> int:
        """Insert or update the search ``(dag_id, run_id, search_key)`` (the run row is created if missing)."""
        values = column_values(record, MaxBatchSearchResult) | {
            "probes": [trial.to_json() for trial in record.probes],  # the JSON column
            "started_at": utc(record.started_at),
            "finished_at": utc(record.finished_at),
        }
        with write_transaction(self.engine) as conn:
            values["benchmark_run_id"] = self._ensure_run(conn, record.dag_id, record.run_id, record.started_at)
            upsert(conn, MaxBatchSearchResult, values, SEARCH_KEY)
            return id_of(conn, MaxBatchSearchResult, values, SEARCH_KEY)

    @retry
    def upsert_fabric(self, record: FabricRecord) -> int:
        """Insert or update the fabric benchmark repeat ``(dag_id, run_id, probe_key, repeat)`` with its sizes (a
        retried task replaces them); the run row is created if missing. Returns its id."""
        values = column_values(record, FabricBenchmark) | {
            "started_at": utc(record.started_at),
            "finished_at": utc(record.finished_at),
        }
        with write_transaction(self.engine) as conn:
            values["benchmark_run_id"] = self._ensure_run(conn, record.dag_id, record.run_id, record.started_at)
            upsert(conn, FabricBenchmark, values, FABRIC_KEY)
            fabric_id = id_of(conn, FabricBenchmark, values, FABRIC_KEY)
            conn.execute(delete(FabricBenchmarkSize).where(FabricBenchmarkSize.probe_id == fabric_id))
            if record.sizes:
                sizes = [column_values(size, FabricBenchmarkSize) | {"probe_id": fabric_id} for size in record.sizes]
                conn.execute(table_of(FabricBenchmarkSize).insert().values(sizes))
            return fabric_id

    # ------------------------------------------------------------------ regressions

    @retry
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
            **configuration_values(configuration),
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
            "first_bad_night": verdict.first_bad_night,
        }
        with write_transaction(self.engine) as conn:
            values["benchmark_run_id"] = self._run_pk(conn, dag_id, run_id)
            upsert(conn, Regression, values, REGRESSION_KEY)
            return id_of(conn, Regression, values, REGRESSION_KEY)

    @retry
    def touch_regression(self, regression_id: int, run_id: str) -> None:
        """Note that run ``run_id`` still shows the open regression ``regression_id``."""
        stmt = update(Regression).where(Regression.id == regression_id).values(last_seen_run_id=run_id)
        with write_transaction(self.engine) as conn:
            conn.execute(stmt)

    @retry
    def accept_regression(
        self, regression_id: int, reason: str, accepted_from: date | None = None, at: datetime | None = None
    ) -> date | None:
        """Accept the open regression ``regression_id`` as the new normal: it is closed (``closed_reason``
        ``accepted as the new normal: <reason>``) and the detector's baseline of its configuration starts on
        ``accepted_from`` (default: its first bad night, else the night it was found). Returns that night, or
        None when there is no such open regression (nothing changed)."""
        if not reason.strip():
            raise ValueError("say why the regression is accepted as the new normal (reason is empty)")
        table = table_of(Regression)
        with write_transaction(self.engine) as conn:
            row = conn.execute(
                select(table.c.night, table.c.first_bad_night).where(
                    table.c.id == regression_id, table.c.status == "open"
                )
            ).first()
            if row is None:
                return None
            start = accepted_from or row.first_bad_night or row.night
            conn.execute(
                update(Regression)
                .where(Regression.id == regression_id, Regression.status == "open")
                .values(
                    status="closed",
                    closed_reason=f"{ACCEPTED} {reason.strip()}",
                    closed_at=utc(at or now()),
                    accepted_from=start,
                )
            )
            return start

    @retry
    def close_regression(self, regression_id: int, reason: str, closed_at: datetime | None = None) -> bool:
        """Close a regression (recovered, accepted, ...). False if there is no such open one."""
        stmt = (
            update(Regression)
            .where(Regression.id == regression_id, Regression.status == "open")
            .values(status="closed", closed_reason=reason, closed_at=utc(closed_at or now()))
        )
        with write_transaction(self.engine) as conn:
            return conn.execute(stmt).rowcount > 0
