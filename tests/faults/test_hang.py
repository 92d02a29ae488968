"""A training that goes silent, through the real DAG: the no-progress watchdog stops it, its whole process
tree is gone afterwards, and the repeat is stored as failed with the watchdog's reason."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from dlperf_core.storage import ResultStore
from faults.common import DATA, processes_left, run_cli, wait_until_visible
from helpers import run_id_of

pytestmark = pytest.mark.postgres


def test_silent_training_is_stopped_by_the_watchdog(tmp_path, pg_url, fault):
    rec = fault(
        "fault",
        "training hangs with no output",
        "a real training that prints its parameters and then nothing (--print-freq 1000000, 100000 iterations); "
        "suite watchdog_s 20, timeout_s 300; local runtime through dag.test",
        "the watchdog stops it after ~20 s of silence; repeat failed with that reason; no process of it left "
        "(torchrun's workers run in their own session: they must be killed too)",
    )
    marker = f"DLPERF_FAULT_MARK={uuid.uuid4().hex}"  # inherited by every process the run starts
    key, value = marker.split("=")
    probe = subprocess.Popen(["sleep", "60"], env={**os.environ, key: value})  # the check can see a live one
    try:
        assert wait_until_visible(marker, probe.pid) == [probe.pid]
    finally:
        probe.kill()
        probe.wait()
    out = run_cli(tmp_path, pg_url, str(DATA / "hang-local.yaml"), **{key: value})
    left = processes_left(marker)
    rows = ResultStore(pg_url).results(run_id=run_id_of(out.stdout))
    rec.results_lost = 1 - len(rows)
    rec.containers_leaked = 0  # local runtime: processes are checked instead
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-3000:]
    assert left == {}, f"processes left running: {left}"
    (row,) = rows.itertuples()
    assert row.status == "failed" and row.reason.startswith("watchdog: no log progress for 20 s"), row.reason
    log = Path(row.log_path).read_text(errors="replace")
    assert "PARAMETER" in log, log[-2000:]  # the worker had started training before it went silent
    took = (row.finished_at - row.started_at).total_seconds()
    assert took < 150, f"the hung repeat took {took:.0f} s (timeout is 300 s)"
    rec.observed = f"stopped after {took:.1f} s: {row.reason!r}; 0 processes left (15 s grace)"
