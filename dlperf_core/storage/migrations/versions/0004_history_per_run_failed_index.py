"""nightly_history summarises only the runs a query asks for (PostgreSQL); an index for failed repeats.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 00:00:00

* PostgreSQL: ``nightly_history`` is driven by ``benchmark_runs``: each scheduled run's cases are summarised in
  a ``LATERAL`` subquery whose top level is the GROUP BY (so it is not flattened: outer filters on the
  configuration or the topology, e.g. ``nodes * gpus_per_node = 32``, are pushed into it and reach the
  per-run index), and each case's 1n1g baseline is a second ``LATERAL`` index lookup. A filter on the night
  (``night >= CURRENT_DATE - 30``) limits the runs before anything is summarised. 0002's view joined the
  summary of every run to the runs, so a query by night or topology summarised the whole table first
  (seconds at a million rows). Same columns, same figures as ``case_summary`` gives (the tests compare
  both with pandas). SQLite keeps 0002's view.
* PostgreSQL: JIT off for the database (see ``JIT_OFF``).
* ``ix_results_failed``: a partial index on ``results (benchmark_run_id) WHERE status = 'failed'``, so that
  "runs that failed, and why" reads only the failed repeats of the runs it asks for.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NIGHTLY_HISTORY_PG = """
CREATE VIEW nightly_history AS
SELECT s.framework, s.model, s."precision", s.batch_size_per_device, s.nodes, s.gpus_per_node,
       s.case_key, CAST(b.started_at AT TIME ZONE 'UTC' AS DATE) AS night, b.started_at, s.dag_id, s.run_id,
       b.status AS run_status, s.median_throughput, s.n, s.n_failed,
       s.median_throughput / base.throughput AS speedup,
       s.median_throughput / base.throughput / NULLIF(s.nodes * s.gpus_per_node, 0) AS scaling_efficiency,
       s.environment_id
FROM benchmark_runs b
CROSS JOIN LATERAL (
    SELECT r.dag_id, r.run_id, r.case_key, r.framework, r.model, r."precision", r.batch_size_per_device,
           r.nodes, r.gpus_per_node,
           COUNT(*) FILTER (WHERE r.status = 'ok') AS n,
           COUNT(*) FILTER (WHERE r.status = 'failed') AS n_failed,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY r.throughput) FILTER (WHERE r.status = 'ok') AS median_throughput,
           MAX(r.environment_id) AS environment_id
    FROM results r
    WHERE r.run_id = b.run_id AND r.dag_id = b.dag_id
    GROUP BY r.dag_id, r.run_id, r.case_key, r.framework, r.model, r."precision", r.batch_size_per_device,
             r.nodes, r.gpus_per_node
) s
LEFT JOIN LATERAL (
    SELECT AVG(one.median) AS throughput
    FROM (
        SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY r1.throughput) FILTER (WHERE r1.status = 'ok') AS median
        FROM results r1
        WHERE r1.run_id = s.run_id AND r1.dag_id = s.dag_id AND r1.framework = s.framework
          AND r1.model = s.model AND r1."precision" = s."precision"
          AND r1.batch_size_per_device = s.batch_size_per_device AND r1.nodes = 1 AND r1.gpus_per_node = 1
        GROUP BY r1.case_key
    ) one
) base ON TRUE
WHERE b."trigger" = 'scheduled'
"""

#: JIT compilation of these short analytical queries costs far more than it saves: the planner's estimate
#: for a LATERAL summary is high, and compiling took 1.3 s of a 1.4 s query at a million rows. Set for the
#: database (new sessions, also analysts' psql); skipped with a notice where the user may not alter it.
JIT_OFF = """
DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I SET jit = off', current_database());
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'dlperf: could not turn JIT off for this database (not its owner); queries still work';
END $$
"""

JIT_DEFAULT = """
DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I RESET jit', current_database());
EXCEPTION WHEN insufficient_privilege THEN
    NULL;
END $$
"""



def _revision_0002():
    path = Path(__file__).with_name("0002_environments_regressions_views.py")
    spec = importlib.util.spec_from_file_location("dlperf_migration_0002", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_M0002 = _revision_0002()
NIGHTLY_HISTORY_0002_PG = _M0002.NIGHTLY_HISTORY.format(night=_M0002.NIGHT_PG)  # restored on downgrade


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP VIEW IF EXISTS nightly_history")
        op.execute(NIGHTLY_HISTORY_PG)
        op.execute(JIT_OFF)
    op.create_index(
        "ix_results_failed", "results", ["benchmark_run_id"],
        postgresql_where=sa.text("status = 'failed'"), sqlite_where=sa.text("status = 'failed'"),
    )


def downgrade() -> None:
    op.drop_index("ix_results_failed", table_name="results")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(JIT_DEFAULT)
        op.execute("DROP VIEW IF EXISTS nightly_history")
        op.execute(NIGHTLY_HISTORY_0002_PG)
