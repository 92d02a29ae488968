"""SQLAlchemy 2 declarative models of the dlperf results database.

Two tables and one view:

* ``benchmark_runs``: one row per benchmark run (an Airflow DAG run, or a CLI run), unique on
  ``(dag_id, run_id)``.
* ``results``: one row per measured repeat of one case, unique on
  ``(dag_id, run_id, case_key, repeat)``.
* ``case_summary``: a read-only view (created by the Alembic migration, never by ``create_all``)
  with per-case statistics; :data:`case_summary` describes its columns for typed reads.

The schema itself is owned by the Alembic migrations in ``migrations/versions``; these models must
stay in step with them (a test compares the two).
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
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
    func,
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


def utcnow() -> datetime:
    """The current time as an aware UTC datetime (Python-side column default)."""
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    """Declarative base of the dlperf tables (the metadata Alembic compares against)."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class BenchmarkRun(Base):
    """One benchmark run: a DAG run (or CLI invocation) that measures a suite of cases."""

    __tablename__ = "benchmark_runs"
    __table_args__ = (
        UniqueConstraint("dag_id", "run_id"),
        CheckConstraint("status IN ('running', 'success', 'failed')", name="status"),
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
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, default=utcnow, server_default=func.now()
    )


class Result(Base):
    """One repeat of one benchmark case: its outcome and measured throughput (samples/s)."""

    __tablename__ = "results"
    __table_args__ = (
        UniqueConstraint("dag_id", "run_id", "case_key", "repeat"),
        CheckConstraint("status IN ('ok', 'failed')", name="status"),
        CheckConstraint(
            "status = 'failed' OR (throughput IS NOT NULL AND throughput > 0)",
            name="ok_throughput",
        ),
        CheckConstraint(
            "batch_size_per_device >= 1 AND nodes >= 1 AND gpus_per_node >= 1 AND repeat >= 0",
            name="shape",
        ),
        Index(None, "dag_id", "run_id"),
        Index(
            "ix_results_case_shape",
            "framework",
            "model",
            "precision",
            "batch_size_per_device",
            "nodes",
            "gpus_per_node",
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
)

CASE_SUMMARY_COLUMNS: tuple[str, ...] = tuple(c.name for c in case_summary.columns)
"""Column names of the ``case_summary`` view, in order."""
