"""Tests of dlperf_core.parsing: real NGC PyTorch logs, the window rule, failures, and that
``measure`` is total (robustness of the parsers: tests/test_parsing_fuzz.py).

The real logs live in ``$DLPERF_SHARED/reallogs`` (default: the repository's ``../shared``).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlperf_core.parsing import (
    FORMATS,
    IterationRecord,
    LogFormat,
    WindowResult,
    detect_format,
    get_format,
    measure,
    parse_file,
    parse_log,
)
from dlperf_core.parsing.failures import loss_failure
from helpers import SHARED  # noqa: E402  (seeds and reallogs, $DLPERF_SHARED)
from parsing_checks import SETTINGS, check_all, print_table

NGC = SHARED / "reallogs" / "ngc_pytorch"
FMT = "ngc_pytorch_dllogger"

PUBLISHED = {  # reallogs/PROVENANCE.md: each equals the log's Summary train.total_ips
    "pytorch_gpu1_fp32_bs128.txt": 364.3,
    "pytorch_gpu1_amp_bs128.txt": 828.7,
    "pytorch_gpu1_amp_bs256.txt": 841.6,
    "pytorch_gpu8_fp32_bs128.txt": 2826.8,
    "pytorch_gpu8_amp_bs128.txt": 6014.7,
    "pytorch_gpu8_amp_bs248.txt": 6230.1,
}
REPORTED_TOLERANCE = 0.001  # reported_throughput vs published: 0.1 %
# Our rule drops iterations 1-5 (start-up: iteration 1 runs at ~5 % speed), which the published arithmetic
# mean of per-iteration rates keeps, so ours is higher: +0.67 % .. +1.21 % on these six logs. Bound: 0 .. +3 %.
OUR_RULE_BOUND = (0.0, 0.03)

needs_logs = pytest.mark.skipif(not NGC.is_dir(), reason=f"no real logs at {NGC}")


def _real(name: str) -> str:
    return (NGC / name).read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------ synthetic logs
T0 = datetime(2021, 4, 9, 16, 50, 0)


def stamp(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S.%f")


def param_line(batch: int | None = 32, world: int | None = 2, print_freq: int = 1, **more: object) -> str:
    kv = {"arch": "resnet50", "batch_size": batch, "print_freq": print_freq, "world_size": world, **more}
    body = "".join(f"{k} : {v}  " for k, v in kv.items() if v is not None)
    return f"DLL {stamp(0)} - PARAMETER {body}".rstrip() + " \n"


def iter_line(seconds: float, epoch: int | None, it: int, loss: float, rate: float, prefix: str = "") -> str:
    step = f"Epoch: {epoch} Iteration: {it}" if epoch is not None else f"Iteration: {it}"
    return f"{prefix}DLL {stamp(seconds)} - {step}  train.loss : {loss:.5f}  train.total_ips : {rate:.2f} img/s\n"


def summary_line(seconds: float, rate: float) -> str:
    return f"DLL {stamp(seconds)} - Summary: train.loss : 6.90000  train.total_ips : {rate:.2f} img/s\n"


def synthetic(
    iters_per_epoch: int,
    *,
    epochs: int = 1,
    print_freq: int = 1,
    batch: int = 32,
    world: int = 2,
    per_iter: float = 0.1,
    zero_based: bool = False,
    prefix: str = "",
    summary: bool = True,
    params: bool = True,
) -> str:
    """A DLLogger log whose every iteration takes ``per_iter`` s: throughput is batch*world/per_iter."""
    rate = batch * world / per_iter
    out = [param_line(batch, world, print_freq)] if params else []
    done = 0
    for e in range(epochs):
        first = 0 if zero_based else 1
        for i in range(first, iters_per_epoch + first):
            if i % print_freq == 0:
                out.append(iter_line((done + i - first + 1) * per_iter, e, i, 7.0, rate, prefix))
        done += iters_per_epoch
    if summary:
        out.append(summary_line(done * per_iter + 0.5, rate))
    return "".join(out)


# ------------------------------------------------------------------------------------ real logs
@needs_logs
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_real_log_reproduces_published_figure(name: str) -> None:
    (run,) = check_all(_real(name), file=name)
    published = PUBLISHED[name]
    assert run.format == FMT and run.status == "ok"
    assert run.reported_throughput == pytest.approx(published, rel=REPORTED_TOLERANCE)
    diff = run.throughput / published - 1  # type: ignore[operator]
    print(f"{name}: published {published}, reported {run.reported_throughput}, ours {run.throughput:.2f} ({diff:+.2%})")
    assert OUR_RULE_BOUND[0] <= diff <= OUR_RULE_BOUND[1]
    assert run.method == "timestamps" and run.window == (6, 99) and run.iterations == 94
    gpus = 8 if "gpu8" in name else 1
    assert run.gpus == gpus and run.batch_size_per_device == int(name.split("_bs")[1].split(".")[0])
    assert len(run.records) == 99 and [r.iteration for r in run.records] == list(range(1, 100))


@needs_logs
def test_real_log_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the per-file table (run pytest with -s to see it)."""
    rows = []
    for name, published in sorted(PUBLISHED.items()):
        (run,) = parse_file(NGC / name)
        assert run.throughput is not None
        rows.append(
            f"{name:30s} {published:9.1f} {run.reported_throughput:10.2f} {run.throughput:10.2f} "
            f"{100 * (run.throughput / published - 1):+6.2f}%"
        )
    print_table(capsys, "file                           published   reported   our rule   diff", rows)


@needs_logs
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_real_log_timestamps_and_printed_rates_agree(name: str) -> None:
    (run,) = parse_log(_real(name))
    by_rates = measure(run.records, warmup=5, measured=None, global_batch=None)
    assert isinstance(by_rates, WindowResult) and by_rates.method == "printed_rates"
    assert by_rates.throughput == pytest.approx(run.throughput, rel=0.005)


@needs_logs
def test_real_log_with_mpirun_prefixes_and_several_ranks() -> None:
    text = _real("pytorch_gpu8_amp_bs128.txt")
    (plain,) = parse_log(text)
    # Every line twice: as rank 0 and as rank 1 (with rank 1 lying about its speed), both prefix styles.
    lines = text.splitlines(keepends=True)
    lie = "train.total_ips : 9"
    both = "".join(
        f"[1,1]<stdout>:{ln.replace('train.total_ips : ', lie)}Fri Apr  9 16:50:03 2021[1,0]<stdout>:{ln}"
        for ln in lines
    )
    (run,) = check_all(both)
    assert run.status == "ok" and run.throughput == pytest.approx(plain.throughput)
    assert {r.rank for r in run.records} == {0} and len(run.records) == 99
    assert run.reported_throughput == pytest.approx(6014.71)


# ------------------------------------------------------------------------------------ window rule
def test_print_freq_counts_iterations_not_lines() -> None:
    text = synthetic(200, print_freq=10)  # lines at 10, 20, ..., 200; 0.1 s and 64 samples per iteration
    (run,) = check_all(text)
    assert run.throughput == pytest.approx(640.0, rel=1e-6)  # counting lines would give 64
    assert run.method == "timestamps"
    # warm-up 5: nothing printed at or before 5, so iteration 10 is the base and not counted
    assert run.window == (11, 200) and run.iterations == 190
    (run,) = check_all(text, warmup=20, measured=100)
    assert run.window == (21, 120) and run.iterations == 100
    assert run.throughput == pytest.approx(640.0, rel=1e-6)
    (run,) = check_all(text, warmup=5, measured=100)  # window 6..105: last printed iteration inside is 100
    assert run.window == (11, 100) and run.iterations == 90


def test_epochs_restart_into_global_iterations() -> None:
    text = synthetic(50, epochs=3)
    (run,) = check_all(text)
    assert [r.iteration for r in run.records] == list(range(1, 151))
    assert [r.epoch for r in run.records][48:52] == [0, 0, 1, 1]
    assert run.window == (6, 150) and run.throughput == pytest.approx(640.0, rel=1e-6)
    (run,) = check_all(text, warmup=10, measured=120)  # ends in the third epoch
    assert run.window == (11, 130) and run.iterations == 120


def test_zero_based_epoch_counters() -> None:
    (run,) = check_all(synthetic(50, epochs=2, zero_based=True))
    assert [r.iteration for r in run.records] == list(range(100))
    assert run.throughput == pytest.approx(640.0, rel=1e-6)


def test_counter_that_does_not_restart_is_kept() -> None:
    lines = [param_line()] + [iter_line(0.1 * i, i // 20, i, 7.0, 640.0) for i in range(1, 61)]
    (run,) = check_all("".join(lines) + summary_line(7, 640))
    assert [r.iteration for r in run.records] == list(range(1, 61))


@pytest.mark.parametrize("prefix", ["[1,0]<stdout>:", "Fri Apr  9 16:50:03 2021[1,0]<stdout>:", "[1,0]<stderr>:"])
def test_mpirun_prefixes(prefix: str) -> None:
    (run,) = check_all(synthetic(100, prefix=prefix))
    assert run.status == "ok" and run.throughput == pytest.approx(640.0, rel=1e-6)
    assert run.records[0].rank == 0


def test_no_batch_size_uses_printed_rates() -> None:
    lines = [iter_line(0.1 * i, 0, i, 7.0, 100.0 if i <= 50 else 300.0) for i in range(1, 101)]
    (run,) = check_all("".join(lines))  # no PARAMETER line: gpus and batch unknown
    assert run.gpus is None and run.batch_size_per_device is None
    assert run.method == "printed_rates" and run.window == (6, 100)
    # 45 iterations at 100/s and 50 at 300/s: harmonic mean weighted by iterations
    assert run.throughput == pytest.approx(95 / (45 / 100 + 50 / 300))


def test_newer_images_per_second_unit_and_no_epoch() -> None:
    text = synthetic(30).replace("img/s", "images/s").replace("Epoch: 0 ", "")
    (run,) = check_all(text)
    assert run.status == "ok" and run.reported_throughput == pytest.approx(640.0)
    assert run.records[0].epoch is None


def test_measure_without_timestamps_weights_rates_by_iterations() -> None:
    recs = [
        IterationRecord(5, None, 50.0, 1.0),
        IterationRecord(10, None, 100.0, 1.0),  # covers 6..10
        IterationRecord(20, None, 200.0, 1.0),  # covers 11..20
    ]
    res = measure(recs, warmup=5, measured=None, global_batch=64)
    assert isinstance(res, WindowResult) and res.method == "printed_rates"
    assert res.throughput == pytest.approx(15 / (5 / 100 + 10 / 200)) == pytest.approx(150.0)
    assert res.samples == 15 * 64 and res.seconds == pytest.approx(15 * 64 / 150.0)
    assert res.window == (6, 20) and res.iterations == 15


def test_measure_timestamps() -> None:
    recs = [IterationRecord(i, 100.0 + 0.5 * i, 1.0, 1.0) for i in range(0, 41, 10)]
    res = measure(recs, warmup=10, measured=20, global_batch=8)
    assert isinstance(res, WindowResult) and res.method == "timestamps"
    assert res.window == (11, 30) and res.samples == 160 and res.seconds == pytest.approx(10.0)
    assert res.throughput == pytest.approx(16.0)


def test_measure_bad_times_fall_back_to_rates_and_bad_rates_fail() -> None:
    same_time = [IterationRecord(i, 5.0, 80.0, 1.0) for i in range(1, 11)]
    res = measure(same_time, warmup=2, measured=None, global_batch=8)
    assert isinstance(res, WindowResult) and res.method == "printed_rates" and res.throughput == 80.0
    for bad in (0.0, -3.0, math.inf, math.nan, None):
        recs = [IterationRecord(i, None, bad, 1.0) for i in range(1, 11)]
        assert measure(recs, warmup=2, measured=None, global_batch=8) == "no usable timing in the window"


def test_measure_too_few_iterations() -> None:
    recs = [IterationRecord(i, float(i), 10.0, 1.0) for i in range(1, 51)]
    assert measure(recs, warmup=5, measured=100, global_batch=1) == (
        "too few iterations for the window (got 50, need 105)"
    )
    assert measure(recs, warmup=50, measured=None, global_batch=1) == (
        "too few iterations for the window (got 50, need 51)"
    )
    assert measure([], warmup=5, measured=None, global_batch=1) == ("too few iterations for the window (got 0, need 6)")
    one = [IterationRecord(10, 1.0, 10.0, 1.0)]  # nothing before it to start the clock
    assert measure(one, warmup=5, measured=None, global_batch=1) == (
        "too few iterations for the window (got 10, need 11)"
    )
    with pytest.raises(ValueError):
        measure(recs, warmup=-1, measured=None, global_batch=1)


# ------------------------------------------------------------------------------------ failures
@needs_logs
def test_out_of_memory() -> None:
    text = _real("pytorch_gpu1_fp32_bs128.txt").split("DLL 2020-12-16 11:32:25")[0] + (
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


@needs_logs
def test_truncated_logs() -> None:
    text = _real("pytorch_gpu1_amp_bs128.txt")
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


@needs_logs
def test_complete_log_without_final_newline_is_fine() -> None:
    (run,) = check_all(_real("pytorch_gpu1_amp_bs128.txt").rstrip("\n"))
    assert run.status == "ok"
    (run,) = check_all(synthetic(50).rstrip("\n"))
    assert run.status == "ok" and run.reported_throughput == pytest.approx(640.0)


@needs_logs
def test_too_few_iterations_for_the_window() -> None:
    text = _real("pytorch_gpu1_amp_bs128.txt")
    (run,) = check_all(text, warmup=5, measured=200)
    assert run.reason == "too few iterations for the window (got 99, need 205)"
    (run,) = check_all(text, warmup=99)
    assert run.reason == "too few iterations for the window (got 99, need 100)"
    assert run.reported_throughput == pytest.approx(828.65)  # the framework's figure is kept
    (run,) = check_all(text, warmup=5, measured=94)
    assert run.status == "ok" and run.window == (6, 99)


def test_unknown_format() -> None:
    (run,) = check_all("epoch: 1 step: 10, loss is 6.906126\n")
    assert (run.format, run.status, run.reason) == ("unknown", "failed", "unrecognised log format")
    assert detect_format("hello") is None
    with pytest.raises(ValueError, match="unknown log format"):
        parse_log("x", format="no_such_format")


# ------------------------------------------------------------------------------------ API
def test_to_dict_and_registry(tmp_path: Path) -> None:
    (run,) = parse_log(synthetic(20), file="a.log")
    d = run.to_dict()
    assert "records" not in d and d["window"] == [6, 20] and d["file"] == "a.log"
    assert json.loads(json.dumps(d)) == d
    assert set(d) == {
        "file",
        "format",
        "status",
        "reason",
        "throughput",
        "reported_throughput",
        "iterations",
        "gpus",
        "batch_size_per_device",
        "window",
        "method",
        "window_fitted",
    }
    assert FMT in [f.name for f in FORMATS] and isinstance(get_format(FMT), LogFormat)
    assert get_format(FMT).default_warmup == 5 and get_format(FMT).default_measured is None
    path = tmp_path / "log.txt"
    path.write_bytes(synthetic(20).encode() + b"\xff\xfe garbage \x00\n")
    (run,) = parse_file(path)
    assert run.status == "ok" and run.file == str(path)


# ------------------------------------------------------------------------------------ robustness
# Parsing any text never crashes: tests/test_parsing_fuzz.py (every registered format). The rule itself:
@SETTINGS
@given(
    st.lists(
        st.builds(
            IterationRecord,
            st.integers(-5, 60),
            st.none() | st.floats(allow_nan=True, allow_infinity=True),
            st.none() | st.floats(allow_nan=True, allow_infinity=True),
            st.none() | st.floats(allow_nan=True, allow_infinity=True),
        ),
        max_size=30,
    ),
    st.integers(0, 20),
    st.none() | st.integers(1, 40),
    st.none() | st.integers(-2, 1000),
)
def test_measure_is_total(recs: list[IterationRecord], warmup: int, measured: int | None, batch: int | None) -> None:
    res = measure(recs, warmup=warmup, measured=measured, global_batch=batch)
    if isinstance(res, WindowResult):
        assert math.isfinite(res.throughput) and res.throughput > 0 and res.iterations > 0
    else:
        assert isinstance(res, str) and res


# ---- dlperf's own workload on an H100 (reallogs/h100_reference/PROVENANCE.md: "dlperf window throughput")
H100 = SHARED / "reallogs" / "h100_reference"
H100_PUBLISHED = {  # file -> the published window figure (img/s); the log's Summary is that same window's
    "bare_amp_bf16_bs256.log": 3895.9,
    "bare_tf32_bs128.log": 2377.8,
    "dlperf_amp_bf16_bs256_r0_node0.log": 3892.5,
    "dlperf_tf32_bs128_r0_node0.log": 2380.0,
    "bare_amp_bf16_bs256_compile.log": 5120.5,
}


@pytest.mark.skipif(not H100.is_dir(), reason=f"no real logs at {H100}")
@pytest.mark.parametrize("name", sorted(H100_PUBLISHED))
def test_h100_reference_logs_reproduce_their_published_figures(name: str) -> None:
    """Parsed with no window given, a log of dlperf's workload is read with the window it says it ran with
    (PARAMETER warmup_iterations 20, iterations 100): the published figure, ours and the framework's."""
    (run,) = parse_file(H100 / name)
    assert run.status == "ok" and run.window == (21, 120) and run.iterations == 100
    assert run.throughput == pytest.approx(H100_PUBLISHED[name], rel=1e-3)
    assert run.reported_throughput == pytest.approx(H100_PUBLISHED[name], rel=1e-3)
    assert run.gpus == 1 and run.batch_size_per_device in (128, 256)
    # a caller's window still wins over the log's own
    (five,) = parse_file(H100 / name, warmup=5)
    assert five.window == (6, 120)


@pytest.mark.skipif(not H100.is_dir(), reason=f"no real logs at {H100}")
def test_h100_fp16_run_that_diverged_is_failed_nan() -> None:
    (run,) = parse_file(H100 / "bare_amp_fp16_bs256_nan.log")
    assert run.status == "failed" and run.reason == "loss is NaN/inf at iteration 3" and run.throughput is None


# ---- records kept as columns
def test_record_columns_read_as_records_and_measure_alike() -> None:
    from dlperf_core.parsing import RecordColumns

    records = tuple(IterationRecord(i, 1000.0 + 0.5 * i, 200.0 + i, 7.0 - 0.01 * i, 0, i // 10) for i in range(1, 31))
    cols = RecordColumns.of(records)
    assert len(cols) == 30 and cols == records and records == tuple(cols) and cols[-1] == records[-1]
    assert cols[2:5] == records[2:5] and list(cols) == list(records)
    with pytest.raises(IndexError):
        cols[30]
    bare = RecordColumns([1, 2], [None, None], [1.0, 2.0], [None, float("nan")])  # no rank or epoch column
    assert bare[0] == IterationRecord(1, None, 1.0, None, None, None) and math.isnan(bare[1].loss)
    for window in ((5, 10), (5, None), (0, 20), (29, 1), (25, 10)):
        for fit in (False, True):
            for batch in (None, 64):
                a = measure(records, warmup=window[0], measured=window[1], global_batch=batch, fit=fit)
                b = measure(cols, warmup=window[0], measured=window[1], global_batch=batch, fit=fit)
                assert a == b, (window, fit, batch)
    shuffled = records[10:] + records[:10] + records[3:4]  # out of order, with a repeated number
    assert (
        measure(shuffled, warmup=5, measured=20, global_batch=64)
        == measure(RecordColumns.of(shuffled), warmup=5, measured=20, global_batch=64)
        == measure(records, warmup=5, measured=20, global_batch=64)
    )
    assert loss_failure(bare) == "loss is NaN/inf at iteration 2"
