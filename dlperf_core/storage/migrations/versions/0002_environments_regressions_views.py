"""Environments, regressions, run/result additions and the analyst views.

Revision ID: 0002
Revises: 0001
Create Date: 2026-02-01 00:00:00

* ``environments`` (one row per distinct environment, unique content hash); ``results`` gains
  ``environment_id`` (FK, NULL) and ``gpu_memory_peak_mb``; ``benchmark_runs`` gains
  ``triggered_by`` and ``report_path``.
* ``regressions``: verdicts of regression detection, unique per (benchmark run, case).
* Views: ``case_summary`` (re-created with ``stdev_throughput``, ``cv``, ``gpu_memory_peak_mb``,
  ``environment_id``), ``latest_summary``, ``nightly_history``, ``open_regressions``.
* Indexes for the views: ``(run_id, dag_id, configuration)`` serves a run's summary and its 1n1g
  baseline; ``(configuration, started_at)`` serves one configuration's history and its newest run.
  They replace ``ix_results_dag_id_run_id`` and ``ix_results_case_shape`` (prefixes of them).

The view SQL differs per dialect where PostgreSQL has a better tool: ``percentile_cont`` and
``stddev_samp`` instead of rank arithmetic, ``NOT MATERIALIZED`` CTEs so that a filter on a run or a
configuration reaches the index, and a loose index scan (recursive CTE) plus ``LATERAL`` for the
newest run per configuration. SQLite (the embedded default) computes the same figures with window
functions and a two-pass sum of squared deviations for the sample standard deviation.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CONFIGURATION = 'framework, model, "precision", batch_size_per_device, nodes, gpus_per_node'

# ---------------------------------------------------------------------------- case_summary

#: PostgreSQL: one GROUP BY per case; the median is percentile_cont(0.5) (the mean of the middle
#: two of an even count, as in 0001), the stdev the sample standard deviation (n - 1).
CASE_SUMMARY_PG = """
CREATE VIEW case_summary AS
WITH cases AS NOT MATERIALIZED (
    SELECT dag_id, run_id, case_key, framework, model, "precision",
           batch_size_per_device, nodes, gpus_per_node,
           COUNT(*) FILTER (WHERE status = 'ok') AS n,
           COUNT(*) FILTER (WHERE status = 'failed') AS n_failed,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY throughput)
               FILTER (WHERE status = 'ok') AS median_throughput,
           AVG(throughput) FILTER (WHERE status = 'ok') AS mean_throughput,
           MIN(throughput) FILTER (WHERE status = 'ok') AS min_throughput,
           MAX(throughput) FILTER (WHERE status = 'ok') AS max_throughput,
           stddev_samp(throughput) FILTER (WHERE status = 'ok') AS stdev_throughput,
           MAX(gpu_memory_peak_mb) FILTER (WHERE status = 'ok') AS gpu_memory_peak_mb,
           MAX(environment_id) AS environment_id
    FROM results
    GROUP BY dag_id, run_id, case_key, framework, model, "precision",
             batch_size_per_device, nodes, gpus_per_node
),
baseline AS NOT MATERIALIZED (
    SELECT dag_id, run_id, framework, model, "precision", batch_size_per_device,
           AVG(median_throughput) AS baseline_throughput
    FROM cases
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
           / NULLIF(s.nodes * s.gpus_per_node, 0) AS scaling_efficiency,
       s.stdev_throughput,
       s.stdev_throughput / NULLIF(s.mean_throughput, 0) AS cv,
       s.gpu_memory_peak_mb,
       s.environment_id
FROM cases s
LEFT JOIN baseline b
  ON b.dag_id = s.dag_id AND b.run_id = s.run_id
 AND b.framework = s.framework AND b.model = s.model AND b."precision" = s."precision"
 AND b.batch_size_per_device = s.batch_size_per_device
"""

#: SQLite: 0001's rank-based median, plus the sample stdev as sqrt(sum of squared deviations from
#: the case mean / (n - 1)) (two passes, so no loss of precision from SUM(x^2) - SUM(x)^2/n).
CASE_SUMMARY_SQLITE = """
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
           MAX(CASE WHEN status = 'ok' THEN throughput END) AS max_throughput,
           MAX(CASE WHEN status = 'ok' THEN gpu_memory_peak_mb END) AS gpu_memory_peak_mb,
           MAX(environment_id) AS environment_id
    FROM results
    GROUP BY dag_id, run_id, case_key, framework, model, "precision",
             batch_size_per_device, nodes, gpus_per_node
),
spread AS (
    SELECT r.dag_id, r.run_id, r.case_key,
           SUM((r.throughput - c.mean_throughput) * (r.throughput - c.mean_throughput)) AS squares
    FROM results r
    JOIN cases c ON c.dag_id = r.dag_id AND c.run_id = r.run_id AND c.case_key = r.case_key
    WHERE r.status = 'ok'
    GROUP BY r.dag_id, r.run_id, r.case_key
),
summary AS (
    SELECT c.dag_id, c.run_id, c.case_key, c.framework, c.model, c."precision",
           c.batch_size_per_device, c.nodes, c.gpus_per_node,
           c.n, c.n_failed, m.median_throughput,
           c.mean_throughput, c.min_throughput, c.max_throughput,
           CASE WHEN c.n > 1 THEN sqrt(sp.squares / (c.n - 1)) END AS stdev_throughput,
           c.gpu_memory_peak_mb, c.environment_id
    FROM cases c
    LEFT JOIN medians m
      ON m.dag_id = c.dag_id AND m.run_id = c.run_id AND m.case_key = c.case_key
    LEFT JOIN spread sp
      ON sp.dag_id = c.dag_id AND sp.run_id = c.run_id AND sp.case_key = c.case_key
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
           / NULLIF(s.nodes * s.gpus_per_node, 0) AS scaling_efficiency,
       s.stdev_throughput,
       s.stdev_throughput / NULLIF(s.mean_throughput, 0) AS cv,
       s.gpu_memory_peak_mb,
       s.environment_id
FROM summary s
LEFT JOIN baseline b
  ON b.dag_id = s.dag_id AND b.run_id = s.run_id
 AND b.framework = s.framework AND b.model = s.model AND b."precision" = s."precision"
 AND b.batch_size_per_device = s.batch_size_per_device
"""

# ---------------------------------------------------------------------------- latest_summary

_SUMMARY_COLUMNS = """s.dag_id, s.run_id, s.case_key, s.framework, s.model, s."precision",
       s.batch_size_per_device, s.nodes, s.gpus_per_node, s.total_gpus, s.n, s.n_failed,
       s.median_throughput, s.mean_throughput, s.min_throughput, s.max_throughput,
       s.speedup, s.scaling_efficiency, s.stdev_throughput, s.cv, s.gpu_memory_peak_mb,
       s.environment_id"""

#: The newest run of a configuration is the run of its most recently started repeat (runs of the
#: DAG do not overlap: max_active_runs=1). PostgreSQL walks the distinct configurations with a loose
#: index scan (one index probe each), finds each one's newest repeat with another probe, and
#: summarises only that run's case (the filter reaches case_summary's GROUP BY and its baseline).
LATEST_SUMMARY_PG = f"""
CREATE VIEW latest_summary AS
WITH RECURSIVE configurations AS (
    (SELECT {CONFIGURATION} FROM results ORDER BY {CONFIGURATION} LIMIT 1)
    UNION ALL
    SELECT nxt.*
    FROM configurations c
    CROSS JOIN LATERAL (
        SELECT r.framework, r.model, r."precision", r.batch_size_per_device, r.nodes, r.gpus_per_node
        FROM results r
        WHERE (r.framework, r.model, r."precision", r.batch_size_per_device, r.nodes, r.gpus_per_node)
            > (c.framework, c.model, c."precision", c.batch_size_per_device, c.nodes, c.gpus_per_node)
        ORDER BY r.framework, r.model, r."precision", r.batch_size_per_device, r.nodes, r.gpus_per_node
        LIMIT 1
    ) nxt
),
newest AS (
    SELECT c.*, latest.dag_id, latest.run_id, latest.case_key
    FROM configurations c
    CROSS JOIN LATERAL (
        SELECT r.dag_id, r.run_id, r.case_key
        FROM results r
        WHERE r.framework = c.framework AND r.model = c.model AND r."precision" = c."precision"
          AND r.batch_size_per_device = c.batch_size_per_device AND r.nodes = c.nodes
          AND r.gpus_per_node = c.gpus_per_node
        ORDER BY r.started_at DESC, r.id DESC
        LIMIT 1
    ) latest
)
SELECT {_SUMMARY_COLUMNS},
       b.started_at, b."trigger"
FROM newest n
CROSS JOIN LATERAL (
    SELECT * FROM case_summary cs
    WHERE cs.dag_id = n.dag_id AND cs.run_id = n.run_id AND cs.case_key = n.case_key
      AND cs.framework = n.framework AND cs.model = n.model AND cs."precision" = n."precision"
      AND cs.batch_size_per_device = n.batch_size_per_device AND cs.nodes = n.nodes
      AND cs.gpus_per_node = n.gpus_per_node
    OFFSET 0  -- a fence: keeps this a per-configuration lookup instead of one join over all runs
) s
JOIN benchmark_runs b ON b.dag_id = s.dag_id AND b.run_id = s.run_id
"""

LATEST_SUMMARY_SQLITE = f"""
CREATE VIEW latest_summary AS
WITH newest AS (
    SELECT dag_id, run_id, case_key, {CONFIGURATION},
           ROW_NUMBER() OVER (PARTITION BY {CONFIGURATION} ORDER BY started_at DESC, id DESC) AS rn
    FROM results
)
SELECT {_SUMMARY_COLUMNS},
       b.started_at, b."trigger"
FROM newest n
JOIN case_summary s
  ON s.dag_id = n.dag_id AND s.run_id = n.run_id AND s.case_key = n.case_key
 AND s.framework = n.framework AND s.model = n.model AND s."precision" = n."precision"
 AND s.batch_size_per_device = n.batch_size_per_device AND s.nodes = n.nodes
 AND s.gpus_per_node = n.gpus_per_node
JOIN benchmark_runs b ON b.dag_id = s.dag_id AND b.run_id = s.run_id
WHERE n.rn = 1
"""

# ---------------------------------------------------------------------------- nightly_history

#: One row per configuration and scheduled run. ``night`` is the UTC date the run started.
NIGHTLY_HISTORY = """
CREATE VIEW nightly_history AS
SELECT s.framework, s.model, s."precision", s.batch_size_per_device, s.nodes, s.gpus_per_node,
       s.case_key, {night} AS night, b.started_at, s.dag_id, s.run_id, b.status AS run_status,
       s.median_throughput, s.n, s.n_failed, s.speedup, s.scaling_efficiency, s.environment_id
FROM case_summary s
JOIN benchmark_runs b ON b.dag_id = s.dag_id AND b.run_id = s.run_id
WHERE b."trigger" = 'scheduled'
"""
NIGHT_PG = "CAST(b.started_at AT TIME ZONE 'UTC' AS DATE)"
NIGHT_SQLITE = "DATE(b.started_at)"

# ---------------------------------------------------------------------------- open_regressions

REGRESSION_COLUMNS = (
    "id", "benchmark_run_id", "dag_id", "run_id", "framework", "model", "precision",
    "batch_size_per_device", "nodes", "gpus_per_node", "case_key", "night", "median_throughput",
    "baseline_median", "baseline_mad", "baseline_nights", "change_pct", "robust_z", "direction",
    "environment_changed", "environment_changes", "environment_id", "status", "last_seen_run_id",
    "closed_at", "closed_reason", "created_at",
)

OPEN_REGRESSIONS = f"""
CREATE VIEW open_regressions AS
SELECT {", ".join(f'g."{c}"' for c in REGRESSION_COLUMNS)},
       b.started_at AS run_started_at, b."trigger"
FROM regressions g
JOIN benchmark_runs b ON b.id = g.benchmark_run_id
WHERE g.status = 'open'
"""

VIEWS = ("open_regressions", "nightly_history", "latest_summary", "case_summary")
"""Views of this revision, dependents first (the drop order)."""


def _timestamp(name: str, nullable: bool = False, now: bool = False) -> sa.Column:
    return sa.Column(
        name,
        sa.DateTime(timezone=True),
        nullable=nullable,
        server_default=sa.func.now() if now else None,
    )


def _configuration_columns() -> list[sa.Column]:
    return [
        sa.Column("framework", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("precision", sa.Text(), nullable=False),
        sa.Column("batch_size_per_device", sa.Integer(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("gpus_per_node", sa.Integer(), nullable=False),
    ]


CONFIGURATION_NAMES = ["framework", "model", "precision", "batch_size_per_device", "nodes", "gpus_per_node"]


def create_views(dialect: str) -> None:
    """Create this revision's views for ``dialect`` (postgresql or sqlite)."""
    pg = dialect == "postgresql"
    op.execute(CASE_SUMMARY_PG if pg else CASE_SUMMARY_SQLITE)
    op.execute(LATEST_SUMMARY_PG if pg else LATEST_SUMMARY_SQLITE)
    op.execute(NIGHTLY_HISTORY.format(night=NIGHT_PG if pg else NIGHT_SQLITE))
    op.execute(OPEN_REGRESSIONS)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.execute("DROP VIEW IF EXISTS case_summary")
    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        _timestamp("captured_at"),
        sa.Column("framework", sa.Text(), nullable=True),
        sa.Column("framework_version", sa.Text(), nullable=True),
        sa.Column("image", sa.Text(), nullable=True),
        sa.Column("image_digest", sa.Text(), nullable=True),
        sa.Column("hostnames", sa.Text(), nullable=True),
        sa.Column("gpu_model", sa.Text(), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("driver_version", sa.Text(), nullable=True),
        sa.Column("cuda_version", sa.Text(), nullable=True),
        sa.Column("cudnn_version", sa.Text(), nullable=True),
        sa.Column("nccl_version", sa.Text(), nullable=True),
        sa.Column("power_limit_w", sa.Float(), nullable=True),
        sa.Column("sm_clock_max_mhz", sa.Float(), nullable=True),
        sa.Column("cpu_model", sa.Text(), nullable=True),
        sa.Column("cpu_count", sa.Integer(), nullable=True),
        sa.Column("memory_total_mb", sa.Float(), nullable=True),
        sa.Column("missing", sa.Text(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environments")),
        sa.UniqueConstraint("content_hash", name=op.f("uq_environments_content_hash")),
    )
    with op.batch_alter_table("benchmark_runs") as batch:
        batch.add_column(sa.Column("triggered_by", sa.Text(), nullable=True))
        batch.add_column(sa.Column("report_path", sa.Text(), nullable=True))

    op.drop_index(op.f("ix_results_case_shape"), table_name="results")
    op.drop_index(op.f("ix_results_dag_id_run_id"), table_name="results")
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("environment_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("gpu_memory_peak_mb", sa.Float(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_results_environment_id_environments"),
            "environments",
            ["environment_id"],
            ["id"],
            ondelete="SET NULL",
        )
    op.create_index(
        op.f("ix_results_run_configuration"), "results", ["run_id", "dag_id", *CONFIGURATION_NAMES]
    )
    op.create_index(
        op.f("ix_results_configuration_started"), "results", [*CONFIGURATION_NAMES, "started_at"]
    )
    op.create_index(op.f("ix_results_environment_id"), "results", ["environment_id"])
    op.create_index(op.f("ix_results_benchmark_run_id"), "results", ["benchmark_run_id"])

    op.create_table(
        "regressions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("benchmark_run_id", sa.Integer(), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        *_configuration_columns(),
        sa.Column("case_key", sa.Text(), nullable=False),
        sa.Column("night", sa.Date(), nullable=False),
        sa.Column("median_throughput", sa.Float(), nullable=False),
        sa.Column("baseline_median", sa.Float(), nullable=False),
        sa.Column("baseline_mad", sa.Float(), nullable=False),
        sa.Column("baseline_nights", sa.Integer(), nullable=False),
        sa.Column("change_pct", sa.Float(), nullable=False),
        sa.Column("robust_z", sa.Float(), nullable=False),
        sa.Column("direction", sa.String(16), nullable=False),
        sa.Column("environment_changed", sa.Boolean(), nullable=False),
        sa.Column("environment_changes", sa.Text(), nullable=True),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("last_seen_run_id", sa.String(250), nullable=True),
        _timestamp("closed_at", nullable=True),
        sa.Column("closed_reason", sa.Text(), nullable=True),
        _timestamp("created_at", now=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_regressions")),
        sa.ForeignKeyConstraint(
            ["benchmark_run_id"],
            ["benchmark_runs.id"],
            name=op.f("fk_regressions_benchmark_run_id_benchmark_runs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
            name=op.f("fk_regressions_environment_id_environments"),
            ondelete="SET NULL",
        ),
        sa.UniqueConstraint(
            "benchmark_run_id", "case_key", name=op.f("uq_regressions_benchmark_run_id_case_key")
        ),
        sa.CheckConstraint("status IN ('open', 'closed')", name=op.f("ck_regressions_status")),
        sa.CheckConstraint(
            "direction IN ('slower', 'faster')", name=op.f("ck_regressions_direction")
        ),
    )
    op.create_index(
        op.f("ix_regressions_configuration_status"),
        "regressions",
        [*CONFIGURATION_NAMES, "status"],
    )
    create_views(dialect)


def _initial_case_summary_sql() -> str:
    """0001's case_summary (restored on downgrade), read from the frozen 0001 module."""
    path = Path(__file__).with_name("0001_initial.py")
    spec = importlib.util.spec_from_file_location("dlperf_migration_0001", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASE_SUMMARY_SQL


def downgrade() -> None:
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    op.drop_index(op.f("ix_regressions_configuration_status"), table_name="regressions")
    op.drop_table("regressions")
    op.drop_index(op.f("ix_results_benchmark_run_id"), table_name="results")
    op.drop_index(op.f("ix_results_environment_id"), table_name="results")
    op.drop_index(op.f("ix_results_configuration_started"), table_name="results")
    op.drop_index(op.f("ix_results_run_configuration"), table_name="results")
    with op.batch_alter_table("results") as batch:
        batch.drop_constraint(op.f("fk_results_environment_id_environments"), type_="foreignkey")
        batch.drop_column("gpu_memory_peak_mb")
        batch.drop_column("environment_id")
    op.create_index(op.f("ix_results_dag_id_run_id"), "results", ["dag_id", "run_id"])
    op.create_index(op.f("ix_results_case_shape"), "results", CONFIGURATION_NAMES)
    # Not batch mode: on SQLite a batch "move and copy" drops benchmark_runs, and with foreign keys on
    # that DROP deletes every row first, cascading to all results. ALTER TABLE DROP COLUMN (SQLite
    # 3.35+) keeps the rows.
    op.drop_column("benchmark_runs", "report_path")
    op.drop_column("benchmark_runs", "triggered_by")
    op.drop_table("environments")
    op.execute(_initial_case_summary_sql())
