"""(d) DAG parse time, and planning time for a 300-run matrix (5 benchmarks x 6 topologies x 2 precisions x
5 repeats). The DAG's shape does not depend on the suite (cases are planned at run time and mapped), so the
file parses in the same time whatever the matrix; planning the matrix is measured separately. Target < 2 s.

    .venv/bin/python bench/dag_parse_time.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from _common import REPO, machine

PROBE = """
import time, json
from dlperf_cli.embedded import prepare_environment
prepare_environment()
t0 = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
t1 = time.perf_counter()
bag = DagBag(dag_folder=%r)
t2 = time.perf_counter()
assert not bag.import_errors, bag.import_errors
print(json.dumps({"import_airflow_s": t1 - t0, "parse_s": t2 - t1, "parse_reported_s": sum(s.duration for s in bag.dagbag_stats) if hasattr(bag.dagbag_stats[0].duration, '__float__') else None}))
"""


def main() -> None:
    from dlperf_core.inventory import Inventory, Node
    from dlperf_core.plan import plan_suite
    from dlperf_core.suite import parse_suite

    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")} | {"AIRFLOW_HOME": tmp}
        out = subprocess.run(
            [sys.executable, "-c", PROBE % str(REPO / "dags")], env=env, capture_output=True, text=True, check=True
        )
        times = json.loads(out.stdout.strip().splitlines()[-1])
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
    xcom = json.dumps([r.to_dict() for r in runs])
    print(f"# DAG parse time  ({machine()})")
    print(
        f"DagBag parse of dags/ (dlperf_benchmark): {times['parse_s']:.3f} s  (target < 2 s; ratio {times['parse_s'] / 2:.2f} of target)"
    )
    print(f"importing Airflow before it (once per process): {times['import_airflow_s']:.3f} s")
    print(f"planning the {len(runs)}-run matrix: {plan_s * 1000:.1f} ms; plan XCom {len(xcom) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
