"""Tests of the TF2 official ResNet parser (``tf2_official_resnet``, dlperf_core.parsing.tf2). No real TF2 log
exists in ``$DLPERF_SHARED/reallogs``: the fixtures (``parsing_logs.tf_log``) are synthetic, written the way
tensorflow/models prints them (robustness: tests/core/parsing/test_parsing_fuzz.py).
"""

from __future__ import annotations

import pytest

from dlperf_core.parsing import detect_format, get_format, tf2
from parsing_checks import check_all
from parsing_logs import absl, tf_log, tf_startup

TF = tf2.NAME


@pytest.mark.parametrize("legacy", [False, True])
def test_tf2_realistic_log(legacy: bool) -> None:
    text = tf_log(legacy=legacy)
    assert detect_format(text) == TF
    (run,) = check_all(text, file="rn50_b128_fp32_1.log")
    assert run.status == "ok" and run.format == TF and run.gpus == 2 and run.batch_size_per_device == 128
    assert run.method == "printed_rates" and run.window == (101, 600) and run.iterations == 500
    assert run.throughput == pytest.approx(1024.0, rel=1e-5)  # 256 samples / 0.25 s
    assert run.reported_throughput == pytest.approx(1024.0, rel=1e-5)  # mean of the lines after the first
    assert [r.iteration for r in run.records] == list(range(100, 601, 100))
    assert all(r.time is None for r in run.records)
    assert run.records[0].samples_per_sec == pytest.approx(25600 / 55.0, rel=1e-5)  # first window: start-up
    assert get_format(TF).default_warmup == 100 and get_format(TF).default_measured is None


def test_tf2_print_frequency_and_epochs() -> None:
    text = tf_log(steps=300, epochs=2, log_steps=50, gpus=1, bs=64, step_time=0.2)
    (run,) = check_all(text)
    assert [r.iteration for r in run.records] == list(range(50, 601, 50))  # global steps across epochs
    assert run.window == (101, 600) and run.iterations == 500  # the first 100 steps (two lines) skipped
    assert run.throughput == pytest.approx(320.0, rel=1e-5)
    assert run.gpus == 1 and run.batch_size_per_device == 64  # one "Created TensorFlow device" GPU
    (run,) = check_all(text, warmup=200, measured=300)
    assert run.window == (201, 500) and run.iterations == 300


def test_tf2_rates_are_weighted_by_iterations() -> None:
    msg = "TimeHistory: {:.2f} seconds, {:.2f} examples/second between steps {} and {}"
    lines = [
        absl(10, "keras_utils.py:145", msg.format(s, r, a, b))
        for s, r, a, b in (
            (60.0, 200.0, 0, 100),
            (10.0, 1000.0, 100, 200),
            (40.0, 500.0, 200, 300),
            (20.0, 500.0, 300, 350),
        )
    ]
    (run,) = check_all("".join(lines))
    assert run.throughput == pytest.approx(250 / (100 / 1000 + 100 / 500 + 50 / 500))
    assert run.reported_throughput == pytest.approx((1000 + 500 + 500) / 3)
    assert run.gpus is None and run.batch_size_per_device is None  # batch 120, but the GPU count is unknown


def test_tf2_multi_worker_gpus() -> None:
    (run,) = check_all(tf_log(workers=2, gpus=8, bs=64, step_time=0.3))
    assert run.gpus == 16 and run.batch_size_per_device == 64
    assert run.throughput == pytest.approx(16 * 64 / 0.3, rel=1e-5)


def test_tf2_mpirun_prefixes_keep_the_lowest_rank() -> None:
    a = tf_log(prefix="[1,0]<stderr>:")
    b = tf_log(prefix="[1,1]<stderr>:", step_time=0.1)  # rank 1 reports other rates
    text = "".join(x + y for x, y in zip(a.splitlines(keepends=True), b.splitlines(keepends=True)))
    (run,) = check_all(text)
    assert {r.rank for r in run.records} == {0} and len(run.records) == 6
    assert run.throughput == pytest.approx(1024.0, rel=1e-5)


def test_tf2_keras_progress_bar_with_carriage_returns() -> None:
    text = tf_log()
    bar = "".join(f"\r {i:4d}/600 [===>....] - ETA: 2:30 - loss: 7.1234 - accuracy: 0.0010" for i in range(1, 99, 7))
    text = text.replace("I0115 10:13:05", bar + "I0115 10:13:05", 1)
    (run,) = check_all(text)
    assert run.status == "ok" and len(run.records) == 6


def test_tf2_failures() -> None:
    # out of memory
    text = (
        tf_startup(2)
        + "Epoch 1/1\n"
        + (
            "2021-01-15 10:13:00.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:439] Allocator (GPU_0_bfc) ran "
            "out of memory trying to allocate 392.00MiB (rounded to 411041792).\n"
            "tensorflow.python.framework.errors_impl.ResourceExhaustedError:  OOM when allocating tensor with "
            "shape[256,64,112,112] and type half on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
        )
    )
    (run,) = check_all(text, format=TF)
    assert run.status == "failed" and run.reason == "out of memory" and run.gpus == 2
    # NaN loss printed before a TimeHistory line, and a NaN after the last one
    (run,) = check_all(tf_log(loss_at={150: "7.01", 250: "nan"}))
    assert run.reason == "loss is NaN/inf at iteration 300"
    assert run.records[1].loss == pytest.approx(7.01)
    text = tf_log().replace("600/600 - 150s - loss: 6.9512", "600/600 - 150s - loss: nan")
    (run,) = check_all(text)
    assert run.reason == "loss is NaN/inf at iteration 600"
    # truncated: stopped in epoch 2 of 3, or inside a line
    text = tf_log(steps=300, epochs=3, finished=False)
    cut = text.index("Epoch 3/3")
    (run,) = check_all(text[:cut])
    assert run.reason == "truncated log: 2 of 3 epochs"
    (run,) = check_all(text[: cut - 30])
    assert run.reason == "truncated log: last line cut"
    (run,) = check_all(text)  # every epoch there, no "Run stats": not truncated
    assert run.status == "ok"
    # too few iterations; a single TimeHistory line
    (run,) = check_all(tf_log(), measured=1000)
    assert run.reason == "too few iterations for the window (got 600, need 1100)"
    (run,) = check_all(tf_log(steps=199))
    assert run.reason == "too few iterations for the window (got 100, need 101)" and run.reported_throughput is None
    # no training lines
    text = tf_startup(1) + "Traceback (most recent call last):\nValueError: boom\n"
    assert detect_format(text) is None
    (run,) = check_all(text, format=TF)
    assert run.reason == "no training lines" and run.gpus == 1
