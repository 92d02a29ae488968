"""Initial schema: benchmark_runs, results and the case_summary view.

Revision ID: 0001
Revises:
Create Date: 2026-01-01 00:00:00

Hand-written; frozen (later changes go in new revisions). The view SQL is one text for
PostgreSQL and SQLite: window functions, CTEs, integer division of COUNT()s, NULLIF.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: ``case_summary``: one row per (dag_id, run_id, case_key, framework, model, precision,
#: batch_size_per_device, nodes, gpus_per_node). Statistics are over status='ok' repeats; a case
#: with only failed repeats still appears (n=0, throughput figures NULL). The median is the mean of
#: the middle one or two ranks. speedup = median / median of the same run's 1 node x 1 GPU case
#: with the same framework, model, precision and batch size (NULL when there is none; averaged if
#: several case_keys share that shape), scaling_efficiency = speedup / total_gpus.
CASE_SUMMARY_SQL = """
CREATE VIEW case_summary AS
WITH ranked AS (
    SELECT dag_id, run_id, case_key, throughput,
           ROW_NUMBER() OVER (PARTITION BY dag_id, run_id, case_key ORDER BY throughput) AS rn,
           COUNT(*) OVER (PARTITION BY dag_id, run_id, case_key) AS cnt
    FROM results
    WHERE status = 'ok'
),
medians AS (
    SELECT dag_id, run_id, case_key, AVG(throughput) AS median_throughput
    FROM ranked
    WHERE rn IN ((cnt + 1) / 2, (cnt + 2) / 2)
    GROUP BY dag_id, run_id, case_key
),
cases AS (
    SELECT dag_id, run_id, case_key, framework, model, "precision",
           batch_size_per_device, nodes, gpus_per_node,
           COUNT(CASE WHEN status = 'ok' THEN 1 END) AS n,
           COUNT(CASE WHEN status = 'failed' THEN 1 END) AS n_failed,
           AVG(CASE WHEN status = 'ok' THEN throughput END) AS mean_throughput,
           MIN(CASE WHEN status = 'ok' THEN throughput END) AS min_throughput,
           MAX(CASE WHEN status = 'ok' THEN throughput END) AS max_throughput
    FROM results
    GROUP BY dag_id, run_id, case_key, framework, model, "precision",
             batch_size_per_device, nodes, gpus_per_node
),
summary AS (
    SELECT c.dag_id, c.run_id, c.case_key, c.framework, c.model, c."precision",
           c.batch_size_per_device, c.nodes, c.gpus_per_node,
           c.n, c.n_failed, m.median_throughput,
           c.mean_throughput, c.min_throughput, c.max_throughput
    FROM cases c
    LEFT JOIN medians m
      ON m.dag_id = c.dag_id AND m.run_id = c.run_id AND m.case_key = c.case_key
),
baseline AS (
    SELECT dag_id, run_id, framework, model, "precision", batch_size_per_device,
           AVG(median_throughput) AS baseline_throughput
    FROM summary
    WHERE nodes = 1 AND gpus_per_node = 1
    GROUP BY dag_id, run_id, framework, model, "precision", batch_size_per_device
)
SELECT s.dag_id, s.run_id, s.case_key, s.framework, s.model, s."precision",
       s.batch_size_per_device, s.nodes, s.gpus_per_node,
       s.nodes * s.gpus_per_node AS total_gpus,
       s.n, s.n_failed,
       s.median_throughput, s.mean_throughput, s.min_throughput, s.max_throughput,
       s.median_throughput / b.baseline_throughput AS speedup,
       s.median_throughput / b.baseline_throughput
           / NULLIF(s.nodes * s.gpus_per_node, 0) AS scaling_efficiency
FROM summary s
LEFT JOIN baseline b
  ON b.dag_id = s.dag_id AND b.run_id = s.run_id
 AND b.framework = s.framework AND b.model = s.model AND b."precision" = s."precision"
 AND b.batch_size_per_device = s.batch_size_per_device
"""


def _timestamp(name: str, nullable: bool = False, now: bool = False) -> sa.Column:
    """A timezone-aware timestamp column, defaulting to now() when ``now``."""
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=sa.func.now() if now else None,
    )


def upgrade() -> None:
    """Create the tables, their indexes and the view."""
    op.create_table(
        "benchmark_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("suite", sa.Text(), nullable=False),
        sa.Column("trigger", sa.Text(), nullable=False),
        sa.Column("runtime", sa.Text(), nullable=False),
        _timestamp("started_at"),
        _timestamp("finished_at", nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        _timestamp("created_at", now=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_benchmark_runs")),
        sa.UniqueConstraint("dag_id", "run_id", name=op.f("uq_benchmark_runs_dag_id_run_id")),
        sa.CheckConstraint(
            "status IN ('running', 'success', 'failed')", name=op.f("ck_benchmark_runs_status")
        ),
    )
    op.create_table(
        "results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("benchmark_run_id", sa.Integer(), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("case_key", sa.Text(), nullable=False),
        sa.Column("framework", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("precision", sa.Text(), nullable=False),
        sa.Column("batch_size_per_device", sa.Integer(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("gpus_per_node", sa.Integer(), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("throughput", sa.Float(), nullable=True),
        sa.Column("reported_throughput", sa.Float(), nullable=True),
        sa.Column("iterations", sa.Integer(), nullable=True),
        sa.Column("log_path", sa.Text(), nullable=True),
        _timestamp("started_at"),
        _timestamp("finished_at", nullable=True),
        _timestamp("created_at", now=True),
        _timestamp("updated_at", now=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_results")),
        sa.ForeignKeyConstraint(
            ["benchmark_run_id"],
            ["benchmark_runs.id"],
            name=op.f("fk_results_benchmark_run_id_benchmark_runs"),
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint(
            "dag_id",
            "run_id",
            "case_key",
            "repeat",
            name=op.f("uq_results_dag_id_run_id_case_key_repeat"),
        ),
        sa.CheckConstraint("status IN ('ok', 'failed')", name=op.f("ck_results_status")),
        sa.CheckConstraint(
            "status = 'failed' OR (throughput IS NOT NULL AND throughput > 0)",
            name=op.f("ck_results_ok_throughput"),
        ),
        sa.CheckConstraint(
            "batch_size_per_device >= 1 AND nodes >= 1 AND gpus_per_node >= 1 AND repeat >= 0",
            name=op.f("ck_results_shape"),
        ),
    )
    op.create_index(op.f("ix_results_dag_id_run_id"), "results", ["dag_id", "run_id"])
    op.create_index(
        op.f("ix_results_case_shape"),
        "results",
        ["framework", "model", "precision", "batch_size_per_device", "nodes", "gpus_per_node"],
    )
    op.execute(CASE_SUMMARY_SQL)


def downgrade() -> None:
    """Drop the view, then the tables (indexes go with them)."""
    op.execute("DROP VIEW IF EXISTS case_summary")
    op.drop_index(op.f("ix_results_case_shape"), table_name="results")
    op.drop_index(op.f("ix_results_dag_id_run_id"), table_name="results")
    op.drop_table("results")
    op.drop_table("benchmark_runs")
