"""Every result records where its throughput figure came from: ``results.figure_origin``.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26 00:00:00

``results.figure_origin`` (text): who printed the log lines the figure was read from (``dlperf_core.measure.origin``):
``framework`` (the framework's or its benchmark's own code: DLLogger in DeepLearningExamples, MXNet's
Speedometer, MindSpore's TimeMonitor, PLSC's logger, OneFlow-Benchmark), ``dlperf`` (a dlperf driver or
workload printing the seed's format: the reference workload, ``ngc_pytorch`` and ``oneflow`` on CPU nodes) or
``imported`` (``dlperf import``). PostgreSQL CHECKs the values; SQLite cannot add a CHECK to an existing table
(``ResultRecord`` checks what dlperf writes).

Rows stored before this revision stay NULL (unknown), with one exception: rows of framework
``pytorch_reference`` are backfilled as ``dlperf``, the only certain answer (that framework is dlperf's own
workload on every image). The others are not guessed: whether an ``ngc_pytorch`` or ``oneflow`` row ran on CPU
nodes (``dlperf``) or GPU nodes (``framework``), or came from ``dlperf import`` (``imported``), is not in the
row. Downgrade drops the column.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ORIGINS = ("framework", "dlperf", "imported")
"""The allowed values (``dlperf_core.measure.origin.FIGURE_ORIGINS`` when released)."""

CHECK = f"figure_origin IN ({', '.join(repr(v) for v in ORIGINS)})"

#: The backfill: the one framework whose origin is certain (fixed text: nothing is formatted in at run time).
BACKFILL = "UPDATE results SET figure_origin = 'dlperf' WHERE framework = 'pytorch_reference' AND figure_origin IS NULL"


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    # plain ADD COLUMN on every dialect (SQLite too): no table rebuild, the views on ``results`` stay valid
    op.add_column("results", sa.Column("figure_origin", sa.Text(), nullable=True))
    if pg:  # SQLite cannot add a CHECK to an existing table (the record checks the values it writes)
        op.create_check_constraint(op.f("ck_results_figure_origin"), "results", CHECK)
    op.execute(BACKFILL)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint(op.f("ck_results_figure_origin"), "results", type_="check")
    op.drop_column("results", "figure_origin")
