"""A regression names its first bad night, and a person can accept it as the new normal.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06 00:00:00

* ``regressions.first_bad_night`` (date, NULL): when change points confirmed the regression
  (``dlperf_core.measure.regression``, "Confirmed by change points"), the change point's night: the first night
  at the new level. The row's ``night`` stays the night it was found. NULL on every row stored before this
  revision (not known).
* ``regressions.accepted_from`` (date, NULL): the regression was accepted as the new normal (``dlperf regressions
  accept``, the ``dlperf_accept_regression`` DAG, or SQL: docs/operations.md); the regression detector's baseline of
  the configuration starts on this night (its good nights before it are left out of the baseline, never deleted:
  ``nightly_history`` keeps them). Such a row is ``closed`` with ``closed_reason`` ``accepted as the new normal:
  ...``. NULL: not accepted.

* ``open_regressions``: both columns too (after ``label``); it lists the open ones, which an accepted one is not.

Downgrade drops the columns and restores 0007's ``open_regressions``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


NEW_COLUMNS = ("first_bad_night", "accepted_from")


def _frozen(name: str):
    """A frozen earlier revision's module (0007 made ``open_regressions`` as it is before this revision)."""
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"dlperf_migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    m0006 = _frozen("0006_variants_efficiency.py")
    m0007 = _frozen("0007_fabric_probes.py")
    op.execute("DROP VIEW IF EXISTS open_regressions")
    for column in NEW_COLUMNS:
        op.add_column("regressions", sa.Column(column, sa.Date(), nullable=True))
    op.execute(m0007._open_regressions((*m0006.REGRESSION_COLUMNS, "label", *NEW_COLUMNS)))


def downgrade() -> None:
    m0006 = _frozen("0006_variants_efficiency.py")
    m0007 = _frozen("0007_fabric_probes.py")
    op.execute("DROP VIEW IF EXISTS open_regressions")
    for column in reversed(NEW_COLUMNS):
        op.drop_column("regressions", column)
    op.execute(m0007._open_regressions((*m0006.REGRESSION_COLUMNS, "label")))
