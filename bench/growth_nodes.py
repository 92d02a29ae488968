"""(h) How a case's gang grows with its nodes: one case over 2, 4 and 8 stand-in nodes, each node with its own
Celery worker on its own queue (``DLPERF_NODE`` set, as docker-compose's ``airflow-node-worker`` on a GPU node),
on the tests' CeleryExecutor deployment with node routing on (``[dlperf] cluster_inventory``: an inventory of
exactly that many nodes, its pools made by ``dlperf cluster sync``). The stand-in nodes are containers on this
machine's Docker Engine (docker-local's settings); the case is the synthetic workload (``framework: synthetic``:
a process per node that prints DLLogger lines and trains nothing).

Per case run, from Airflow's task instance records and each node task's report (``NodeShare``'s time stamps):
  join      = the first node task's start (``start_date``) -> the moment the last node saw every peer joined
              (``joined_at``): every node task running and registered on the board, before any workload starts
  teardown  = the case's end (node 0's ``exited_at``: its supervisor, which watches every node, saw every
              workload end) -> the last node task's end (``end_date``): containers stopped and removed, reports pushed
  spread    = the first node task's start -> the last one's (Celery and the workers, not dlperf)
  between cases = one case run's end -> the next case run's gang complete: the nodes' idle time between two runs
Target: join + teardown grows by at most 1 s from 2 to 8 nodes.

    .venv/bin/python bench/growth_nodes.py [--nodes 2,4,8] [--repeats 5] [--out docs/img/growth_nodes.png]
        [--json SERIES.json] [--before LABEL=EARLIER.json ...] [--resummarize SERIES.json]
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
    raw = []
    for index in range(repeats):
        here = node_tis[node_tis["map_index"] == index]
        got = [shares.get((t, index)) for t in here["task_id"]]
        if len(here) != nodes or any(s is None or s.get("joined_at") is None for s in got):
            raise SystemExit(f"{nodes} nodes, case run {index}: a node task reported no join: {got}")
        raw += [
            {
                "index": index,
                "task_id": t.task_id,
                "queued": str(t.queued_dttm),
                "start": str(t.start_date),
                "end": str(t.end_date),
                "joined": s["joined_at"],  # type: ignore[index]
                "exited": s["exited_at"],  # type: ignore[index]
            }
            for t, s in zip(here.itertuples(), got, strict=True)
        ]
    return {"nodes": nodes, "repeats": repeats, **summarize(raw), "pre_execute_s": statistics.median(pre_execute)}


def summarize(rows: list[dict]) -> dict:
    """The figures of one series from its node tasks' rows (``per_node``: one per node task and case run), medians
    over the case runs. ``teardown`` starts where node 0's supervisor saw the case end (``exited_at`` of
    ``on_node0``: every node's workload ended; node 0 watches every node); ``between_cases`` is the cluster's dead
    time from one case run's end to the next one's gang complete (teardown, the next tasks' queueing and start,
    join), over consecutive case runs."""
    by_run: dict[int, list[dict]] = {}
    for row in rows:
        by_run.setdefault(int(row["index"]), []).append(row)
    joins, teardowns, spreads, settle, queued_spreads, between = [], [], [], [], [], []
    for index, here in sorted(by_run.items()):
        starts = [_t(r["start"]) for r in here]
        case_end = next(_t(r["exited"]) for r in here if r["task_id"].endswith(".on_node0"))
        joined = max(_t(r["joined"]) for r in here)
        joins.append((joined - min(starts)).total_seconds())
        teardowns.append((max(_t(r["end"]) for r in here) - case_end).total_seconds())
        spreads.append((max(starts) - min(starts)).total_seconds())
        queued = [_t(r["queued"]) for r in here]
        queued_spreads.append((max(queued) - min(queued)).total_seconds())
        settle.append((joined - max(starts)).total_seconds())
        if index + 1 in by_run:
            next_joined = max(_t(r["joined"]) for r in by_run[index + 1])
            between.append((next_joined - case_end).total_seconds())
    return {
        "join_s": statistics.median(joins),
        "teardown_s": statistics.median(teardowns),
        "join_plus_teardown_s": statistics.median(j + t for j, t in zip(joins, teardowns, strict=True)),
        "between_cases_s": statistics.median(between) if between else None,
        "start_spread_s": statistics.median(spreads),
        "last_start_to_joined_s": statistics.median(settle),
        "queued_spread_s": statistics.median(queued_spreads),
        "per_node": rows,
        "joins": joins,
        "teardowns": teardowns,
        "betweens": between,
    }


def plot(figures: list[dict], path: Path, before: list[tuple[str, list[dict]]] = ()) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    frame = pd.DataFrame(figures)
    fig = Figure(figsize=(6.5, 4.5), layout="constrained")
    ax = fig.subplots()
    for column, label in (
        ("join_s", "join: first node task start -> gang complete"),
        ("teardown_s", "teardown: case end -> last node task end"),
        ("pre_execute_s", "Airflow's task start (Pre Execute), before dlperf's code"),
    ):
        ax.plot(frame["nodes"], frame[column], "o-", label=label)
    ax.plot(frame["nodes"], frame["join_plus_teardown_s"], "s-", color="black", label="join + teardown")
    ax.plot(
        frame["nodes"],
        frame["between_cases_s"],
        "D-",
        color="purple",
        label="between cases: case end -> next gang complete",
    )
    for (label, series), style in zip(before, ("s--", "s:"), strict=False):
        old = pd.DataFrame(series)
        ax.plot(old["nodes"], old["join_plus_teardown_s"], style, color="grey", label=f"join + teardown, {label}")
    ax.set_xticks(frame["nodes"])
    ax.set_xlabel("nodes in the case (one Celery worker each)")
    ax.set_ylabel("seconds (median over the case runs)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    ax.set_title("Growth with the nodes of a case (CeleryExecutor, stand-in nodes)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def print_table(figures: list[dict], label: str = "") -> None:
    print(
        "\n| nodes | join s | of it: task starts' spread s | last task start -> gang complete s | Airflow's task "
        "start (Pre Execute) s | teardown s | join + teardown s | between cases s |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for f in figures:
        between = "" if f["between_cases_s"] is None else f"{f['between_cases_s']:.2f}"
        print(
            f"| {label}{f['nodes']} | {f['join_s']:.2f} | {f['start_spread_s']:.2f} | {f['last_start_to_joined_s']:.2f} "
            f"| {f['pre_execute_s']:.2f} | {f['teardown_s']:.2f} | {f['join_plus_teardown_s']:.2f} | {between} |"
        )
    by = {int(f["nodes"]): f for f in figures}
    if 2 in by and 8 in by:
        growth = by[8]["join_plus_teardown_s"] - by[2]["join_plus_teardown_s"]
        verdict = "met" if growth <= TARGET_GROWTH_S else "MISSED"
        print(f"\njoin + teardown, 8 nodes - 2 nodes: {growth:+.2f} s (target <= {TARGET_GROWTH_S:g} s): {verdict}")
        if by[8]["between_cases_s"] is not None and by[2]["between_cases_s"] is not None:
            print(f"between cases, 8 nodes - 2 nodes: {by[8]['between_cases_s'] - by[2]['between_cases_s']:+.2f} s")


def resummarize(path: Path) -> list[dict]:
    """A series saved with ``--json``, its figures computed again from its node tasks' rows (``per_node``)."""
    return [
        {"nodes": f["nodes"], "repeats": f["repeats"], **summarize(f["per_node"]), "pre_execute_s": f["pre_execute_s"]}
        for f in json.loads(path.read_text())
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="2,4,8")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, help="PNG of the figures (docs/img/growth_nodes.png)")
    ap.add_argument("--json", type=Path, help="write the figures as JSON too")
    ap.add_argument(
        "--before",
        action="append",
        default=[],
        metavar="LABEL=JSON",
        help="an earlier series (its --json) to print and to draw beside this one",
    )
    ap.add_argument(
        "--resummarize",
        type=Path,
        metavar="JSON",
        help="measure nothing: this series (a --json) is the one printed and drawn, its figures computed from its rows",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for every process of the deployment (an Airflow option to compare)",
    )
    args = ap.parse_args()
    before = [(label, resummarize(Path(p))) for label, p in (item.split("=", 1) for item in args.before)]
    if args.resummarize:
        figures = resummarize(args.resummarize)
    else:
        env = dict(item.split("=", 1) for item in args.set)
        print(f"# growth with the nodes of a case, CeleryExecutor  ({machine()}) {env or ''}")
        figures = []
        for n in (int(s) for s in args.nodes.split(",")):
            with tempfile.TemporaryDirectory(prefix=f"dlperf-nodes-{n}-") as tmp:
                figures.append(measure(n, args.repeats, Path(tmp), env))
            print(json.dumps(figures[-1]), flush=True)
    for label, series in before:
        print(f"\n## {label}")
        print_table(series, f"{label} ")
    print("\n## this series" if before else "")
    print_table(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    if args.out:
        plot(figures, args.out, before)
        print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
