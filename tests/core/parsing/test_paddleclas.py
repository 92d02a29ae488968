"""Tests of the PaddleClas parser (dlperf_core.parsing.paddleclas): PaddleClas ResNet50 and PaddleCV
"[Pass p, train batch b]" lines. The PLSC arcface parser: tests/core/parsing/test_plsc.py; both through the
registry: tests/core/parsing/test_formats.py.

Real logs live in ``$DLPERF_SHARED/reallogs`` (default: the repository's ``../shared``); see PROVENANCE.md.
"""

from __future__ import annotations

import statistics

import pytest

from dlperf_core.parsing import paddleclas, plsc
from dlperf_core.parsing.records import ParsedRun, ParseOptions
from dlperf_core.parsing.window import WindowResult, measure
from helpers import SHARED  # seeds and reallogs, $DLPERF_SHARED
from parsing_checks import parse_with, print_table
from parsing_logs import arc_log, clas_log, cv_log, steady

RESNET = SHARED / "reallogs" / "paddle_resnet50"
needs_resnet = pytest.mark.skipif(not RESNET.is_dir(), reason=f"no real logs at {RESNET}")

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


def clas(text: str, warmup: int | None = None, measured: int | None = None, file: str = "<text>") -> list[ParsedRun]:
    return parse_with(paddleclas.FORMAT, text, warmup, measured, file)


def exact(times: list[float], first: int, last: int, samples_per_iter: int) -> float:
    """samples / seconds of iterations first..last (single epoch)."""
    return (last - first + 1) * samples_per_iter / sum(times[first : last + 1])


# ==================================================================================== real logs
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


# ==================================================================================== the rule
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


# ==================================================================================== failures
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


# ==================================================================================== robustness
# Any text, truncated and shuffled logs, huge lines: tests/core/parsing/test_parsing_fuzz.py.


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
