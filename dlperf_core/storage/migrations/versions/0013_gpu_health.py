"""A clean bill of health per GPU: each result's GPU health snapshot; a throttled case is flagged.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05 00:00:00

* ``gpu_health_snapshots`` (new): one row per result whose GPUs were checked before it ran
  (``dlperf_core.cluster.gpu_health``), unique on ``result_id`` (deleted with its result): when they were read
  (``checked_at``), the suite's ``policy`` (``refuse`` | ``flag``), the ``verdict`` (``ok`` | ``flagged`` |
  ``refused`` | ``no_gpus``), every ``finding`` on one line each (``node0 GPU 1 (GPU-...): compute_processes 2,
  wanted 0``, ``; ``-joined; NULL when there is none), how many ``gpus`` were read, and over the measured window the
  clock-event reasons seen on any GPU (``clock_event_reasons``, NVML's bit mask OR-ed), the lowest SM clock and the
  highest temperature; ``readings`` (each node's NVML readings) and ``windows`` (each GPU's window) hold the rest
  as JSON. Results stored before this revision have none (not checked).
* ``results.throttled`` (text, NULL): the GPUs and the reasons that throttled the case in its measured window (HW
  slowdown 0x8, SW or HW thermal slowdown 0x20/0x40, HW power brake 0x80: ``node0 GPU 1: HW thermal slowdown
  (0x40)``); NULL when none did, when nothing was sampled, and on every row stored before this revision.
* ``case_summary``: ``throttled`` (boolean, last column): an ok repeat was throttled; the reason joins the flags of
  ``unreliable_reason`` as ``throttled: <results.throttled>`` (after the oversubscription's, the same words as
  ``dlperf_core.measure.noise.unreliable_reason``), so it is shown wherever ``unreliable`` is.
* ``latest_summary``, ``latest_nightly_summary``: ``throttled`` too (before ``started_at`` and ``trigger``).
* ``nightly_history``: ``throttled`` (last column), and its ``unreliable_reason`` says so: the regression detector
  leaves a throttled night out of its baselines.

Every view keeps 0012's SQL otherwise (rebuilt from 0012's module with these additions). Downgrade drops the new
table, the column and the views, and restores 0012's views.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

THROTTLED = "throttled: "
"""What comes before ``results.throttled`` in the reason (``dlperf_core.measure.noise.THROTTLED`` when released)."""


def _frozen(name: str):
    """A frozen earlier revision's module (its views are rebuilt here, and restored on downgrade)."""
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"dlperf_migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


m0012 = _frozen("0012_baselines.py")


def unreliable_reason(dialect: str) -> str:
    """0012's reason with the throttling after its flags: every flag that holds, joined by '; ' (NULL when none)."""
    two = m0012.TWO_DECIMALS[dialect]
    parts = (
        f"CASE WHEN {m0012.NOISY} THEN 'CV ' || {two.format(x=m0012.CV)} || ' > {m0012.MAX_RELIABLE_CV:.2f}' END",
        f"CASE WHEN {m0012.SUPERLINEAR} THEN 'speedup ' || {two.format(x=m0012.SPEEDUP)} || ' > ' || "
        f"CAST({m0012.DEVICES} AS text) || ' devices' END",
        f"CASE WHEN s.n = 1 THEN '{m0012.SINGLE_REPEAT}' END",
        "s.oversubscription",
        f"'{THROTTLED}' || s.throttled",
    )
    joined = " || ".join(f"COALESCE('; ' || {p}, '')" for p in parts)
    return f"NULLIF(substr({joined}, 3), '')"


def _swap(sql: str, old: str, new: str, times: int = 1) -> str:
    """``sql`` with ``old`` replaced by ``new``, which must be there ``times`` times (0012's text is frozen: a miss
    is a bug here, caught when the migration is loaded)."""
    found = sql.count(old)
    assert found == times, f"expected {times} of {old!r} in 0012's SQL, found {found}"
    return sql.replace(old, new)


def case_summary(dialect: str) -> str:
    """0012's case_summary with each case's throttling (any repeat's, as its oversubscription) and the column."""
    sql = m0012.AFTER[dialect][0]
    sql = _swap(sql, m0012.unreliable_reason(dialect), unreliable_reason(dialect), 2)
    sql = _swap(
        sql,
        "           MAX(oversubscription) AS oversubscription\n    FROM results\n",
        "           MAX(oversubscription) AS oversubscription,\n           MAX(throttled) AS throttled\n"
        "    FROM results\n",
    )
    if dialect == "sqlite":
        sql = _swap(
            sql,
            "c.environment_id, c.oversubscription\n    FROM cases c",
            "c.environment_id, c.oversubscription, c.throttled\n    FROM cases c",
        )
    return _swap(
        sql,
        "       s.baseline_night\nFROM summary s",
        "       s.baseline_night,\n       s.throttled IS NOT NULL AS throttled\nFROM summary s",
    )


def latest(dialect: str, index: int) -> str:
    """0012's latest_summary (``index`` 1) or latest_nightly_summary (2) with case_summary's ``throttled``."""
    return _swap(
        m0012.AFTER[dialect][index],
        ',\n       b.started_at, b."trigger"',
        ', s.throttled,\n       b.started_at, b."trigger"',
    )


def nightly_history(dialect: str) -> str:
    """0012's nightly_history with the throttling in its reason (PostgreSQL summarises each run itself) and the
    column."""
    sql = m0012.AFTER[dialect][3]
    if dialect == "sqlite":
        return _swap(
            sql,
            "s.baseline_run_id, s.baseline_of, s.baseline_night\nFROM case_summary s",
            "s.baseline_run_id, s.baseline_of, s.baseline_night, s.throttled\nFROM case_summary s",
        )
    sql = _swap(sql, m0012.unreliable_reason(dialect), unreliable_reason(dialect))
    sql = _swap(
        sql,
        "               MAX(r.oversubscription) AS oversubscription\n        FROM results r\n",
        "               MAX(r.oversubscription) AS oversubscription,\n               MAX(r.throttled) AS throttled\n"
        "        FROM results r\n",
    )
    return _swap(
        sql,
        "       s.baseline_night\nFROM benchmark_runs b",
        "       s.baseline_night,\n       s.throttled IS NOT NULL AS throttled\nFROM benchmark_runs b",
    )


AFTER = {
    dialect: (case_summary(dialect), latest(dialect, 1), latest(dialect, 2), nightly_history(dialect))
    for dialect in ("postgresql", "sqlite")
}
"""The views of this revision, per dialect, in creation order."""

VIEWS = m0012.VIEWS
"""Views rebuilt by this revision, dependents first (the drop order)."""

POLICIES = ("refuse", "flag")
VERDICTS = ("ok", "flagged", "refused", "no_gpus")


def _one_of(column: str, values: Sequence[str]) -> sa.CheckConstraint:
    return sa.CheckConstraint(
        f"{column} IN ({', '.join(repr(v) for v in values)})", name=op.f(f"ck_gpu_health_snapshots_{column}")
    )


def _dialect() -> str:
    return "postgresql" if op.get_bind().dialect.name == "postgresql" else "sqlite"


def upgrade() -> None:
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    op.add_column("results", sa.Column("throttled", sa.Text(), nullable=True))
    op.create_table(
        "gpu_health_snapshots",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("result_id", sa.Integer(), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("policy", sa.String(16), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("findings", sa.Text(), nullable=True),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("clock_event_reasons", sa.BigInteger(), nullable=True),
        sa.Column("sm_clock_min_mhz", sa.Float(), nullable=True),
        sa.Column("temperature_max_c", sa.Float(), nullable=True),
        sa.Column("readings", sa.JSON(), nullable=False),
        sa.Column("windows", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        _one_of("policy", POLICIES),
        _one_of("verdict", VERDICTS),
        sa.ForeignKeyConstraint(
            ["result_id"], ["results.id"], name=op.f("fk_gpu_health_snapshots_result_id_results"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_health_snapshots")),
        sa.UniqueConstraint("result_id", name=op.f("uq_gpu_health_snapshots_result_id")),
    )
    for sql in AFTER[_dialect()]:
        op.execute(sql)


def downgrade() -> None:
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    op.drop_table("gpu_health_snapshots")
    op.drop_column("results", "throttled")
    for sql in m0012.AFTER[_dialect()]:
        op.execute(sql)
