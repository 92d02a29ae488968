"""(b) Orchestration overhead per case: what a case run costs around its training (container or process
start, launch and torch import, log collection, parse, store, cleanup), against the training itself.
Target: at most 5 s per case.

Per mapped case run, from Airflow's own task instance records and the case's log:
  case wall   = run_case task duration + store_result task duration
  training    = first to last DLLogger line of node 0 (the loop, warm-up included)
  overhead    = case wall - training

    .venv/bin/python bench/orchestration_overhead.py [--runtimes local,docker]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
from datetime import datetime
from pathlib import Path

from _common import REPO, dlperf_run, machine
from dlperf_core.storage import ResultStore


def training_span(log: Path) -> float:
    stamps = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("DLL "):
            stamps.append(datetime.strptime(line[4:30], "%Y-%m-%d %H:%M:%S.%f"))
    return (stamps[-1] - stamps[0]).total_seconds()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtimes", default="local,docker")
    args = ap.parse_args()
    print(f"# orchestration overhead per case  ({machine()})")
    for runtime in args.runtimes.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            db = f"sqlite:///{tmp / 'bench.db'}"
            run_id, wall = dlperf_run(REPO / "suites" / "smoke.yaml", runtime, db, tmp)
            rows = ResultStore(db).results(run_id=run_id)
            meta = sqlite3.connect(tmp / "airflow" / "airflow.db")
            # each mapped task instance carries its case label ("<case key> r<repeat>") as rendered_map_index
            durations: dict[tuple[str, str], float] = {
                (task, label): dur
                for task, label, dur in meta.execute(
                    "select task_id, rendered_map_index, duration from task_instance where run_id = ? and map_index >= 0",
                    (run_id,),
                )
            }
            n = len(rows)
            overheads = []
            print(f"\nruntime {runtime}: {n} case runs, `dlperf run` wall {wall:.1f} s "
                  f"(including Airflow start, metadata DB migration and DAG parse)")
            print("| case | repeat | run_case s | store_result s | training s | overhead s |")
            print("| --- | --- | --- | --- | --- | --- |")
            for row in rows.sort_values(["nodes", "gpus_per_node", "repeat"]).itertuples():
                key, rep, label = row.case_key, row.repeat, f"{row.case_key} r{row.repeat}"
                run_s, store_s = durations[("run_case", label)], durations[("store_result", label)]
                train = training_span(Path(row.log_path))
                over = run_s + store_s - train
                overheads.append(over)
                print(f"| {key} | {rep} | {run_s:.2f} | {store_s:.2f} | {train:.2f} | {over:.2f} |")
            print(f"median overhead per case ({runtime}): {statistics.median(overheads):.2f} s "
                  f"(target <= 5 s; ratio {statistics.median(overheads) / 5:.2f} of target)")


if __name__ == "__main__":
    main()
