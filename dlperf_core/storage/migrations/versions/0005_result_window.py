"""Every result records the measured window it used, and whether that window was fitted to a foreign log.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 00:00:00

``results.window_first`` / ``window_last``: the first and last iteration numbers counted by the throughput
rule (NULL for a failed repeat, and for rows stored before this revision). ``results.window_fitted``: true
when the window was shortened to fit a log that dlperf did not launch (``dlperf parse`` / ``dlperf import``
use fitted windows by default, see ``ParseOptions.fit``); runs that dlperf launched keep the strict window
and store false.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # plain ADD COLUMN on every dialect (SQLite too): no table rebuild, the views on ``results`` stay valid
    op.add_column("results", sa.Column("window_first", sa.Integer(), nullable=True))
    op.add_column("results", sa.Column("window_last", sa.Integer(), nullable=True))
    op.add_column("results", sa.Column("window_fitted", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    for column in ("window_fitted", "window_last", "window_first"):
        op.drop_column("results", column)
