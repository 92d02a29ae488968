"""Tests of the MLPerf Training MLLOG parser (``mlperf_mllog``, dlperf_core.parsing.mllog) over every ResNet-50 run
of MLPerf Training v1.0 in ``$DLPERF_SHARED/mlperf/training_v1.0`` (PROVENANCE.md there), and over cut and broken
copies of them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from dlperf_core.parsing import detect_format, mllog, mxnet, parse_log
from dlperf_core.parsing.mllog import read_runs
from helpers import SHARED

V1 = SHARED / "mlperf" / "training_v1.0"
RUNS = sorted(V1.glob("*/results/*/resnet/result_*.txt"))
needs_mlperf = pytest.mark.skipif(not RUNS, reason=f"no MLPerf logs at {V1}")
NVIDIA_LOG = V1 / "NVIDIA" / "results" / "dgxa100_ngc21.05_mxnet" / "resnet" / "result_0.txt"
PCL_LOG = V1 / "PCL" / "results" / "CloudBrainII_256_mindspore_close" / "resnet" / "result_0.txt"

# Per submitter folder: runs, and how many have a throughput (every run of v1.0 has usable spans)
WITH_THROUGHPUT = {
    "Dell": (25, 25),
    "Fujitsu": (5, 5),
    "GIGABYTE": (5, 5),
    "Google": (20, 20),  # blocks (TPU)
    "Graphcore": (10, 10),  # epochs
    "Habana": (5, 5),  # blocks
    "Inspur": (15, 15),
    "Intel": (15, 15),  # blocks, Xeon CPUs
    "Lenovo": (15, 15),
    "NVIDIA": (10, 10),
    "PCL": (10, 10),  # blocks, more starts than stops (one start per epoch)
    "Supermicro": (30, 30),
    "nettrix": (10, 10),
}


def _submitter(path: Path) -> str:
    return path.relative_to(V1).parts[0]


@needs_mlperf
def test_every_v1_run_is_detected_as_mllog_and_has_a_throughput_and_a_time_to_train():
    counted: dict[str, list[int]] = {}
    for path in RUNS:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert detect_format(text) == mllog.NAME, path
        (run,) = read_runs(text, str(path))
        assert run.status == "ok", (path, run.reason)
        assert run.throughput is not None and run.throughput > 0
        assert run.time_to_train_s is not None and run.time_to_train_s > 0
        assert run.converged is not None and run.global_batch_size is not None
        # the spans measured lie inside the run, and the rule's figure is at least the whole run's average
        assert all(s.seconds > 0 for s in run.measured)
        assert run.samples is not None and run.throughput >= run.samples / run.time_to_train_s
        have = counted.setdefault(_submitter(path), [0, 0])
        have[0] += 1
        have[1] += run.throughput is not None
    assert {k: tuple(v) for k, v in counted.items()} == WITH_THROUGHPUT


@needs_mlperf
def test_runs_that_log_their_own_figure_are_within_2_percent_of_it():
    """NVIDIA and its partners (NGC MXNet) log a throughput per epoch; dlperf's figure over the same steady
    epochs (samples / wall time: their harmonic mean) is within 2% of the mean of the logged ones."""
    compared = Counter()
    for path in RUNS:
        (run,) = read_runs(path.read_text(encoding="utf-8", errors="replace"), str(path))
        if run.reported_throughput is None:
            continue
        assert run.throughput is not None
        assert abs(run.throughput / run.reported_throughput - 1) <= 0.02, (path, run.throughput)
        compared[_submitter(path)] += 1
    assert compared["NVIDIA"] == 10 and sum(compared.values()) == 115  # every MXNet run: 23 systems x 5


@needs_mlperf
def test_an_mlperf_log_with_mxnet_speedometer_lines_is_mllog_not_ngc_mxnet():
    text = NVIDIA_LOG.read_text()
    speed = "Epoch[0] Batch [40-59]\tSpeed: 391.99 samples/sec\tLR: 0.0033916\t"
    mixed = text.replace("\n", f"\n[1,0]<stderr>:2020-12-16 08:02:43,201:INFO: {speed}\n", 3)
    assert mxnet.detect(mixed)  # the MXNet parser would take it
    assert detect_format(mixed) == mllog.NAME
    (parsed,) = parse_log(mixed, file="x")
    assert parsed.format == mllog.NAME and parsed.status == "ok" and parsed.method == "spans"


@needs_mlperf
def test_epochs_are_measured_after_the_first_and_the_window_names_them():
    (run,) = read_runs(NVIDIA_LOG.read_text(), "x")
    assert run.span_kind == "epoch" and len(run.spans) == 35 and run.measured == run.spans[1:]
    assert run.train_samples == 1_281_167 and run.global_batch_size == 3264 and run.converged
    assert run.time_to_train_s == pytest.approx(1724.542)  # run_stop - run_start, in the log's milliseconds
    expected = 34 * 1_281_167 / sum(s.seconds for s in run.spans[1:])
    assert run.throughput == pytest.approx(expected)
    assert run.hyperparameters["opt_name"] == "lars" and "lars_opt_base_learning_rate" in run.hyperparameters
    assert run.submission["org"] == "NVIDIA"
    (parsed,) = parse_log(NVIDIA_LOG.read_text(), file="x")
    assert parsed.window == (2, 35) and parsed.iterations == 34 and parsed.throughput == pytest.approx(expected)


@needs_mlperf
def test_pcl_blocks_run_from_their_first_start_to_their_stop_and_count_every_start():
    """PCL's MindSpore logs one block_start per epoch (each epoch_count 1, first_epoch_num the block's): a stop
    closes the span from the first start of its number, whose epochs are the starts'."""
    (run,) = read_runs(PCL_LOG.read_text(), "x")
    assert run.span_kind == "block" and len(run.spans) == 11 and run.unclosed_starts == 0
    assert [s.first_epoch for s in run.spans[:3]] == [1, 3, 7]
    assert [s.epochs for s in run.spans[:3]] == [2, 4, 4]
    assert run.spans[0].start_ms == 1622086103640 and run.spans[0].stop_ms == 1622086109020


def test_an_absl_prefix_and_float_epoch_numbers_are_read():
    lines = [
        'I0518 21:43:27.300133 431419 mllog.py:168] :::MLLOG {"namespace": 22, "time_ms": 1000, "key": "run_start", '
        '"value": null, "metadata": {}}',
        ':::MLLOG {"time_ms": 1000, "key": "train_samples", "value": 100, "metadata": {}}',
        ':::MLLOG {"time_ms": 1000, "key": "global_batch_size", "value": 10, "metadata": {}}',
        *(
            f'x] :::MLLOG {{"time_ms": {1000 + 10_000 * i}, "key": "block_start", "value": null, '
            f'"metadata": {{"first_epoch_num": {2.0 * i}, "epoch_count": 2}}}}\n'
            f'x] :::MLLOG {{"time_ms": {1000 + 10_000 * i + 4_000}, "key": "block_stop", "value": null, '
            f'"metadata": {{"first_epoch_num": {2.0 * i}}}}}'
            for i in range(3)
        ),
        ':::MLLOG {"time_ms": 40000, "key": "run_stop", "value": null, "metadata": {"status": "aborted"}}',
    ]
    (run,) = read_runs("\n".join(lines) + "\n", "x")
    assert run.status == "ok" and run.span_kind == "block" and len(run.measured) == 2
    assert run.throughput == pytest.approx(4 * 100 / 8.0)  # 4 epochs of 100 samples in 2 x 4 s
    assert run.time_to_train_s == 39.0 and run.converged is False and run.run_stop_status == "aborted"


@needs_mlperf
def test_a_cut_or_broken_log_is_a_failed_run_with_a_reason_never_a_crash():
    text = NVIDIA_LOG.read_text()
    (cut,) = read_runs(text[: len(text) // 2], "x")
    assert cut.status == "failed" and cut.reason == "truncated: the log ends before run_stop"
    assert cut.time_to_train_s is None and cut.throughput is None
    (fitted,) = parse_log(text[: len(text) // 2], file="x", fit=True)  # a foreign log stopped early: measured
    assert fitted.status == "ok"
    no_start = "\n".join(line for line in text.splitlines() if '"run_start"' not in line)
    (parsed,) = parse_log(no_start, file="x")
    assert parsed.status == "failed" and parsed.reason == "no run_start event" and parsed.throughput is None
    no_samples = "\n".join(line for line in text.splitlines() if '"train_samples"' not in line)
    (parsed,) = parse_log(no_samples, file="x")
    assert parsed.status == "failed" and "train_samples" in (parsed.reason or "")
    no_spans = "\n".join(line for line in text.splitlines() if "_start" not in line or "run_start" in line)
    (run,) = read_runs(no_spans, "x")
    assert run.status == "failed" and run.reason is not None and run.reason.startswith("no usable span")
    assert run.time_to_train_s == pytest.approx(1724.542)  # kept: the run's ends are there
    broken = text.replace('"key": "throughput", "value": ', '"key": "throughput", "value": {', 1)
    (run,) = read_runs(broken, "x")
    assert run.status == "ok" and run.malformed_lines == 1
    for end in range(0, len(text), len(text) // 97):  # cut anywhere: a run or a reason, never a parser error
        for parsed in parse_log(text[:end], file="x", format=mllog.NAME):
            assert parsed.status == "ok" or (parsed.reason and not parsed.reason.startswith("parser error"))
