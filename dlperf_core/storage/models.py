"""SQLAlchemy 2 declarative models of the dlperf results database.

Five tables and four views (docs/schema.md has the diagram):

* ``benchmark_runs``: one row per benchmark run (an Airflow DAG run, or a CLI run), unique on
  ``(dag_id, run_id)``.
* ``results``: one row per measured repeat of one case, unique on
  ``(dag_id, run_id, case_key, repeat)``, linked to the environment it ran in.
* ``environments``: one row per distinct environment (GPUs, driver, CUDA/cuDNN/NCCL, framework,
  image digest, hosts...), unique on its content hash.
* ``regressions``: the verdicts of regression detection, one per run and case at most.
* ``max_batch_searches``: the outcomes of max batch size searches, one per run and search.
* ``fabric_probes`` / ``fabric_probe_sizes``: the all-reduce fabric benchmarks (migration 0007; the tables keep
  their first names).
* ``mlperf_systems`` / ``mlperf_runs`` / ``mlperf_official_scores``: imported MLPerf Training submissions and
  their official scores (migration 0011), read through the view ``mlperf_scores``.
* ``gpu_health_snapshots``: the health of a result's GPUs before it ran and their clocks over its measured window,
  one row per result that was checked (migration 0013, ``dlperf_core.cluster.gpu_health``).
* views (created by the Alembic migrations, never by ``create_all``): ``case_summary``,
  ``latest_summary`` (latest of any run), ``latest_nightly_summary`` (latest scheduled run),
  ``nightly_history``, ``open_regressions``; the ``Table`` objects below
  describe their columns for typed reads.

The schema itself is owned by the Alembic migrations in ``migrations/versions``; these models must
stay in step with them (a test compares the two).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    func,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

#: Deterministic constraint and index names, the same on every dialect.
NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

RUN_STATUSES: tuple[str, ...] = ("running", "success", "failed")
"""Allowed values of ``benchmark_runs.status``."""

RESULT_STATUSES: tuple[str, ...] = ("ok", "failed")
"""Allowed values of ``results.status``."""

REGRESSION_STATUSES: tuple[str, ...] = ("open", "closed")
"""Allowed values of ``regressions.status``."""

ACCEPTED = "accepted as the new normal:"
"""How ``regressions.closed_reason`` of a regression accepted as the new normal begins (its ``accepted_from`` is set)."""

SEARCH_STATUSES: tuple[str, ...] = ("found", "limit_reached", "none_fit", "failed")
"""Allowed values of ``max_batch_searches.status`` (``dlperf_core.measure.maxbatch.SearchStatus``)."""

DIRECTIONS: tuple[str, ...] = ("slower", "faster")
"""Allowed values of ``regressions.direction``."""

HEALTH_POLICIES: tuple[str, ...] = ("refuse", "flag")
"""Allowed values of ``gpu_health_snapshots.policy`` (``dlperf_core.cluster.gpu_health.HEALTH_POLICIES``)."""

HEALTH_VERDICTS: tuple[str, ...] = ("ok", "flagged", "refused", "no_gpus")
"""Allowed values of ``gpu_health_snapshots.verdict`` (``dlperf_core.cluster.gpu_health.VERDICTS``)."""

REGRESSION_LABELS: tuple[str, ...] = ("fabric", "framework", "unexplained")
"""Allowed values of ``regressions.label`` (``dlperf_core.measure.regression.Label``; NULL before migration 0007)."""


def one_of(column: str, values: tuple[str, ...]) -> CheckConstraint:
    """The CHECK that keeps ``column`` to ``values`` (the tuples above), named after the column."""
    return CheckConstraint(f"{column} IN ({', '.join(repr(v) for v in values)})", name=column)


CONFIGURATION_COLUMNS: tuple[str, ...] = (
    "framework",
    "model",
    "precision",
    "batch_size_per_device",
    "variant",
    "nodes",
    "gpus_per_node",
)
"""The columns that name a benchmark configuration (what a history and a regression are about).
``variant`` is the case key's options suffix (``+name=value``..., ``+compile``, then ``+args=`` and the configuration's
fingerprint: migrations 0006 and 0010; ``+args=unknown`` for rows stored before 0010)."""


def utcnow() -> datetime:
    """The current time as an aware UTC datetime (Python-side column default)."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base of the dlperf tables (the metadata Alembic compares against)."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class BenchmarkRun(Base):
    """One benchmark run: a DAG run (or CLI invocation) that measures a suite of cases."""

    __tablename__ = "benchmark_runs"
    __table_args__ = (
        UniqueConstraint("dag_id", "run_id"),
        one_of("status", RUN_STATUSES),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dag_id: Mapped[str] = mapped_column(String(250), nullable=False)
    run_id: Mapped[str] = mapped_column(String(250), nullable=False)
    suite: Mapped[str] = mapped_column(Text, nullable=False)
    trigger: Mapped[str] = mapped_column(Text, nullable=False)
    runtime: Mapped[str] = mapped_column(Text, nullable=False)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    triggered_by: Mapped[str | None] = mapped_column(Text, nullable=True)
    report_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, default=utcnow, server_default=func.now()
    )


class StoredEnvironment(Base):
    """One distinct environment (see :class:`dlperf_core.cluster.environment.Environment`), stored once."""

    __tablename__ = "environments"
    __table_args__ = (UniqueConstraint("content_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    captured_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    framework: Mapped[str | None] = mapped_column(Text, nullable=True)
    framework_version: Mapped[str | None] = mapped_column(Text, nullable=True)
    image: Mapped[str | None] = mapped_column(Text, nullable=True)
    image_digest: Mapped[str | None] = mapped_column(Text, nullable=True)
    hostnames: Mapped[str | None] = mapped_column(Text, nullable=True)
    gpu_model: Mapped[str | None] = mapped_column(Text, nullable=True)
    gpu_count: Mapped[int] = mapped_column(Integer, nullable=False)
    driver_version: Mapped[str | None] = mapped_column(Text, nullable=True)
    cuda_version: Mapped[str | None] = mapped_column(Text, nullable=True)
    cudnn_version: Mapped[str | None] = mapped_column(Text, nullable=True)
    nccl_version: Mapped[str | None] = mapped_column(Text, nullable=True)
    power_limit_w: Mapped[float | None] = mapped_column(Float, nullable=True)
    sm_clock_max_mhz: Mapped[float | None] = mapped_column(Float, nullable=True)
    cpu_model: Mapped[str | None] = mapped_column(Text, nullable=True)
    cpu_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    memory_total_mb: Mapped[float | None] = mapped_column(Float, nullable=True)
    missing: Mapped[str | None] = mapped_column(Text, nullable=True)
    data: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)


class Result(Base):
    """One repeat of one benchmark case: its outcome and measured throughput (samples/s)."""

    __tablename__ = "results"
    __table_args__ = (
        UniqueConstraint("dag_id", "run_id", "case_key", "repeat"),
        one_of("status", RESULT_STATUSES),
        CheckConstraint(
            "status = 'failed' OR (throughput IS NOT NULL AND throughput > 0)",
            name="ok_throughput",
        ),
        CheckConstraint(
            "batch_size_per_device >= 1 AND nodes >= 1 AND gpus_per_node >= 1 AND repeat >= 0",
            name="shape",
        ),
        # case_summary for one run (by run_id alone or dag_id + run_id) and its 1n1g baseline
        Index("ix_results_run_configuration", "run_id", "dag_id", *CONFIGURATION_COLUMNS),
        # nightly_history and latest_summary: one configuration's rows, newest first
        Index("ix_results_configuration_started", *CONFIGURATION_COLUMNS, "started_at"),
        Index(None, "environment_id"),
        Index(None, "benchmark_run_id"),  # the FK: a run's rows, and ON DELETE CASCADE
        # "runs that failed, and why": only the failed repeats (migration 0004)
        Index(
            "ix_results_failed",
            "benchmark_run_id",
            postgresql_where=text("status = 'failed'"),
            sqlite_where=text("status = 'failed'"),
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    benchmark_run_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("benchmark_runs.id", ondelete="CASCADE"), nullable=False
    )
    dag_id: Mapped[str] = mapped_column(String(250), nullable=False)
    run_id: Mapped[str] = mapped_column(String(250), nullable=False)
    case_key: Mapped[str] = mapped_column(Text, nullable=False)
    framework: Mapped[str] = mapped_column(Text, nullable=False)
    model: Mapped[str] = mapped_column(Text, nullable=False)
    precision: Mapped[str] = mapped_column(Text, nullable=False)
    batch_size_per_device: Mapped[int] = mapped_column(Integer, nullable=False)
    variant: Mapped[str] = mapped_column(Text, nullable=False, default="", server_default="")
    compile: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())
    nodes: Mapped[int] = mapped_column(Integer, nullable=False)
    gpus_per_node: Mapped[int] = mapped_column(Integer, nullable=False)
    repeat: Mapped[int] = mapped_column(Integer, nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    throughput: Mapped[float | None] = mapped_column(Float, nullable=True)
    reported_throughput: Mapped[float | None] = mapped_column(Float, nullable=True)
    iterations: Mapped[int | None] = mapped_column(Integer, nullable=True)
    log_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    environment_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("environments.id", ondelete="SET NULL"), nullable=True
    )
    gpu_memory_peak_mb: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the measured window (first, last iteration counted) and whether it was fitted to a foreign log (0005)
    window_first: Mapped[int | None] = mapped_column(Integer, nullable=True)
    window_last: Mapped[int | None] = mapped_column(Integer, nullable=True)
    window_fitted: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())
    # how well the GPUs were used (migration 0006; NULL when unknown, e.g. on CPU nodes)
    mfu: Mapped[float | None] = mapped_column(Float, nullable=True)
    energy_per_sample_j: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_power_mean_w: Mapped[float | None] = mapped_column(Float, nullable=True)
    # who printed the lines the figure was read from: framework | dlperf | imported (dlperf_core.measure.origin,
    # migration 0009; NULL: stored before, unknown). PostgreSQL also CHECKs the values (SQLite cannot add a
    # CHECK to an existing table; ResultRecord checks what dlperf writes).
    figure_origin: Mapped[str | None] = mapped_column(Text, nullable=True)
    # what ran (dlperf_core.model.Case.configuration; its fingerprint ends case_key) and how it was launched
    # per node (dlperf reproduce), migration 0010; NULL: stored before, unknown (case_key ends +args=unknown)
    configuration: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    launch_spec: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # why the case's ranks had no cores of their own (dlperf_core.cluster.cpu_placement); NULL: they had (migration 0012)
    oversubscription: Mapped[str | None] = mapped_column(Text, nullable=True)
    # the GPUs and clock-event reasons that throttled it in its measured window (dlperf_core.cluster.clock_events);
    # NULL: none did, or not sampled (migration 0013)
    throttled: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, default=utcnow, server_default=func.now()
    )
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True),
        nullable=False,
        default=utcnow,
        onupdate=utcnow,
        server_default=func.now(),
    )


class GpuHealthSnapshot(Base):
    """The health of one result's GPUs, read through NVML just before it ran, and their clocks over its measured
    window (``dlperf_core.cluster.gpu_health``; migration 0013)."""

    __tablename__ = "gpu_health_snapshots"
    __table_args__ = (
        UniqueConstraint("result_id"),
        one_of("policy", HEALTH_POLICIES),
        one_of("verdict", HEALTH_VERDICTS),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    result_id: Mapped[int] = mapped_column(Integer, ForeignKey("results.id", ondelete="CASCADE"), nullable=False)
    checked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    policy: Mapped[str] = mapped_column(String(16), nullable=False)  # the suite's health: refuse | flag
    verdict: Mapped[str] = mapped_column(String(16), nullable=False)
    findings: Mapped[str | None] = mapped_column(Text, nullable=True)  # one line per finding, "; "-joined
    gpus: Mapped[int] = mapped_column(Integer, nullable=False)  # GPUs read
    # over the measured window, every GPU: the clock-event reasons seen (bit mask, OR-ed), lowest SM clock, hottest
    clock_event_reasons: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    sm_clock_min_mhz: Mapped[float | None] = mapped_column(Float, nullable=True)
    temperature_max_c: Mapped[float | None] = mapped_column(Float, nullable=True)
    # JSON forms: each node's readings (dlperf_core.cluster.nvml_readings.NodeReadings), each GPU's window
    # (dlperf_core.cluster.clock_events.GpuWindow)
    readings: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False)
    windows: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, default=utcnow, server_default=func.now()
    )


class Regression(Base):
    """A change of one configuration's median outside its nightly noise (dlperf_core.measure.regression)."""

    __tablename__ = "regressions"
    __table_args__ = (
        UniqueConstraint("benchmark_run_id", "case_key"),
        one_of("status", REGRESSION_STATUSES),
        one_of("direction", DIRECTIONS),
        Index("ix_regressions_configuration_status", *CONFIGURATION_COLUMNS, "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    benchmark_run_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("benchmark_runs.id", ondelete="CASCADE"), nullable=False
    )
    dag_id: Mapped[str] = mapped_column(String(250), nullable=False)
    run_id: Mapped[str] = mapped_column(String(250), nullable=False)
    framework: Mapped[str] = mapped_column(Text, nullable=False)
    model: Mapped[str] = mapped_column(Text, nullable=False)
    precision: Mapped[str] = mapped_column(Text, nullable=False)
    batch_size_per_device: Mapped[int] = mapped_column(Integer, nullable=False)
    nodes: Mapped[int] = mapped_column(Integer, nullable=False)
    gpus_per_node: Mapped[int] = mapped_column(Integer, nullable=False)
    variant: Mapped[str] = mapped_column(Text, nullable=False, default="", server_default="")
    case_key: Mapped[str] = mapped_column(Text, nullable=False)
    night: Mapped[date] = mapped_column(Date, nullable=False)
    median_throughput: Mapped[float] = mapped_column(Float, nullable=False)
    baseline_median: Mapped[float] = mapped_column(Float, nullable=False)
    baseline_mad: Mapped[float] = mapped_column(Float, nullable=False)
    baseline_nights: Mapped[int] = mapped_column(Integer, nullable=False)
    change_pct: Mapped[float] = mapped_column(Float, nullable=False)
    robust_z: Mapped[float] = mapped_column(Float, nullable=False)
    direction: Mapped[str] = mapped_column(String(16), nullable=False)
    environment_changed: Mapped[bool] = mapped_column(Boolean, nullable=False)
    environment_changes: Mapped[str | None] = mapped_column(Text, nullable=True)
    environment_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("environments.id", ondelete="SET NULL"), nullable=True
    )
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    last_seen_run_id: Mapped[str | None] = mapped_column(String(250), nullable=True)
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    closed_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, default=utcnow, server_default=func.now()
    )
    # what the regression is put down to: fabric | framework | unexplained (migration 0007)
    label: Mapped[str | None] = mapped_column(String(16), nullable=True)
    # the change point's night when change points confirmed it: the first night at the new level (migration 0014)
    first_bad_night: Mapped[date | None] = mapped_column(Date, nullable=True)
    # accepted as the new normal: the regression detector's baseline of this configuration starts on this night
    # (closed, closed_reason "accepted as the new normal: ..."; migration 0014). NULL: not accepted
    accepted_from: Mapped[date | None] = mapped_column(Date, nullable=True)


class FabricBenchmark(Base):
    """One repeat of an all-reduce fabric benchmark case (``dlperf_core/workload/allreduce.py``): migration 0007.
    The table and its ``probe_key`` keep the names they were created with (the word "probe" now means the
    environment probe only)."""

    __tablename__ = "fabric_probes"
    __table_args__ = (
        UniqueConstraint("dag_id", "run_id", "probe_key", "repeat"),
        one_of("status", RESULT_STATUSES),
        Index("ix_fabric_probes_run", "run_id", "dag_id"),
        Index("ix_fabric_probes_topology_started", "nodes", "gpus_per_node", "started_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    benchmark_run_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("benchmark_runs.id", ondelete="CASCADE"), nullable=False
    )
    dag_id: Mapped[str] = mapped_column(String(250), nullable=False)
    run_id: Mapped[str] = mapped_column(String(250), nullable=False)
    probe_key: Mapped[str] = mapped_column(Text, nullable=False)  # the case key of the fabric benchmark case
    nodes: Mapped[int] = mapped_column(Integer, nullable=False)
    gpus_per_node: Mapped[int] = mapped_column(Integer, nullable=False)
    repeat: Mapped[int] = mapped_column(Integer, nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    ranks: Mapped[int | None] = mapped_column(Integer, nullable=True)
    backend: Mapped[str | None] = mapped_column(Text, nullable=True)
    dtype: Mapped[str | None] = mapped_column(Text, nullable=True)
    avg_busbw_gbs: Mapped[float | None] = mapped_column(Float, nullable=True)
    log_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    environment_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("environments.id", ondelete="SET NULL"), nullable=True
    )
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, default=utcnow, server_default=func.now()
    )


class FabricBenchmarkSize(Base):
    """One message size of an ok fabric benchmark repeat: time of one all-reduce, algorithm and bus bandwidth
    (GB/s)."""

    __tablename__ = "fabric_probe_sizes"

    probe_id: Mapped[int] = mapped_column(Integer, ForeignKey("fabric_probes.id", ondelete="CASCADE"), primary_key=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    time_us: Mapped[float] = mapped_column(Float, nullable=False)
    algbw_gbs: Mapped[float] = mapped_column(Float, nullable=False)
    busbw_gbs: Mapped[float] = mapped_column(Float, nullable=False)


class MaxBatchSearchResult(Base):
    """What one max batch size search concluded in one benchmark run (``dlperf_core.measure.maxbatch``)."""

    __tablename__ = "max_batch_searches"
    __table_args__ = (
        UniqueConstraint("dag_id", "run_id", "search_key"),
        one_of("status", SEARCH_STATUSES),
        Index(None, "benchmark_run_id"),
        Index(None, "search_key", "started_at"),  # one search's history, newest first
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    benchmark_run_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("benchmark_runs.id", ondelete="CASCADE"), nullable=False
    )
    dag_id: Mapped[str] = mapped_column(String(250), nullable=False)
    run_id: Mapped[str] = mapped_column(String(250), nullable=False)
    search_key: Mapped[str] = mapped_column(Text, nullable=False)
    framework: Mapped[str] = mapped_column(Text, nullable=False)
    model: Mapped[str] = mapped_column(Text, nullable=False)
    precision: Mapped[str] = mapped_column(Text, nullable=False)
    nodes: Mapped[int] = mapped_column(Integer, nullable=False)
    gpus_per_node: Mapped[int] = mapped_column(Integer, nullable=False)
    start: Mapped[int] = mapped_column(Integer, nullable=False)
    step: Mapped[int] = mapped_column(Integer, nullable=False)
    limit: Mapped[int] = mapped_column(Integer, nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    max_batch: Mapped[int | None] = mapped_column(Integer, nullable=True)
    first_oom_batch: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    probes: Mapped[list[dict[str, Any]]] = mapped_column(JSON, nullable=False)
    environment_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("environments.id", ondelete="SET NULL"), nullable=True
    )
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, default=utcnow, server_default=func.now()
    )


class StoredMlperfSystem(Base):
    """One MLPerf system description (``<submitter>/systems/<system>.json``) of one round, as imported
    (``dlperf_core.importers.mlperf.MlperfSystem``; migration 0011). Its environment row holds the same description."""

    __tablename__ = "mlperf_systems"
    __table_args__ = (UniqueConstraint("ruleset", "submitter_folder", "system_folder"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ruleset: Mapped[str] = mapped_column(Text, nullable=False)  # the rules' version, e.g. 1.0.0
    submitter: Mapped[str] = mapped_column(Text, nullable=False)  # as the description names it
    submitter_folder: Mapped[str] = mapped_column(Text, nullable=False)
    system_folder: Mapped[str] = mapped_column(Text, nullable=False)
    system_name: Mapped[str] = mapped_column(Text, nullable=False)
    division: Mapped[str] = mapped_column(Text, nullable=False)
    nodes: Mapped[int] = mapped_column(Integer, nullable=False)
    accelerators_per_node: Mapped[int] = mapped_column(Integer, nullable=False)
    accelerators: Mapped[int] = mapped_column(Integer, nullable=False)  # 0: a CPU-only system
    accelerator_model: Mapped[str] = mapped_column(Text, nullable=False)
    accelerator_memory: Mapped[str] = mapped_column(Text, nullable=False)  # as stated: "80 GB", "32GB", ""
    host_processor_model: Mapped[str] = mapped_column(Text, nullable=False)
    host_processors_per_node: Mapped[int] = mapped_column(Integer, nullable=False)
    framework: Mapped[str] = mapped_column(Text, nullable=False)
    interconnect: Mapped[str] = mapped_column(Text, nullable=False)
    environment_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("environments.id", ondelete="SET NULL"), nullable=True
    )
    description: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    imported_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class StoredMlperfRun(Base):
    """One MLPerf run (``result_<n>.txt``): what dlperf's MLLOG parser read from it and the compliance checker's
    verdict (migration 0011)."""

    __tablename__ = "mlperf_runs"
    __table_args__ = (
        UniqueConstraint("system_id", "benchmark", "result_file"),
        one_of("status", RESULT_STATUSES),
        CheckConstraint("status = 'failed' OR (throughput IS NOT NULL AND throughput > 0)", name="ok_throughput"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    system_id: Mapped[int] = mapped_column(Integer, ForeignKey("mlperf_systems.id", ondelete="CASCADE"), nullable=False)
    benchmark: Mapped[str] = mapped_column(Text, nullable=False)
    result_file: Mapped[str] = mapped_column(Text, nullable=False)  # result_<n>.txt
    status: Mapped[str] = mapped_column(String(16), nullable=False)  # ok: a throughput was measured
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    time_to_train_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    converged: Mapped[bool | None] = mapped_column(Boolean, nullable=True)  # run_stop status success; NULL: none
    throughput: Mapped[float | None] = mapped_column(Float, nullable=True)  # samples/s over the steady spans
    reported_throughput: Mapped[float | None] = mapped_column(Float, nullable=True)  # the log's own figure
    span_kind: Mapped[str | None] = mapped_column(Text, nullable=True)  # epoch | block
    spans_measured: Mapped[int] = mapped_column(Integer, nullable=False)
    global_batch_size: Mapped[int | None] = mapped_column(Integer, nullable=True)
    compliant: Mapped[bool] = mapped_column(Boolean, nullable=False)  # mlperf_logging's compliance checker
    compliance_message: Mapped[str] = mapped_column(Text, nullable=False)
    hyperparameters: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)


class StoredMlperfScore(Base):
    """A system's official score for one benchmark, computed by mlperf_logging's result summarizer (minutes to
    train; NULL when too many runs did not converge), migration 0011."""

    __tablename__ = "mlperf_official_scores"

    system_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("mlperf_systems.id", ondelete="CASCADE"), primary_key=True
    )
    benchmark: Mapped[str] = mapped_column(Text, primary_key=True)
    score_minutes: Mapped[float | None] = mapped_column(Float, nullable=True)


#: Metadata that only describes views; never passed to ``create_all`` or Alembic autogenerate.
view_metadata = MetaData()

#: The ``case_summary`` view (created by migration 0001), described for typed ``select()``s.
case_summary = Table(
    "case_summary",
    view_metadata,
    Column("dag_id", String(250)),
    Column("run_id", String(250)),
    Column("case_key", Text),
    Column("framework", Text),
    Column("model", Text),
    Column("precision", Text),
    Column("batch_size_per_device", Integer),
    Column("variant", Text),
    Column("compile", Boolean),
    Column("nodes", Integer),
    Column("gpus_per_node", Integer),
    Column("total_gpus", BigInteger),
    Column("n", BigInteger),
    Column("n_failed", BigInteger),
    Column("median_throughput", Float),
    Column("mean_throughput", Float),
    Column("min_throughput", Float),
    Column("max_throughput", Float),
    Column("speedup", Float),
    Column("scaling_efficiency", Float),
    Column("stdev_throughput", Float),
    Column("cv", Float),
    Column("gpu_memory_peak_mb", Float),
    Column("mfu", Float),
    Column("energy_per_sample_j", Float),
    Column("environment_id", Integer),
    # too noisy to read (migration 0008; the rule: dlperf_core.measure.noise): CV > MAX_RELIABLE_CV or speedup > devices
    Column("unreliable", Boolean),
    Column("unreliable_reason", Text),  # e.g. "CV 0.71 > 0.10", "speedup 4.40 > 2 devices"; NULL when reliable
    # migration 0012: the flags of one ok repeat and of ranks without cores of their own, and the 1n1g the
    # speedup is against: this run's, else the latest nightly's (baseline_of says which; its night, if nightly)
    Column("single_repeat", Boolean),
    Column("oversubscribed", Boolean),
    Column("baseline_dag_id", String(250)),
    Column("baseline_run_id", String(250)),
    Column("baseline_of", Text),  # "this run" | "latest nightly"; NULL: no baseline
    Column("baseline_night", Date),
    # migration 0013: an ok repeat's GPUs were throttled in its measured window (the reason says which and why)
    Column("throttled", Boolean),
)

CASE_SUMMARY_COLUMNS: tuple[str, ...] = tuple(c.name for c in case_summary.columns)
"""Column names of the ``case_summary`` view, in order."""

#: ``latest_summary`` (migration 0002): per configuration, the case_summary row of the run that
#: measured it last (of any run: scheduled or not), with that run's start and trigger.
latest_summary = Table(
    "latest_summary",
    view_metadata,
    *(Column(c.name, c.type) for c in case_summary.columns),
    Column("started_at", DateTime(timezone=True)),
    Column("trigger", Text),
)

#: ``latest_nightly_summary`` (migration 0012): the same, of the latest scheduled run per configuration.
latest_nightly_summary = Table(
    "latest_nightly_summary",
    view_metadata,
    *(Column(c.name, c.type) for c in latest_summary.columns),
)

#: ``nightly_history`` (migration 0002): per configuration and scheduled run, the night's figures.
nightly_history = Table(
    "nightly_history",
    view_metadata,
    Column("framework", Text),
    Column("model", Text),
    Column("precision", Text),
    Column("batch_size_per_device", Integer),
    Column("variant", Text),
    Column("compile", Boolean),
    Column("nodes", Integer),
    Column("gpus_per_node", Integer),
    Column("case_key", Text),
    Column("night", Date),
    Column("started_at", DateTime(timezone=True)),
    Column("dag_id", String(250)),
    Column("run_id", String(250)),
    Column("run_status", String(16)),
    Column("median_throughput", Float),
    Column("n", BigInteger),
    Column("n_failed", BigInteger),
    Column("speedup", Float),
    Column("scaling_efficiency", Float),
    Column("mfu", Float),
    Column("energy_per_sample_j", Float),
    Column("environment_id", Integer),
    Column("unreliable_reason", Text),  # migration 0012: the flags and the baseline, as case_summary's
    Column("baseline_run_id", String(250)),
    Column("baseline_of", Text),
    Column("baseline_night", Date),
    Column("throttled", Boolean),  # migration 0013: as case_summary's; such a night is no regression baseline
)

#: ``open_regressions`` (migration 0002): the regressions still open, with their run's start.
open_regressions = Table(
    "open_regressions",
    view_metadata,
    *(Column(c.name, c.type) for c in Regression.__table__.columns),
    Column("run_started_at", DateTime(timezone=True)),
    Column("trigger", Text),
)

#: ``fabric_summary`` (migration 0007): per run, fabric benchmark case and message size, the medians over the ok repeats.
fabric_summary = Table(
    "fabric_summary",
    view_metadata,
    Column("dag_id", String(250)),
    Column("run_id", String(250)),
    Column("probe_key", Text),
    Column("nodes", Integer),
    Column("gpus_per_node", Integer),
    Column("total_gpus", BigInteger),
    Column("size_bytes", BigInteger),
    Column("n", BigInteger),
    Column("busbw_gbs", Float),
    Column("algbw_gbs", Float),
    Column("time_us", Float),
    Column("environment_id", Integer),
)

#: ``fabric_history`` (migration 0007): ``fabric_summary`` of the scheduled runs, with their night.
fabric_history = Table(
    "fabric_history",
    view_metadata,
    Column("probe_key", Text),
    Column("nodes", Integer),
    Column("gpus_per_node", Integer),
    Column("total_gpus", BigInteger),
    Column("size_bytes", BigInteger),
    Column("night", Date),
    Column("started_at", DateTime(timezone=True)),
    Column("dag_id", String(250)),
    Column("run_id", String(250)),
    Column("run_status", String(16)),
    Column("n", BigInteger),
    Column("busbw_gbs", Float),
    Column("algbw_gbs", Float),
    Column("time_us", Float),
    Column("environment_id", Integer),
)

#: ``mlperf_scores`` (migration 0011): one row per (submitter folder, system folder, benchmark) with its official
#: score, how many of its runs are stored and how many the compliance checker accepted, and the system.
mlperf_scores = Table(
    "mlperf_scores",
    view_metadata,
    Column("ruleset", Text),
    Column("submitter", Text),
    Column("submitter_folder", Text),
    Column("system_folder", Text),
    Column("system_name", Text),
    Column("benchmark", Text),
    Column("score_minutes", Float),
    Column("runs", BigInteger),
    Column("runs_compliant", BigInteger),
    Column("nodes", Integer),
    Column("accelerator_model", Text),
    Column("accelerator_memory", Text),
    Column("accelerators", Integer),
    Column("framework", Text),
    Column("environment_id", Integer),
)
