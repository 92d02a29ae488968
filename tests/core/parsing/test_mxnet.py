"""Tests of the NGC MXNet (``ngc_mxnet``) and TF2 official ResNet (``tf2_official_resnet``) parsers: the real
MXNet logs reproduce their published figures, synthetic logs cover the tricky cases and the
failures (robustness: tests/test_parsing_fuzz.py).

The real logs live in ``$DLPERF_SHARED/reallogs`` (default: the repository's ``../shared``). No real TF2 log
exists there: the TF2 fixtures are synthetic, written the way tensorflow/models prints them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dlperf_core.parsing import (
    WindowResult,
    detect_format,
    get_format,
    measure,
    mxnet,
    parse_log,
    tf2,
)
from helpers import SHARED  # noqa: E402  (seeds and reallogs, $DLPERF_SHARED)
from parsing_checks import check_all, print_table

MX_DIR = SHARED / "reallogs" / "ngc_mxnet"
MX, TF = mxnet.NAME, tf2.NAME

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


# ------------------------------------------------------------------------------------ synthetic MXNet logs
T0 = datetime(2020, 12, 16, 8, 2, 0, tzinfo=UTC)


def mx_stamp(seconds: float) -> str:
    t = T0 + timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


def mx_args(gpus: int, bs: int, iters: int | None, epochs: int, disp: int, **more: object) -> str:
    listed = ", ".join(str(g) for g in range(gpus))
    bench = f"benchmark_iters={iters}, " if iters is not None else "benchmark_iters=None, "
    extra = "".join(f"{k}={v}, " for k, v in more.items())
    return (
        f"Namespace(amp=False, arch='resnetv15', batch_size={gpus * bs}, begin_epoch=0, {bench}"
        f"disp_batches={disp}, dtype='float16', gpus=[{listed}], kv_store='horovod', {extra}"
        f"mode='train', num_epochs={epochs}, num_examples=32000, report='benchmark_report_fp16.json-{gpus},{bs}', "
        f"wd=3.0517578125e-05)"
    )


def mx_run(
    gpus: int,
    bs: int,
    *,
    t0: float = 0.0,
    epochs: int = 3,
    iters: int = 500,
    disp: int = 20,
    per_iter: float = 0.25,
    prefix: bool = True,
    stamps: bool = True,
    args: bool = True,
    bench_arg: bool = True,
    lie: bool = False,
    loss: str | None = None,
    finished: bool = True,
) -> str:
    """One DeepLearningExamples MXNet run whose every iteration takes ``per_iter`` s on every rank (rank r
    prints r ms later; rank order rotates): the global rate is gpus*bs/per_iter."""
    rate = gpus * bs / per_iter
    ranks = list(range(gpus)) if prefix else [None]

    def line(rank: int | None, seconds: float, body: str) -> str:
        pre = f"[1,{rank}]<stderr>:" if rank is not None else ""
        head = f"{mx_stamp(seconds)}:INFO: " if stamps else "INFO:root:"
        return f"{pre}{head}{body}\n"

    out: list[str] = []
    if args:
        for r in reversed(ranks):
            arguments = mx_args(gpus, bs, iters if bench_arg else None, epochs, disp)
            out.append(line(r, t0, "Start with arguments " + arguments))
    out.append("[1,0]<stdout>:NCCL version 2.4.7+cuda10.1\n")
    for e in range(epochs):
        for r in ranks:
            out.append(line(r, t0 + 1 + e * iters * per_iter, f"Starting epoch {e}"))
        for k, end in enumerate(range(disp - 1, iters, disp)):
            order = ranks[k % len(ranks) :] + ranks[: k % len(ranks)]
            for r in order:
                seconds = t0 + 1 + (e * iters + end + 1) * per_iter + 0.001 * (r or 0)
                speed = rate * (3 if lie and r == 1 else 1)
                extra = f"\tcross-entropy={loss}" if loss is not None and e == 1 and end == disp * 3 - 1 else ""
                out.append(
                    line(
                        r,
                        seconds,
                        f"Epoch[{e}] Batch [{end - disp + 1}-{end}]\tSpeed: {speed!r} samples/sec"
                        f"{extra}\tLR: 0.0033916\t",
                    )
                )
    if finished:
        for r in ranks:
            took = epochs * iters * per_iter
            out.append(line(r, t0 + 2 + took, f"Experiment took: {took + 1} sec"))
    return "".join(out)


def mx_table(rows: dict[int, float], bs: int) -> str:
    body = "".join(f"     {g}     |  {v:^8} |\n" for g, v in rows.items())
    return f"train.total_ips\n           |{bs:^11d}|\n------------------------\n{body}\n"


def mx_bench(bs: int = 128, table: bool = True, **kw: object) -> str:
    """benchmark.py -n 1,8: a 1-GPU run, an 8-GPU run, then the total_ips table."""
    text = mx_run(1, bs, **kw) + mx_run(8, bs, t0=1000.0, **kw)  # type: ignore[arg-type]
    return text + (mx_table({1: 500.5, 8: 4000.25}, bs) if table else "")


# ------------------------------------------------------------------------------------ MXNet: real logs
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


# ------------------------------------------------------------------------------------ MXNet: synthetic
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


# ------------------------------------------------------------------------------------ synthetic TF2 logs
TF_T0 = datetime(2021, 1, 15, 10, 12, 0)
TID = 140234567890112


def tf_full(seconds: float) -> str:
    return (TF_T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S.%f")


def absl(seconds: float, where: str, msg: str, level: str = "I") -> str:
    return f"{level}{(TF_T0 + timedelta(seconds=seconds)).strftime('%m%d %H:%M:%S.%f')} {TID} {where}] {msg}\n"


def tf_startup(gpus: int, workers: int = 1) -> str:
    lib = "I tensorflow/stream_executor/platform/default/dso_loader.cc:48] Successfully opened dynamic library"
    out = [f"{tf_full(0.5)}: {lib} libcudart.so.10.1\n", f"{tf_full(2.1)}: {lib} libcuda.so.1\n"]
    for g in range(gpus):
        out.append(
            f"{tf_full(2.4)}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1716] Found device {g} with properties: \n"
            f"pciBusID: 0000:{0x1A + g:02x}:00.0 name: Tesla V100-SXM2-16GB computeCapability: 7.0\n"
            "coreClock: 1.53GHz coreCount: 80 deviceMemorySize: 15.78GiB deviceMemoryBandwidth: 836.37GiB/s\n"
        )
    out.append(
        f"{tf_full(3.0)}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1858] Adding visible gpu devices: "
        + ", ".join(map(str, range(gpus)))
        + "\n"
    )
    out.append(
        f"{tf_full(3.1)}: W tensorflow/core/platform/profile_utils/cpu_utils.cc:104] CPU Frequency: 2499995000 Hz\n"
    )
    for g in range(gpus):
        out.append(
            f"{tf_full(4.0)}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1402] Created TensorFlow device "
            f"(/job:localhost/replica:0/task:0/device:GPU:{g} with 14951 MB memory) -> physical GPU (device: {g}, "
            f"name: Tesla V100-SXM2-16GB, pci bus id: 0000:{0x1A + g:02x}:00.0, compute capability: 7.0)\n"
        )
    if workers > 1:
        local = ", ".join(f"'/job:worker/task:0/device:GPU:{g}'" for g in range(gpus))
        spec = "{'worker': [" + ", ".join(f"'10.0.0.{w + 1}:12345'" for w in range(workers)) + "]}"
        msg = (
            f"MultiWorkerMirroredStrategy with cluster_spec = {spec}, task_type = 'worker', task_id = 0, "
            f"num_workers = {workers}, local_devices = ({local}), communication = CollectiveCommunication.NCCL"
        )
        out.append(f"INFO:tensorflow:{msg}\n" + absl(4.2, "collective_all_reduce_strategy.py:315", msg))
    elif gpus > 1:
        devs = ", ".join(f"'/job:localhost/replica:0/task:0/device:GPU:{g}'" for g in range(gpus))
        msg = f"Using MirroredStrategy with devices ({devs})"
        out.append(f"INFO:tensorflow:{msg}\n" + absl(4.2, "mirrored_strategy.py:341", msg))
    out.append(absl(4.3, "dataset_factory.py:176", "Using augmentation: autoaugment=None"))
    out.append(
        "W0115 10:12:05.000000 140234567890112 optimizer_factory.py:123] "
        "Warning: lr_schedule (piecewise_constant_with_warmup) is deprecated.\n"
    )
    return "".join(out)


def tf_log(
    *,
    steps: int = 600,
    epochs: int = 1,
    log_steps: int = 100,
    gpus: int = 2,
    bs: int = 128,
    step_time: float = 0.25,
    startup: float = 30.0,
    legacy: bool = False,
    finished: bool = True,
    workers: int = 1,
    prefix: str = "",
    loss_at: dict[int, str] | None = None,
) -> str:
    """A classifier_trainer.py log: ``epochs`` x ``steps`` steps at ``step_time`` s each (the first window
    also ``startup`` s more), a TimeHistory line (``legacy``: TF 2.1's BenchmarkMetric) every ``log_steps``."""
    total = workers * gpus * bs
    out = [tf_startup(gpus, workers)]
    t, last = 10.0, 0
    for e in range(epochs):
        out.append(f"Epoch {e + 1}/{epochs}\n")
        if e == 0:
            out.append(
                f"{tf_full(12)}: I tensorflow/stream_executor/platform/default/dso_loader.cc:48] "
                "Successfully opened dynamic library libcublas.so.10\n"
            )
        for step in range(e * steps + 1, (e + 1) * steps + 1):
            if step - last >= log_steps:
                secs = (step - last) * step_time + (startup if last == 0 else 0.0)
                t += secs
                rate = (step - last) * total / secs
                for lk, lv in (loss_at or {}).items():
                    if last < lk <= step:
                        out.append(
                            f"{prefix}I0115 10:30:00.000000 {TID} controller.py:479] train | step: {lk:6d} | "
                            f"steps/sec: 4.0 | output: {{'train_accuracy': 0.001, 'train_loss': {lv}}}\n"
                        )
                if legacy:
                    msg = (
                        f"BenchmarkMetric: {{'global step':{step}, 'time_taken': {secs:f},"
                        f"'examples_per_second': {rate:f}}}"
                    )
                else:
                    msg = f"TimeHistory: {secs:.2f} seconds, {rate:.2f} examples/second between steps {last} and {step}"
                out.append(prefix + absl(t, "keras_utils.py:145", msg))
                last = step
        out.append(
            f"{steps}/{steps} - {steps * step_time:.0f}s - loss: 6.9512 - accuracy: 0.0012 - top_5_accuracy: 0.0061\n"
        )
        if legacy:
            out.append(
                absl(t, "keras_utils.py:152", f"BenchmarkMetric: {{'epoch':{e}, 'time_taken': {steps * step_time:f}}}")
            )
    if finished:
        out.append(absl(t + 1, "classifier_trainer.py:455", "Run stats:"))
        out.append(
            "{'loss': 6.9512, 'training_accuracy_top_1': 0.0012, 'step_timestamp_log': ['BatchTimestamp<...>'], "
            "'train_finish_time': 1610705600.1}\n"
        )
    return "".join(out)


# ------------------------------------------------------------------------------------ TF2
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


# ------------------------------------------------------------------------------------ detection
@needs_logs
def test_detection_is_specific() -> None:
    dll = (
        "DLL 2020-12-16 11:34:01.884827 - Epoch: 0 Iteration: 1  train.loss : 6.98774  train.total_ips : 34.97 img/s\n"
    )
    assert not mxnet.detect(dll) and not tf2.detect(dll)
    assert not tf2.detect(_real("mxnet_gpu1_gpu8_fp32_bs96.txt"))
    assert not mxnet.detect(tf_log()) and not mxnet.detect(tf_log(legacy=True))
    assert detect_format(tf_log()) == TF and detect_format(mx_bench()) == MX
    ngc = SHARED / "reallogs" / "ngc_pytorch"
    for path in sorted(ngc.glob("*.txt")) if ngc.is_dir() else []:
        text = path.read_text(encoding="utf-8")
        assert not mxnet.detect(text) and not tf2.detect(text), path.name


# Robustness (any text, truncated and shuffled logs, huge lines): tests/test_parsing_fuzz.py.


# ---- ngc_mxnet CPU: real logs of dlperf/ngc-mxnet:cpu (MXNet 1.9.1 Module.fit + stock Speedometer, dist_sync
# workers under mpirun, a Speed line every batch: "Batch [k-1-k]" = iteration k+1, the job's samples/sec).
CPU_LOGS = Path(__file__).resolve().parent / "data" / "cpu_logs"


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
