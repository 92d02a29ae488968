"""How fast the analyst views answer over a million result rows (PostgreSQL).

Creates a fresh database, migrates it to head, fills it server-side (generate_series) with
N_RUNS benchmark runs x 336 configurations x 5 repeats (about 1,000,000 results; every tenth run is
manual, the others nightly) and a few hundred regressions, ANALYZEs, then times every view query
(and the README's example queries): the median of 5 executions of EXPLAIN (ANALYZE) 's
"Execution Time", in ms. Target: each view query under 200 ms.

    .venv/bin/python bench/views_at_scale.py [--rows 1000000] [--keep]

Admin URL: $DLPERF_TEST_PG_URL or postgresql://postgres@127.0.0.1:5432/postgres.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid

import sqlalchemy as sa

from _common import REPO, machine  # noqa: F401  (puts the repository on sys.path)
from dlperf_core.storage import ResultStore

FRAMEWORKS = ["pytorch", "paddle", "mxnet", "tensorflow"]
MODELS = ["resnet50", "bert_base", "vit_b16"]
PRECISIONS = ["fp32", "amp"]
BATCHES = [64, 128]
TOPOLOGIES = [(1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8), (8, 8)]
REPEATS = 5
CONFIGS = len(FRAMEWORKS) * len(MODELS) * len(PRECISIONS) * len(BATCHES) * len(TOPOLOGIES)

FILL_RUNS = """
INSERT INTO benchmark_runs (dag_id, run_id, suite, "trigger", runtime, started_at, finished_at, status,
                            triggered_by)
SELECT 'dlperf_benchmark',
       CASE WHEN n % 10 = 0 THEN 'manual__' ELSE 'scheduled__' END || n,
       'nightly', CASE WHEN n % 10 = 0 THEN 'manual' ELSE 'scheduled' END, 'docker',
       timestamptz '2024-01-01 02:00+00' + n * interval '1 day',
       timestamptz '2024-01-01 05:00+00' + n * interval '1 day', 'success',
       CASE WHEN n % 10 = 0 THEN 'alice' ELSE 'scheduler' END
FROM generate_series(1, :runs) n
"""

FILL_RESULTS = f"""
WITH configs AS (
    SELECT c,
           (ARRAY{FRAMEWORKS!r})[1 + c % {len(FRAMEWORKS)}] AS framework,
           (ARRAY{MODELS!r})[1 + (c / {len(FRAMEWORKS)}) % {len(MODELS)}] AS model,
           (ARRAY{PRECISIONS!r})[1 + (c / {len(FRAMEWORKS) * len(MODELS)}) % 2] AS precision,
           (ARRAY{BATCHES!r})[1 + (c / {len(FRAMEWORKS) * len(MODELS) * 2}) % 2] AS batch,
           (ARRAY{[t[0] for t in TOPOLOGIES]!r})[1 + (c / {len(FRAMEWORKS) * len(MODELS) * 4}) % {len(TOPOLOGIES)}] AS nodes,
           (ARRAY{[t[1] for t in TOPOLOGIES]!r})[1 + (c / {len(FRAMEWORKS) * len(MODELS) * 4}) % {len(TOPOLOGIES)}] AS gpn
    FROM generate_series(0, {CONFIGS - 1}) c
)
INSERT INTO results (benchmark_run_id, dag_id, run_id, case_key, framework, model, "precision",
                     batch_size_per_device, nodes, gpus_per_node, "repeat", status, reason, throughput,
                     started_at, finished_at, environment_id, gpu_memory_peak_mb)
SELECT b.id, b.dag_id, b.run_id,
       k.framework || '/' || k.model || '/' || k.precision || '/b' || k.batch || '/' || k.nodes || 'n' || k.gpn || 'g',
       k.framework, k.model, k.precision, k.batch, k.nodes, k.gpn, r,
       CASE WHEN random() < 0.01 THEN 'failed' ELSE 'ok' END, NULL,
       (100 + k.c) * k.nodes * k.gpn * 0.9 * (1 + 0.01 * (random() - 0.5)),
       b.started_at + (k.c * {REPEATS} + r) * interval '2 seconds',
       b.started_at + (k.c * {REPEATS} + r + 1) * interval '2 seconds',
       NULL, 1000 + random() * 70000
FROM benchmark_runs b CROSS JOIN configs k CROSS JOIN generate_series(0, {REPEATS - 1}) r
"""
FIX_FAILED = "UPDATE results SET throughput = NULL, reason = 'synthetic failure' WHERE status = 'failed'"

FILL_REGRESSIONS = """
INSERT INTO regressions (benchmark_run_id, dag_id, run_id, framework, model, "precision", batch_size_per_device,
                         nodes, gpus_per_node, case_key, night, median_throughput, baseline_median, baseline_mad,
                         baseline_nights, change_pct, robust_z, direction, environment_changed, status)
SELECT DISTINCT ON (r.benchmark_run_id, r.case_key)
       r.benchmark_run_id, r.dag_id, r.run_id, r.framework, r.model, r."precision", r.batch_size_per_device,
       r.nodes, r.gpus_per_node, r.case_key, CAST(r.started_at AS date), 95, 100, 0.5, 14, -5, -6.7, 'slower',
       r.id % 3 = 0, CASE WHEN r.id % 4 = 0 THEN 'open' ELSE 'closed' END
FROM results r WHERE r.id % 3001 = 0
"""

QUERIES = {
    "case_summary, one run (run_id)": "SELECT * FROM case_summary WHERE run_id = :run",
    "case_summary, one run (dag_id, run_id)": "SELECT * FROM case_summary WHERE dag_id = 'dlperf_benchmark' AND run_id = :run",
    "latest_summary (all configurations)": "SELECT * FROM latest_summary",
    "nightly_history, one configuration, last 30 nights": (
        "SELECT * FROM nightly_history WHERE framework = 'pytorch' AND model = 'resnet50' AND \"precision\" = 'amp' "
        "AND batch_size_per_device = 128 AND nodes = 4 AND gpus_per_node = 8 ORDER BY night DESC LIMIT 30"
    ),
    "nightly_history, one configuration, all nights": (
        "SELECT * FROM nightly_history WHERE framework = 'pytorch' AND model = 'resnet50' AND \"precision\" = 'amp' "
        "AND batch_size_per_device = 128 AND nodes = 4 AND gpus_per_node = 8"
    ),
    "nightly_history, one model (all its configurations), last 30 nights": (
        "SELECT * FROM nightly_history WHERE framework = 'pytorch' AND model = 'resnet50' "
        "AND night >= (SELECT CAST(MAX(started_at) AS date) - 30 FROM benchmark_runs)"
    ),
    "README: scaling efficiency at 32 GPUs, last 30 nights": (
        'SELECT night, framework, model, "precision", batch_size_per_device, scaling_efficiency, speedup '
        "FROM nightly_history WHERE nodes * gpus_per_node = 32 "
        "AND night >= (SELECT CAST(MAX(started_at) AS date) - 30 FROM benchmark_runs) "
        'ORDER BY framework, model, "precision", night'
    ),
    "open_regressions": "SELECT * FROM open_regressions",
    "README: best framework per topology at AMP (latest)": (
        "SELECT DISTINCT ON (model, nodes, gpus_per_node) model, nodes, gpus_per_node, framework, median_throughput "
        "FROM latest_summary WHERE \"precision\" = 'amp' ORDER BY model, nodes, gpus_per_node, median_throughput DESC"
    ),
    "README: failed repeats of the last 30 days": (
        'SELECT r.run_id, r.case_key, r."repeat", r.reason FROM results r '
        "JOIN benchmark_runs b ON b.id = r.benchmark_run_id "
        "WHERE r.status = 'failed' AND b.started_at >= (SELECT MAX(started_at) FROM benchmark_runs) - interval '30 days'"
    ),
}


def explain_ms(conn: sa.Connection, sql: str, params: dict) -> float:
    plan = conn.execute(sa.text(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}"), params).scalar_one()
    return float(plan[0]["Execution Time"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="result rows to generate (about)")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()
    admin_url = sa.make_url(os.environ.get("DLPERF_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"))
    admin_url = admin_url.set(drivername="postgresql+psycopg2")
    name = f"dlperf_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = admin_url.set(database=name).render_as_string(hide_password=False)
    runs = max(1, round(args.rows / (CONFIGS * REPEATS)))
    print(f"# views at scale: {machine()}")
    print(f"database {name}: {runs} runs x {CONFIGS} configurations x {REPEATS} repeats")
    try:
        store = ResultStore(url)
        store.ensure_schema()
        t0 = time.perf_counter()
        with store.engine.begin() as conn:
            conn.execute(sa.text(FILL_RUNS), {"runs": runs})
            conn.execute(sa.text(FILL_RESULTS))
            conn.execute(sa.text(FIX_FAILED))
            conn.execute(sa.text(FILL_REGRESSIONS))
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("VACUUM ANALYZE"))
            rows = conn.execute(sa.text("SELECT COUNT(*) FROM results")).scalar_one()
            regressions = conn.execute(sa.text("SELECT COUNT(*) FROM regressions WHERE status = 'open'")).scalar_one()
        print(f"filled {rows:,} result rows, {regressions} open regressions in {time.perf_counter() - t0:.1f} s\n")
        with store.engine.connect() as conn:
            newest = conn.execute(
                sa.text("SELECT run_id FROM benchmark_runs ORDER BY started_at DESC LIMIT 1")
            ).scalar_one()
            params = {"run": newest}
            print("| query | rows | median ms (5 runs, EXPLAIN ANALYZE) | max ms | wall ms (fetch) |")
            print("| ----- | ---- | ----------------------------------- | ------ | --------------- |")
            for label, sql in QUERIES.items():
                explain_ms(conn, sql, params)  # warm the cache
                times = [explain_ms(conn, sql, params) for _ in range(5)]
                t = time.perf_counter()
                n = len(conn.execute(sa.text(sql), params).all())
                wall = (time.perf_counter() - t) * 1000
                print(f"| {label} | {n} | {statistics.median(times):.1f} | {max(times):.1f} | {wall:.1f} |")
        store.dispose()
    finally:
        if not args.keep:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
