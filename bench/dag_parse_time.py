"""(d) DAG parse time, and planning time for a 300-run matrix (5 benchmarks x 6 topologies x 2 precisions x
5 repeats). The DAG's shape does not depend on the suite (cases are planned at run time and mapped), so the
file parses in the same time whatever the matrix; planning the matrix is measured separately. Target < 2 s.

Each parse runs in a fresh process, as Airflow 3's dag-processor parses every file in a process forked for it
(nothing the DAG file computed survives to the next parse but what it leaves on disk). The trigger form's
choices (:func:`dlperf_core.plan.form_choices.discover_choices`) are cached in the dlperf home's state folder, so the parse
is timed twice per round: cold (no cache file: every suite and inventory is read) and warm (the cache file of
the cold parse: one small JSON file is read, no suite). The dlperf home is a copy of the repository's
suites/ and inventories/ in a temporary folder, so the repository's own state folder is left alone.

    .venv/bin/python bench/dag_parse_time.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, machine

PROBE = """
import json, sys, time
from pathlib import Path
suites = str(Path(sys.argv[2]) / "suites")
opened = []
def audit(event, args):  # every suite file the parse opens
    if event == "open" and isinstance(args[0], str) and args[0].startswith(suites):
        opened.append(args[0])
sys.addaudithook(audit)
from dlperf_cli.embedded import prepare_environment
prepare_environment()
t0 = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
t1 = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1])
t2 = time.perf_counter()
assert not bag.import_errors, bag.import_errors
print(json.dumps({"import_airflow_s": t1 - t0, "parse_s": t2 - t1, "suites_opened": len(opened)}))
"""

CACHE = Path(".dlperf") / "cache" / "form-choices.json"
"""The form choices' cache under the dlperf home (dlperf_core.plan.form_choices.choices_cache_path)."""


def parse_once(env: dict[str, str], home: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO / "dags"), str(home)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def parse_rounds(rounds: int) -> dict[str, list[dict[str, float]]]:
    """``rounds`` x (cold parse, warm parse), each in a fresh process; their probes' figures."""
    times: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        for folder in ("suites", "inventories"):
            shutil.copytree(REPO / folder, home / folder)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DLPERF"))}
        env |= {"AIRFLOW_HOME": str(Path(tmp) / "airflow"), "DLPERF_HOME": str(home)}
        parse_once(env, home)  # the first parse writes Airflow's own files and warms the OS's page cache
        for _ in range(rounds):
            (home / CACHE).unlink(missing_ok=True)
            times["cold"].append(parse_once(env, home))
            times["warm"].append(parse_once(env, home))
    return times


def discovery_rounds(rounds: int) -> dict[str, list[float]]:
    """``rounds`` x (cold, warm) calls of discover_choices in this process (modules already imported)."""
    from dlperf_core.plan.form_choices import discover_choices

    times: dict[str, list[float]] = {"cold": [], "warm": []}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for folder in ("suites", "inventories"):
            shutil.copytree(REPO / folder, home / folder)
        discover_choices(home)  # imports, page cache
        for _ in range(rounds):
            (home / CACHE).unlink(missing_ok=True)
            for kind in ("cold", "warm"):
                t0 = time.perf_counter()
                discover_choices(home)
                times[kind].append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="cold + warm parses, each in a fresh process")
    args = parser.parse_args()
    from dlperf_core.cluster.inventory import Inventory, Node
    from dlperf_core.plan.cases import plan_suite
    from dlperf_core.plan.suite import parse_suite

    times = parse_rounds(args.rounds)
    suite = parse_suite(
        {
            "name": "matrix300",
            "repeats": 5,
            "benchmarks": [
                {
                    "framework": "pytorch_reference",
                    "model": "resnet50_v1.5",
                    "precisions": ["fp32", "amp"],
                    "batch_size_per_device": b,
                    "topologies": ["1n1g", "1n2g", "1n4g", "1n8g", "2n8g", "4n8g"],
                }
                for b in (64, 96, 128, 192, 256)  # 5 entries stand in for the 5 frameworks
            ],
        }
    )
    inv = Inventory(nodes=tuple(Node(name=f"n{i}", gpus=8) for i in range(4)))
    t0 = time.perf_counter()
    runs = plan_suite(suite, inv)
    plan_s = time.perf_counter() - t0
    xcom = json.dumps([r.to_json() for r in runs])
    print(f"# DAG parse time  ({machine()}; {args.rounds} rounds, each parse in a fresh process)")
    for kind, what in (("cold", "no form-choices cache"), ("warm", "form-choices cache of the cold parse")):
        parse = [t["parse_s"] for t in times[kind]]
        opened = sorted({int(t["suites_opened"]) for t in times[kind]})
        print(
            f"DagBag parse of dags/ (dlperf_benchmark), {kind} ({what}): median {statistics.median(parse):.3f} s, "
            f"min {min(parse):.3f} s, max {max(parse):.3f} s; suite files opened: {'/'.join(map(str, opened))}"
            f"  (target < 2 s; ratio {statistics.median(parse) / 2:.2f} of target)"
        )
        print(f"  rounds: {', '.join(f'{p:.3f}' for p in parse)}")
    saved = [c["parse_s"] - w["parse_s"] for c, w in zip(times["cold"], times["warm"], strict=True)]
    print(
        f"cold - warm, per round: median {statistics.median(saved) * 1000:.0f} ms ({', '.join(f'{d * 1000:.0f}' for d in saved)})"
    )
    discovery = discovery_rounds(args.rounds)
    print(
        "discover_choices alone (in one process): "
        + "; ".join(
            f"{kind} median {statistics.median(v) * 1000:.1f} ms (min {min(v) * 1000:.1f})"
            for kind, v in discovery.items()
        )
    )
    imports = [t["import_airflow_s"] for kinds in times.values() for t in kinds]
    print(f"importing Airflow before it (once per process): median {statistics.median(imports):.3f} s")
    print(f"planning the {len(runs)}-run matrix: {plan_s * 1000:.1f} ms; plan XCom {len(xcom) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
