"""Where a log came from decides its window: runs dlperf launched keep the strict window (too few iterations is
a failure: dlperf asked for more), logs from elsewhere (`dlperf parse`, `dlperf import`) get a window fitted to
what they hold, flagged `window_fitted`, with a stated minimum."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dlperf_core.measure.measurement import measure_case_run
from dlperf_core.model import Case, CaseOutcome, NodeOutcome
from dlperf_core.parsing import parse_log
from dlperf_core.parsing.window import MIN_FITTED_MEASURED
from helpers import DLPERF, REPO, SHARED

PADDLE8 = SHARED / "reallogs" / "paddle_resnet50" / "paddle_gpu8_fp32_bs96.txt"
pytestmark = pytest.mark.skipif(not PADDLE8.is_file(), reason=f"no real logs at {PADDLE8}")


def cut_after_step(text: str, step: int) -> str:
    """The log up to and including its ``train step:<step>`` line (whole lines)."""
    lines = text.split("\n")
    last = next(i for i, line in enumerate(lines) if f"train step:{step} " in line)
    return "\n".join(lines[: last + 1]) + "\n"


@pytest.fixture(scope="module")
def short_log(tmp_path_factory) -> Path:
    """An 8-GPU PaddleClas log that its author stopped after step 62 (63 iterations from step 0)."""
    path = tmp_path_factory.mktemp("paddle") / "paddle_gpu8_fp32_bs96_62steps.txt"
    path.write_text(cut_after_step(PADDLE8.read_text(), 62))
    return path


def test_a_short_foreign_log_is_measured_over_what_it_holds(short_log):
    text = short_log.read_text()
    (strict,) = parse_log(text, file=short_log.name)
    assert strict.status == "failed" and strict.reason.startswith("truncated log: 63 of")
    (fitted,) = parse_log(text, file=short_log.name, fit=True)
    assert fitted.status == "ok" and fitted.window_fitted
    assert fitted.window == (21, 62) and fitted.iterations == 42  # warm-up 20 kept, then every iteration
    # the same figure as a strict window that asks for exactly what the log has
    (exact,) = parse_log(text, file=short_log.name, warmup=20, measured=43)
    assert exact.status == "failed"  # still stopped before its planned epoch: truncated
    full_rate = parse_log(PADDLE8.read_text(), file=PADDLE8.name, warmup=20, measured=42)[0].throughput
    assert fitted.throughput == pytest.approx(full_rate, rel=1e-12)  # the first 42 measured steps of the full log
    # a full log under the fitted policy: nothing to fit
    (whole,) = parse_log(PADDLE8.read_text(), file=PADDLE8.name, fit=True)
    assert whole.status == "ok" and not whole.window_fitted and whole.window == (21, 120)


def test_a_fitted_window_has_a_minimum():
    text = cut_after_step(PADDLE8.read_text(), 20 + MIN_FITTED_MEASURED - 1)  # 9 iterations after warm-up
    (run,) = parse_log(text, file="short.txt", fit=True)
    assert run.status == "failed" and run.throughput is None
    assert run.reason == (
        f"too few iterations for a fitted window (got {20 + MIN_FITTED_MEASURED - 1}, need at least"
        f" {20 + MIN_FITTED_MEASURED}: 20 warm-up + {MIN_FITTED_MEASURED})"
    )
    (ok,) = parse_log(cut_after_step(PADDLE8.read_text(), 20 + MIN_FITTED_MEASURED), file="s.txt", fit=True)
    assert ok.status == "ok" and ok.iterations == MIN_FITTED_MEASURED


def test_a_cut_last_line_is_left_out_of_a_fitted_window(short_log):
    text = short_log.read_text()
    torn = text + "2020-12-16 18:57:37 INFO: epoch:0   train step:63   loss:  7.9"  # no newline: cut
    (strict,) = parse_log(torn, file="torn.txt")
    assert strict.status == "failed" and strict.reason == "truncated log: last line cut"
    (fitted,) = parse_log(torn, file="torn.txt", fit=True)
    (clean,) = parse_log(text, file="torn.txt", fit=True)
    assert fitted.status == "ok" and fitted.window == clean.window and fitted.throughput == clean.throughput


def test_dlperf_parse_fits_by_default_and_strict_restores_the_failure(short_log):
    out = subprocess.run([*DLPERF, "parse", str(short_log), "--json"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    (run,) = json.loads(out.stdout)
    assert run["status"] == "ok" and run["window_fitted"] is True and run["window"] == [21, 62]
    text = subprocess.run([*DLPERF, "parse", str(short_log)], capture_output=True, text=True, cwd=REPO).stdout
    assert "window=21-62 (fitted)" in text
    strict = subprocess.run(
        [*DLPERF, "parse", str(short_log), "--json", "--strict"], capture_output=True, text=True, cwd=REPO
    )
    assert strict.returncode == 1
    (run,) = json.loads(strict.stdout)
    assert run["status"] == "failed" and run["window_fitted"] is False and run["throughput"] is None


def test_a_run_dlperf_launched_keeps_the_strict_window(tmp_path, short_log, monkeypatch):
    """measure_case_run() is what store_result calls on a launched run's log: dlperf asked for 20 + 100 iterations, so a
    log that stops after 62 is a failed run, whatever dlperf parse says of the same file."""
    import dlperf_core.frameworks.pytorch_reference as ref

    monkeypatch.setattr(ref.PytorchReference, "log_format", "paddleclas")  # an adapter that logs this format
    log = tmp_path / "node0.log"
    log.write_text(short_log.read_text())
    case = Case("pytorch_reference", "resnet50_v1.5", "fp32", 96, 1, 8, 20, 100)
    now = datetime(2026, 11, 24, tzinfo=UTC)
    outcome = CaseOutcome(now, now, [NodeOutcome(node="node0", rank=0, exit_code=0, log_path=str(log))], None)
    verdict = measure_case_run(case, outcome)
    assert verdict.status == "failed" and verdict.reason.startswith("truncated log: 63 of")
    assert verdict.throughput is None and verdict.window_first is None
    full = tmp_path / "full.log"
    full.write_text(PADDLE8.read_text())
    ok = measure_case_run(
        case, CaseOutcome(now, now, [NodeOutcome(node="node0", rank=0, exit_code=0, log_path=str(full))], None)
    )
    assert ok.status == "ok" and (ok.window_first, ok.window_last) == (21, 120)  # stored with the row
