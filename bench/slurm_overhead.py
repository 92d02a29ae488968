"""(l) dlperf's overhead per case run on Slurm beside the docker runtime's, on this machine.

The same suite (dlperf's reference ResNet-50 shrunk to 32x32, width 8, batch 8; 1n1g and 2n1g; N repeats) through
`dlperf run` (the real DAG under dag.test(), SQLite results) twice:

  docker  two stand-in nodes (containers of dlperf/pytorch-reference:cpu on a network of this script's own)
  slurm   the Slurm 22.05 test cluster (tests/slurm_cluster.py: login node over SSH, partition torch, whose nodes are
          containers FROM the same image); each case run is sbatch'ed, its task defers to SlurmJobTrigger and
          resumes to collect

Per case run:
  run_case s  Airflow's task instance of run_case, start to end (a deferred one: its first start to its end after
              the resume; the wait on the triggerer included)
  stored s    the stored row's finished_at - started_at (docker: the containers' run; slurm: the job's StartTime to
              EndTime, Slurm's whole seconds)
  training s  node 0's log: the first to the last DLLogger line (the loop, warm-up included)
  store s     store_result's duration
  overhead s  run_case - training + store
  queue s     slurm: sbatch to the job's start (scontrol's SubmitTime -> StartTime, whole seconds)
  polls       slurm: `scontrol show job` calls for the job on the login node (a wrapper in /usr/local/bin on the login
              node counts them: the trigger's looks and the resumed task's), at the inventory's poll_s

    .venv/bin/python bench/slurm_overhead.py [--repeats 3] [--poll-s 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

from _common import REPO, dll_times, machine
from dlperf_core.storage import ResultStore

sys.path.insert(0, str(REPO / "tests"))
from slurm_cluster import CONTROLLER, slurm_cluster  # noqa: E402

CONN_ID = "dlperf_slurm_bench"
NETWORK = "dlperf-bench-slurm-net"

SUITE = {
    "name": "slurm-overhead",
    "runtime": "docker",
    "precisions": ["fp32"],
    "topologies": ["1n1g", "2n1g"],
    "warmup_iterations": 2,
    "measured_iterations": 20,
    "timeout_s": 600,
    "watchdog_s": 180,
    "benchmarks": [
        {
            "framework": "pytorch_reference",
            "model": "resnet50_v1.5",
            "batch_size_per_device": 8,
            "image": "dlperf/pytorch-reference:cpu",
            "extra_args": ["--image-size", "32", "--width", "8", "--device", "cpu"],
        }
    ],
}

DOCKER_INVENTORY = {
    "name": "bench-slurm-docker",
    "nodes": [
        {
            "name": f"bench-slurm-node{i}",
            "gpus": 1,
            "accelerator": "cpu",
            "docker_url": "unix:///var/run/docker.sock",
            "network": NETWORK,
            "ipc_host": False,
            "shm_size": "1g",
        }
        for i in (0, 1)
    ],
}

SCONTROL_COUNTER = """#!/bin/bash
# bench/slurm_overhead.py: count the login node's scontrol calls, then run Slurm's
echo "$(date +%s.%N) $*" >> /tmp/scontrol.calls
exec /usr/bin/scontrol "$@"
"""


def slurm_inventory(poll_s: float) -> dict:
    block = {
        "connection": CONN_ID,
        "partition": "torch",
        "time_limit": "00:10:00",
        "work_dir": "/shared/dlperf",
        "poll_s": poll_s,
        "setup": ["export PATH=/opt/venv/bin:$PATH"],
    }
    nodes = [{"name": f"slot{i}", "gpus": 1, "accelerator": "cpu"} for i in (0, 1)]
    return {"name": "bench-slurm", "slurm": block, "nodes": nodes}


def dlperf_run(folder: Path, suite: dict, inventory: dict, extra_env: dict[str, str]) -> tuple[str, str, float]:
    """`dlperf run` of ``suite`` on ``inventory``: (DAG run id, SQLite results URL, wall seconds)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    (folder / "inventory.yaml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    db = f"sqlite:///{folder / 'results.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(folder / "airflow"),
        DLPERF_LOG_DIR=str(folder / "logs"),
        DLPERF_REPORT_DIR=str(folder / "reports"),
        DLPERF_DB_URL=db,
        DLPERF_HOME=str(REPO),
        **extra_env,
    )
    argv = [sys.executable, "-m", "dlperf_cli.main", "run", str(folder / "suite.yaml")]
    t0 = time.perf_counter()
    out = subprocess.run(
        [*argv, "--inventory", str(folder / "inventory.yaml")], cwd=REPO, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    (folder / "dlperf-run.log").write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        raise SystemExit(f"dlperf run failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return re.findall(r"^DAG run (\S+): ", out.stdout, flags=re.M)[-1], db, wall


def _scontrol_time(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S")


def task_instances(folder: Path, run_id: str) -> dict[tuple[str, str], tuple[datetime, datetime, float]]:
    """(task id, case label) -> (start, end, duration) of the run's mapped task instances (Airflow's own records in
    the run's SQLite metadata DB; a deferred run_case keeps its first start)."""
    import sqlite3

    meta = sqlite3.connect(folder / "airflow" / "airflow.db")
    rows = meta.execute(
        "select task_id, rendered_map_index, start_date, end_date, duration from task_instance "
        "where run_id = ? and map_index >= 0",
        (run_id,),
    ).fetchall()
    return {(t, label): (datetime.fromisoformat(a), datetime.fromisoformat(b), d) for t, label, a, b, d in rows}


def per_case(
    folder: Path, db: str, run_id: str, jobs: dict[str, dict[str, str]] | None, calls: list[str]
) -> list[dict]:
    rows = ResultStore(db).results(run_id=run_id).sort_values(["nodes", "repeat"])
    tis = task_instances(folder, run_id)
    out = []
    for row in rows.to_dict("records"):
        assert row["status"] == "ok", row
        stamps = dll_times(Path(row["log_path"]).read_text(errors="replace"))
        label = f"{row['case_key']} r{row['repeat']}"
        start, end, _ = tis[("case_run.run_case", label)]
        store = tis[("case_run.store_result", label)][2]
        task = (end - start).total_seconds()
        train = (stamps[-1] - stamps[0]).total_seconds()
        spec = row["launch_spec"] if isinstance(row["launch_spec"], dict) else json.loads(row["launch_spec"])
        line = {
            "case": f"{row['nodes']}n{row['gpus_per_node']}g",
            "repeat": row["repeat"],
            "task": task,
            "stored": (row["finished_at"] - row["started_at"]).total_seconds(),
            "training": train,
            "store": store,
            "overhead": task - train + store,
            "throughput": row["throughput"],
            "threads": "--threads" in spec["nodes"][0]["argv"],
        }
        if jobs is not None:
            job_id = str(spec["slurm"]["job_id"])
            job = jobs[job_id]
            line["job"] = job_id
            line["queue"] = (_scontrol_time(job["StartTime"]) - _scontrol_time(job["SubmitTime"])).total_seconds()
            line["polls"] = sum(1 for c in calls if re.search(rf"show job( -o)? {job_id}$", c.strip()))
        out.append(line)
    return out


def filled(db: str, run_id: str) -> set[str]:
    """The columns every row of the run fills (not None, not NaN)."""
    rows = ResultStore(db).results(run_id=run_id)
    return {c for c in rows.columns if rows[c].map(lambda v: v is not None and v == v).all()}


def table(name: str, cases: list[dict]) -> None:
    slurm = "queue" in cases[0]
    head = (
        "| runtime | case | repeat | run_case s | stored started-finished s | training s | store s | overhead s "
        "| samples/s | --threads |" + (" queue s | polls |" if slurm else "")
    )
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for c in cases:
        tail = f" {c['queue']:.0f} | {c['polls']} |" if slurm else ""
        print(
            f"| {name} | {c['case']} | {c['repeat']} | {c['task']:.2f} | {c['stored']:.2f} | {c['training']:.2f} "
            f"| {c['store']:.2f} | {c['overhead']:.2f} | {c['throughput']:.1f} | {'yes' if c['threads'] else 'no'} |"
            + tail
        )


def summary(name: str, cases: list[dict]) -> dict[str, float]:
    med = {k: statistics.median(c[k] for c in cases) for k in ("task", "training", "overhead")}
    for topo in ("1n1g", "2n1g"):
        med[f"overhead {topo}"] = statistics.median(c["overhead"] for c in cases if c["case"] == topo)
    if "queue" in cases[0]:
        med["queue"] = statistics.median(c["queue"] for c in cases)
        med["polls"] = statistics.median(c["polls"] for c in cases)
    print(f"{name}: medians " + ", ".join(f"{k} {v:.2f}" for k, v in med.items()))
    return med


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--poll-s", type=float, default=2.0)
    args = ap.parse_args()
    suite = SUITE | {"repeats": args.repeats}
    load = os.getloadavg()
    print(f"# dlperf overhead per case run: slurm vs docker  ({machine()}; load average {load[0]:.2f} {load[1]:.2f})")
    with tempfile.TemporaryDirectory(prefix="dlperf-slurm-bench-") as tmp:
        folder = Path(tmp)
        try:
            docker_id, docker_db, docker_wall = dlperf_run(folder / "docker", suite, DOCKER_INVENTORY, {})
        finally:
            subprocess.run(["docker", "network", "rm", NETWORK], capture_output=True)
        docker_cases = per_case(folder / "docker", docker_db, docker_id, None, [])
        print(f"\ndocker runtime: `dlperf run` wall {docker_wall:.1f} s, {len(docker_cases)} case runs")
        table("docker", docker_cases)
        with slurm_cluster() as cluster:
            controller = cluster.containers[CONTROLLER]
            wrapper = folder / "scontrol"
            wrapper.write_text(SCONTROL_COUNTER)
            wrapper.chmod(0o755)
            subprocess.run(["docker", "cp", str(wrapper), f"{controller}:/usr/local/bin/scontrol"], check=True)
            subprocess.run(
                [
                    "docker",
                    "exec",
                    controller,
                    "bash",
                    "-c",
                    "touch /tmp/scontrol.calls && chmod 666 /tmp/scontrol.calls",
                ],
                check=True,
            )
            conn = {f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(cluster.airflow_connection())}
            slurm_id, slurm_db, slurm_wall = dlperf_run(folder / "slurm", suite, slurm_inventory(args.poll_s), conn)
            calls = subprocess.run(
                ["docker", "exec", controller, "cat", "/tmp/scontrol.calls"], capture_output=True, text=True, check=True
            ).stdout.splitlines()
            calls = [c.split(" ", 1)[1] for c in calls if " " in c]
            jobs = {}
            for job_id in sorted({m[1] for c in calls if (m := re.search(r"show job(?: -o)? (\d+)$", c.strip()))}):
                jobs[job_id] = cluster.job(job_id)
            slurm_cases = per_case(folder / "slurm", slurm_db, slurm_id, jobs, calls)
        print(
            f"\nslurm runtime (poll_s {args.poll_s:g}): `dlperf run` wall {slurm_wall:.1f} s, {len(slurm_cases)} case runs"
        )
        table("slurm", slurm_cases)
        print()
        d = summary("docker", docker_cases)
        s = summary("slurm", slurm_cases)
        same, only_docker, only_slurm = (
            filled(docker_db, docker_id) & filled(slurm_db, slurm_id),
            filled(docker_db, docker_id) - filled(slurm_db, slurm_id),
            filled(slurm_db, slurm_id) - filled(docker_db, docker_id),
        )
        print(
            f"\ncolumns every row fills: {len(same)} on both runtimes; only docker's: {sorted(only_docker) or 'none'}; "
            f"only slurm's: {sorted(only_slurm) or 'none'}"
        )
        print(
            f"\nslurm / docker: task {s['task'] / d['task']:.2f}x, overhead {s['overhead'] / d['overhead']:.2f}x "
            f"(+{s['overhead'] - d['overhead']:.2f} s per case run); training {s['training'] / d['training']:.2f}x; "
            f"dlperf run wall {slurm_wall / docker_wall:.2f}x ({slurm_wall:.1f} s vs {docker_wall:.1f} s)"
        )


if __name__ == "__main__":
    main()
