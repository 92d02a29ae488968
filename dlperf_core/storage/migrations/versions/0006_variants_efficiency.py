"""A configuration's variant is part of its identity; MFU, energy and board power per result.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 00:00:00

* ``results.variant`` / ``regressions.variant``: the case key's options suffix (``+name=value...``, and
  ``+compile`` for a torch.compile run; '' for none), backfilled from ``case_key``. It joins the
  configuration columns (``framework, model, precision, batch_size_per_device, variant, nodes,
  gpus_per_node``): before, two variants of one configuration in one run (NGC PyTorch AMP with a static and
  a dynamic loss scale, or eager and compiled) shared one 1n1g baseline (the mean of both) and one
  "latest" row. Indexes on the configuration are rebuilt with it.
* ``results.compiled``: the case ran under ``torch.compile`` (``compile: true`` in the suite).
* ``results.mfu`` (model FLOPs utilisation, 0..1), ``results.energy_per_sample_j`` and
  ``results.gpu_power_mean_w`` (the case's GPUs' mean board power, summed): NULL when unknown (CPU nodes,
  a GPU missing from the peak table), never 0. See ``dlperf_core/measure/efficiency.py``.
* Views: ``case_summary``, ``latest_summary``, ``nightly_history`` group by the variant and carry
  ``variant``, ``compiled``, ``mfu`` and ``energy_per_sample_j`` (medians over the ok repeats);
  ``open_regressions`` carries ``variant``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CONFIGURATION_NAMES = ["framework", "model", "precision", "batch_size_per_device", "variant", "nodes", "gpus_per_node"]
OLD_CONFIGURATION_NAMES = [c for c in CONFIGURATION_NAMES if c != "variant"]
CONFIGURATION = 'framework, model, "precision", batch_size_per_device, variant, nodes, gpus_per_node'

#: The variant of a case key: everything from its first "+" (framework, model, precision and topology have none).
VARIANT_OF_KEY = {
    "postgresql": "CASE WHEN strpos(case_key, '+') > 0 THEN substr(case_key, strpos(case_key, '+')) ELSE '' END",
    "sqlite": "CASE WHEN instr(case_key, '+') > 0 THEN substr(case_key, instr(case_key, '+')) ELSE '' END",
}
#: The backfill of the new column, per dialect (fixed text: no value is formatted into it at run time).
VARIANT_BACKFILL = {
    dialect: tuple(f"UPDATE {table} SET variant = {expr} WHERE case_key LIKE '%+%'" for table in ("results", "regressions"))
    for dialect, expr in VARIANT_OF_KEY.items()
}

# ---------------------------------------------------------------------------- case_summary

CASE_SUMMARY_PG = """
CREATE VIEW case_summary AS
WITH cases AS NOT MATERIALIZED (
    SELECT dag_id, run_id, case_key, framework, model, "precision",
           batch_size_per_device, variant, compiled, nodes, gpus_per_node,
           COUNT(*) FILTER (WHERE status = 'ok') AS n,
           COUNT(*) FILTER (WHERE status = 'failed') AS n_failed,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY throughput)
               FILTER (WHERE status = 'ok') AS median_throughput,
           AVG(throughput) FILTER (WHERE status = 'ok') AS mean_throughput,
           MIN(throughput) FILTER (WHERE status = 'ok') AS min_throughput,
           MAX(throughput) FILTER (WHERE status = 'ok') AS max_throughput,
           stddev_samp(throughput) FILTER (WHERE status = 'ok') AS stdev_throughput,
           MAX(gpu_memory_peak_mb) FILTER (WHERE status = 'ok') AS gpu_memory_peak_mb,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY mfu) FILTER (WHERE status = 'ok') AS mfu,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY energy_per_sample_j)
               FILTER (WHERE status = 'ok') AS energy_per_sample_j,
           MAX(environment_id) AS environment_id
    FROM results
    GROUP BY dag_id, run_id, case_key, framework, model, "precision",
             batch_size_per_device, variant, compiled, nodes, gpus_per_node
),
baseline AS NOT MATERIALIZED (
    SELECT dag_id, run_id, framework, model, "precision", batch_size_per_device, variant,
           AVG(median_throughput) AS baseline_throughput
    FROM cases
    WHERE nodes = 1 AND gpus_per_node = 1
    GROUP BY dag_id, run_id, framework, model, "precision", batch_size_per_device, variant
)
SELECT s.dag_id, s.run_id, s.case_key, s.framework, s.model, s."precision",
       s.batch_size_per_device, s.variant, s.compiled, s.nodes, s.gpus_per_node,
       s.nodes * s.gpus_per_node AS total_gpus,
       s.n, s.n_failed,
       s.median_throughput, s.mean_throughput, s.min_throughput, s.max_throughput,
       s.median_throughput / b.baseline_throughput AS speedup,
       s.median_throughput / b.baseline_throughput
           / NULLIF(s.nodes * s.gpus_per_node, 0) AS scaling_efficiency,
       s.stdev_throughput,
       s.stdev_throughput / NULLIF(s.mean_throughput, 0) AS cv,
       s.gpu_memory_peak_mb, s.mfu, s.energy_per_sample_j,
       s.environment_id
FROM cases s
LEFT JOIN baseline b
  ON b.dag_id = s.dag_id AND b.run_id = s.run_id
 AND b.framework = s.framework AND b.model = s.model AND b."precision" = s."precision"
 AND b.batch_size_per_device = s.batch_size_per_device AND b.variant = s.variant
"""


def _sqlite_median(name: str, column: str) -> str:
    """Two CTEs giving the median of ``column`` over a case's ok repeats (NULLs left out), as 0001's."""
    return f"""
ranked_{name} AS (
    SELECT dag_id, run_id, case_key, {column} AS v,
           ROW_NUMBER() OVER (PARTITION BY dag_id, run_id, case_key ORDER BY {column}) AS rn,
           COUNT(*) OVER (PARTITION BY dag_id, run_id, case_key) AS cnt
    FROM results
    WHERE status = 'ok' AND {column} IS NOT NULL
),
median_{name} AS (
    SELECT dag_id, run_id, case_key, AVG(v) AS {name}
    FROM ranked_{name}
    WHERE rn IN ((cnt + 1) / 2, (cnt + 2) / 2)
    GROUP BY dag_id, run_id, case_key
),"""


CASE_SUMMARY_SQLITE = f"""
CREATE VIEW case_summary AS
WITH {_sqlite_median("median_throughput", "throughput")}{_sqlite_median("mfu", "mfu")}{_sqlite_median("energy_per_sample_j", "energy_per_sample_j")}
cases AS (
    SELECT dag_id, run_id, case_key, framework, model, "precision",
           batch_size_per_device, variant, compiled, nodes, gpus_per_node,
           COUNT(CASE WHEN status = 'ok' THEN 1 END) AS n,
           COUNT(CASE WHEN status = 'failed' THEN 1 END) AS n_failed,
           AVG(CASE WHEN status = 'ok' THEN throughput END) AS mean_throughput,
           MIN(CASE WHEN status = 'ok' THEN throughput END) AS min_throughput,
           MAX(CASE WHEN status = 'ok' THEN throughput END) AS max_throughput,
           MAX(CASE WHEN status = 'ok' THEN gpu_memory_peak_mb END) AS gpu_memory_peak_mb,
           MAX(environment_id) AS environment_id
    FROM results
    GROUP BY dag_id, run_id, case_key, framework, model, "precision",
             batch_size_per_device, variant, compiled, nodes, gpus_per_node
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
           c.batch_size_per_device, c.variant, c.compiled, c.nodes, c.gpus_per_node,
           c.n, c.n_failed, m.median_throughput,
           c.mean_throughput, c.min_throughput, c.max_throughput,
           CASE WHEN c.n > 1 THEN sqrt(sp.squares / (c.n - 1)) END AS stdev_throughput,
           c.gpu_memory_peak_mb, mf.mfu, me.energy_per_sample_j, c.environment_id
    FROM cases c
    LEFT JOIN median_median_throughput m
      ON m.dag_id = c.dag_id AND m.run_id = c.run_id AND m.case_key = c.case_key
    LEFT JOIN median_mfu mf
      ON mf.dag_id = c.dag_id AND mf.run_id = c.run_id AND mf.case_key = c.case_key
    LEFT JOIN median_energy_per_sample_j me
      ON me.dag_id = c.dag_id AND me.run_id = c.run_id AND me.case_key = c.case_key
    LEFT JOIN spread sp
      ON sp.dag_id = c.dag_id AND sp.run_id = c.run_id AND sp.case_key = c.case_key
),
baseline AS (
    SELECT dag_id, run_id, framework, model, "precision", batch_size_per_device, variant,
           AVG(median_throughput) AS baseline_throughput
    FROM summary
    WHERE nodes = 1 AND gpus_per_node = 1
    GROUP BY dag_id, run_id, framework, model, "precision", batch_size_per_device, variant
)
SELECT s.dag_id, s.run_id, s.case_key, s.framework, s.model, s."precision",
       s.batch_size_per_device, s.variant, s.compiled, s.nodes, s.gpus_per_node,
       s.nodes * s.gpus_per_node AS total_gpus,
       s.n, s.n_failed,
       s.median_throughput, s.mean_throughput, s.min_throughput, s.max_throughput,
       s.median_throughput / b.baseline_throughput AS speedup,
       s.median_throughput / b.baseline_throughput
           / NULLIF(s.nodes * s.gpus_per_node, 0) AS scaling_efficiency,
       s.stdev_throughput,
       s.stdev_throughput / NULLIF(s.mean_throughput, 0) AS cv,
       s.gpu_memory_peak_mb, s.mfu, s.energy_per_sample_j,
       s.environment_id
FROM summary s
LEFT JOIN baseline b
  ON b.dag_id = s.dag_id AND b.run_id = s.run_id
 AND b.framework = s.framework AND b.model = s.model AND b."precision" = s."precision"
 AND b.batch_size_per_device = s.batch_size_per_device AND b.variant = s.variant
"""

# ---------------------------------------------------------------------------- latest_summary

_SUMMARY_COLUMNS = """s.dag_id, s.run_id, s.case_key, s.framework, s.model, s."precision",
       s.batch_size_per_device, s.variant, s.compiled, s.nodes, s.gpus_per_node, s.total_gpus, s.n, s.n_failed,
       s.median_throughput, s.mean_throughput, s.min_throughput, s.max_throughput,
       s.speedup, s.scaling_efficiency, s.stdev_throughput, s.cv, s.gpu_memory_peak_mb,
       s.mfu, s.energy_per_sample_j, s.environment_id"""

_R_CONFIGURATION = ", ".join(f"r.{c}" if c != "precision" else 'r."precision"' for c in CONFIGURATION_NAMES)
_C_CONFIGURATION = ", ".join(f"c.{c}" if c != "precision" else 'c."precision"' for c in CONFIGURATION_NAMES)
_SAME_CONFIGURATION = " AND ".join(
    f'{a}."precision" = {b}."precision"' if c == "precision" else f"{a}.{c} = {b}.{c}"
    for a, b in (("r", "c"),)
    for c in CONFIGURATION_NAMES
)
_SAME_CASE = " AND ".join(
    'cs."precision" = n."precision"' if c == "precision" else f"cs.{c} = n.{c}" for c in CONFIGURATION_NAMES
)

#: As 0002's: a loose index scan over the distinct configurations (now with their variant), the newest
#: repeat of each, and only that run's case summarised.
LATEST_SUMMARY_PG = f"""
CREATE VIEW latest_summary AS
WITH RECURSIVE configurations AS (
    (SELECT {CONFIGURATION} FROM results ORDER BY {CONFIGURATION} LIMIT 1)
    UNION ALL
    SELECT nxt.*
    FROM configurations c
    CROSS JOIN LATERAL (
        SELECT {_R_CONFIGURATION}
        FROM results r
        WHERE ({_R_CONFIGURATION}) > ({_C_CONFIGURATION})
        ORDER BY {_R_CONFIGURATION}
        LIMIT 1
    ) nxt
),
newest AS (
    SELECT c.*, latest.dag_id, latest.run_id, latest.case_key
    FROM configurations c
    CROSS JOIN LATERAL (
        SELECT r.dag_id, r.run_id, r.case_key
        FROM results r
        WHERE {_SAME_CONFIGURATION}
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
      AND {_SAME_CASE}
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
 AND {_SAME_CASE.replace("cs.", "s.")}
JOIN benchmark_runs b ON b.dag_id = s.dag_id AND b.run_id = s.run_id
WHERE n.rn = 1
"""

# ---------------------------------------------------------------------------- nightly_history

#: 0004's per-run LATERAL summary, grouped by the variant too, with the medians of MFU and energy.
NIGHTLY_HISTORY_PG = """
CREATE VIEW nightly_history AS
SELECT s.framework, s.model, s."precision", s.batch_size_per_device, s.variant, s.compiled, s.nodes,
       s.gpus_per_node, s.case_key, CAST(b.started_at AT TIME ZONE 'UTC' AS DATE) AS night, b.started_at,
       s.dag_id, s.run_id, b.status AS run_status, s.median_throughput, s.n, s.n_failed,
       s.median_throughput / base.throughput AS speedup,
       s.median_throughput / base.throughput / NULLIF(s.nodes * s.gpus_per_node, 0) AS scaling_efficiency,
       s.mfu, s.energy_per_sample_j, s.environment_id
FROM benchmark_runs b
CROSS JOIN LATERAL (
    SELECT r.dag_id, r.run_id, r.case_key, r.framework, r.model, r."precision", r.batch_size_per_device,
           r.variant, r.compiled, r.nodes, r.gpus_per_node,
           COUNT(*) FILTER (WHERE r.status = 'ok') AS n,
           COUNT(*) FILTER (WHERE r.status = 'failed') AS n_failed,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY r.throughput) FILTER (WHERE r.status = 'ok') AS median_throughput,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY r.mfu) FILTER (WHERE r.status = 'ok') AS mfu,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY r.energy_per_sample_j)
               FILTER (WHERE r.status = 'ok') AS energy_per_sample_j,
           MAX(r.environment_id) AS environment_id
    FROM results r
    WHERE r.run_id = b.run_id AND r.dag_id = b.dag_id
    GROUP BY r.dag_id, r.run_id, r.case_key, r.framework, r.model, r."precision", r.batch_size_per_device,
             r.variant, r.compiled, r.nodes, r.gpus_per_node
) s
LEFT JOIN LATERAL (
    SELECT AVG(one.median) AS throughput
    FROM (
        SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY r1.throughput) FILTER (WHERE r1.status = 'ok') AS median
        FROM results r1
        WHERE r1.run_id = s.run_id AND r1.dag_id = s.dag_id AND r1.framework = s.framework
          AND r1.model = s.model AND r1."precision" = s."precision"
          AND r1.batch_size_per_device = s.batch_size_per_device AND r1.variant = s.variant
          AND r1.nodes = 1 AND r1.gpus_per_node = 1
        GROUP BY r1.case_key
    ) one
) base ON TRUE
WHERE b."trigger" = 'scheduled'
"""

NIGHTLY_HISTORY_SQLITE = """
CREATE VIEW nightly_history AS
SELECT s.framework, s.model, s."precision", s.batch_size_per_device, s.variant, s.compiled, s.nodes,
       s.gpus_per_node, s.case_key, DATE(b.started_at) AS night, b.started_at, s.dag_id, s.run_id,
       b.status AS run_status, s.median_throughput, s.n, s.n_failed, s.speedup, s.scaling_efficiency,
       s.mfu, s.energy_per_sample_j, s.environment_id
FROM case_summary s
JOIN benchmark_runs b ON b.dag_id = s.dag_id AND b.run_id = s.run_id
WHERE b."trigger" = 'scheduled'
"""

# ---------------------------------------------------------------------------- open_regressions

REGRESSION_COLUMNS = (
    "id", "benchmark_run_id", "dag_id", "run_id", "framework", "model", "precision",
    "batch_size_per_device", "nodes", "gpus_per_node", "case_key", "night", "median_throughput",
    "baseline_median", "baseline_mad", "baseline_nights", "change_pct", "robust_z", "direction",
    "environment_changed", "environment_changes", "environment_id", "status", "last_seen_run_id",
    "closed_at", "closed_reason", "created_at", "variant",
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
"""Views rebuilt by this revision, dependents first (the drop order)."""

INDEXES = (  # (name, table, columns before the configuration, columns after it)
    ("ix_results_run_configuration", "results", ["run_id", "dag_id"], []),
    ("ix_results_configuration_started", "results", [], ["started_at"]),
    ("ix_regressions_configuration_status", "regressions", [], ["status"]),
)


def _create_indexes(configuration: list[str]) -> None:
    for name, table, before, after in INDEXES:
        op.create_index(name, table, [*before, *configuration, *after])


def _drop_indexes() -> None:
    for name, table, _, _ in INDEXES:
        op.drop_index(name, table_name=table)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    pg = dialect == "postgresql"
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    op.add_column("results", sa.Column("variant", sa.Text(), server_default="", nullable=False))
    op.add_column("results", sa.Column("compiled", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.add_column("results", sa.Column("mfu", sa.Float(), nullable=True))
    op.add_column("results", sa.Column("energy_per_sample_j", sa.Float(), nullable=True))
    op.add_column("results", sa.Column("gpu_power_mean_w", sa.Float(), nullable=True))
    op.add_column("regressions", sa.Column("variant", sa.Text(), server_default="", nullable=False))
    for statement in VARIANT_BACKFILL["postgresql" if pg else "sqlite"]:
        op.execute(statement)
    _drop_indexes()
    _create_indexes(CONFIGURATION_NAMES)
    op.execute(CASE_SUMMARY_PG if pg else CASE_SUMMARY_SQLITE)
    op.execute(LATEST_SUMMARY_PG if pg else LATEST_SUMMARY_SQLITE)
    op.execute(NIGHTLY_HISTORY_PG if pg else NIGHTLY_HISTORY_SQLITE)
    op.execute(OPEN_REGRESSIONS)


def _frozen(name: str):
    """A frozen earlier revision's module (its view SQL is restored on downgrade)."""
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"dlperf_migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def downgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    m0002 = _frozen("0002_environments_regressions_views.py")
    m0004 = _frozen("0004_history_per_run_failed_index.py")
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    _drop_indexes()
    _create_indexes(OLD_CONFIGURATION_NAMES)
    for column in ("gpu_power_mean_w", "energy_per_sample_j", "mfu", "compiled", "variant"):
        op.drop_column("results", column)
    op.drop_column("regressions", "variant")
    op.execute(m0002.CASE_SUMMARY_PG if pg else m0002.CASE_SUMMARY_SQLITE)
    op.execute(m0002.LATEST_SUMMARY_PG if pg else m0002.LATEST_SUMMARY_SQLITE)
    op.execute(m0004.NIGHTLY_HISTORY_PG if pg else m0002.NIGHTLY_HISTORY.format(night=m0002.NIGHT_SQLITE))
    op.execute(m0002.OPEN_REGRESSIONS)
