"""All-reduce bandwidth probes (the fabric), and the cause of a regression.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 00:00:00

* ``fabric_probes``: one row per repeat of a probe case (``dlperf_core/workload/allreduce.py``, launched like
  the benchmarks of the same topology): status, reason, ranks, backend, dtype, the average bus bandwidth.
  Unique on ``(dag_id, run_id, probe_key, repeat)`` (a retried task updates its row).
* ``fabric_probe_sizes``: one row per message size of an ok probe: time, algorithm and bus bandwidth (GB/s,
  nccl-tests' definitions). Deleted with their probe.
* ``regressions.label``: ``fabric`` (the bus bandwidth of the same night and topology dropped beyond its own
  noise too), ``framework`` (the framework version or image digest changed, the fabric steady) or
  ``unexplained``; NULL for regressions judged before this revision.
* Views: ``fabric_summary`` (per run, probe and message size: the median bus and algorithm bandwidth over the
  ok repeats) and ``fabric_history`` (the same for scheduled runs, with the night); ``open_regressions``
  carries ``label``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LABELS = ("fabric", "framework", "unexplained")

_MEDIAN_PG = "percentile_cont(0.5) WITHIN GROUP (ORDER BY {c}) FILTER (WHERE p.status = 'ok')"

FABRIC_SUMMARY_PG = f"""
CREATE VIEW fabric_summary AS
SELECT p.dag_id, p.run_id, p.probe_key, p.nodes, p.gpus_per_node, p.nodes * p.gpus_per_node AS total_gpus,
       s.size_bytes,
       COUNT(*) FILTER (WHERE p.status = 'ok') AS n,
       {_MEDIAN_PG.format(c="s.busbw_gbs")} AS busbw_gbs,
       {_MEDIAN_PG.format(c="s.algbw_gbs")} AS algbw_gbs,
       {_MEDIAN_PG.format(c="s.time_us")} AS time_us,
       MAX(p.environment_id) AS environment_id
FROM fabric_probes p
JOIN fabric_probe_sizes s ON s.probe_id = p.id
GROUP BY p.dag_id, p.run_id, p.probe_key, p.nodes, p.gpus_per_node, s.size_bytes
"""


def _sqlite_median(name: str, column: str) -> str:
    return f"""
ranked_{name} AS (
    SELECT p.dag_id, p.run_id, p.probe_key, s.size_bytes, s.{column} AS v,
           ROW_NUMBER() OVER (PARTITION BY p.dag_id, p.run_id, p.probe_key, s.size_bytes ORDER BY s.{column}) AS rn,
           COUNT(*) OVER (PARTITION BY p.dag_id, p.run_id, p.probe_key, s.size_bytes) AS cnt
    FROM fabric_probes p JOIN fabric_probe_sizes s ON s.probe_id = p.id
    WHERE p.status = 'ok'
),
median_{name} AS (
    SELECT dag_id, run_id, probe_key, size_bytes, AVG(v) AS {name}
    FROM ranked_{name}
    WHERE rn IN ((cnt + 1) / 2, (cnt + 2) / 2)
    GROUP BY dag_id, run_id, probe_key, size_bytes
),"""


FABRIC_SUMMARY_SQLITE = f"""
CREATE VIEW fabric_summary AS
WITH {_sqlite_median("busbw_gbs", "busbw_gbs")}{_sqlite_median("algbw_gbs", "algbw_gbs")}{_sqlite_median("time_us", "time_us")}
cases AS (
    SELECT p.dag_id, p.run_id, p.probe_key, p.nodes, p.gpus_per_node, s.size_bytes,
           COUNT(CASE WHEN p.status = 'ok' THEN 1 END) AS n, MAX(p.environment_id) AS environment_id
    FROM fabric_probes p JOIN fabric_probe_sizes s ON s.probe_id = p.id
    GROUP BY p.dag_id, p.run_id, p.probe_key, p.nodes, p.gpus_per_node, s.size_bytes
)
SELECT c.dag_id, c.run_id, c.probe_key, c.nodes, c.gpus_per_node, c.nodes * c.gpus_per_node AS total_gpus,
       c.size_bytes, c.n, b.busbw_gbs, a.algbw_gbs, t.time_us, c.environment_id
FROM cases c
LEFT JOIN median_busbw_gbs b ON b.dag_id = c.dag_id AND b.run_id = c.run_id AND b.probe_key = c.probe_key
 AND b.size_bytes = c.size_bytes
LEFT JOIN median_algbw_gbs a ON a.dag_id = c.dag_id AND a.run_id = c.run_id AND a.probe_key = c.probe_key
 AND a.size_bytes = c.size_bytes
LEFT JOIN median_time_us t ON t.dag_id = c.dag_id AND t.run_id = c.run_id AND t.probe_key = c.probe_key
 AND t.size_bytes = c.size_bytes
"""

FABRIC_HISTORY = """
CREATE VIEW fabric_history AS
SELECT f.probe_key, f.nodes, f.gpus_per_node, f.total_gpus, f.size_bytes, {night} AS night, b.started_at,
       f.dag_id, f.run_id, b.status AS run_status, f.n, f.busbw_gbs, f.algbw_gbs, f.time_us, f.environment_id
FROM fabric_summary f
JOIN benchmark_runs b ON b.dag_id = f.dag_id AND b.run_id = f.run_id
WHERE b."trigger" = 'scheduled'
"""
FABRIC_HISTORY_PG = FABRIC_HISTORY.format(night="CAST(b.started_at AT TIME ZONE 'UTC' AS DATE)")
FABRIC_HISTORY_SQLITE = FABRIC_HISTORY.format(night="DATE(b.started_at)")
FABRIC_VIEWS = ("fabric_history", "fabric_summary", "open_regressions")
"""Views of this revision, dependents first (the drop order)."""


def _frozen(name: str):
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"dlperf_migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _open_regressions(columns: tuple[str, ...]) -> str:
    return f"""
CREATE VIEW open_regressions AS
SELECT {", ".join(f'g."{c}"' for c in columns)},
       b.started_at AS run_started_at, b."trigger"
FROM regressions g
JOIN benchmark_runs b ON b.id = g.benchmark_run_id
WHERE g.status = 'open'
"""


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    pg = dialect == "postgresql"
    m0006 = _frozen("0006_variants_efficiency.py")
    op.create_table(
        "fabric_probes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("benchmark_run_id", sa.Integer(), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("probe_key", sa.Text(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("gpus_per_node", sa.Integer(), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("ranks", sa.Integer(), nullable=True),
        sa.Column("backend", sa.Text(), nullable=True),
        sa.Column("dtype", sa.Text(), nullable=True),
        sa.Column("avg_busbw_gbs", sa.Float(), nullable=True),
        sa.Column("log_path", sa.Text(), nullable=True),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("status IN ('ok', 'failed')", name=op.f("ck_fabric_probes_status")),
        sa.ForeignKeyConstraint(["benchmark_run_id"], ["benchmark_runs.id"],
                                name=op.f("fk_fabric_probes_benchmark_run_id_benchmark_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["environment_id"], ["environments.id"],
                                name=op.f("fk_fabric_probes_environment_id_environments"), ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fabric_probes")),
        sa.UniqueConstraint("dag_id", "run_id", "probe_key", "repeat",
                            name=op.f("uq_fabric_probes_dag_id_run_id_probe_key_repeat")),
    )
    op.create_index("ix_fabric_probes_run", "fabric_probes", ["run_id", "dag_id"])
    op.create_index("ix_fabric_probes_topology_started", "fabric_probes", ["nodes", "gpus_per_node", "started_at"])
    op.create_table(
        "fabric_probe_sizes",
        sa.Column("probe_id", sa.Integer(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("time_us", sa.Float(), nullable=False),
        sa.Column("algbw_gbs", sa.Float(), nullable=False),
        sa.Column("busbw_gbs", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["probe_id"], ["fabric_probes.id"],
                                name=op.f("fk_fabric_probe_sizes_probe_id_fabric_probes"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("probe_id", "size_bytes", name=op.f("pk_fabric_probe_sizes")),
    )
    op.execute("DROP VIEW IF EXISTS open_regressions")
    op.add_column("regressions", sa.Column("label", sa.String(16), nullable=True))
    if pg:  # SQLite cannot add a CHECK to an existing table (the model checks the values it writes)
        op.create_check_constraint(
            op.f("ck_regressions_label"), "regressions", f"label IN ({', '.join(repr(v) for v in LABELS)})"
        )
    op.execute(_open_regressions((*m0006.REGRESSION_COLUMNS, "label")))
    op.execute(FABRIC_SUMMARY_PG if pg else FABRIC_SUMMARY_SQLITE)
    op.execute(FABRIC_HISTORY_PG if pg else FABRIC_HISTORY_SQLITE)


def downgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    m0006 = _frozen("0006_variants_efficiency.py")
    for view in FABRIC_VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    if pg:
        op.drop_constraint(op.f("ck_regressions_label"), "regressions", type_="check")
    op.drop_column("regressions", "label")
    op.execute(m0006.OPEN_REGRESSIONS)
    op.drop_table("fabric_probe_sizes")
    op.drop_index("ix_fabric_probes_topology_started", table_name="fabric_probes")
    op.drop_index("ix_fabric_probes_run", table_name="fabric_probes")
    op.drop_table("fabric_probes")
