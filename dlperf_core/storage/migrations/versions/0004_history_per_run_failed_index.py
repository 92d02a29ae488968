"""nightly_history summarises only the runs a query asks for (PostgreSQL); an index for failed repeats.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 00:00:00

* PostgreSQL: ``nightly_history`` is driven by ``benchmark_runs`` and summarises each scheduled run through a
  ``LATERAL`` lookup into ``case_summary``. A filter on the night (``night >= CURRENT_DATE - 30``) now limits
  the runs before anything is summarised, and a filter on the configuration or the topology (``nodes *
  gpus_per_node = 32``) still reaches the per-run summary and its indexes. 0002's view joined the summary of
  every run to the runs, so a query by night or topology summarised the whole table first (seconds at a
  million rows). Same columns, same figures. SQLite keeps 0002's view.
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
       b.status AS run_status, s.median_throughput, s.n, s.n_failed, s.speedup, s.scaling_efficiency,
       s.environment_id
FROM benchmark_runs b
CROSS JOIN LATERAL (
    SELECT * FROM case_summary cs
    WHERE cs.dag_id = b.dag_id AND cs.run_id = b.run_id
) s
WHERE b."trigger" = 'scheduled'
"""


def _revision_0002():
    path = Path(__file__).with_name("0002_environments_regressions_views.py")
    spec = importlib.util.spec_from_file_location("dlperf_migration_0002", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP VIEW IF EXISTS nightly_history")
        op.execute(NIGHTLY_HISTORY_PG)
    op.create_index(
        "ix_results_failed", "results", ["benchmark_run_id"],
        postgresql_where=sa.text("status = 'failed'"), sqlite_where=sa.text("status = 'failed'"),
    )


def downgrade() -> None:
    op.drop_index("ix_results_failed", table_name="results")
    if op.get_bind().dialect.name == "postgresql":
        m0002 = _revision_0002()
        op.execute("DROP VIEW IF EXISTS nightly_history")
        op.execute(m0002.NIGHTLY_HISTORY.format(night=m0002.NIGHT_PG))
