"""A configuration's identity covers what changes the work; every result keeps its configuration and launch spec.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 00:00:00

* ``results.configuration`` (JSON): everything that changes what is trained or measured
  (``dlperf_core.model.Case.configuration``: framework, model, precision, batch, topology, options, compile,
  extra arguments, warm-up and measured iterations). Its fingerprint ends the case key and the variant
  (``...+args=1f0c9a2e``), so results that differ in any of those never share a baseline, a history series, a
  ``latest`` row or a regression: those all follow ``case_key``/``variant``.
* ``results.launch_spec`` (JSON): what was launched on each node (image tag, ID and digest, argv,
  environment without secrets, container settings, dlperf version), for ``dlperf reproduce``.
* ``results.compiled`` is renamed ``compile``, the suite's name for the flag, and the views with it.

Rows stored before this revision keep every value; their configuration and launch spec stay NULL (not
known: nothing recorded their extra arguments or window, and they are not guessed), and ``+args=unknown`` is
appended to their ``case_key`` and ``variant`` (in ``results`` and ``regressions``). So every series stored
before goes on as its own series ending ``+args=unknown``, and the first night after the upgrade starts a new
one for each configuration: the nightly detector judges it only once that has enough good nights of its own
(docs/operations.md says what that means; the regression step says so per case while it waits). Downgrade
removes the two columns and the suffix, and restores the name ``compiled``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNKNOWN = "+args=unknown"
"""The suffix of a row whose configuration was not recorded (``dlperf_core.model.UNKNOWN_ARGS`` when released)."""

UNKNOWN_LENGTH = 13
"""``len(UNKNOWN)``, written out (the downgrade's SQL holds only this module's constants)."""
assert len(UNKNOWN) == UNKNOWN_LENGTH

TABLES = ("results", "regressions")
"""The tables whose ``case_key`` and ``variant`` carry the suffix."""


def _frozen(name: str):
    """A frozen earlier revision's module (its view SQL is the base of this one's, and is restored on downgrade)."""
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"dlperf_migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


m0006 = _frozen("0006_variants_efficiency.py")
m0008 = _frozen("0008_unreliable_configurations.py")


def _renamed(sql: str) -> str:
    """A view of 0006/0008 reading ``compile`` where it read ``compiled`` (the only word of those texts with it)."""
    assert sql.count("compiled") >= 1
    return sql.replace("compiled", "compile")


BEFORE = {
    "postgresql": (m0008.CASE_SUMMARY_PG, m0008.LATEST_SUMMARY_PG, m0006.NIGHTLY_HISTORY_PG),
    "sqlite": (m0008.CASE_SUMMARY_SQLITE, m0008.LATEST_SUMMARY_SQLITE, m0006.NIGHTLY_HISTORY_SQLITE),
}
"""The views as 0008 left them, per dialect, in creation order."""
AFTER = {dialect: tuple(_renamed(sql) for sql in views) for dialect, views in BEFORE.items()}

VIEWS = ("nightly_history", "latest_summary", "case_summary")
"""Views rebuilt by this revision, dependents first (the drop order)."""


def _dialect() -> str:
    return "postgresql" if op.get_bind().dialect.name == "postgresql" else "sqlite"


def upgrade() -> None:
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    op.add_column("results", sa.Column("configuration", sa.JSON(), nullable=True))
    op.add_column("results", sa.Column("launch_spec", sa.JSON(), nullable=True))
    op.execute('ALTER TABLE results RENAME COLUMN compiled TO "compile"')
    for table in TABLES:
        op.execute(
            f"UPDATE {table} SET case_key = case_key || '{UNKNOWN}', variant = variant || '{UNKNOWN}' "
            "WHERE case_key NOT LIKE '%+args=%'"
        )
    for sql in AFTER[_dialect()]:
        op.execute(sql)


def downgrade() -> None:
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    for table in TABLES:  # only the suffix this revision added; rows stored since keep theirs (their fingerprint)
        op.execute(
            f"UPDATE {table} SET case_key = substr(case_key, 1, length(case_key) - {UNKNOWN_LENGTH}), "
            f"variant = substr(variant, 1, length(variant) - {UNKNOWN_LENGTH}) WHERE case_key LIKE '%{UNKNOWN}'"
        )
    op.execute('ALTER TABLE results RENAME COLUMN "compile" TO compiled')
    op.drop_column("results", "launch_spec")
    op.drop_column("results", "configuration")
    for sql in BEFORE[_dialect()]:
        op.execute(sql)
