"""(k) The bad node named (docs/benchmarks.md): how often the per-node rule (dlperf_core/measure/node_peers.py) names a
node that is not slow, and how often it names one that is.

1. **Simulated** (seconds, no Docker): seeded sweeps of 3 to 16 identical nodes whose figures scatter with a spread
   (CV) of 0.5 to 3 %: how many noise-only sweeps name a node, and in how many a node 10 % slower is named (and how
   many other nodes with it), at the default policy (5 %).
2. **Real** (``--clean N --slowed M``; Docker, the reference CPU image): ``dlperf run tests/data/node-sweep-suite.yaml``
   on the four stand-in nodes of tests/data/node-sweep-inventory.yaml, N times with the slowed node's quota set to
   its peers' (clean sweeps), then M times as the inventory has it (sweep-node3 at 0.15 of a core, the others at
   half): each sweep's figures and the nodes named at the default 5 % and at the stand-ins' 50 % (z 2)
   (tests/e2e/test_node_sweep.py's). Each run takes about a minute; the results go to a SQLite file of their own.

    .venv/bin/python bench/node_sweeps.py                        # simulated only
    .venv/bin/python bench/node_sweeps.py --clean 10 --slowed 1  # and ten clean sweeps and a slowed one for real
    .venv/bin/python bench/node_sweeps.py --sweeps 0 --clean 10 --measured 80   # a longer measured window
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from _common import REPO, machine
from dlperf_core.measure.node_peers import NodeFigure, NodePolicy, node_figures, score_sweeps

SUITE = REPO / "tests" / "data" / "node-sweep-suite.yaml"
INVENTORY = REPO / "tests" / "data" / "node-sweep-inventory.yaml"
SLOWED = "sweep-node3"
STAND_IN = NodePolicy(slower_than=0.5, z_threshold=2.0)  # tests/e2e/test_node_sweep.py's


def simulated(sweeps: int, seed: int = 36) -> None:
    print(f"simulated: {sweeps} sweeps per row, 3-16 nodes each, default policy ({NodePolicy().slower_than:.0%})")
    print("| node spread (CV) | noise-only sweeps naming a node | 10 % slow node named | other nodes named too |")
    print("| ---: | ---: | ---: | ---: |")
    for cv in (0.005, 0.01, 0.015, 0.02, 0.03):
        rng = random.Random(seed)
        false = found = wrong = 0
        for _ in range(sweeps):
            n = rng.randint(3, 16)
            values = [1000.0 * (1 + rng.gauss(0, cv)) for _ in range(n)]
            false += bool(score_sweeps(_figures(values)).slow)
            slow = rng.randrange(n)
            values[slow] *= 0.9
            named = {s.node for s in score_sweeps(_figures(values)).slow}
            found += f"n{slow}" in named
            wrong += len(named - {f"n{slow}"})
        print(f"| {cv:.1%} | {false} of {sweeps} | {found / sweeps:.1%} | {wrong} |")


def _figures(values: list[float]) -> list[NodeFigure]:
    return [NodeFigure("s+args=0", f"n{i}", f"s+node=n{i}+args=0", v) for i, v in enumerate(values)]


def real(clean: int, slowed: int, measured: int | None) -> None:
    with tempfile.TemporaryDirectory(prefix="dlperf-node-sweeps-") as tmp:
        work = Path(tmp)
        suite = yaml.safe_load(SUITE.read_text())
        suite["inventory"] = str(INVENTORY)
        suite["measured_iterations"] = measured or suite["measured_iterations"]
        (work / "suite.yaml").write_text(yaml.safe_dump(suite))
        inventory = yaml.safe_load(INVENTORY.read_text())
        quota = {n["name"]: n.get("cpu_quota") for n in inventory["nodes"]}
        peers = next(q for name, q in quota.items() if name != SLOWED)
        for node in inventory["nodes"]:
            node["cpu_quota"] = peers
        (work / "clean.yaml").write_text(yaml.safe_dump(inventory))
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env |= {
            "AIRFLOW_HOME": str(work / "airflow"),
            "DLPERF_LOG_DIR": str(work / "logs"),
            "DLPERF_REPORT_DIR": str(work / "reports"),
            "DLPERF_DB_URL": f"sqlite:///{work / 'results.db'}",
        }
        print(
            f"\nreal: {clean} clean sweeps (every node at {peers} CPU), {slowed} slowed ({SLOWED} at {quota[SLOWED]})"
        )
        print("| sweep | load (1 min) | wall (s) | figures (samples/s) | spread | named at 5 % | named at 50 %, z 2 |")
        print("| --- | ---: | ---: | --- | ---: | --- | --- |")
        kinds = ["clean"] * clean + ["slowed"] * slowed
        for i, kind in enumerate(kinds):
            inv = work / "clean.yaml" if kind == "clean" else INVENTORY
            started = time.monotonic()
            load = os.getloadavg()[0]
            out = subprocess.run(
                [sys.executable, "-m", "dlperf_cli.main", "run", str(work / "suite.yaml"), "--inventory", str(inv)],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            wall = time.monotonic() - started
            if out.returncode != 0:
                kept = Path(tempfile.gettempdir()) / f"node-sweeps-{kind}-{i + 1}.log"
                kept.write_text(out.stdout + "\n--- stderr ---\n" + out.stderr)
                print(f"| {kind} {i + 1} | {load:.1f} | {wall:.0f} | failed (exit {out.returncode}): {kept} | | | |")
                continue
            run_id = next(
                line.split()[2].rstrip(":") for line in out.stdout.splitlines() if line.startswith("DAG run ")
            )
            figures = _run_figures(env["DLPERF_DB_URL"], run_id)
            values = {f.node: f.value for f in figures}
            clean_values = [v for n, v in values.items() if kind == "clean" or n != SLOWED]
            spread = (max(clean_values) - min(clean_values)) / statistics.median(clean_values)
            named = [
                ", ".join(s.node for s in score_sweeps(figures, policy=policy).slow) or "none"
                for policy in (NodePolicy(), STAND_IN)
            ]
            shown = ", ".join(f"{n.removeprefix('sweep-')} {v:.1f}" for n, v in sorted(values.items()))
            print(f"| {kind} {i + 1} | {load:.1f} | {wall:.0f} | {shown} | {spread:.1%} | {named[0]} | {named[1]} |")


def _run_figures(url: str, run_id: str) -> list[NodeFigure]:
    from dlperf_core.storage import ResultStore

    store = ResultStore(url)
    try:
        summary = store.summary(run_id=run_id)
        return node_figures(zip(summary["case_key"], summary["median_throughput"]))
    finally:
        store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=int, default=2000, help="simulated sweeps per spread")
    parser.add_argument("--clean", type=int, default=0, help="real clean sweeps on the stand-in nodes")
    parser.add_argument("--slowed", type=int, default=0, help="real sweeps with the slowed node")
    parser.add_argument("--measured", type=int, help="measured iterations per case (default: the suite's, 20)")
    args = parser.parse_args()
    print(machine())
    if args.sweeps:
        simulated(args.sweeps)
    if args.clean or args.slowed:
        real(args.clean, args.slowed, args.measured)


if __name__ == "__main__":
    main()
