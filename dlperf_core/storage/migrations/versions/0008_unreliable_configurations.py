"""A configuration too noisy to read is flagged: ``unreliable`` and ``unreliable_reason`` in the summaries.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 00:00:00

* ``case_summary``: 0006's view plus ``unreliable`` (boolean) and ``unreliable_reason`` (text, NULL when
  reliable). A case of a run is unreliable when its CV across the ok repeats (stdev/mean) is above
  ``MAX_RELIABLE_CV`` (0.10), or when its speedup against the run's 1n1g is above its device count
  (nodes x GPUs per node: super-linear scaling is not believable). An unknown CV (one ok repeat) or speedup
  (no 1n1g) flags nothing. The reason reads ``CV 0.71 > 0.10``, ``speedup 4.40 > 2 devices``, or both joined
  by ``; `` (two decimals), the wording of ``dlperf_core.measure.noise.unreliable_reason``.
* ``latest_summary`` carries both columns (before ``started_at`` and ``trigger``, as case_summary has them).
* ``nightly_history`` is recreated unchanged (on SQLite it reads case_summary).

The threshold is written here as a literal (a released migration keeps the SQL it ran); a test checks it
against ``dlperf_core.measure.noise.MAX_RELIABLE_CV``, so a new threshold needs a new revision.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_RELIABLE_CV = 0.10
"""The CV above which a configuration is unreliable (``dlperf_core.measure.noise.MAX_RELIABLE_CV`` when released)."""

# The figures of the rule, as 0006's case_summary computes them in its last SELECT (s: the case, b: its 1n1g)
CV = "s.stdev_throughput / NULLIF(s.mean_throughput, 0)"
SPEEDUP = "s.median_throughput / b.baseline_throughput"
DEVICES = "s.nodes * s.gpus_per_node"

NOISY = f"{CV} > {MAX_RELIABLE_CV!r}"
SUPERLINEAR = f"{SPEEDUP} > {DEVICES}"
#: ``unreliable``: either holds (an unknown CV or speedup, NULL, counts as not holding)
UNRELIABLE = f"(COALESCE({NOISY}, FALSE) OR COALESCE({SUPERLINEAR}, FALSE))"

#: A number as text with two decimals, per dialect (``f"{x:.2f}"`` in Python).
TWO_DECIMALS = {
    "postgresql": "CAST(ROUND(CAST({x} AS numeric), 2) AS text)",
    "sqlite": "printf('%.2f', {x})",
}


def unreliable_reason(dialect: str) -> str:
    """The SQL of ``unreliable_reason``: NULL, or the reason(s) why, joined by '; '."""
    two = TWO_DECIMALS[dialect]
    cv_text = f"'CV ' || {two.format(x=CV)} || ' > {MAX_RELIABLE_CV:.2f}'"
    speedup_text = f"'speedup ' || {two.format(x=SPEEDUP)} || ' > ' || CAST({DEVICES} AS text) || ' devices'"
    return (
        f"CASE WHEN {NOISY} AND {SUPERLINEAR} THEN {cv_text} || '; ' || {speedup_text}\n"
        f"            WHEN {NOISY} THEN {cv_text}\n"
        f"            WHEN {SUPERLINEAR} THEN {speedup_text} END"
    )


def unreliable_columns(dialect: str) -> str:
    """The two new columns of case_summary's last SELECT."""
    return f"{UNRELIABLE} AS unreliable,\n       {unreliable_reason(dialect)} AS unreliable_reason"


def _frozen(name: str):
    """A frozen earlier revision's module (its view SQL is the base of this one's, and is restored on downgrade)."""
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"dlperf_migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _add_after(sql: str, marker: str, added: str) -> str:
    """``sql`` with ``added`` right after ``marker``, which must occur exactly once."""
    assert sql.count(marker) == 1, f"{marker!r} occurs {sql.count(marker)} times"
    return sql.replace(marker, marker + added)


m0006 = _frozen("0006_variants_efficiency.py")

# 0006's texts with the two columns after environment_id (case_summary's last column)
CASE_SUMMARY_PG = _add_after(m0006.CASE_SUMMARY_PG, "       s.environment_id", ",\n       " + unreliable_columns("postgresql"))
CASE_SUMMARY_SQLITE = _add_after(m0006.CASE_SUMMARY_SQLITE, "       s.environment_id", ",\n       " + unreliable_columns("sqlite"))
_LATEST_MARKER = "s.mfu, s.energy_per_sample_j, s.environment_id"
LATEST_SUMMARY_PG = _add_after(m0006.LATEST_SUMMARY_PG, _LATEST_MARKER, ", s.unreliable, s.unreliable_reason")
LATEST_SUMMARY_SQLITE = _add_after(m0006.LATEST_SUMMARY_SQLITE, _LATEST_MARKER, ", s.unreliable, s.unreliable_reason")

VIEWS = ("nightly_history", "latest_summary", "case_summary")
"""Views rebuilt by this revision, dependents first (the drop order)."""


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    op.execute(CASE_SUMMARY_PG if pg else CASE_SUMMARY_SQLITE)
    op.execute(LATEST_SUMMARY_PG if pg else LATEST_SUMMARY_SQLITE)
    op.execute(m0006.NIGHTLY_HISTORY_PG if pg else m0006.NIGHTLY_HISTORY_SQLITE)


def downgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    op.execute(m0006.CASE_SUMMARY_PG if pg else m0006.CASE_SUMMARY_SQLITE)
    op.execute(m0006.LATEST_SUMMARY_PG if pg else m0006.LATEST_SUMMARY_SQLITE)
    op.execute(m0006.NIGHTLY_HISTORY_PG if pg else m0006.NIGHTLY_HISTORY_SQLITE)
