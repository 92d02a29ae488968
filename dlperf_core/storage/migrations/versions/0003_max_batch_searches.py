"""Max batch size searches: one row per search of a benchmark run, with its probes.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 00:00:00

``max_batch_searches`` keeps what ``dlperf_core.measure.maxbatch`` concluded for one framework, model, precision,
options and topology in one benchmark run: the stepping (start, step, limit), the verdict (status,
max_batch, first_oom_batch, reason) and every probe (batch, status, reason, throughput) as JSON.
Unique on ``(dag_id, run_id, search_key)``: a retried task updates its row.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "max_batch_searches",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("benchmark_run_id", sa.Integer(), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("search_key", sa.Text(), nullable=False),
        sa.Column("framework", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("precision", sa.Text(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("gpus_per_node", sa.Integer(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("limit", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("max_batch", sa.Integer(), nullable=True),
        sa.Column("first_oom_batch", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("probes", sa.JSON(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint(
            "status IN ('found', 'limit_reached', 'none_fit', 'failed')", name=op.f("ck_max_batch_searches_status")
        ),
        sa.ForeignKeyConstraint(
            ["benchmark_run_id"], ["benchmark_runs.id"],
            name=op.f("fk_max_batch_searches_benchmark_run_id_benchmark_runs"), ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"], ["environments.id"],
            name=op.f("fk_max_batch_searches_environment_id_environments"), ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_max_batch_searches")),
        sa.UniqueConstraint("dag_id", "run_id", "search_key", name=op.f("uq_max_batch_searches_dag_id_run_id_search_key")),
    )
    op.create_index(op.f("ix_max_batch_searches_benchmark_run_id"), "max_batch_searches", ["benchmark_run_id"])
    op.create_index(
        op.f("ix_max_batch_searches_search_key_started_at"), "max_batch_searches", ["search_key", "started_at"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_max_batch_searches_search_key_started_at"), table_name="max_batch_searches")
    op.drop_index(op.f("ix_max_batch_searches_benchmark_run_id"), table_name="max_batch_searches")
    op.drop_table("max_batch_searches")
