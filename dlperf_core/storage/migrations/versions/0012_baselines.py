"""Every speedup names its baseline; a single repeat and an oversubscribed case are flagged; latest nightly.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 00:00:00

* ``results.oversubscription`` (text, NULL): why the case's ranks had no cores of their own
  (``dlperf_core.cluster.cpu_placement``: ``oversubscribed: 4 ranks on 2 cores of host``); NULL when each had its own,
  and on every row stored before this revision (not known).
* ``case_summary``: the **baseline** of a case's speedup is the 1n1g of the same run (same framework, model,
  precision, batch and variant, ok repeats' median) or, where that run has none, the 1n1g of the **latest
  nightly** (scheduled) run of the same configuration that started at or before it. Four new columns name it:
  ``baseline_dag_id``, ``baseline_run_id``, ``baseline_of`` (``this run`` | ``latest nightly``) and
  ``baseline_night`` (the UTC date of the baseline run when it is a scheduled one, else NULL). An
  oversubscribed case has no speedup (NULL): its figure says how crowded the host was, not how it scales.
  ``single_repeat`` (one ok repeat: no CV to judge it by) and ``oversubscribed`` join the flags: the reason
  lists every one that holds, joined by ``; ``: ``CV 0.71 > 0.10``, ``speedup 4.40 > 2 devices``, ``single
  repeat``, and the oversubscription's own text (``dlperf_core.measure.noise.unreliable_reason``, the same words).
* ``latest_summary``: the latest of **any** run per configuration (as before), with the new columns.
* ``latest_nightly_summary`` (new): per configuration, the case_summary row of the latest **scheduled** run
  that measured it, with that run's start and trigger: what the results page shows first.
* ``nightly_history``: a night's speedup follows the same rule and names its baseline; it keeps its columns and
  adds ``unreliable_reason`` and the baseline. On PostgreSQL it keeps 0004's shape (the scheduled runs first,
  each summarised in a LATERAL subquery: a filter on the night limits the runs before anything is summarised);
  on SQLite it reads case_summary.

Downgrade drops the new view and the column and restores 0011's views (0010's texts).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_RELIABLE_CV = 0.10
"""As 0008's (``dlperf_core.measure.noise.MAX_RELIABLE_CV`` when released; a test checks it)."""

SINGLE_REPEAT = "single repeat"
"""The flag of a case with one ok repeat (``dlperf_core.measure.noise.SINGLE_REPEAT`` when released)."""

THIS_RUN, LATEST_NIGHTLY = "this run", "latest nightly"
"""``baseline_of``'s values (``dlperf_core.measure.noise.BASELINE_OF`` when released)."""


def _frozen(name: str):
    """A frozen earlier revision's module (restored on downgrade; its configuration names)."""
    path = Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"dlperf_migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


m0006 = _frozen("0006_variants_efficiency.py")
m0008 = _frozen("0008_unreliable_configurations.py")
m0010 = _frozen("0010_configuration_identity.py")

#: The columns that make two cases share a 1n1g baseline (the configuration without the topology).
SAME_BASELINE = ("framework", "model", "precision", "batch_size_per_device", "variant")
CONFIGURATION = m0006.CONFIGURATION.replace("compiled", "compile")  # the seven configuration columns
CONFIGURATION_NAMES = list(m0006.CONFIGURATION_NAMES)


def _q(column: str) -> str:
    return '"precision"' if column == "precision" else column


def _same(a: str, b: str, columns: Sequence[str] = SAME_BASELINE) -> str:
    return " AND ".join(f"{a}.{_q(c)} = {b}.{_q(c)}" for c in columns)


_BASELINE_KEY = ", ".join(_q(c) for c in SAME_BASELINE)

#: The figures of the rule, over the ``summary`` CTE (s) below.
CV = "s.stdev_throughput / NULLIF(s.mean_throughput, 0)"
SPEEDUP = "CASE WHEN s.oversubscription IS NULL THEN s.median_throughput / s.baseline_throughput END"
DEVICES = "s.nodes * s.gpus_per_node"
NOISY = f"{CV} > {MAX_RELIABLE_CV!r}"
SUPERLINEAR = f"{SPEEDUP} > {DEVICES}"

TWO_DECIMALS = m0008.TWO_DECIMALS  # a number as text with two decimals, per dialect


def unreliable_reason(dialect: str) -> str:
    """Every flag that holds, joined by '; ' (NULL when none): the same text on both dialects, built from
    ``'; ' || part`` (NULL when the part is) so that the ones that do not hold fall out."""
    two = TWO_DECIMALS[dialect]
    parts = (
        f"CASE WHEN {NOISY} THEN 'CV ' || {two.format(x=CV)} || ' > {MAX_RELIABLE_CV:.2f}' END",
        f"CASE WHEN {SUPERLINEAR} THEN 'speedup ' || {two.format(x=SPEEDUP)} || ' > ' || "
        f"CAST({DEVICES} AS text) || ' devices' END",
        f"CASE WHEN s.n = 1 THEN '{SINGLE_REPEAT}' END",
        "s.oversubscription",
    )
    joined = " || ".join(f"COALESCE('; ' || {p}, '')" for p in parts)
    return f"NULLIF(substr({joined}, 3), '')"


def final_select(dialect: str) -> str:
    """case_summary's last SELECT over the ``summary`` CTE (s), the same on both dialects but for the reason's
    number format."""
    return f"""
SELECT s.dag_id, s.run_id, s.case_key, s.framework, s.model, s."precision",
       s.batch_size_per_device, s.variant, s."compile", s.nodes, s.gpus_per_node,
       s.nodes * s.gpus_per_node AS total_gpus,
       s.n, s.n_failed,
       s.median_throughput, s.mean_throughput, s.min_throughput, s.max_throughput,
       {SPEEDUP} AS speedup,
       {SPEEDUP} / NULLIF({DEVICES}, 0) AS scaling_efficiency,
       s.stdev_throughput,
       {CV} AS cv,
       s.gpu_memory_peak_mb, s.mfu, s.energy_per_sample_j,
       s.environment_id,
       {unreliable_reason(dialect)} IS NOT NULL AS unreliable,
       {unreliable_reason(dialect)} AS unreliable_reason,
       s.n = 1 AS single_repeat,
       s.oversubscription IS NOT NULL AS oversubscribed,
       s.baseline_dag_id, s.baseline_run_id,
       CASE WHEN s.baseline_run_id IS NULL THEN NULL
            WHEN s.baseline_dag_id = s.dag_id AND s.baseline_run_id = s.run_id THEN '{THIS_RUN}'
            ELSE '{LATEST_NIGHTLY}' END AS baseline_of,
       s.baseline_night
FROM summary s
"""


_CASES_GROUP = 'dag_id, run_id, case_key, framework, model, "precision", batch_size_per_device, variant, "compile", nodes, gpus_per_node'

# ---------------------------------------------------------------------------- case_summary, PostgreSQL

CASE_SUMMARY_PG = f"""
CREATE VIEW case_summary AS
WITH cases AS NOT MATERIALIZED (
    SELECT {_CASES_GROUP},
           COUNT(*) FILTER (WHERE status = 'ok') AS n,
           COUNT(*) FILTER (WHERE status = 'failed') AS n_failed,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY throughput)
               FILTER (WHERE status = 'ok') AS median_throughput,
           AVG(throughput) FILTER (WHERE status = 'ok') AS mean_throughput,
           MIN(throughput) FILTER (WHERE status = 'ok') AS min_throughput,
           MAX(throughput) FILTER (WHERE status = 'ok') AS max_throughput,
           stddev_samp(throughput) FILTER (WHERE status = 'ok') AS stdev_throughput,
           MAX(gpu_memory_peak_mb) FILTER (WHERE status = 'ok') AS gpu_memory_peak_mb,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY mfu) FILTER (WHERE status = 'ok') AS mfu,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY energy_per_sample_j)
               FILTER (WHERE status = 'ok') AS energy_per_sample_j,
           MAX(environment_id) AS environment_id,
           MAX(oversubscription) AS oversubscription
    FROM results
    GROUP BY {_CASES_GROUP}
),
baseline AS NOT MATERIALIZED (
    SELECT dag_id, run_id, {_BASELINE_KEY}, AVG(median_throughput) AS baseline_throughput
    FROM cases
    WHERE nodes = 1 AND gpus_per_node = 1
    GROUP BY dag_id, run_id, {_BASELINE_KEY}
),
summary AS NOT MATERIALIZED (
    SELECT s.*,
           COALESCE(b.baseline_throughput, nb.baseline_throughput) AS baseline_throughput,
           CASE WHEN b.baseline_throughput IS NOT NULL THEN b.dag_id ELSE nb.dag_id END AS baseline_dag_id,
           CASE WHEN b.baseline_throughput IS NOT NULL THEN b.run_id ELSE nb.run_id END AS baseline_run_id,
           CASE WHEN b.baseline_throughput IS NOT NULL THEN
                    CASE WHEN r."trigger" = 'scheduled' THEN CAST(r.started_at AT TIME ZONE 'UTC' AS DATE) END
                ELSE nb.night END AS baseline_night
    FROM cases s
    LEFT JOIN benchmark_runs r ON r.dag_id = s.dag_id AND r.run_id = s.run_id
    LEFT JOIN baseline b ON b.dag_id = s.dag_id AND b.run_id = s.run_id AND {_same("b", "s")}
    LEFT JOIN LATERAL (
        SELECT nb.dag_id, nb.run_id, nb.baseline_throughput,
               CAST(nr.started_at AT TIME ZONE 'UTC' AS DATE) AS night
        FROM baseline nb
        JOIN benchmark_runs nr ON nr.dag_id = nb.dag_id AND nr.run_id = nb.run_id
        WHERE b.baseline_throughput IS NULL AND nb.baseline_throughput IS NOT NULL
          AND {_same("nb", "s")}
          AND nr."trigger" = 'scheduled' AND nr.started_at <= r.started_at
        ORDER BY nr.started_at DESC, nr.id DESC
        LIMIT 1
    ) nb ON TRUE
)
{final_select("postgresql")}"""

# ---------------------------------------------------------------------------- case_summary, SQLite


_sqlite_median = m0006._sqlite_median  # a case's median over its ok repeats, as 0006's CTEs


CASE_SUMMARY_SQLITE = f"""
CREATE VIEW case_summary AS
WITH {_sqlite_median("median_throughput", "throughput")}{_sqlite_median("mfu", "mfu")}{_sqlite_median("energy_per_sample_j", "energy_per_sample_j")}
cases AS (
    SELECT {_CASES_GROUP},
           COUNT(CASE WHEN status = 'ok' THEN 1 END) AS n,
           COUNT(CASE WHEN status = 'failed' THEN 1 END) AS n_failed,
           AVG(CASE WHEN status = 'ok' THEN throughput END) AS mean_throughput,
           MIN(CASE WHEN status = 'ok' THEN throughput END) AS min_throughput,
           MAX(CASE WHEN status = 'ok' THEN throughput END) AS max_throughput,
           MAX(CASE WHEN status = 'ok' THEN gpu_memory_peak_mb END) AS gpu_memory_peak_mb,
           MAX(environment_id) AS environment_id,
           MAX(oversubscription) AS oversubscription
    FROM results
    GROUP BY {_CASES_GROUP}
),
spread AS (
    SELECT r.dag_id, r.run_id, r.case_key,
           SUM((r.throughput - c.mean_throughput) * (r.throughput - c.mean_throughput)) AS squares
    FROM results r
    JOIN cases c ON c.dag_id = r.dag_id AND c.run_id = r.run_id AND c.case_key = r.case_key
    WHERE r.status = 'ok'
    GROUP BY r.dag_id, r.run_id, r.case_key
),
figures AS (
    SELECT c.dag_id, c.run_id, c.case_key, c.framework, c.model, c."precision",
           c.batch_size_per_device, c.variant, c."compile", c.nodes, c.gpus_per_node,
           c.n, c.n_failed, m.median_throughput,
           c.mean_throughput, c.min_throughput, c.max_throughput,
           CASE WHEN c.n > 1 THEN sqrt(sp.squares / (c.n - 1)) END AS stdev_throughput,
           c.gpu_memory_peak_mb, mf.mfu, me.energy_per_sample_j, c.environment_id, c.oversubscription
    FROM cases c
    LEFT JOIN median_median_throughput m
      ON m.dag_id = c.dag_id AND m.run_id = c.run_id AND m.case_key = c.case_key
    LEFT JOIN median_mfu mf
      ON mf.dag_id = c.dag_id AND mf.run_id = c.run_id AND mf.case_key = c.case_key
    LEFT JOIN median_energy_per_sample_j me
      ON me.dag_id = c.dag_id AND me.run_id = c.run_id AND me.case_key = c.case_key
    LEFT JOIN spread sp
      ON sp.dag_id = c.dag_id AND sp.run_id = c.run_id AND sp.case_key = c.case_key
),
baseline AS (
    SELECT f.dag_id, f.run_id, {", ".join(f"f.{_q(c)}" for c in SAME_BASELINE)},
           AVG(f.median_throughput) AS baseline_throughput, r."trigger", r.started_at, r.id AS run_pk
    FROM figures f
    LEFT JOIN benchmark_runs r ON r.dag_id = f.dag_id AND r.run_id = f.run_id
    WHERE f.nodes = 1 AND f.gpus_per_node = 1
    GROUP BY f.dag_id, f.run_id, {", ".join(f"f.{_q(c)}" for c in SAME_BASELINE)}
),
nightly AS (
    SELECT f.dag_id, f.run_id, f.case_key, nb.dag_id AS baseline_dag_id, nb.run_id AS baseline_run_id,
           nb.baseline_throughput, DATE(nb.started_at) AS night,
           ROW_NUMBER() OVER (PARTITION BY f.dag_id, f.run_id, f.case_key
                              ORDER BY nb.started_at DESC, nb.run_pk DESC) AS rn
    FROM figures f
    JOIN benchmark_runs r ON r.dag_id = f.dag_id AND r.run_id = f.run_id
    JOIN baseline nb ON {_same("nb", "f")} AND nb.baseline_throughput IS NOT NULL
     AND nb."trigger" = 'scheduled' AND nb.started_at <= r.started_at
),
summary AS (
    SELECT f.*,
           COALESCE(b.baseline_throughput, nb.baseline_throughput) AS baseline_throughput,
           CASE WHEN b.baseline_throughput IS NOT NULL THEN b.dag_id ELSE nb.baseline_dag_id END AS baseline_dag_id,
           CASE WHEN b.baseline_throughput IS NOT NULL THEN b.run_id ELSE nb.baseline_run_id END AS baseline_run_id,
           CASE WHEN b.baseline_throughput IS NOT NULL THEN
                    CASE WHEN b."trigger" = 'scheduled' THEN DATE(b.started_at) END
                ELSE nb.night END AS baseline_night
    FROM figures f
    LEFT JOIN baseline b ON b.dag_id = f.dag_id AND b.run_id = f.run_id AND {_same("b", "f")}
    LEFT JOIN nightly nb ON nb.dag_id = f.dag_id AND nb.run_id = f.run_id AND nb.case_key = f.case_key
     AND nb.rn = 1 AND b.baseline_throughput IS NULL
)
{final_select("sqlite")}"""

# ---------------------------------------------------------------------------- latest_summary, latest_nightly_summary

NEW_COLUMNS = ("single_repeat", "oversubscribed", "baseline_dag_id", "baseline_run_id", "baseline_of", "baseline_night")
_SUMMARY_COLUMNS = (
    m0006._SUMMARY_COLUMNS.replace("compiled", '"compile"')
    + ", s.unreliable, s.unreliable_reason, "
    + ", ".join(f"s.{c}" for c in NEW_COLUMNS)
)
_R_CONFIGURATION = ", ".join(f"r.{_q(c)}" for c in CONFIGURATION_NAMES)
_C_CONFIGURATION = ", ".join(f"c.{_q(c)}" for c in CONFIGURATION_NAMES)


def latest_pg(name: str, scheduled_only: bool) -> str:
    """0006's loose index scan over the configurations, the newest result of each (of a scheduled run only,
    with ``scheduled_only``), and that run's case summarised."""
    runs = (
        "JOIN benchmark_runs br ON br.dag_id = r.dag_id AND br.run_id = r.run_id AND br.\"trigger\" = 'scheduled'"
        if scheduled_only
        else ""
    )
    return f"""
CREATE VIEW {name} AS
WITH RECURSIVE configurations AS (
    (SELECT {CONFIGURATION} FROM results ORDER BY {CONFIGURATION} LIMIT 1)
    UNION ALL
    SELECT nxt.*
    FROM configurations c
    CROSS JOIN LATERAL (
        SELECT {_R_CONFIGURATION}
        FROM results r
        WHERE ({_R_CONFIGURATION}) > ({_C_CONFIGURATION})
        ORDER BY {_R_CONFIGURATION}
        LIMIT 1
    ) nxt
),
newest AS (
    SELECT c.*, latest.dag_id, latest.run_id, latest.case_key
    FROM configurations c
    CROSS JOIN LATERAL (
        SELECT r.dag_id, r.run_id, r.case_key
        FROM results r {runs}
        WHERE {_same("r", "c", CONFIGURATION_NAMES)}
        ORDER BY r.started_at DESC, r.id DESC
        LIMIT 1
    ) latest
)
SELECT {_SUMMARY_COLUMNS},
       b.started_at, b."trigger"
FROM newest n
CROSS JOIN LATERAL (
    SELECT * FROM case_summary cs
    WHERE cs.dag_id = n.dag_id AND cs.run_id = n.run_id AND cs.case_key = n.case_key
      AND {_same("cs", "n", CONFIGURATION_NAMES)}
    OFFSET 0  -- a fence: keeps this a per-configuration lookup instead of one join over all runs
) s
JOIN benchmark_runs b ON b.dag_id = s.dag_id AND b.run_id = s.run_id
"""


def latest_sqlite(name: str, scheduled_only: bool) -> str:
    runs = (
        "JOIN benchmark_runs br ON br.dag_id = r.dag_id AND br.run_id = r.run_id WHERE br.\"trigger\" = 'scheduled'"
        if scheduled_only
        else ""
    )
    partition = ", ".join(f"r.{_q(c)}" for c in CONFIGURATION_NAMES)
    return f"""
CREATE VIEW {name} AS
WITH newest AS (
    SELECT r.dag_id, r.run_id, r.case_key, {partition},
           ROW_NUMBER() OVER (PARTITION BY {partition} ORDER BY r.started_at DESC, r.id DESC) AS rn
    FROM results r {runs}
)
SELECT {_SUMMARY_COLUMNS},
       b.started_at, b."trigger"
FROM newest n
JOIN case_summary s
  ON s.dag_id = n.dag_id AND s.run_id = n.run_id AND s.case_key = n.case_key
 AND {_same("s", "n", CONFIGURATION_NAMES)}
JOIN benchmark_runs b ON b.dag_id = s.dag_id AND b.run_id = s.run_id
WHERE n.rn = 1
"""


# ---------------------------------------------------------------------------- nightly_history


_R1_SAME = " AND ".join(f"r1.{_q(c)} = s.{_q(c)}" for c in SAME_BASELINE)

#: PostgreSQL: as 0004/0006, from the scheduled runs, each run summarised in a LATERAL subquery (so a filter on
#: the night limits the runs first and one on the configuration reaches each run's summary); its 1n1g baseline
#: looked up per row, that of the latest earlier night where the run has none.
NIGHTLY_HISTORY_PG = f"""
CREATE VIEW nightly_history AS
SELECT s.framework, s.model, s."precision", s.batch_size_per_device, s.variant, s."compile", s.nodes,
       s.gpus_per_node, s.case_key, CAST(b.started_at AT TIME ZONE 'UTC' AS DATE) AS night, b.started_at,
       s.dag_id, s.run_id, b.status AS run_status, s.median_throughput, s.n, s.n_failed,
       {SPEEDUP} AS speedup,
       {SPEEDUP} / NULLIF({DEVICES}, 0) AS scaling_efficiency,
       s.mfu, s.energy_per_sample_j, s.environment_id,
       {unreliable_reason("postgresql")} AS unreliable_reason,
       s.baseline_run_id,
       CASE WHEN s.baseline_run_id IS NULL THEN NULL
            WHEN s.baseline_dag_id = s.dag_id AND s.baseline_run_id = s.run_id THEN '{THIS_RUN}'
            ELSE '{LATEST_NIGHTLY}' END AS baseline_of,
       s.baseline_night
FROM benchmark_runs b
CROSS JOIN LATERAL (
    SELECT c.*,
           COALESCE(own.throughput, prior.throughput) AS baseline_throughput,
           CASE WHEN own.throughput IS NOT NULL THEN c.dag_id ELSE prior.dag_id END AS baseline_dag_id,
           CASE WHEN own.throughput IS NOT NULL THEN c.run_id ELSE prior.run_id END AS baseline_run_id,
           CASE WHEN own.throughput IS NOT NULL THEN CAST(b.started_at AT TIME ZONE 'UTC' AS DATE)
                ELSE prior.night END AS baseline_night
    FROM (
        SELECT r.dag_id, r.run_id, r.case_key, r.framework, r.model, r."precision", r.batch_size_per_device,
               r.variant, r."compile", r.nodes, r.gpus_per_node,
               COUNT(*) FILTER (WHERE r.status = 'ok') AS n,
               COUNT(*) FILTER (WHERE r.status = 'failed') AS n_failed,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY r.throughput) FILTER (WHERE r.status = 'ok')
                   AS median_throughput,
               AVG(r.throughput) FILTER (WHERE r.status = 'ok') AS mean_throughput,
               stddev_samp(r.throughput) FILTER (WHERE r.status = 'ok') AS stdev_throughput,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY r.mfu) FILTER (WHERE r.status = 'ok') AS mfu,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY r.energy_per_sample_j)
                   FILTER (WHERE r.status = 'ok') AS energy_per_sample_j,
               MAX(r.environment_id) AS environment_id,
               MAX(r.oversubscription) AS oversubscription
        FROM results r
        WHERE r.run_id = b.run_id AND r.dag_id = b.dag_id
        GROUP BY r.dag_id, r.run_id, r.case_key, r.framework, r.model, r."precision", r.batch_size_per_device,
                 r.variant, r."compile", r.nodes, r.gpus_per_node
    ) c
    LEFT JOIN LATERAL (
        SELECT AVG(one.median) AS throughput
        FROM (
            SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY r1.throughput) FILTER (WHERE r1.status = 'ok') AS median
            FROM results r1
            WHERE r1.run_id = c.run_id AND r1.dag_id = c.dag_id AND {_R1_SAME.replace("s.", "c.")}
              AND r1.nodes = 1 AND r1.gpus_per_node = 1
            GROUP BY r1.case_key
        ) one
    ) own ON TRUE
    LEFT JOIN LATERAL (
        SELECT last.dag_id, last.run_id, last.night, AVG(one.median) AS throughput
        FROM (
            SELECT r1.dag_id, r1.run_id, CAST(pb.started_at AT TIME ZONE 'UTC' AS DATE) AS night
            FROM results r1
            JOIN benchmark_runs pb ON pb.dag_id = r1.dag_id AND pb.run_id = r1.run_id
            WHERE own.throughput IS NULL AND {_R1_SAME.replace("s.", "c.")}
              AND r1.nodes = 1 AND r1.gpus_per_node = 1 AND r1.status = 'ok'
              AND pb."trigger" = 'scheduled' AND pb.started_at <= b.started_at
            ORDER BY pb.started_at DESC, pb.id DESC
            LIMIT 1
        ) last
        CROSS JOIN LATERAL (
            SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY r2.throughput) FILTER (WHERE r2.status = 'ok') AS median
            FROM results r2
            WHERE r2.run_id = last.run_id AND r2.dag_id = last.dag_id AND {_R1_SAME.replace("r1.", "r2.").replace("s.", "c.")}
              AND r2.nodes = 1 AND r2.gpus_per_node = 1
            GROUP BY r2.case_key
        ) one
        GROUP BY last.dag_id, last.run_id, last.night
    ) prior ON TRUE
) s
WHERE b."trigger" = 'scheduled'
"""

#: SQLite: the scheduled runs' case_summary rows with their night (the embedded default's small databases).
NIGHTLY_HISTORY_SQLITE = """
CREATE VIEW nightly_history AS
SELECT s.framework, s.model, s."precision", s.batch_size_per_device, s.variant, s."compile", s.nodes,
       s.gpus_per_node, s.case_key, DATE(b.started_at) AS night, b.started_at, s.dag_id, s.run_id,
       b.status AS run_status, s.median_throughput, s.n, s.n_failed, s.speedup, s.scaling_efficiency,
       s.mfu, s.energy_per_sample_j, s.environment_id,
       s.unreliable_reason, s.baseline_run_id, s.baseline_of, s.baseline_night
FROM case_summary s
JOIN benchmark_runs b ON b.dag_id = s.dag_id AND b.run_id = s.run_id
WHERE b."trigger" = 'scheduled'
"""


def nightly_history(dialect: str) -> str:
    """The scheduled runs' summaries with their night: 0006's columns, then the reason and the baseline."""
    return NIGHTLY_HISTORY_PG if dialect == "postgresql" else NIGHTLY_HISTORY_SQLITE


AFTER = {
    dialect: (
        CASE_SUMMARY_PG if dialect == "postgresql" else CASE_SUMMARY_SQLITE,
        (latest_pg if dialect == "postgresql" else latest_sqlite)("latest_summary", False),
        (latest_pg if dialect == "postgresql" else latest_sqlite)("latest_nightly_summary", True),
        nightly_history(dialect),
    )
    for dialect in ("postgresql", "sqlite")
}
"""The views of this revision, per dialect, in creation order."""

VIEWS = ("nightly_history", "latest_nightly_summary", "latest_summary", "case_summary")
"""Views rebuilt by this revision, dependents first (the drop order)."""


def _dialect() -> str:
    return "postgresql" if op.get_bind().dialect.name == "postgresql" else "sqlite"


def upgrade() -> None:
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    op.add_column("results", sa.Column("oversubscription", sa.Text(), nullable=True))
    for sql in AFTER[_dialect()]:
        op.execute(sql)


def downgrade() -> None:
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    op.drop_column("results", "oversubscription")
    for sql in m0010.AFTER[_dialect()]:
        op.execute(sql)
