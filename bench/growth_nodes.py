"""(h) How a case's gang grows with its nodes: one case over 2, 4 and 8 stand-in nodes, each node with its own
Celery worker on its own queue (``DLPERF_NODE`` set, as docker-compose's ``airflow-node-worker`` on a GPU node),
on the tests' CeleryExecutor deployment with node routing on (``[dlperf] cluster_inventory``: an inventory of
exactly that many nodes, its pools made by ``dlperf cluster sync``). The stand-in nodes are containers on this
machine's Docker Engine (docker-local's settings); the case is the synthetic workload (``framework: synthetic``:
a process per node that prints DLLogger lines and trains nothing).

Per case run, from Airflow's task instance records and each node task's report (``NodeShare``'s time stamps):
  join      = the first node task's start (``start_date``) -> the moment the last node saw every peer joined
              (``joined_at``): every node task running and registered on the board, before any workload starts
  teardown  = the first node's workload end (``exited_at``: its supervisor saw the case end) -> the last node
              task's end (``end_date``): containers stopped and removed, reports pushed
  spread    = the first node task's start -> the last one's (Celery and the workers, not dlperf)
Target: join + teardown grows by at most 1 s from 2 to 8 nodes.

    .venv/bin/python bench/growth_nodes.py [--nodes 2,4,8] [--repeats 5] [--out docs/img/growth_nodes.png]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from datetime import datetime
from pathlib import Path

import pandas as pd
import yaml

from _common import REPO, machine
from _deployment import Worker, celery_deployment

TARGET_GROWTH_S = 1.0


def inventory_of(nodes: int, path: Path) -> str:
    """docker-local's stand-in node settings, ``nodes`` times, each node on a queue of its own."""
    template = yaml.safe_load((REPO / "inventories/docker-local.yaml").read_text())["nodes"][0]
    inventory = {
        "name": f"bench-{nodes}-nodes",
        "nodes": [{**template, "name": f"node{i}", "gpus": 1, "queue": f"node-{i}"} for i in range(nodes)],
    }
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return str(path)


def suite_of(nodes: int, repeats: int, inventory: str, path: Path) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "name": f"gang-{nodes}",
                "runtime": "docker",
                "inventory": inventory,
                "repeats": repeats,
                "precisions": ["fp32"],
                "topologies": [f"{nodes}n1g"],
                "warmup_iterations": 1,
                "measured_iterations": 4,
                "timeout_s": 300,
                "watchdog_s": 120,
                "benchmarks": [
                    {
                        "framework": "synthetic",
                        "model": "synthetic",
                        "batch_size_per_device": 4,
                        "extra_args": ["--step-ms", "200"],
                    }
                ],
            },
            sort_keys=False,
        )
    )
    return str(path)


def _share(value: object) -> dict | None:
    """The NodeShare of a node task's return value (the serde form that XCom keeps)."""
    data = value.get("__data__", value) if isinstance(value, dict) else None
    data = json.loads(data) if isinstance(data, str) else data
    return data.get("share") if isinstance(data, dict) else None


def _pre_execute_s(log: Path) -> float | None:
    """Airflow's own start of a task, before any of dlperf's code runs: its log's first line to the end of its
    "Pre Execute" group (DAG bundle loaded, DAG file parsed)."""
    stamps = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        stamps.append(entry.get("timestamp"))
        if entry.get("event") == "::endgroup::":
            return (_t(stamps[-1]) - _t(stamps[0])).total_seconds()
    return None


def _t(stamp: str) -> pd.Timestamp:
    return pd.Timestamp(datetime.fromisoformat(stamp))


def measure(nodes: int, repeats: int, tmp: Path, env: dict[str, str] | None = None) -> dict:
    inventory = inventory_of(nodes, tmp / "inventory.yaml")
    suite = suite_of(nodes, repeats, inventory, tmp / "suite.yaml")
    workers = [Worker("worker-central", "default", concurrency=2)] + [
        Worker(f"worker-node{i}", f"node-{i}", env=(("DLPERF_NODE", f"node{i}"),)) for i in range(nodes)
    ]
    with celery_deployment(tmp / "airflow", workers, extra_env=env, inventory=inventory) as deployment:
        run_id = deployment.trigger({"suite": suite, "runtime": "docker"})
        state = deployment.wait(run_id, timeout=300 + 120 * repeats)
        tis = deployment.task_instances(run_id)
        if state != "success":
            raise SystemExit(f"{nodes} nodes: the run ended {state}:\n{tis[['task_id', 'map_index', 'state']]}")
        node_tis = tis[tis["task_id"].str.startswith("case_run.on_")]
        shares = {
            (task_id, index): _share(value)
            for task_id in node_tis["task_id"].unique()
            for index, value in deployment.xcom_values(run_id, task_id).items()
        }
        pre_execute = [
            seconds
            for path in (deployment.stack.home / "logs").rglob("*.log")
            if "task_id=case_run.on_" in str(path) and (seconds := _pre_execute_s(path)) is not None
        ]
    joins, teardowns, spreads, settle, queued_spreads = [], [], [], [], []
    raw = []
    for index in range(repeats):
        here = node_tis[node_tis["map_index"] == index]
        got = [shares.get((t, index)) for t in here["task_id"]]
        raw += [
            {
                "index": index,
                "task_id": t.task_id,
                "queued": str(t.queued_dttm),
                "start": str(t.start_date),
                "end": str(t.end_date),
                "joined": (s or {}).get("joined_at"),
                "exited": (s or {}).get("exited_at"),
            }
            for t, s in zip(here.itertuples(), got, strict=True)
        ]
        if len(here) != nodes or any(s is None or s.get("joined_at") is None for s in got):
            raise SystemExit(f"{nodes} nodes, case run {index}: a node task reported no join: {got}")
        first_start, last_start = here["start_date"].min(), here["start_date"].max()
        joined = max(_t(s["joined_at"]) for s in got)  # type: ignore[index]
        exited = min(_t(s["exited_at"]) for s in got)  # type: ignore[index]
        joins.append((joined - first_start).total_seconds())
        teardowns.append((here["end_date"].max() - exited).total_seconds())
        spreads.append((last_start - first_start).total_seconds())
        queued_spreads.append((here["queued_dttm"].max() - here["queued_dttm"].min()).total_seconds())
        settle.append((joined - last_start).total_seconds())
    return {
        "nodes": nodes,
        "repeats": repeats,
        "join_s": statistics.median(joins),
        "teardown_s": statistics.median(teardowns),
        "join_plus_teardown_s": statistics.median(j + t for j, t in zip(joins, teardowns, strict=True)),
        "start_spread_s": statistics.median(spreads),
        "last_start_to_joined_s": statistics.median(settle),
        "queued_spread_s": statistics.median(queued_spreads),
        "pre_execute_s": statistics.median(pre_execute),
        "per_node": raw,
        "joins": joins,
        "teardowns": teardowns,
    }


def plot(figures: list[dict], path: Path, before: list[dict] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    frame = pd.DataFrame(figures)
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    for column, label in (
        ("join_s", "join: first node task start -> gang complete"),
        ("teardown_s", "teardown: first workload end -> last node task end"),
        ("start_spread_s", "of the join: node task starts' spread"),
        ("pre_execute_s", "Airflow's task start (Pre Execute), before dlperf's code"),
    ):
        ax.plot(frame["nodes"], frame[column], "o-", label=label)
    ax.plot(frame["nodes"], frame["join_plus_teardown_s"], "s-", color="black", label="join + teardown")
    if before:
        old = pd.DataFrame(before)
        ax.plot(old["nodes"], old["join_plus_teardown_s"], "s--", color="grey", label="join + teardown, before")
    ax.set_xticks(frame["nodes"])
    ax.set_xlabel("nodes in the case (one Celery worker each)")
    ax.set_ylabel("seconds (median over the case runs)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title("Growth with the nodes of a case (CeleryExecutor, stand-in nodes)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="2,4,8")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, help="PNG of the figures (docs/img/growth_nodes.png)")
    ap.add_argument("--json", type=Path, help="write the figures as JSON too")
    ap.add_argument("--before", type=Path, help="a JSON of an earlier series (--json) to draw beside this one")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for every process of the deployment (an Airflow option to compare)",
    )
    args = ap.parse_args()
    env = dict(item.split("=", 1) for item in args.set)
    print(f"# growth with the nodes of a case, CeleryExecutor  ({machine()}) {env or ''}")
    figures = []
    for n in (int(s) for s in args.nodes.split(",")):
        with tempfile.TemporaryDirectory(prefix=f"dlperf-nodes-{n}-") as tmp:
            figures.append(measure(n, args.repeats, Path(tmp), env))
        print(json.dumps(figures[-1]), flush=True)
    print(
        "\n| nodes | join s | of it: task starts' spread s | last task start -> gang complete s | Airflow's task "
        "start (Pre Execute) s | teardown s | join + teardown s |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for f in figures:
        print(
            f"| {f['nodes']} | {f['join_s']:.2f} | {f['start_spread_s']:.2f} | {f['last_start_to_joined_s']:.2f} | "
            f"{f['pre_execute_s']:.2f} | {f['teardown_s']:.2f} | {f['join_plus_teardown_s']:.2f} |"
        )
    by = {int(f["nodes"]): f for f in figures}
    if 2 in by and 8 in by:
        growth = by[8]["join_plus_teardown_s"] - by[2]["join_plus_teardown_s"]
        verdict = "met" if growth <= TARGET_GROWTH_S else "MISSED"
        print(f"\njoin + teardown, 8 nodes - 2 nodes: {growth:+.2f} s (target <= {TARGET_GROWTH_S:g} s): {verdict}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    if args.out:
        plot(figures, args.out, json.loads(args.before.read_text()) if args.before else None)
        print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
