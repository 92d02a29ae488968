"""(g) How dlperf's cost grows with the size of a night: matrices of 10, 100, 1,000 and 1,500 case runs through
the real DAG, of the synthetic workload (``framework: synthetic``: a process that prints DLLogger lines and
trains nothing, so that what is measured is dlperf and Airflow, not a framework's start-up).

Target: dlperf's overhead per case run at 1,000 within 1.5x of that at 10; no per-run cost that grows with the
matrix.

Each size is one ``dlperf run`` (the embedded runtime: ``dag.test()`` in one process, a fresh SQLite metadata
DB and results DB) of a generated suite: one benchmark, batch sizes 1..N/5, five repeats, 1n1g. Per case run,
from Airflow's task instance records and node 0's log:
  scheduling  = the gap before ``run_case`` starts: from its ``queued_dttm`` where Airflow set one, else from
                the end of the task instance before it (``dag.test()`` runs one task at a time and queues none)
  overhead    = dlperf's own time around the workload: ``run_case`` start -> first log line, last log line ->
                ``run_case`` end, plus ``store_result``'s duration
  store       = ``store_result``'s duration (parse, upsert)
Totals: wall time of ``dlperf run``, bytes of the plan's XCom (``plan_cases``), of the list ``run_case`` is mapped
over (``capture_environment``'s return value: every mapped task instance pulls it whole) and of the planned runs
handed out one XCom each (``dlperf_airflow.handout``, pulled one by one), metadata DB and results DB sizes after the run, peak memory of the ``dlperf run``
process (``/usr/bin/time``'s maximum resident set size: in the embedded runtime that process is the scheduler
and every task).

    .venv/bin/python bench/growth.py [--sizes 10,100,1000,1500] [--out docs/img/growth_matrix.png]
    .venv/bin/python bench/growth.py --executor celery --sizes 10,100,1000 --out docs/img/growth_matrix_celery.png

With ``--executor celery`` the night runs on the tests' CeleryExecutor deployment (bench/_deployment.py: api-server,
scheduler, dag-processor, one Celery worker running two tasks at once, Redis, metadata and results in PostgreSQL),
the case runs on the local runtime in the worker; scheduling is then ``queued_dttm`` -> ``start_date`` (Celery
queues every task), the databases' sizes are PostgreSQL's, and peak memory is the scheduler's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from _common import REPO, dll_times, machine

REPEATS = 5
TARGET_RATIO = 1.5
XCOM_BYTES = (
    "select case when key = 'return_value' then task_id else 'handed_out' end, sum(length(cast(value as text))) "
    "from xcom where run_id = :run_id and task_id in ('plan_cases', 'capture_environment') group by 1"
)


def suite_text(case_runs: int) -> str:
    """A suite of ``case_runs`` case runs of the synthetic workload: ``case_runs / 5`` batch sizes x 5 repeats."""
    batches = max(1, case_runs // REPEATS)
    return (
        f"name: growth-{case_runs}\n"
        "runtime: local\n"
        f"inventory: {REPO / 'inventories' / 'local.yaml'}\n"
        f"repeats: {REPEATS}\n"
        "precisions: [fp32]\n"
        "topologies: [1n1g]\n"
        "warmup_iterations: 2\n"
        "measured_iterations: 10\n"
        "benchmarks:\n"
        "  - framework: synthetic\n"
        "    model: synthetic\n"
        f"    batch_size_per_device: [{', '.join(str(b) for b in range(1, batches + 1))}]\n"
    )


def _utc(series: pd.Series) -> pd.Series:
    return pd.to_datetime(series, utc=True, format="ISO8601").dt.as_unit("us")


def measure(case_runs: int, tmp: Path) -> dict[str, float]:
    """One ``dlperf run`` of ``case_runs`` synthetic case runs; its figures."""
    suite = tmp / "suite.yaml"
    suite.write_text(suite_text(case_runs))
    results_db = tmp / "results.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and not k.startswith("DLPERF")}
    env.update(DLPERF_HOME=str(tmp / "home"))
    peak = tmp / "peak_kb"
    t0 = time.perf_counter()
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%M", "-o", str(peak), sys.executable, "-m", "dlperf_cli.main", "run", str(suite)]
        + ["--db", f"sqlite:///{results_db}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"dlperf run of {case_runs} failed:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}")
    run_id = re.findall(r"^DAG run (\S+): ", out.stdout, flags=re.M)[-1]
    airflow_db = tmp / "home" / ".dlperf" / "airflow" / "airflow.db"
    meta = sqlite3.connect(airflow_db)
    tis = pd.read_sql(
        "select task_id, map_index, rendered_map_index as label, queued_dttm, start_date, end_date, duration "
        "from task_instance where run_id = ? and start_date is not null order by start_date",
        meta,
        params=(run_id,),
    )
    for column in ("queued_dttm", "start_date", "end_date"):
        tis[column] = _utc(tis[column])
    xcom = dict(meta.execute(XCOM_BYTES.replace(":run_id", "?"), (run_id,)).fetchall())
    meta.close()
    results = sqlite3.connect(results_db)
    rows = pd.read_sql("select case_key, repeat, status, log_path from results", results)
    results.close()
    sizes = (airflow_db.stat().st_size, results_db.stat().st_size)
    figures = per_case_run(case_runs, tis, rows)
    return night(case_runs, wall, figures, xcom, sizes, int(peak.read_text().split()[-1]) / 1024)


def night(
    case_runs: int,
    wall: float,
    per_case: dict[str, float],
    xcom: dict[str, int],
    db_bytes: tuple[int, int],
    peak_rss_mb: float,
) -> dict[str, float]:
    """One night's figures: per case run (``per_case_run``), XCom bytes by task (``XCOM_BYTES``), the metadata
    and results databases' sizes, peak memory."""
    return {
        "case_runs": case_runs,
        "wall_s": wall,
        **per_case,
        "plan_xcom_bytes": float(xcom.get("plan_cases", 0)),
        "mapped_xcom_bytes": float(xcom.get("capture_environment", 0)),
        "handed_out_xcom_bytes": float(xcom.get("handed_out", 0)),
        "metadata_db_bytes": float(db_bytes[0]),
        "results_db_bytes": float(db_bytes[1]),
        "peak_rss_mb": peak_rss_mb,
    }


def measure_celery(case_runs: int, tmp: Path) -> dict[str, float]:
    """The same night on the tests' CeleryExecutor deployment (bench/_deployment.py): one Celery worker on the
    default queue running two tasks at once, metadata and results in PostgreSQL. Peak memory: the scheduler's
    (its process and children's resident set, sampled every second)."""
    from sqlalchemy import create_engine, text

    from _deployment import Worker, celery_deployment

    suite = tmp / "suite.yaml"
    suite.write_text(suite_text(case_runs))
    with celery_deployment(tmp / "airflow", [Worker("worker", "default", concurrency=2)]) as deployment:
        peak = PeakRss(deployment.stack.processes["scheduler"].pid)
        t0 = time.perf_counter()
        run_id = deployment.trigger({"suite": str(suite), "runtime": "local"})
        state = deployment.wait(run_id, timeout=60 + 6 * case_runs)
        wall = time.perf_counter() - t0
        peak.stop()
        tis = deployment.task_instances(run_id)
        if state != "success":
            raise SystemExit(f"{case_runs}: the run ended {state}:\n{tis[tis['state'] != 'success']}")
        tis = tis[tis["start_date"].notna()].sort_values("start_date").reset_index(drop=True)
        engine = create_engine(deployment.metadata_url)
        with engine.connect() as conn:
            xcom = dict(conn.execute(text(XCOM_BYTES), {"run_id": run_id}).all())  # type: ignore[arg-type]
        engine.dispose()
        engine = create_engine(deployment.results_url)
        rows = pd.read_sql("select case_key, repeat, status, log_path from results", engine)
        engine.dispose()
        figures = per_case_run(case_runs, tis, rows)
        sizes = (deployment.database_bytes(deployment.metadata_url), deployment.database_bytes(deployment.results_url))
    return night(case_runs, wall, figures, xcom, sizes, peak.peak_mb)


class PeakRss:
    """The peak resident set of a process and its children, sampled every second in a thread."""

    def __init__(self, pid: int) -> None:
        import threading

        import psutil

        self._root = psutil.Process(pid)
        self.peak_mb = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        while not self._done.wait(1.0):
            try:
                procs = [self._root, *self._root.children(recursive=True)]
                rss = sum(p.memory_info().rss for p in procs if p.is_running())
            except psutil.Error:
                continue
            self.peak_mb = max(self.peak_mb, rss / 2**20)

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)


def per_case_run(case_runs: int, tis: pd.DataFrame, rows: pd.DataFrame) -> dict[str, float]:
    """Per case run figures from the run's task instances (sorted by start) and the stored rows."""
    tis = tis.copy()
    previous_end = tis["end_date"].shift(1)
    tis["scheduling"] = (tis["start_date"] - tis["queued_dttm"].fillna(previous_end)).dt.total_seconds()
    if len(rows) != case_runs or set(rows["status"]) != {"ok"}:
        raise SystemExit(f"{case_runs}: {len(rows)} rows stored, statuses {rows['status'].value_counts().to_dict()}")
    by_label = {(r.task_id, r.label): r for r in tis.itertuples()}
    overheads, stores, scheduling = [], [], []
    for row in rows.itertuples():
        label = f"{row.case_key} r{row.repeat}"
        run, store = by_label[("case_run.run_case", label)], by_label[("case_run.store_result", label)]
        stamps = dll_times(Path(row.log_path).read_text(errors="replace"))
        around = (stamps[0] - run.start_date).total_seconds() + (run.end_date - stamps[-1]).total_seconds()
        overheads.append(around + store.duration)
        stores.append(store.duration)
        scheduling.append(run.scheduling)
    n = len(overheads)
    first, last = slice(0, max(1, n // 10)), slice(n - max(1, n // 10), n)
    return {
        "overhead_median_s": statistics.median(overheads),
        "overhead_first_tenth_s": statistics.median(overheads[first]),
        "overhead_last_tenth_s": statistics.median(overheads[last]),
        "scheduling_median_s": statistics.median(scheduling),
        "scheduling_last_tenth_s": statistics.median(scheduling[last]),
        "store_median_s": statistics.median(stores),
    }


def plot(figures: list[dict[str, float]], path: Path, executor: str = "embedded") -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    frame = pd.DataFrame(figures)
    fig = Figure(figsize=(10, 4), layout="constrained")
    left, right = fig.subplots(1, 2)
    for column, label in (
        ("overhead_median_s", "dlperf overhead per case run (median)"),
        ("scheduling_median_s", "scheduling gap per case run (median)"),
        ("store_median_s", "store_result per case run (median)"),
    ):
        left.plot(frame["case_runs"], frame[column], "o-", label=label)
    right.plot(frame["case_runs"], frame["wall_s"] / frame["case_runs"], "o-", label="wall time / case run")
    for ax, title in ((left, "Per case run"), (right, "Whole run")):
        ax.set_xscale("log")
        ax.set_xlabel("case runs in the DAG run")
        ax.set_ylabel("seconds")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
        ax.set_title(title)
    where = "embedded runtime" if executor == "embedded" else "CeleryExecutor deployment"
    fig.suptitle(f"Growth with the matrix ({where}, synthetic workload)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,100,1000,1500")
    ap.add_argument("--out", type=Path, help="PNG of the figures (docs/img/growth_matrix.png)")
    ap.add_argument("--json", type=Path, help="write the figures as JSON too")
    ap.add_argument(
        "--executor",
        choices=("embedded", "celery"),
        default="embedded",
        help="embedded: `dlperf run` (dag.test() in one process, SQLite); celery: the tests' CeleryExecutor "
        "deployment (PostgreSQL, Redis, one Celery worker)",
    )
    args = ap.parse_args()
    print(f"# growth with the matrix, {args.executor}  ({machine()})")
    figures = []
    one_night = measure if args.executor == "embedded" else measure_celery
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix=f"dlperf-growth-{size}-") as tmp:
            figures.append(one_night(size, Path(tmp)))
        print(json.dumps(figures[-1]), flush=True)
    print(
        "\n| case runs | wall s | wall s / case run | overhead s (median; first, last tenth) | scheduling gap s "
        "(median; last tenth) | store s | plan XCom KB | mapped list XCom KB | handed-out XCom KB | metadata DB MB | results DB MB | peak RSS MB |"
    )
    print("| ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for f in figures:
        print(
            f"| {f['case_runs']:,.0f} | {f['wall_s']:.0f} | {f['wall_s'] / f['case_runs']:.3f} | "
            f"{f['overhead_median_s']:.3f} ({f['overhead_first_tenth_s']:.3f}, {f['overhead_last_tenth_s']:.3f}) | "
            f"{f['scheduling_median_s']:.3f} ({f['scheduling_last_tenth_s']:.3f}) | {f['store_median_s']:.3f} | "
            f"{f['plan_xcom_bytes'] / 1024:.0f} | {f['mapped_xcom_bytes'] / 1024:.1f} | "
            f"{f.get('handed_out_xcom_bytes', 0) / 1024:.0f} | "
            f"{f['metadata_db_bytes'] / 2**20:.1f} | {f['results_db_bytes'] / 2**20:.1f} | {f['peak_rss_mb']:.0f} |"
        )
    sizes = {int(f["case_runs"]): f for f in figures}
    if 10 in sizes and 1000 in sizes:
        ratio = sizes[1000]["overhead_median_s"] / sizes[10]["overhead_median_s"]
        verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
        print(f"\noverhead per case run at 1,000 / at 10: {ratio:.2f} (target <= {TARGET_RATIO}): {verdict}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    if args.out:
        plot(figures, args.out, args.executor)
        print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
