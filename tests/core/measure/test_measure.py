"""The verdict on one case run: a failed process is named by its own last words, never stored as a zero."""

from __future__ import annotations

from datetime import UTC, datetime

from dlperf_core.measure.measurement import measure_case_run
from dlperf_core.model import Case, CaseOutcome, NodeOutcome
from dlperf_core.parsing.failures import error_line

CASE = Case("pytorch_reference", "resnet50_v1.5", "fp32", 8, 1, 1, 2, 3)
NOW = datetime(2026, 11, 22, tzinfo=UTC)


def outcome(log, failure):
    return CaseOutcome(NOW, NOW, [NodeOutcome(node="node0", rank=0, exit_code=2, log_path=str(log))], failure)


def test_error_line_finds_exceptions_and_argparse_errors():
    traceback = "Traceback (most recent call last):\n  File 'x', line 3\nValueError: Invalid loss, terminating\n"
    assert error_line(traceback) == "ValueError: Invalid loss, terminating"
    usage = "usage: train.py [-h]\ntrain.py: error: unrecognized arguments: --no-such-flag\n"
    assert error_line(usage) == "train.py: error: unrecognized arguments: --no-such-flag"
    assert (
        error_line("[1,0]<stderr>:RuntimeError: gloo timed out\n[1,1]<stdout>:bye\n") == "RuntimeError: gloo timed out"
    )
    assert error_line("train loss 1.2, error rate 0.3\nall fine\n") is None
    assert len(error_line("KeyError: " + "x" * 1000)) == 240
    # a launcher's traceback about its failed child comes after the child's usage error: the cause wins
    launcher = (
        "of_cnn_train_val.py: error: unrecognized arguments: --no-such-flag\n"
        "Traceback (most recent call last):\n"
        "subprocess.CalledProcessError: Command '['python3', 'x.py']' returned non-zero exit status 2.\n"
    )
    assert error_line("generic-image-rec train script: error: unrecognized arguments: --x\n") == (
        "generic-image-rec train script: error: unrecognized arguments: --x"  # PLSC's prog name has spaces
    )
    assert error_line(launcher) == "of_cnn_train_val.py: error: unrecognized arguments: --no-such-flag"
    # torchrun in an image without torch: the interpreter says it, not an exception line
    no_torch = (
        "/usr/bin/python3: Error while finding module specification for 'torch.distributed.run' "
        "(ModuleNotFoundError: No module named 'torch')\n"
    )
    assert error_line(no_torch) == "ModuleNotFoundError: No module named 'torch' (python -m torch.distributed.run)"
    assert error_line("/opt/venv/bin/python3.11: No module named oneflow\n") == "No module named oneflow"


def test_a_wrong_argument_fails_with_the_frameworks_own_words(tmp_path):
    log = tmp_path / "node0.log"
    log.write_text("usage: train.py [-h] [--batch-size N]\ntrain.py: error: unrecognized arguments: --no-such-flag\n")
    verdict = measure_case_run(CASE, outcome(log, "node0 exited with code 2"))
    assert verdict.status == "failed" and verdict.throughput is None
    assert verdict.reason == (
        "node0 exited with code 2; log: no training lines; "
        "error: train.py: error: unrecognized arguments: --no-such-flag"
    )


def test_a_failed_run_without_last_words_keeps_the_exit_reason(tmp_path):
    log = tmp_path / "node0.log"
    log.write_text("")
    verdict = measure_case_run(CASE, outcome(log, "node0 was killed (exit code 137)"))
    assert verdict.status == "failed"
    assert verdict.reason.startswith("node0 was killed (exit code 137)")
    assert "error:" not in verdict.reason
