"""Tests of the failures a parser reports (dlperf_core.parsing.failures), through the NGC PyTorch DLLogger
parser: out of memory, NaN/inf loss, no training lines, truncated logs, too few iterations for the window."""

from __future__ import annotations

import pytest

from dlperf_core.parsing import detect_format, dllogger
from parsing_checks import check_all
from parsing_logs import iter_line, needs_ngc_logs, ngc_log, param_line, synthetic

FMT = dllogger.NAME


@needs_ngc_logs
def test_out_of_memory() -> None:
    text = ngc_log("pytorch_gpu1_fp32_bs128.txt").split("DLL 2020-12-16 11:32:25")[0] + (
        "Traceback (most recent call last):\n"
        "RuntimeError: CUDA out of memory. Tried to allocate 98.00 MiB (GPU 0; 15.78 GiB total capacity)\n"
    )
    (run,) = check_all(text)
    assert run.status == "failed" and run.reason == "out of memory" and run.throughput is None
    (run,) = check_all(synthetic(100) + "terminate called after throwing an instance of 'std::bad_alloc'\n")
    assert run.reason == "out of memory"


def test_nan_and_inf_loss() -> None:
    lines = synthetic(20).splitlines(keepends=True)
    lines[7] = lines[7].replace("train.loss : 7.00000", "train.loss : nan")  # line 0 is PARAMETER
    (run,) = check_all("".join(lines))
    assert run.status == "failed" and run.reason == "loss is NaN/inf at iteration 7"
    (run,) = check_all(synthetic(20).replace("Iteration: 12  train.loss : 7.00000", "Iteration: 12  train.loss : inf"))
    assert run.reason == "loss is NaN/inf at iteration 12"


def test_no_training_lines() -> None:
    text = param_line() + "Traceback (most recent call last):\nValueError: boom\n"
    assert detect_format(text) == FMT
    (run,) = check_all(text)
    assert run.status == "failed" and run.reason == "no training lines" and run.gpus == 2
    (run,) = check_all("nothing here\n", format=FMT)
    assert run.reason == "no training lines"


@needs_ngc_logs
def test_truncated_logs() -> None:
    text = ngc_log("pytorch_gpu1_amp_bs128.txt")
    cut = text.index("DLL 2020-12-16 11:34:09")  # a line boundary in the middle of the iterations
    (run,) = check_all(text[:cut])
    assert run.status == "failed" and run.reason is not None and run.reason.startswith("truncated log")
    assert run.reason == f"truncated log: {run.records[-1].iteration} of 99 iterations"
    (run,) = check_all(text[: cut + 60])  # inside a line
    assert run.reason == "truncated log: last line cut"
    # our workload: warmup_iterations + iterations announce the end
    plan = param_line(warmup_iterations=5, iterations=100)
    body = "".join(iter_line(0.1 * i, 0, i, 7.0, 640.0) for i in range(1, 60))
    (run,) = check_all(plan + body)
    assert run.reason == "truncated log: 59 of 105 iterations"
    (run,) = check_all(param_line(epochs=3) + body)
    assert run.reason == "truncated log: 1 of 3 epochs"


@needs_ngc_logs
def test_complete_log_without_final_newline_is_fine() -> None:
    (run,) = check_all(ngc_log("pytorch_gpu1_amp_bs128.txt").rstrip("\n"))
    assert run.status == "ok"
    (run,) = check_all(synthetic(50).rstrip("\n"))
    assert run.status == "ok" and run.reported_throughput == pytest.approx(640.0)


@needs_ngc_logs
def test_too_few_iterations_for_the_window() -> None:
    text = ngc_log("pytorch_gpu1_amp_bs128.txt")
    (run,) = check_all(text, warmup=5, measured=200)
    assert run.reason == "too few iterations for the window (got 99, need 205)"
    (run,) = check_all(text, warmup=99)
    assert run.reason == "too few iterations for the window (got 99, need 100)"
    assert run.reported_throughput == pytest.approx(828.65)  # the framework's figure is kept
    (run,) = check_all(text, warmup=5, measured=94)
    assert run.status == "ok" and run.window == (6, 99)
