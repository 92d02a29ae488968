"""Tests of the NGC MXNet parser (``ngc_mxnet``, dlperf_core.parsing.mxnet): the real MXNet logs reproduce
their published figures, synthetic logs (``parsing_logs.mx_run``) cover the tricky cases and the failures
(robustness: tests/core/parsing/test_parsing_fuzz.py). The TF2 parser: tests/core/parsing/test_tf2.py.

The real logs live in ``$DLPERF_SHARED/reallogs`` (default: the repository's ``../shared``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from dlperf_core.parsing import WindowResult, detect_format, measure, mxnet, parse_log
from helpers import REPO, SHARED  # SHARED: seeds and reallogs, $DLPERF_SHARED
from parsing_checks import check_all, print_table
from parsing_logs import mx_bench, mx_run

MX_DIR = SHARED / "reallogs" / "ngc_mxnet"
MX = mxnet.NAME

PUBLISHED = {  # reallogs/PROVENANCE.md: benchmark.py's train.total_ips table, rows 1 and 8 GPUs
    "mxnet_gpu1_gpu8_fp32_bs96.txt": (387.1, 2998.1),
    "mxnet_gpu1_gpu8_amp_bs128.txt": (1380.6, 9218.9),
    "mxnet_gpu1_gpu8_amp_bs192.txt": (1447.6, 9765.6),
}
REPORTED_TOLERANCE = 0.001  # reported_throughput vs published: 0.1 %
# Our rule: rank 0's timestamps, iterations 501..1500 (epochs 1 and 2 after the warm-up epoch), samples =
# 1000 x global batch, time = t(iteration 1500) - t(iteration 500). The table is global batch / mean batch
# latency (train.latency_avg) over benchmark.py's timed batches, so it leaves out the time between batches
# (display, epoch switch) that wall time keeps: per file (1 GPU / 8 GPUs)
#   fp32_bs96   385.46 (-0.42 %) / 2995.74 (-0.08 %)
#   amp_bs128  1377.43 (-0.23 %) / 9263.87 (+0.49 %)
#   amp_bs192  1440.97 (-0.46 %) / 9789.49 (+0.24 %)
# The harmonic mean of the Speed lines of the same window is within 0.05 % of ours (-0.44 % .. +0.50 % vs
# the table: under it on 1 GPU, OVER it on two of the 8-GPU runs). Bound: |diff| <= 1 %.
OUR_RULE_BOUND = (-0.01, 0.01)
OURS = {  # our rule, pinned (regression check, 0.01 %)
    "mxnet_gpu1_gpu8_fp32_bs96.txt": (385.460, 2995.740),
    "mxnet_gpu1_gpu8_amp_bs128.txt": (1377.425, 9263.866),
    "mxnet_gpu1_gpu8_amp_bs192.txt": (1440.965, 9789.488),
}

needs_logs = pytest.mark.skipif(not MX_DIR.is_dir(), reason=f"no real logs at {MX_DIR}")


def _real(name: str) -> str:
    return (MX_DIR / name).read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------ real logs
@needs_logs
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_mxnet_real_log_reproduces_published_figures(name: str) -> None:
    text = _real(name)
    assert detect_format(text) == MX
    runs = check_all(text, file=name)
    assert [r.gpus for r in runs] == [1, 8]
    bs = int(name.split("_bs")[1].split(".")[0])
    for run, published, ours in zip(runs, PUBLISHED[name], OURS[name]):
        assert run.format == MX and run.status == "ok" and run.file == name
        assert run.batch_size_per_device == bs
        assert run.reported_throughput == pytest.approx(published, rel=REPORTED_TOLERANCE)
        diff = run.throughput / published - 1  # type: ignore[operator]
        assert OUR_RULE_BOUND[0] <= diff <= OUR_RULE_BOUND[1], (run.gpus, diff)
        assert run.throughput == pytest.approx(ours, rel=1e-4)
        assert run.method == "timestamps" and run.window == (501, 1500) and run.iterations == 1000
        assert [r.iteration for r in run.records] == list(range(20, 1501, 20))
        assert {r.rank for r in run.records} == {0} and [r.epoch for r in run.records][24:26] == [0, 1]


@needs_logs
def test_mxnet_real_log_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the per-file table (run pytest with -s to see it)."""
    rows = []
    for name, published in sorted(PUBLISHED.items()):
        for run, pub in zip(parse_log(_real(name), file=name), published):
            assert run.throughput is not None and run.reported_throughput is not None
            hm = measure(run.records, warmup=500, measured=None, global_batch=None)
            assert isinstance(hm, WindowResult)
            ours, harmonic = run.throughput, hm.throughput
            rows.append(
                f"{name:30s} {run.gpus:4d} {pub:9.1f} {run.reported_throughput:9.2f} {ours:9.2f} "
                f"{100 * (ours / pub - 1):+6.2f}%  {harmonic:9.2f} {100 * (harmonic / pub - 1):+6.2f}%"
            )
    print_table(
        capsys, "file                           gpus published  reported  our rule   diff   harm.mean   diff", rows
    )


@needs_logs
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_mxnet_real_log_timestamps_and_printed_rates_agree(name: str) -> None:
    for run in parse_log(_real(name)):
        by_rates = measure(run.records, warmup=500, measured=None, global_batch=None)
        assert isinstance(by_rates, WindowResult) and by_rates.method == "printed_rates"
        assert by_rates.throughput == pytest.approx(run.throughput, rel=0.001)


@needs_logs
def test_mxnet_real_log_precision_is_not_read() -> None:
    """The "amp" files are pure fp16 (amp=False, dtype='float16'): nothing precision-specific comes out."""
    text = _real("mxnet_gpu1_gpu8_amp_bs128.txt")
    assert "amp=False" in text and "dtype='float16'" in text
    assert set(parse_log(text)[0].to_dict()) == set(parse_log(_real("mxnet_gpu1_gpu8_fp32_bs96.txt"))[0].to_dict())


@needs_logs
def test_mxnet_real_log_window_options() -> None:
    text = _real("mxnet_gpu1_gpu8_fp32_bs96.txt")
    one, eight = check_all(text, warmup=1000, measured=400)
    assert one.window == (1001, 1400) and eight.window == (1001, 1400) and one.iterations == 400
    one, eight = check_all(text, warmup=0)  # the first line (iteration 20) starts the clock
    assert one.window == (21, 1500) and one.status == "ok"
    one, eight = check_all(text, warmup=500, measured=2000)
    assert one.reason == eight.reason == "too few iterations for the window (got 1500, need 2500)"
    assert one.reported_throughput == pytest.approx(387.07)  # the framework's figure is kept
    one, eight = check_all(text, warmup=1500)
    assert one.reason == "too few iterations for the window (got 1500, need 1501)"


@needs_logs
def test_mxnet_real_log_oom_in_second_run_only() -> None:
    text = _real("mxnet_gpu1_gpu8_fp32_bs96.txt")
    cut = text.index("[1,1]<stderr>:2020-12-16 08:09:25,352:INFO: Epoch[0] Batch [0-19]")
    oom = (
        "[1,3]<stderr>:mxnet.base.MXNetError: [08:09:06] src/storage/./pooled_storage_manager.h:157: "
        "cudaMalloc failed: out of memory\n"
    )
    one, eight = check_all(text[:cut] + oom)
    assert one.status == "ok" and one.throughput == pytest.approx(385.46, rel=1e-4)
    assert (eight.status, eight.reason, eight.throughput, eight.gpus) == ("failed", "out of memory", None, 8)


@needs_logs
def test_mxnet_real_log_truncated() -> None:
    text = _real("mxnet_gpu1_gpu8_amp_bs192.txt")
    cut = text.index("[1,0]<stderr>:2020-12-16 08:27:")  # a line boundary in the 8-GPU run's epoch 1
    one, eight = check_all(text[:cut])
    assert one.status == "ok"
    assert eight.status == "failed" and eight.reason == "truncated log: 2 of 3 epochs"
    assert eight.reported_throughput is None  # the table is gone too
    one, eight = check_all(text[: cut + 70])  # inside a line
    assert eight.reason == "truncated log: last line cut"
    cut = text.index("Experiment took")  # the 1-GPU run stops in its last line: its last epoch was full
    (one,) = check_all(text[:cut])
    assert one.reason == "truncated log: last line cut"
    (one,) = check_all(text[: text.rfind("\n", 0, cut) + 1])
    assert one.status == "ok" and one.gpus == 1


@needs_logs
def test_mxnet_real_log_without_final_newline_is_fine() -> None:
    one, eight = check_all(_real("mxnet_gpu1_gpu8_amp_bs128.txt").rstrip("\n"))
    assert one.status == eight.status == "ok" and eight.reported_throughput == pytest.approx(9218.9)


# ------------------------------------------------------------------------------------ synthetic
def test_mxnet_two_runs_display_interval_and_global_iterations() -> None:
    one, eight = check_all(mx_bench(128))
    assert (one.gpus, one.batch_size_per_device, eight.gpus, eight.batch_size_per_device) == (1, 128, 8, 128)
    assert one.throughput == pytest.approx(512.0, rel=1e-9) and eight.throughput == pytest.approx(4096.0, rel=1e-9)
    assert one.method == eight.method == "timestamps"
    assert one.window == eight.window == (501, 1500) and one.iterations == 1000
    assert [r.iteration for r in eight.records] == list(range(20, 1501, 20))  # 25 lines per epoch, 20 apart
    assert (one.reported_throughput, eight.reported_throughput) == (500.5, 4000.25)


def test_mxnet_ranks_keep_the_lowest_one() -> None:
    _, eight = check_all(mx_bench(64, lie=True))  # rank 1 prints three times the speed
    assert {r.rank for r in eight.records} == {0} and len(eight.records) == 75
    assert eight.throughput == pytest.approx(8 * 64 / 0.25, rel=1e-9)
    by_rates = measure(eight.records, warmup=500, measured=None, global_batch=None)
    assert isinstance(by_rates, WindowResult) and by_rates.throughput == pytest.approx(2048.0)


def test_mxnet_epoch_length_without_benchmark_iters() -> None:
    """No benchmark_iters: an epoch is num_examples // batch_size (32000 // 256 = 125 batches)."""
    text = mx_run(2, 128, iters=125, disp=25, bench_arg=False)
    (run,) = check_all(text, warmup=125)
    assert [r.iteration for r in run.records] == list(range(25, 376, 25))
    assert run.window == (126, 375) and run.throughput == pytest.approx(1024.0, rel=1e-9)


def test_mxnet_no_prefix_no_timestamps_no_arguments() -> None:
    """Plain MXNet Speedometer output (``INFO:root:``, no date): printed rates, gpus and batch unknown."""
    text = mx_run(1, 32, prefix=False, stamps=False, args=False, iters=200, epochs=2)
    assert detect_format(text) == MX
    (run,) = check_all(text, warmup=200)
    assert run.gpus is None and run.batch_size_per_device is None and run.reported_throughput is None
    assert run.method == "printed_rates" and run.window == (201, 400)
    assert run.throughput == pytest.approx(128.0)
    assert run.records[0].rank is None and run.records[0].time is None


def test_mxnet_mxnet_style_batch_counter() -> None:
    """MXNet's own Speedometer prints ``Batch [20-40]`` / ``Batch [40]`` (batch index 40 done: iteration 41)."""
    lines = [
        f"INFO:root:Epoch[0] Batch [{b - 20}-{b}]\tSpeed: 100.00 samples/sec\taccuracy=0.1\n"
        for b in range(20, 201, 20)
    ]
    lines += [f"INFO:root:Epoch[0] Batch [{b}]\tSpeed: 300.00 samples/sec\n" for b in range(220, 401, 20)]
    (run,) = check_all("".join(lines), warmup=21)
    assert [r.iteration for r in run.records][:2] == [21, 41] and run.records[-1].iteration == 401
    assert run.window == (22, 401)
    assert run.throughput == pytest.approx(380 / (180 / 100 + 200 / 300))


def test_mxnet_runs_split_without_argument_lines() -> None:
    text = mx_run(1, 32, args=False, epochs=2) + mx_run(1, 32, args=False, epochs=2, per_iter=0.5, t0=600)
    first, second = check_all(text)
    assert first.throughput == pytest.approx(128.0) and second.throughput == pytest.approx(64.0)
    assert first.gpus == second.gpus == 1 and first.batch_size_per_device is None


def test_mxnet_ranks_printing_in_any_order_and_first_args_from_another_rank() -> None:
    text = mx_run(4, 32, iters=100, epochs=2)
    assert text.startswith("[1,3]<stderr>:")
    (run,) = check_all(text, warmup=100)
    assert run.gpus == 4 and run.batch_size_per_device == 32 and run.throughput == pytest.approx(512.0)


def test_mxnet_table_with_several_batch_columns() -> None:
    table = (
        "train.total_ips\n           |     96    |    192    |\n------------------------------------\n"
        "     1     |   387.07  |   401.5   |\n     8     |   2998.1  |   3111.0  |\n\n"
    )
    runs = check_all(mx_run(1, 96) + mx_run(8, 192, t0=1000.0) + table)
    assert [r.reported_throughput for r in runs] == [387.07, 3111.0]


def test_mxnet_failures() -> None:
    # NaN loss in a metric field
    (run,) = check_all(mx_run(1, 32, loss="nan"))
    assert run.status == "failed" and run.reason == "loss is NaN/inf at iteration 560"  # epoch 1, Batch [40-59]
    # no training lines: the arguments, then a crash
    text = mx_run(8, 32, epochs=0, finished=False) + "[1,0]<stderr>:Traceback (most recent call last):\n"
    assert detect_format(text) == MX
    (run,) = check_all(text)
    assert run.status == "failed" and run.reason == "no training lines" and run.gpus == 8
    (run,) = check_all("nothing here\n", format=MX)
    assert run.reason == "no training lines"
    # too few iterations for the default window: 2 epochs of 200
    (run,) = check_all(mx_run(1, 32, iters=200, epochs=2))
    assert run.reason == "too few iterations for the window (got 400, need 501)"
    # unfinished run that stopped inside its last epoch
    text = mx_run(1, 32, epochs=3, finished=False)
    (run,) = check_all(text[: text.index("Epoch[2] Batch [300-319]")].rsplit("\n", 1)[0] + "\n")
    assert run.reason == "truncated log: 300 of 500 iterations of the last epoch"
    (run,) = check_all(text)  # all epochs and all batches there: not truncated even without its end line
    assert run.status == "ok"
    text = mx_run(1, 32) + "[1,0]<stderr>:terminate called after throwing an instance of 'std::bad_alloc'\n"
    assert check_all(text)[0].reason == "out of memory"


# Robustness (any text, truncated and shuffled logs, huge lines): tests/core/parsing/test_parsing_fuzz.py.


# ---- ngc_mxnet CPU: real logs of dlperf/ngc-mxnet:cpu (MXNet 1.9.1 Module.fit + stock Speedometer, dist_sync
# workers under mpirun, a Speed line every batch: "Batch [k-1-k]" = iteration k+1, the job's samples/sec).
CPU_LOGS = REPO / "tests" / "data" / "cpu_logs"


def _cpu_stamp(path: Path, rank: int, batch: int) -> float:
    """Seconds of rank ``rank``'s Speed line ending at batch index ``batch`` (read independently of the parser)."""
    for line in path.read_text().splitlines():
        if line.startswith(f"[1,{rank}]<stderr>:") and f"Batch [{batch - 1}-{batch}]\t" in line:
            stamp = line.split("<stderr>:", 1)[1][:23]
            return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()
    raise AssertionError(f"no Batch [{batch - 1}-{batch}] line of rank {rank} in {path.name}")


@pytest.mark.parametrize("name", ["ngc_mxnet_1n2g.log", "ngc_mxnet_2n1g.log"])
def test_mxnet_cpu_real_log_two_workers(name: str) -> None:
    """25 iterations (5 warm-up + 20 measured) of 2 workers x 8: the total batch 16 comes from the arguments,
    the GPU count from the two ranks; the window is exactly iterations 6..25 of rank 0's lines."""
    path = CPU_LOGS / name
    (run,) = check_all(path.read_text(), warmup=5, measured=20)
    assert run.format == MX and run.status == "ok" and run.gpus == 2 and run.batch_size_per_device == 8
    assert run.window == (6, 25) and run.iterations == 20 and run.method == "timestamps"
    assert run.reported_throughput is None and {r.rank for r in run.records} == {0}
    assert [r.iteration for r in run.records] == list(range(2, 26))  # Batch [0-1] .. [23-24]
    seconds = _cpu_stamp(path, 0, 24) - _cpu_stamp(path, 0, 4)  # iteration 25 - iteration 5
    assert run.throughput == pytest.approx(20 * 16 / seconds)
    assert all(r.loss is not None and 0 < r.loss < 100 for r in run.records)  # cross-entropy=...


def test_mxnet_cpu_real_log_nan_loss() -> None:
    """--lr 1e30: MXNet's CrossEntropy metric prints cross-entropy=nan from the first Speed line on."""
    (run,) = check_all((CPU_LOGS / "ngc_mxnet_nan.log").read_text(), warmup=2, measured=3)
    assert run.status == "failed" and run.reason == "loss is NaN/inf at iteration 2" and run.throughput is None
    assert run.gpus == 1 and run.batch_size_per_device == 8
