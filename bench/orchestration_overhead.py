"""(b) Orchestration overhead per case: what a case run costs around its training, against the training.
Target: at most 5 s per case.

Per mapped case run, from Airflow's own task instance records (start, end, duration) and node 0's log:
  start     = run_case start -> first DLLogger line (process/container start, torchrun, worker python and
              torch import, model build, rendezvous)
  training  = first -> last DLLogger line (the loop, warm-up included)
  finish    = last DLLogger line -> run_case end (exit, log collection, container removal)
  store     = store_result duration (parse, upsert)
  overhead  = start + finish + store
The same command launched bare (torchrun, no dlperf) is timed side by side: its wall time minus its
training span is what launching through torchrun costs anyway; the difference is dlperf's own share.

    .venv/bin/python bench/orchestration_overhead.py [--runtimes local,docker] [--bare 5]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd

from _common import REPO, bare_command, bare_env, dll_times, dlperf_run, machine
from dlperf_core.storage import ResultStore

SMOKE_ARGS = [
    "--batch-size",
    "8",
    "--precision",
    "fp32",
    "--warmup-iterations",
    "3",
    "--iterations",
    "10",
    "--image-size",
    "64",
    "--width",
    "16",
    "--device",
    "cpu",
]


def bare_launch_cost(runs: int) -> list[float]:
    """Wall time minus training span of the smoke 1n1g command launched bare with torchrun."""
    costs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = subprocess.run(bare_command(SMOKE_ARGS), capture_output=True, text=True, check=True, env=bare_env())
        wall = time.perf_counter() - t0
        stamps = dll_times(out.stdout)
        costs.append(wall - (stamps[-1] - stamps[0]).total_seconds())
    return costs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtimes", default="local,docker")
    ap.add_argument("--bare", type=int, default=5)
    args = ap.parse_args()
    print(f"# orchestration overhead per case  ({machine()})")
    bare = bare_launch_cost(args.bare)
    bare_med = statistics.median(bare)
    print(
        f"\nbare torchrun launch of the same 1n1g command, start + exit around the loop: median {bare_med:.2f} s "
        f"over {len(bare)} runs {[round(b, 2) for b in bare]}"
    )
    for runtime in args.runtimes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            db = f"sqlite:///{tmp / 'bench.db'}"
            run_id, wall = dlperf_run(REPO / "suites" / "smoke.yaml", runtime, db, tmp)
            rows = ResultStore(db).results(run_id=run_id)
            meta = sqlite3.connect(tmp / "airflow" / "airflow.db")
            # each mapped task instance carries its case label ("<case key> r<repeat>") as rendered_map_index
            tis = pd.read_sql(
                "select task_id, rendered_map_index as label, start_date, end_date, duration from task_instance "
                "where run_id = ? and map_index >= 0",
                meta,
                params=(run_id,),
            )
            tis["start_date"] = pd.to_datetime(tis["start_date"], utc=True, format="ISO8601")
            tis["end_date"] = pd.to_datetime(tis["end_date"], utc=True, format="ISO8601")
            ti = {(r.task_id, r.label): r for r in tis.itertuples()}
            print(
                f"\nruntime {runtime}: {len(rows)} case runs; `dlperf run` wall {wall:.1f} s "
                f"(including Airflow start, metadata DB migration and DAG parse, once per run)"
            )
            print("| case | repeat | start s | training s | finish s | store s | overhead s |")
            print("| --- | --- | --- | --- | --- | --- | --- |")
            overheads = []
            for row in rows.sort_values(["nodes", "gpus_per_node", "repeat"]).itertuples():
                label = f"{row.case_key} r{row.repeat}"
                run, store = ti[("case_run.run_case", label)], ti[("case_run.store_result", label)]
                stamps = dll_times(Path(row.log_path).read_text(errors="replace"))
                start = (stamps[0] - run.start_date).total_seconds()
                train = (stamps[-1] - stamps[0]).total_seconds()
                finish = (run.end_date - stamps[-1]).total_seconds()
                over = start + finish + store.duration
                overheads.append(over)
                topo = row.case_key.rsplit("/", 1)[1]
                print(
                    f"| {topo} | {row.repeat} | {start:.2f} | {train:.2f} | {finish:.2f} | {store.duration:.2f} | {over:.2f} |"
                )
            med = statistics.median(overheads)
            print(
                f"median overhead per case ({runtime}): {med:.2f} s (target <= 5 s: ratio {med / 5:.2f}); "
                f"of which the bare torchrun launch costs {bare_med:.2f} s anyway; dlperf's own share {med - bare_med:.2f} s"
            )


if __name__ == "__main__":
    main()
