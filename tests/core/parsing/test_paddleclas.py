"""Tests of the PaddlePaddle log parsers: ``paddleclas`` (PaddleClas ResNet50, PaddleCV) and
``paddle_plsc_arcface`` (PLSC arcface_paddle, PLSC entry.py).

Real logs live in ``$DLPERF_SHARED/reallogs`` (default: the repository's ``../shared``); see PROVENANCE.md.
Registry behaviour is tested through formats.FORMATS, where both formats are registered.
"""

from __future__ import annotations

import os
import statistics
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from dlperf_core.parsing import formats, paddleclas, plsc
from dlperf_core.parsing.api import parse_log
from dlperf_core.parsing.records import ParsedRun, ParseOptions
from dlperf_core.parsing.window import WindowResult, measure
from parsing_checks import parse_with, print_table

SHARED = Path(os.environ.get("DLPERF_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
RESNET = SHARED / "reallogs" / "paddle_resnet50"
ARCFACE = SHARED / "reallogs" / "paddle_plsc_arcface"
OTHERS = [SHARED / "reallogs" / "ngc_pytorch", SHARED / "reallogs" / "ngc_mxnet"]
CLAS, PLSC = paddleclas.NAME, plsc.NAME

needs_resnet = pytest.mark.skipif(not RESNET.is_dir(), reason=f"no real logs at {RESNET}")
needs_arcface = pytest.mark.skipif(not ARCFACE.is_dir(), reason=f"no real logs at {ARCFACE}")

# reallogs/PROVENANCE.md: mean ips of the train-step lines after the first 10 (100 for 32 GPUs) x GPUs
PUBLISHED = {
    "paddle_gpu1_fp32_bs96.txt": 383.0,
    "paddle_gpu1_amp_bs128.txt": 1335.1,
    "paddle_gpu1_amp_bs208.txt": 1400.1,
    "paddle_gpu8_fp32_bs96.txt": 2753.3,
    "paddle_gpu8_amp_bs128.txt": 8322.9,
    "paddle_gpu8_amp_bs208.txt": 9099.5,
    "paddle_gpu32_fp32_bs96.txt": 10715.3,
    "paddle_gpu32_amp_bs128.txt": 29524.6,
    "paddle_gpu32_amp_bs208.txt": 31036.8,
}
REPORTED_TOLERANCE = 0.001  # reported_throughput (the report's own method) vs published: 0.1 %
# Our rule, default window (DLPerf: iterations 21..120), timed from the running averages; vs published:
#   gpu1 fp32 +1.56 %, gpu1 amp128 +0.12 %, gpu1 amp208 +0.63 %, gpu8 fp32 +0.02 %, gpu8 amp128 +0.47 %,
#   gpu8 amp208 +0.36 %, gpu32 fp32 -0.47 %, gpu32 amp128 -1.37 %, gpu32 amp208 -0.37 %.
# The published figure averages RUNNING averages over the whole epoch (steps 10/100 to the end), ours is
# the true rate of 100 early iterations; both are sound, they measure different windows. Bound: +-2 %.
OUR_RULE_BOUND = 0.02
# Our rule over the published window (warm-up 10, to the end): within 0.25 % on 1 and 8 GPUs; on 32 GPUs
# +0.21 .. +1.34 %, because the published mean of running averages drags the slow start-up steps along.
SAME_WINDOW_BOUND = {1: 0.0025, 8: 0.0025, 32: 0.015}


def _resnet(name: str) -> str:
    return (RESNET / name).read_text(encoding="utf-8")


def _arcface_logs() -> list[Path]:
    return sorted(ARCFACE.glob("*/*/training.log")) if ARCFACE.is_dir() else []


def clas(text: str, warmup: int | None = None, measured: int | None = None, file: str = "<text>") -> list[ParsedRun]:
    return parse_with(paddleclas.FORMAT, text, warmup, measured, file)


def arc(text: str, warmup: int | None = None, measured: int | None = None) -> list[ParsedRun]:
    return parse_with(plsc.FORMAT, text, warmup, measured)


# ==================================================================================== synthetic logs
T0 = datetime(2020, 12, 16, 18, 0, 0)
BANNER = (
    "===========================================================\n"
    "==        PaddleClas is powered by PaddlePaddle !        ==\n"
    "===========================================================\n"
)


def clas_log(
    times: list[float],
    *,
    batch: int = 128,
    gpus: int = 1,
    print_interval: int = 1,
    epochs: int = 1,
    end: bool = True,
    gpu_lines: str | None = None,
    config: bool = True,
    loss: str = "7.0000",
    prefix: str = "",
    start: float = 0.0,
) -> str:
    """A PaddleClas static log whose step k of every epoch takes ``times[k]`` seconds, printed as the real
    program does: running average of the step times since the epoch start, reset at step 5."""
    clock = start
    out: list[str] = []

    def stamp() -> str:
        return (T0 + timedelta(seconds=int(clock))).strftime("%Y-%m-%d %H:%M:%S")

    if gpu_lines is None:
        gpu_lines = "" if gpus == 1 else f"worker_key:_worker, size: {{'_worker': {gpus}}}\n"
    if config:
        out.append(f"{prefix}{stamp()} INFO: \n" + "".join(f"{prefix}{x}\n" for x in BANNER.splitlines()))
        for key, value in (
            ("TRAIN", ""),
            ("    batch_size", batch * gpus),
            ("    num_workers", 4),
            ("VALID", ""),
            ("    batch_size", 64),
            ("epochs", epochs),
            ("is_distributed", gpus > 1),
            ("print_interval", print_interval),
            ("total_images", len(times) * batch * gpus),
        ):
            out.append(f"{prefix}{stamp()} INFO: {key} : {value}\n")
    out.append(gpu_lines)
    for e in range(epochs):
        total, count = 0.0, 0
        for k, dt in enumerate(times):
            clock += dt
            if k == 5:
                total, count = 0.0, 0
            total, count = total + dt, count + 1
            avg = total / count
            if k % print_interval == 0:
                out.append(
                    f"{prefix}{stamp()} INFO: epoch:{e:<3d} train step:{k:<4d} loss: {loss} top1: 0.0000 "
                    f"top5: 0.0000 lr: 0.100000 elapse: {avg:.3f}s ips: {batch / avg:.5f} images/sec.\n"
                )
        if end:
            out.append(
                f"{prefix}{stamp()} INFO: END epoch:{e:<3d} train loss:  6.9 top1: 0.0 top5: 0.0  "
                f"elapse_sum: {total:.3f}s ips: {batch / (total / count):.5f} images/sec.\n"
            )
    return "".join(out)


def steady(n: int = 200, dt: float = 0.1, slow: dict[int, float] | None = None) -> list[float]:
    """Step times: a slow start (steps 0-4), ``dt`` afterwards, ``slow`` overrides."""
    times = [1.0, 0.5, 0.3, 0.2, 0.15] + [dt] * (n - 5)
    for k, v in (slow or {}).items():
        times[k] = v
    return times


def exact(times: list[float], first: int, last: int, samples_per_iter: int) -> float:
    """samples / seconds of iterations first..last (single epoch)."""
    return (last - first + 1) * samples_per_iter / sum(times[first : last + 1])


# ==================================================================================== PaddleClas: real logs
@needs_resnet
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_real_resnet_log_reproduces_published_figure(name: str) -> None:
    text = _resnet(name)
    assert paddleclas.detect(text) and not plsc.detect(text)
    (run,) = clas(text, file="renamed.log")  # the GPU count comes from the log, not from the file name
    published = PUBLISHED[name]
    gpus = int(name.split("_gpu")[1].split("_")[0])
    batch = int(name.split("_bs")[1].split(".")[0])
    assert run.status == "ok" and run.gpus == gpus and run.batch_size_per_device == batch
    assert run.reported_throughput == pytest.approx(published, rel=REPORTED_TOLERANCE)
    assert run.method == "printed_rates" and run.window == (21, 120) and run.iterations == 100
    diff = run.throughput / published - 1  # type: ignore[operator]
    assert abs(diff) <= OUR_RULE_BOUND, f"{name}: {diff:+.2%}"
    # the published window timed by our rule
    (same,) = clas(text, warmup=10, measured=None)
    assert abs(same.throughput / published - 1) <= SAME_WINDOW_BOUND[gpus]  # type: ignore[operator]
    # records: one per train-step line, 1 s timestamps kept, global rates recovered from the running averages
    assert run.records[0].iteration == 0 and all(r.epoch == 0 for r in run.records)
    assert all(r.time is not None for r in run.records)
    assert len(run.records) == len(text.split("train step:")) - 1


@needs_resnet
def test_real_resnet_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Per-file table (pytest -s): published, reported (report's method), our rule (default window and the
    published window) and the 1 s timestamps over the published window for comparison."""
    rows = []
    for name, published in sorted(PUBLISHED.items()):
        (run,) = clas(_resnet(name))
        (same,) = clas(_resnet(name), warmup=10, measured=None)
        global_batch = run.gpus * run.batch_size_per_device  # type: ignore[operator]
        stamps = measure(run.records, warmup=10, measured=None, global_batch=global_batch)
        assert isinstance(stamps, WindowResult) and stamps.method == "timestamps"
        assert run.throughput and run.reported_throughput and same.throughput
        rows.append(
            f"{name:28s} {published:9.1f} {run.reported_throughput:9.1f} {run.throughput:9.1f} "
            f"{100 * (run.throughput / published - 1):+6.2f}% {same.throughput:9.1f} "
            f"{100 * (same.throughput / published - 1):+6.2f}% {stamps.throughput:9.1f}"
        )
    print_table(
        capsys, "file                         published  reported  our-rule   diff   pub-window  diff   1s-stamps", rows
    )


@needs_resnet
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_real_resnet_running_averages_agree_with_timestamps(name: str) -> None:
    """Over the whole run, the 1 s timestamps (resolution error <= 2 s / span) and the running averages agree
    to within 1 %: the timestamps run slightly slower, since batch_time leaves the logging time out."""
    (run,) = clas(_resnet(name), warmup=10, measured=None)
    global_batch = run.gpus * run.batch_size_per_device  # type: ignore[operator]
    stamps = measure(run.records, warmup=10, measured=None, global_batch=global_batch)
    assert isinstance(stamps, WindowResult) and stamps.seconds
    ratio = stamps.throughput / run.throughput  # type: ignore[operator]
    slack = 2.0 / stamps.seconds
    assert 0.99 - slack <= ratio <= 1.0 + slack, f"{ratio:.4f}"


@needs_resnet
def test_real_resnet_gpu_count_from_each_kind_of_evidence() -> None:
    text = _resnet("paddle_gpu8_amp_bs128.txt")
    # the launcher's env table alone (no Gloo size line)
    (run,) = clas(text.replace("size: {'_worker': 8}", "size: ?"))
    assert run.gpus == 8
    # neither: the global TRAIN batch_size 1024 over ips x elapse (128)
    bare = text.replace("size: {'_worker': 8}", "size: ?").replace("PADDLE_TRAINERS_NUM", "PADDLE_X")
    (run,) = clas(bare)
    assert run.gpus == 8 and run.batch_size_per_device == 128
    # 32 GPUs on 4 nodes: Gloo's size says 32 while the launcher lists 8 local GPUs
    (run,) = clas(_resnet("paddle_gpu32_amp_bs208.txt"), file="1n8g/paddle_gpu8.log")
    assert run.gpus == 32 and run.batch_size_per_device == 208
    (run,) = clas(_resnet("paddle_gpu1_fp32_bs96.txt"), file="4n8g/x_gpu32.log")  # is_distributed : False
    assert run.gpus == 1


@needs_resnet
def test_real_resnet_32_gpu_logs_without_end_line_are_complete() -> None:
    for name in ("paddle_gpu32_fp32_bs96.txt", "paddle_gpu32_amp_bs128.txt", "paddle_gpu32_amp_bs208.txt"):
        text = _resnet(name)
        assert "END epoch" not in text
        (run,) = clas(text)
        assert run.status == "ok"


# ==================================================================================== PaddleClas: the rule
def test_interval_rates_are_recovered_exactly_from_running_averages() -> None:
    times = steady(200, 0.1, slow={30: 0.4, 31: 0.25, 150: 1.0})
    (run,) = clas(clas_log(times, batch=128, gpus=4))
    assert run.gpus == 4 and run.batch_size_per_device == 128 and run.method == "printed_rates"
    assert run.window == (21, 120) and run.iterations == 100
    assert run.throughput == pytest.approx(exact(times, 21, 120, 512), rel=1e-5)
    by_step = {r.iteration: r.samples_per_sec for r in run.records}
    for k in (5, 6, 30, 31, 150, 199):  # every record: the global rate of its own step
        assert by_step[k] == pytest.approx(512 / times[k], rel=1e-3), k
    assert by_step[0] == pytest.approx(512 / times[0], rel=1e-3)
    assert by_step[3] == pytest.approx(512 / times[3], rel=1e-3)
    (run,) = clas(clas_log(times, batch=128, gpus=4), warmup=100, measured=None)
    assert run.window == (101, 199) and run.throughput == pytest.approx(exact(times, 101, 199, 512), rel=1e-5)
    # the 1 s timestamps over the same short window would be off by up to 2 s in ~10 s
    stamped = measure(run.records, warmup=20, measured=100, global_batch=512)
    assert isinstance(stamped, WindowResult) and stamped.method == "timestamps"


def test_print_interval_counts_iterations_not_lines() -> None:
    times = steady(300, 0.1, slow={57: 0.5})
    (run,) = clas(clas_log(times, batch=64, gpus=2, print_interval=10))
    assert [r.iteration for r in run.records][:4] == [0, 10, 20, 30]
    assert run.window == (21, 120) and run.iterations == 100
    assert run.throughput == pytest.approx(exact(times, 21, 120, 128), rel=1e-5)
    (run,) = clas(clas_log(times, batch=64, gpus=2, print_interval=10), warmup=35, measured=100)
    assert run.window == (31, 130)  # base: the last record at or before 35; end: the last one <= 135
    assert run.throughput == pytest.approx(exact(times, 31, 130, 128), rel=1e-5)


def test_epochs_continue_the_iteration_numbers() -> None:
    times = steady(60, 0.1, slow={40: 0.3})
    (run,) = clas(clas_log(times, batch=32, gpus=1, epochs=3), warmup=20, measured=None)
    assert [r.iteration for r in run.records] == list(range(180))
    assert [r.epoch for r in run.records][58:62] == [0, 0, 1, 1]
    assert run.status == "ok" and run.window == (21, 179)
    expected = 159 * 32 / (sum(times[21:]) + 2 * sum(times))  # the restarted epochs' slow steps included
    assert run.throughput == pytest.approx(expected, rel=1e-4)


def test_print_interval_across_epochs_uses_the_planned_epoch_length() -> None:
    times = steady(95, 0.1)  # 95 steps: the last printed step is 90, the epoch has 95
    (run,) = clas(clas_log(times, batch=32, print_interval=10, epochs=2), warmup=20, measured=None)
    assert [r.iteration for r in run.records][9:12] == [90, 95, 105]
    assert run.status == "ok"


def test_several_runs_in_one_file() -> None:
    a = clas_log(steady(150, 0.1), batch=32, gpus=1)
    b = clas_log(steady(150, 0.2), batch=32, gpus=2)
    runs = clas(a + b)
    assert len(runs) == 2 and [r.gpus for r in runs] == [1, 2]
    assert runs[0].throughput == pytest.approx(320.0, rel=1e-4)
    assert runs[1].throughput == pytest.approx(320.0, rel=1e-4)
    assert runs[1].records[0].iteration == 0


@pytest.mark.parametrize("prefix", ["[1,0]<stdout>:", "Fri Apr  9 16:50:03 2021[1,0]<stderr>:"])
def test_mpirun_prefixes_and_several_ranks(prefix: str) -> None:
    times = steady(150, 0.1)
    (plain,) = clas(clas_log(times, gpus=2))
    one = clas_log(times, gpus=2, prefix=prefix)
    (run,) = clas(one)
    assert run.throughput == pytest.approx(plain.throughput) and run.records[0].rank == 0
    liar = clas_log(steady(150, 0.5), gpus=2, prefix="[1,1]<stdout>:")
    mixed = "".join(x + y for x, y in zip(one.splitlines(keepends=True), liar.splitlines(keepends=True)))
    (run,) = clas(mixed)
    assert run.throughput == pytest.approx(plain.throughput) and {r.rank for r in run.records} == {0}


@pytest.mark.parametrize(
    ("lines", "gpus"),
    [
        ("    |                     PADDLE_TRAINERS_NUM                        4                      |\n", 4),
        ("export PADDLE_TRAINERS_NUM=4\n", 4),
        ("trainers_num:4\n", 4),
        ("worker_key:job-x_worker, size: {'job-x_worker': 16}\n", 16),
        ("INFO 2020-12-16 18:48:40,698 launch_utils.py:471] Local start 4 processes. First process\n", 4),
        ("gpus: 0,1,2,3\n", 4),
    ],
)
def test_gpu_count_evidence(lines: str, gpus: int) -> None:
    text = clas_log(steady(150, 0.1), batch=64, gpus=gpus, gpu_lines=lines).replace("is_distributed : True\n", "")
    (run,) = clas(text)
    assert run.gpus == gpus and run.batch_size_per_device == 64
    assert run.throughput == pytest.approx(640.0 * gpus, rel=1e-4)


def test_gpu_count_from_global_batch_over_per_card_batch() -> None:
    text = clas_log(steady(150, 0.1), batch=128, gpus=4, gpu_lines="")
    (run,) = clas(text)  # TRAIN batch_size 512 / (ips x elapse = 128)
    assert run.gpus == 4 and run.batch_size_per_device == 128


def test_gpu_count_unknown_fails_unless_hinted() -> None:
    text = clas_log(steady(150, 0.1), batch=128, gpus=4, gpu_lines="", config=False)
    (run,) = clas(text)
    assert run.status == "failed" and run.reason == paddleclas.UNKNOWN_GPUS and run.gpus is None
    (run,) = paddleclas.parse(text, "<text>", ParseOptions(20, 100), gpus_hint=4)
    assert run.status == "ok" and run.gpus == 4 and run.throughput == pytest.approx(5120.0, rel=1e-4)
    for name, gpus in (("logs/paddle/2n8g/rn50_b128_fp32_1.log", 16), ("paddle_gpu8_amp_bs128.txt", 8)):
        (run,) = clas(text, file=name)
        assert run.gpus == gpus, name
    assert paddleclas.gpus_from_name("resnet.log") is None


def test_reported_is_the_published_method() -> None:
    times = steady(150, 0.1)
    text = clas_log(times, batch=100, gpus=2)
    (run,) = clas(text)
    ips = [float(x.split("ips: ")[1].split()[0]) for x in text.splitlines() if "train step:" in x]
    assert run.reported_throughput == pytest.approx(statistics.fmean(ips[10:]) * 2, rel=1e-9)
    (run,) = clas(clas_log(times, batch=100, gpus=16))  # multi-node: the first 100 lines skipped
    assert run.reported_throughput == pytest.approx(statistics.fmean(ips[100:]) * 16, rel=1e-9)


def test_newer_batch_cost_layout() -> None:
    text = clas_log(steady(150, 0.1), batch=64, gpus=1)
    newer = []
    for line in text.splitlines(keepends=True):
        if "train step:" in line:
            head, rest = line.split(" loss: ")
            loss = rest.split()[0]
            elapse = float(rest.split("elapse: ")[1].split("s ")[0])
            ips = rest.split("ips: ")[1]
            line = (
                f"{head} top1: 0.00000, top5: 0.00000, loss: {loss}, lr: 0.100000, batch_cost: {elapse:.5f} s, "
                f"reader_cost: 0.00100 s, ips: {ips}"
            )
        newer.append(line)
    (run,) = clas("".join(newer))
    assert run.status == "ok" and run.throughput == pytest.approx(640.0, rel=1e-4)


# ==================================================================================== PaddleCV lines
def cv_log(
    n: int,
    *,
    batch: int | None = 256,
    elapse: float = 0.5,
    step: int = 1,
    extra: str = "",
    stamps: bool = False,
    passes: int = 1,
) -> str:
    out = ["-----------  Configuration Arguments -----------\n"]
    if batch is not None:
        out.append(f"batch_size: {batch}\n")
    out.append("model: ResNet50\n------------------------------------------------\n" + extra)
    clock = 0.0
    for p in range(passes):
        for b in range(n):
            clock += elapse
            if b % step == 0:
                t = (T0 + timedelta(seconds=clock)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3] + " " if stamps else ""
                out.append(
                    f"{t}[Pass {p}, train batch {b}] \tloss 6.90000, acc1 0.00000, acc5 0.00000, "
                    f"lr 0.10000, elapse {elapse:.4f} sec\n"
                )
    return "".join(out)


def test_paddlecv_lines_batch_over_elapse() -> None:
    text = cv_log(200)
    assert paddleclas.detect(text)
    (run,) = clas(text)
    assert run.status == "ok" and run.method == "printed_rates" and run.window == (21, 120)
    assert run.throughput == pytest.approx(512.0) and run.reported_throughput is None
    assert run.gpus is None and run.batch_size_per_device is None
    (run,) = clas(cv_log(200, extra="trainers_num:4\n"))  # four trainer processes of 256 each
    assert run.gpus == 4 and run.batch_size_per_device == 256 and run.throughput == pytest.approx(2048.0)
    (run,) = clas(cv_log(200, step=10, passes=2), warmup=20, measured=None)
    # a pass's length is unknown: taken as its last printed batch + 1 (like a DLLogger epoch)
    assert [r.iteration for r in run.records][18:22] == [180, 190, 191, 201]
    assert run.window == (21, 381) and run.throughput == pytest.approx(512.0)


def test_paddlecv_timestamps_with_ms_time_the_window() -> None:
    (run,) = clas(cv_log(200, stamps=True))
    assert run.method == "timestamps" and run.throughput == pytest.approx(512.0, rel=1e-3)


def test_paddlecv_without_batch_size_fails() -> None:
    (run,) = clas(cv_log(200, batch=None))
    assert run.status == "failed" and run.reason == paddleclas.UNKNOWN_BATCH


# ==================================================================================== PaddleClas: failures
@needs_resnet
def test_resnet_out_of_memory() -> None:
    text = _resnet("paddle_gpu1_amp_bs208.txt")
    cut = text[: text.index("train step:300 ")].rsplit("\n", 1)[0] + "\n"
    oom = cut + "paddle.fluid.core_avx.EnforceNotMet: Out of memory error on GPU 0.\n"
    (run,) = clas(oom)
    assert run.status == "failed" and run.reason == "out of memory" and run.throughput is None


def test_resnet_nan_loss() -> None:
    text = clas_log(steady(150, 0.1)).replace("train step:77   loss: 7.0000", "train step:77   loss: nan")
    (run,) = clas(text)
    assert run.status == "failed" and run.reason == "loss is NaN/inf at iteration 77"


@needs_resnet
def test_resnet_truncated() -> None:
    text = _resnet("paddle_gpu8_fp32_bs96.txt")
    cut = text[: text.index("train step:900 ")].rsplit("\n", 1)[0] + "\n"
    (run,) = clas(cut)
    assert run.status == "failed" and run.reason == "truncated log: 900 of 1668 iterations"
    (run,) = clas(cut + "2020-12-16 19:01:00 INFO: epoch:0   train step:900  loss:  6.")
    assert run.reason == "truncated log: last line cut"
    (run,) = clas(text.rstrip("\n"))  # a complete log without its final newline is fine
    assert run.status == "ok"
    short = clas_log(steady(150, 0.1), epochs=2)
    (run,) = clas(short[: short.index("epoch:1 ")].rsplit("\n", 1)[0] + "\n")
    assert run.reason == "truncated log: 1 of 2 epochs"


def test_resnet_too_few_iterations_and_no_training_lines() -> None:
    (run,) = clas(clas_log(steady(60, 0.1)))
    assert run.reason == "too few iterations for the window (got 59, need 120)"
    assert run.reported_throughput is not None  # the framework's figure is kept
    (run,) = clas(clas_log(steady(60, 0.1)), warmup=20, measured=None)
    assert run.status == "ok" and run.window == (21, 59)
    head = clas_log(steady(10, 0.1)).split("2020-12-16 18:00:01 INFO: epoch")[0]
    assert paddleclas.detect(head)
    (run,) = clas(head + "Traceback (most recent call last):\nValueError: boom\n")
    assert run.status == "failed" and run.reason == "no training lines"
    (run,) = clas("nothing here\n")
    assert run.reason == "no training lines"


# ==================================================================================== PLSC: real logs
@needs_arcface
@pytest.mark.parametrize("path", _arcface_logs(), ids=lambda p: "/".join(p.parts[-3:-1]))
def test_real_arcface_logs(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert plsc.detect(text) and not paddleclas.detect(text)
    (run,) = arc(text)
    assert run.status == "ok" and run.reported_throughput is None  # no summary figure in these logs
    assert run.gpus == 8 and run.batch_size_per_device == 128 and run.method == "timestamps"
    assert run.window == (101, 126400)
    paused = sum(1 for a, b in zip(run.records, run.records[1:]) if _between(text, a, b))
    assert paused == 87  # 63 validations (every 2000 steps) + 24 checkpoint saves inside the window
    assert run.iterations == 126300 - 100 * paused
    # the same intervals by the printed throughput (framework clock): within 0.1 %
    kept = _kept_printed(text, run)
    assert run.throughput == pytest.approx(kept, rel=0.001)
    # every interval, pauses included, is far slower: the exclusion matters
    naive = measure(run.records, warmup=50, measured=None, global_batch=1024)
    assert isinstance(naive, WindowResult) and naive.throughput < 0.9 * run.throughput  # type: ignore[operator]


def _between(text: str, a: object, b: object) -> bool:
    """Whether a validation or save line lies between the training lines of records a and b."""
    ia = text.index(f"step: {a.iteration}, ")  # type: ignore[attr-defined]
    ib = text.index(f"step: {b.iteration}, ")  # type: ignore[attr-defined]
    chunk = text[ia:ib]
    return "test time:" in chunk or "Save model to" in chunk


def _kept_printed(text: str, run: ParsedRun) -> float:
    iters, seconds = 0, 0.0
    for a, b in zip(run.records, run.records[1:]):
        if not _between(text, a, b):
            k = b.iteration - a.iteration
            iters += k
            seconds += k / b.samples_per_sec  # type: ignore[operator]
    return iters / seconds


@needs_arcface
def test_real_arcface_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Per-file table (pytest -s): no published figure; our rule, printed rates over the same intervals,
    the median interval rate and the naive span (validation included)."""
    rows = []
    for path in _arcface_logs():
        text = path.read_text(encoding="utf-8")
        (run,) = arc(text)
        naive = measure(run.records, warmup=50, measured=None, global_batch=1024)
        assert isinstance(naive, WindowResult) and run.throughput
        median = statistics.median(r.samples_per_sec for r in run.records[1:])  # type: ignore[type-var]
        rows.append(
            f"{'/'.join(path.parts[-3:-1]):45s} {run.throughput:9.1f} {_kept_printed(text, run):9.1f} "
            f"{median:9.1f} {naive.throughput:9.1f}"
        )
    print_table(capsys, "log                                            our-rule   printed    median     naive", rows)


# ==================================================================================== PLSC: synthetic
A0 = datetime(2021, 9, 28, 11, 6, 33, 524000)


def arc_stamp(seconds: float) -> str:
    return (A0 + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def arc_log(
    lines: int,
    *,
    interval: int = 100,
    world: int = 8,
    batch: int = 128,
    step_time: float = 0.1,
    pauses: dict[int, tuple[str, float]] | None = None,
    form: str = "throughput",
    header: bool = True,
    total_steps: int | None = None,
    startup: float = 60.0,
    prefix: str = "",
    loss: str = "37.6789",
) -> str:
    """An arcface_paddle log: a line every ``interval`` steps of ``step_time`` s; ``pauses[step]`` =
    (kind, seconds) adds validation or a checkpoint save after that step's line."""
    total = world * batch
    clock, out = 0.0, []

    def put(message: str) -> None:
        out.append(f"{prefix}Training: {arc_stamp(clock)} - {message}\n")

    if header:
        put("rank: 0")
        put("--------args----------")
        put(f"batch_size: {batch}")
        put(f"log_interval_step: {interval}")
        put("------------------------")
        put(f"world_size: {world}")
        put(f"total_batch_size: {total}")
        put(f"total_steps: {total_steps or lines * interval}")
    last = clock
    clock += startup
    for i in range(1, lines + 1):
        step = i * interval
        clock += interval * step_time
        rate = total * interval / (clock - last)
        last = clock
        head = f"loss {loss}, lr: 0.200000, epoch: 0, step: {step}, eta: 4.72 hours, "
        if form == "throughput":
            put(head + f"throughput: {rate:.2f} imgs/sec")
        else:
            samples = batch if form == "ips_per_card" else total
            put(
                head + f"avg_reader_cost: 0.00100 sec, avg_batch_cost: {step_time:.5f} sec, "
                f"avg_samples: {samples:.5f}, ips: {rate * samples / total:.5f} images/sec"
            )
        kind, seconds = (pauses or {}).get(step, ("", 0.0))
        if kind == "validation":
            clock += seconds
            put(f"[lfw][{step}]XNorm: 4.269427")
            put(f"[lfw][{step}]Accuracy-Flip: 0.97933+-0.00554")
            put(f"test time: {seconds:.4f}")
        elif kind == "save":
            clock += seconds
            put(f"Save model to MS1M_v3_arcface_static_0.1/FresResNet50/{step}.")
    return "".join(out)


def test_arcface_validation_and_saves_are_left_out() -> None:
    pauses = {300: ("validation", 40.0), 600: ("save", 20.0), 700: ("validation", 40.0)}
    text = arc_log(12, pauses=pauses)
    (run,) = arc(text)
    assert run.status == "ok" and run.method == "timestamps" and run.window == (101, 1200)
    assert run.iterations == 1100 - 300  # intervals 300-400, 600-700, 700-800 left out
    assert run.throughput == pytest.approx(10240.0, rel=1e-3)
    printed = {r.iteration: r.samples_per_sec for r in run.records}
    assert printed[400] < 2500 and printed[500] == pytest.approx(10240.0, rel=1e-3)  # records keep printed rates
    assert printed[100] < 2000  # the first interval holds the start-up ...
    (run,) = arc(text, warmup=0, measured=None)  # ... and is never counted, whatever the warm-up
    assert run.window == (101, 1200) and run.throughput == pytest.approx(10240.0, rel=1e-3)


def test_arcface_without_timestamps_uses_printed_rates_with_the_same_exclusions() -> None:
    text = arc_log(12, pauses={300: ("validation", 40.0)})
    bare = "".join(line.split(" - ", 1)[1] + "\n" for line in text.splitlines())
    (run,) = arc(bare)
    assert run.status == "ok" and run.method == "printed_rates" and run.iterations == 1000
    assert run.throughput == pytest.approx(10240.0, rel=1e-3)
    (run,) = arc(text.replace("total_batch_size: 1024", "total_batch_size: x").replace("world_size: 8", "w"))
    assert run.method == "printed_rates" and run.gpus is None  # no global batch: printed rates


@pytest.mark.parametrize("form", ["ips_total", "ips_per_card"])
def test_arcface_newer_ips_form(form: str) -> None:
    (run,) = arc(arc_log(12, form=form))
    assert run.status == "ok" and run.throughput == pytest.approx(10240.0, rel=1e-3)
    assert [r.samples_per_sec for r in run.records][3] == pytest.approx(10240.0, rel=1e-3)  # scaled to global


def test_arcface_seed_window_entry_py_lines() -> None:
    """The DLPerf seed patched entry.py to exit at batch 150 and averaged iterations 51..150."""
    lines = ["[INFO 2021-03-12 10:00:00,000] Pass:0 batch:0 lr:0.1 loss:45.0 qps:100.00\n"]
    rates = {b: 2500.0 + b for b in range(10, 151, 10)}
    lines += [
        f"[INFO 2021-03-12 10:00:{b // 10:02d},000] Pass:0 batch:{b} lr:0.1 loss:44.0 qps:{q:.2f}\n"
        for b, q in rates.items()
    ]
    text = "".join(lines)
    assert plsc.detect(text)
    (run,) = arc(text)
    assert run.window == (51, 150) and run.iterations == 100 and run.method == "printed_rates"
    assert run.throughput == pytest.approx(100 / sum(10 / rates[b] for b in range(60, 151, 10)))
    assert plsc.FORMAT.default_warmup == 50 and plsc.FORMAT.default_measured is None


def test_arcface_entry_py_multi_node_lines_and_passes() -> None:
    """entry.py logs of the seed's multi-node runs hold one line per node and batch; passes restart the batch."""
    lines = []
    for p in range(2):
        for b in range(0, 101, 10):
            for node in range(4):
                lines.append(f"Pass:{p} batch:{b} lr:0.1 loss:44.0 qps:{1000.0 if node == 0 else 1.0 + b:.2f}\n")
    (run,) = arc("".join(lines), warmup=0, measured=None)
    assert [r.iteration for r in run.records][:3] == [0, 10, 20] and run.records[11].iteration == 101
    assert run.status == "ok" and run.throughput == pytest.approx(1000.0) and run.window == (1, 201)


def test_arcface_several_runs() -> None:
    a, b = arc_log(6), arc_log(6, step_time=0.2)
    runs = arc(a + b)
    assert len(runs) == 2
    assert runs[0].throughput == pytest.approx(10240.0, rel=1e-3)
    assert runs[1].throughput == pytest.approx(5120.0, rel=1e-3)
    body = "".join(x for x in b.splitlines(keepends=True) if "step: " in x)
    runs = arc(a + body)  # the step counter goes back: a second run, same settings
    assert len(runs) == 2 and runs[1].gpus == 8 and runs[1].throughput == pytest.approx(5120.0, rel=1e-3)


def test_arcface_prefixed_ranks() -> None:
    good = arc_log(8, prefix="[1,0]<stdout>:")
    bad = arc_log(8, prefix="[1,3]<stdout>:", step_time=0.4)
    mixed = "".join(x + y for x, y in zip(good.splitlines(keepends=True), bad.splitlines(keepends=True)))
    (run,) = arc(mixed)
    assert run.throughput == pytest.approx(10240.0, rel=1e-3) and {r.rank for r in run.records} == {0}


def test_arcface_failures() -> None:
    text = arc_log(12)
    (run,) = arc(text + "RuntimeError: (ResourceExhausted) Out of memory error on GPU 3.\n")
    assert run.reason == "out of memory"
    nan = text.replace("loss 37.6789, lr: 0.200000, epoch: 0, step: 700,", "loss nan, lr: 0, epoch: 0, step: 700,")
    (run,) = arc(nan)
    assert run.reason == "loss is NaN/inf at iteration 700"
    (run,) = arc(arc_log(12, total_steps=5000))
    assert run.reason == "truncated log: 1200 of 5000 iterations"
    (run,) = arc(arc_log(12, total_steps=1250))  # logged up to the last multiple of the log interval
    assert run.status == "ok"
    (run,) = arc(text + "Training: 2021-09-28 11:10:24,823 - loss 37.6789, lr: 0.2000")
    assert run.reason == "truncated log: last line cut"
    (run,) = arc(arc_log(3), warmup=300)
    assert run.reason == "too few iterations for the window (got 300, need 301)"
    header = arc_log(0)
    assert plsc.detect(header)
    (run,) = arc(header + "Traceback (most recent call last):\n")
    assert run.reason == "no training lines" and run.gpus == 8


@needs_arcface
def test_real_arcface_truncated() -> None:
    text = _arcface_logs()[0].read_text(encoding="utf-8")
    cut = text[: text.index("step: 50000,")].rsplit("\n", 1)[0] + "\n"
    (run,) = arc(cut)
    assert run.reason == "truncated log: 49900 of 126400 iterations"


# ==================================================================================== registry & API
def test_detectors_are_specific() -> None:
    for folder in OTHERS:
        for path in sorted(folder.glob("*.txt")) if folder.is_dir() else []:
            text = path.read_text(encoding="utf-8")
            assert not paddleclas.detect(text) and not plsc.detect(text), path
    for fmt in formats.FORMATS:
        if fmt.name not in (CLAS, PLSC):
            for text in (clas_log(steady(30, 0.1)), cv_log(30), arc_log(5)):
                assert not fmt.detect(text), fmt.name
    assert not paddleclas.detect(arc_log(5)) and not plsc.detect(clas_log(steady(30, 0.1)))


def test_through_the_api_with_both_formats_registered() -> None:
    assert formats.detect_format(clas_log(steady(30, 0.1))) == CLAS
    assert formats.detect_format(arc_log(3)) == PLSC
    (run,) = parse_log(clas_log(steady(200, 0.1), gpus=2))
    assert run.format == CLAS and run.window == (21, 120) and run.throughput == pytest.approx(2560.0, rel=1e-4)
    (run,) = parse_log(arc_log(8), format=PLSC)
    assert run.format == PLSC and run.window == (101, 800)
    assert paddleclas.FORMAT.default_warmup == 20 and paddleclas.FORMAT.default_measured == 100


# ==================================================================================== robustness
# Any text, truncated and shuffled logs, huge lines: tests/test_parsing_fuzz.py.


def test_odd_digits_never_crash() -> None:
    """'²' passes str.isdigit() but not int(); '٣' is a decimal digit that int() and regex \\d accept."""
    for digit in ("\u00b2", "\u0663"):
        for text in (
            f"2020-12-16 18:00:00 INFO: epochs : {digit}\n" + clas_log(steady(30, 0.1)),
            f"batch_size: {digit}\n[Pass 0, train batch 1] loss 1, elapse 1 sec\n",
            f"Training: 2021-09-28 11:06:33,524 - world_size: {digit}\n" + arc_log(3),
        ):
            for fmt in (paddleclas.FORMAT, plsc.FORMAT):
                parse_with(fmt, text)


# ---- PLSC 2.4 engine lines (dlperf/paddle:cpu, docker/paddle-cpu): real CPU log of a 2n1g run
CPU_PLSC = Path(__file__).parent / "data" / "cpu_logs" / "paddle_plsc_2n1g.log"


def test_plsc24_engine_cpu_log_reads_global_ips_per_step() -> None:
    text = CPU_PLSC.read_text()
    assert formats.detect_format(text) == PLSC
    (run,) = parse_with(plsc.FORMAT, text, 3, 6, str(CPU_PLSC))
    assert run.status == "ok" and run.gpus == 2 and run.batch_size_per_device == 4
    assert [r.iteration for r in run.records] == list(range(1, 10))  # Iter 0..8 of epoch 1
    assert run.records[3].samples_per_sec == pytest.approx(4.01293) and run.records[3].loss == pytest.approx(39.32742)
    rates = [4.01293, 3.97558, 3.00356, 3.00306, 3.42503, 3.84153]  # ips is global: printed as is
    assert run.window == (4, 9) and run.method == "printed_rates"
    assert run.throughput == pytest.approx(len(rates) / sum(1 / r for r in rates))


def test_plsc24_engine_cpu_log_truncated_nan_and_epochs() -> None:
    text = CPU_PLSC.read_text()
    cut = text[: text.index("[Iter: 7/6400]")]
    cut = cut[: cut.rindex("\n") + 1]  # whole lines up to step 7: no "training stops early", 7 of 9 steps
    (run,) = parse_with(plsc.FORMAT, cut, 3)
    assert run.status == "failed" and run.reason == "truncated log: 7 of 9 iterations"
    nan = text.replace("MarginLoss: 43.39571, loss: 43.39571", "MarginLoss: nan, loss: nan")
    (run,) = parse_with(plsc.FORMAT, nan, 3)
    assert run.status == "failed" and "loss is NaN/inf" in run.reason
    # a second epoch continues the iteration count (Iter restarts at 0)
    two = text.replace("[Epoch 1/1][Iter: 8/6400]", "[Epoch 2/2][Iter: 0/6400]")
    (run,) = parse_with(plsc.FORMAT, two, 3)
    assert run.records[-1].iteration == 6401 and run.records[-2].iteration == 8
