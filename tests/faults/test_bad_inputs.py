"""Bad input at the edges that other tests do not reach through the real entry points: logs that are empty,
binary, truncated, one gigantic line or full of NaN through `dlperf parse`, and a topology larger than the
inventory through the DAG's plan task. (Malformed suite YAML, unknown framework/model and bad trigger form
values are covered by tests/core/plan/test_suite.py, tests/e2e/test_e2e_local.py and tests/airflow_plugin/test_dag.py; the
parsers are fuzzed with hypothesis in tests/core/parsing/.)"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from faults.common import DATA, run_cli
from helpers import DLPERF, REPO, run_id_of
from parsing_logs import synthetic


def _nan_log() -> bytes:
    lines = synthetic(30).splitlines(keepends=True)
    return "".join(
        line.replace("train.loss : 7.00000", "train.loss : nan") if i >= 10 else line for i, line in enumerate(lines)
    ).encode()


LOGS = {
    "empty": (lambda: b"", "empty log"),
    "binary": (lambda: os.urandom(200_000) + b"\x00" * 1000, "binary garbage"),
    "truncated": (lambda: synthetic(30).encode()[: len(synthetic(30)) * 2 // 3 + 7], "truncated mid-line"),
    "gigantic-line": (
        lambda: b"DLL 2020-12-16 11:34:01.884827 - Epoch: 0 Iteration: 1 " + b"9" * 20_000_000,
        "one 20 MB line",
    ),
    "nan": (_nan_log, "loss NaN from iteration 10"),
}


@pytest.mark.parametrize("kind", sorted(LOGS))
def test_bad_log_gets_a_failed_status_with_a_reason(kind, tmp_path, fault):
    make, what = LOGS[kind]
    rec = fault(
        "bad input",
        f"log: {kind}",
        f"`dlperf parse --json` on a log file: {what}",
        "exit 1, status failed with a reason, no crash",
    )
    log = tmp_path / f"{kind}.log"
    log.write_bytes(make())
    # a log cut mid-line is a failed run by the strict window (dlperf's own runs); `dlperf parse` fits the
    # window to a foreign log by default and measures its complete lines (tests/core/measure/test_window_policy.py)
    strict = ["--strict"] if kind == "truncated" else []
    done = subprocess.run(
        [*DLPERF, "parse", str(log), "--json", *strict], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 1, done.stdout[-1000:]
    runs = json.loads(done.stdout)
    assert runs and all(r["status"] == "failed" and r["reason"] and r["throughput"] is None for r in runs), runs
    rec.observed = "; ".join(sorted({r["reason"] for r in runs}))


@pytest.mark.postgres
def test_topology_larger_than_inventory_fails_the_plan_task(tmp_path, pg_url, fault):
    rec = fault(
        "bad input",
        "topology larger than the inventory",
        "suite asks 4n8g, local inventory has 2 nodes x 2 devices; `dlperf run` (dag.test)",
        "plan_cases fails naming the topology; nothing runs, no row stored",
    )
    suite = yaml.safe_load((DATA / "tiny-local.yaml").read_text())
    suite["benchmarks"][0]["topologies"] = ["4n8g"]
    path = tmp_path / "too-big.yaml"
    path.write_text(yaml.safe_dump(suite))
    out = run_cli(tmp_path, pg_url, str(path))
    assert out.returncode == 1
    run_id = run_id_of(out.stdout)
    text = out.stdout + out.stderr
    assert "needs 4 nodes" in text, text[-3000:]
    from dlperf_core.storage import ResultStore

    store = ResultStore(pg_url)
    store.ensure_schema()
    assert len(store.results(run_id=run_id)) == 0
    line = next(l for l in text.splitlines() if "needs 4 nodes" in l)
    rec.observed = f"DAG run failed at plan_cases: {line.strip()[-200:]}"
