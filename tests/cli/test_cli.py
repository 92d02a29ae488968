"""`dlperf parse` on real published logs, and `dlperf results` on an empty and a filled database."""

import json
import subprocess
from pathlib import Path

import pytest

from helpers import DLPERF, REPO, SHARED
from parsing_logs import NGC_PUBLISHED  # reallogs/PROVENANCE.md figures


@pytest.mark.skipif(not (SHARED / "reallogs").exists(), reason="../shared/reallogs not present")
def test_parse_json_gives_the_published_figures():
    logs = sorted(str(p) for p in (SHARED / "reallogs" / "ngc_pytorch").glob("*.txt"))
    out = subprocess.run([*DLPERF, "parse", *logs, "--json"], capture_output=True, text=True, cwd=REPO, check=True)
    runs = json.loads(out.stdout)
    assert len(runs) == len(NGC_PUBLISHED)
    for run in runs:
        assert {
            "file",
            "format",
            "throughput",
            "reported_throughput",
            "iterations",
            "status",
            "reason",
            "gpus",
            "batch_size_per_device",
        } <= set(run)
        published = NGC_PUBLISHED[Path(run["file"]).name]
        assert run["format"] == "ngc_pytorch_dllogger" and run["status"] == "ok"
        assert run["reported_throughput"] == pytest.approx(published, rel=0.005)
        # our window rule (after iteration 5, from timestamps) is within 2% of the framework's own mean
        assert run["throughput"] == pytest.approx(published, rel=0.02)
        assert run["gpus"] in (1, 8) and run["batch_size_per_device"] in (128, 256, 248)


def test_parse_marks_a_broken_log_failed_with_a_reason(tmp_path):
    log = tmp_path / "oom.log"
    log.write_text(
        "DLL 2026-01-01 00:00:00.000000 - PARAMETER batch_size : 256  world_size : 1\n"
        "DLL 2026-01-01 00:00:01.000000 - Epoch: 0 Iteration: 1  train.loss : 7.0  train.total_ips : 100.0 img/s\n"
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    out = subprocess.run([*DLPERF, "parse", str(log), "--json"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 1
    (run,) = json.loads(out.stdout)
    assert run["status"] == "failed" and "out of memory" in run["reason"] and run["throughput"] is None


def test_results_on_an_empty_database(tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    out = subprocess.run([*DLPERF, "results", "--db", db], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0 and "(no results)" in out.stdout
