"""Tests of the OneFlow cnns parser (dlperf_core.parsing.oneflow).

No real GPU logs of this format are stored (shared/reallogs has none), so the fixtures (``parsing_logs.of_log``)
are synthetic logs built from the seed report's verbatim lines, the DLPerf scripts' arguments and
OneFlow-Benchmark cnns' print statements (util.Metric/print_args): the seed (seeds/003_*) prints a 10-line log
(1n1g, bs 128, no timestamps) and its method (drop the first samples/s, average the rest): reproduced verbatim.
Each table row gets a log whose printed values average to the published figure. DLPerf's later
extract_cnn_result.py docstring gives two real timestamped 2n8g lines (iterations 20 and 120): the timestamp
rule reproduces 2048 x 100 / dt from them. Real CPU logs of dlperf/oneflow:cpu are at the end.
The MindSpore model_zoo parser: tests/core/parsing/test_mindspore.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dlperf_core.parsing import oneflow
from helpers import REPO
from parsing_checks import parse_as as parse
from parsing_checks import print_table
from parsing_logs import OF_END, OF_SEED_LINES, OF_TS20, OF_TS120, of_header, of_log, of_train, of_ts_log, ts_rates_2n8g

OF = oneflow.NAME
# the samples/s of the seed's 10 verbatim lines (parsing_logs.OF_SEED_LINES) after the first
OF_SEED_VALUES = [385.628, 386.264, 385.723, 384.622, 385.367, 384.704, 384.927, 384.109, 384.517]


# seeds/003: OneFlow v0.1.8 ResNet50 v1.5 fp32, (batch per device, nodes, gpus per node) -> samples/s
OF_PUBLISHED = {
    (128, 1, 1): 383.760,
    (128, 1, 2): 747.295,
    (128, 1, 4): 1497.618,
    (128, 1, 8): 2942.321,
    (128, 2, 8): 5839.054,
    (128, 4, 8): 11548.451,
    (160, 1, 1): 382.324,
    (160, 1, 2): 755.956,
    (160, 1, 4): 1494.733,
    (160, 1, 8): 3016.431,
    (160, 2, 8): 5877.289,
    (160, 4, 8): 11623.889,
}
OF_REPORTED_TOLERANCE = 0.001  # reported_throughput vs published
# Ours is the iteration-weighted harmonic mean of the same values (all print intervals are 20 iterations):
# never above their arithmetic mean, and below it by ~variance/mean^2 (< 0.01 % here). Bound: -0.1 % .. 0.
OF_BOUND = (-0.001, 1e-9)


def of_table_rates(target: float) -> list[float]:
    """Ten printed values: a slow start-up interval, then 9 values whose arithmetic mean is ``target``."""
    spread = (0.0014, -0.0012, 0.0003, -0.0015, 0.0011, -0.0004, 0.0008, -0.0009, 0.0004)  # sums to 0
    return [target * 0.75] + [round(target * (1 + d), 3) for d in spread]


def test_oneflow_seed_example_lines() -> None:
    """The seed's 10 verbatim lines behind its local_run.sh arguments (1n1g, bs 128, 200 iterations)."""
    text = of_header() + OF_SEED_LINES + OF_END
    (run,) = parse(text, OF)
    seed_method = sum(OF_SEED_VALUES) / len(OF_SEED_VALUES)  # drop the first, average the rest
    assert run.status == "ok" and run.reported_throughput == pytest.approx(seed_method, rel=1e-12)
    assert round(seed_method, 3) == 385.096
    assert run.gpus == 1 and run.batch_size_per_device == 128
    assert run.method == "printed_rates" and run.window == (21, 200) and run.iterations == 180
    assert run.throughput == pytest.approx(180 / sum(20 / v for v in OF_SEED_VALUES))
    assert OF_BOUND[0] <= run.throughput / seed_method - 1 <= OF_BOUND[1]  # type: ignore[operator]
    assert [r.iteration for r in run.records] == list(range(20, 201, 20))
    assert all(r.time is None for r in run.records)  # no timestamps: no time, never the rate as a time
    (bare,) = parse(OF_SEED_LINES, OF)  # the lines alone: no arguments, printed rates still work
    assert bare.status == "ok" and bare.gpus is None and bare.throughput == pytest.approx(run.throughput)


@pytest.mark.parametrize("key", sorted(OF_PUBLISHED), ids=lambda k: f"{k[1]}n{k[2]}g_b{k[0]}")
def test_oneflow_seed_table(key: tuple[int, int, int]) -> None:
    batch, nodes, gpn = key
    published = OF_PUBLISHED[key]
    (run,) = parse(of_log(of_table_rates(published), nodes=nodes, gpn=gpn, batch=batch), OF)
    assert run.status == "ok" and run.gpus == nodes * gpn and run.batch_size_per_device == batch
    assert run.reported_throughput == pytest.approx(published, rel=OF_REPORTED_TOLERANCE)
    diff = run.throughput / published - 1  # type: ignore[operator]
    assert OF_BOUND[0] <= diff <= OF_BOUND[1]


# seeds/003's Speedup column: samples/s over the same batch's 1n1g, as printed (2 decimals)
OF_SPEEDUP = {
    (128, 1, 2): 1.95,
    (128, 1, 4): 3.90,
    (128, 1, 8): 7.67,
    (128, 2, 8): 15.22,
    (128, 4, 8): 30.09,
    (160, 1, 2): 1.98,
    (160, 1, 4): 3.91,
    (160, 1, 8): 7.89,
    (160, 2, 8): 15.37,
    (160, 4, 8): 30.40,
}


def test_oneflow_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The seed's tables rebuilt from logs: our rule keeps every row's rank and the Speedup column as printed.

    Prints published / reported / our rule / diff / speedup (pytest -s to see)."""
    runs = {
        key: parse(of_log(of_table_rates(OF_PUBLISHED[key]), nodes=key[1], gpn=key[2], batch=key[0]), OF)[0]
        for key in sorted(OF_PUBLISHED)
    }
    ours = {key: run.throughput for key, run in runs.items()}
    assert all(run.status == "ok" and run.throughput is not None for run in runs.values())
    assert sorted(ours, key=ours.__getitem__) == sorted(OF_PUBLISHED, key=OF_PUBLISHED.__getitem__)
    rows = []
    for key, run in runs.items():
        batch, nodes, gpn = key
        speedup = ours[key] / ours[(batch, 1, 1)]  # type: ignore[operator]
        assert round(speedup, 2) == OF_SPEEDUP.get(key, 1.0), key
        assert round(run.reported_throughput, 3) == OF_PUBLISHED[key]  # type: ignore[arg-type]
        rows.append(
            f"{nodes}n{gpn}g_b{batch:<10d} {OF_PUBLISHED[key]:10.3f} {run.reported_throughput:10.3f} "
            f"{run.throughput:10.3f} {100 * (run.throughput / OF_PUBLISHED[key] - 1):+7.3f}% {speedup:7.2f}"
        )
    (seed,) = parse(of_header() + OF_SEED_LINES + OF_END, OF)
    assert round(seed.reported_throughput, 3) == 385.096  # type: ignore[arg-type]
    rows.append(f"{'seed 10 lines':16s} {'-':>10s} {seed.reported_throughput:10.3f} {seed.throughput:10.3f}")
    assert len(rows) == len(OF_PUBLISHED) + 1
    print_table(capsys, "OneFlow case      published   reported   our rule    diff  speedup", rows)


def test_oneflow_timestamps_reproduce_dlperf_later_rule() -> None:
    rates, stamps = ts_rates_2n8g()
    text = of_ts_log()
    assert OF_TS20 + "\n" in text and OF_TS120 + "\n" in text
    (run,) = parse(text, OF, warmup=20, measured=100)  # DLPerf's extract_cnn_result.py: iterations 20..120
    assert run.method == "timestamps" and run.window == (21, 120) and run.gpus == 16
    dlperf = 2048 * 100 / (1597933977.6064055 - 1597933942.9863544)
    assert run.throughput == pytest.approx(dlperf, rel=1e-12) and round(dlperf, 2) == 5915.65
    (run,) = parse(text, OF)  # default window: 21..200
    assert run.method == "timestamps" and run.window == (21, 200)
    assert run.throughput == pytest.approx(2048 * 180 / (stamps[-1] - stamps[0]))
    # without arguments the global batch is unknown: the printed (global) rates are used
    (run,) = parse("".join(of_train(0, 20 * (k + 1), r, stamp=s) for k, (r, s) in enumerate(zip(rates, stamps))), OF)
    assert run.method == "printed_rates" and run.gpus is None and run.records[0].time == 1597933942.9863544


def test_oneflow_print_frequency_and_epochs() -> None:
    rates = [300.0] + [400.0] * 19
    (run,) = parse(of_log(rates, every=10, epochs=2), OF)  # 100 iterations per epoch, a line every 10
    assert [r.iteration for r in run.records] == list(range(10, 201, 10))
    assert [r.epoch for r in run.records][9:11] == [0, 1]
    assert run.window == (21, 200) and run.throughput == pytest.approx(400.0)
    no_line = of_log(rates, every=10, epochs=2, per_epoch_line=False)  # epoch length from num_examples
    (run2,) = parse(no_line, OF)
    assert [r.iteration for r in run2.records] == list(range(10, 201, 10))
    bare = "".join(ln for ln in no_line.splitlines(keepends=True) if ln.startswith("train:"))
    (run3,) = parse(bare, OF)  # no arguments at all: the counter restarts at the highest printed iter
    assert [r.iteration for r in run3.records] == list(range(10, 201, 10))
    assert run3.throughput == pytest.approx(400.0)


def test_oneflow_validation_lines_are_not_training() -> None:
    text = (
        of_log([300.0] + [400.0] * 9, end=False)
        + ("validation: epoch 0, iter 100, top_1: 0.000740, top_k: 0.004860, samples/s: 1240.473 1597934001.2\n")
        + OF_END
    )
    (run,) = parse(text, OF)
    assert len(run.records) == 10 and run.status == "ok" and run.throughput == pytest.approx(400.0)


def test_oneflow_mpirun_prefixes_and_several_runs() -> None:
    base = of_log([300.0] + [400.0] * 9)
    lies = base.replace("samples/s: 400.000", "samples/s: 999.000")
    both = "".join(
        f"[1,1]<stdout>:{a}[1,0]<stdout>:{b}"
        for a, b in zip(lies.splitlines(keepends=True), base.splitlines(keepends=True))
    )
    (run,) = parse(both, OF)
    assert run.status == "ok" and {r.rank for r in run.records} == {0} and run.throughput == pytest.approx(400.0)
    assert run.reported_throughput == pytest.approx(400.0)
    two = of_log([300.0] + [400.0] * 9) + of_log([500.0] + [800.0] * 9, nodes=1, gpn=2)
    first, second = parse(two, OF)
    assert (first.gpus, first.throughput, second.gpus, second.throughput) == (
        1,
        pytest.approx(400.0),
        2,
        pytest.approx(800.0),
    )
    assert [r.iteration for r in second.records][0] == 20


def test_oneflow_failures() -> None:
    rates = [300.0] + [400.0] * 9
    text = of_log(rates)
    (run,) = parse(text.replace("iter 80, loss: 1.050000", "iter 80, loss: nan"), OF)
    assert (run.status, run.reason) == ("failed", "loss is NaN/inf at iteration 80")
    oom = of_log(rates[:3], end=False) + (
        "F0808 15:34:02.123456 12345 cuda_util.cpp:55] Check failed: error == cudaSuccess (2 vs. 0) out of memory\n"
    )
    (run,) = parse(oom, OF)
    assert (run.status, run.reason, run.throughput) == ("failed", "out of memory", None)
    (run,) = parse(text[: text.index("train: epoch 0, iter 120")], OF)
    assert run.reason == "truncated log: 100 of 200 iterations"
    (run,) = parse(text[: text.index("train: epoch 0, iter 120") + 30], OF)
    assert run.reason == "truncated log: last line cut"
    (run,) = parse(text, OF, warmup=20, measured=300)
    assert run.reason == "too few iterations for the window (got 200, need 320)"
    assert run.reported_throughput == pytest.approx(400.0)
    (run,) = parse(of_header() + "Traceback (most recent call last):\nKeyboardInterrupt\n", OF)
    assert (run.reason, run.gpus, run.batch_size_per_device) == ("no training lines", 1, 128)
    graph = text.replace("samples/s: 400.000", "samples/s: -1.000")  # graph scripts print -1
    (run,) = parse(graph, OF)
    assert run.reported_throughput is None and run.reason == "no usable timing in the window"


def test_oneflow_complete_log_without_final_newline() -> None:
    (run,) = parse(of_ts_log().rstrip("\n"), OF)
    assert run.status == "ok" and run.method == "timestamps"
    lines = of_ts_log(end=False).rstrip("\n")
    (run,) = parse(lines, OF)  # ends on a train line: its timestamp may be cut and is not used
    assert run.status == "ok" and run.records[-1].time is None and run.records[-1].iteration == 200


# ================================================================================== robustness
# Any text, truncated and shuffled logs, huge lines: tests/core/parsing/test_parsing_fuzz.py.


# ---- oneflow CPU: real logs of dlperf/oneflow:cpu (OneFlow 0.9.0 eager DDP, flowvision ResNet-50 at 32x32,
# batch 4 per process, 2 processes; the argument block and train lines are printed by dlperf's CPU driver,
# imitating OneFlow-Benchmark; only rank 0 prints; printed every 5 iterations; OneFlow's glog lines around).
OF_CPU_LOGS = REPO / "tests" / "data" / "cpu_logs"


def _of_cpu_stamps(path: Path) -> dict[int, float]:
    """iter -> trailing unix time of the train lines (read independently of the parser)."""
    found = re.findall(r"^train: epoch 0, iter (\d+), .* samples/s: \S+ (\S+)$", path.read_text(), re.MULTILINE)
    return {int(it): float(stamp) for it, stamp in found}


@pytest.mark.parametrize("name", ["oneflow_1n2g.log", "oneflow_2n1g.log"])
def test_oneflow_cpu_real_log_two_processes(name: str) -> None:
    """15 iterations (5 warm-up + 10 measured) of 2 processes x 4: gpus from num_nodes x gpu_num_per_node,
    the window 6..15 timed by the trailing timestamps of iterations 5 and 15."""
    path = OF_CPU_LOGS / name
    (run,) = parse(path.read_text(), OF, warmup=5, measured=10)
    assert run.format == OF and run.status == "ok" and run.gpus == 2 and run.batch_size_per_device == 4
    assert run.window == (6, 15) and run.iterations == 10 and run.method == "timestamps"
    assert [r.iteration for r in run.records] == [5, 10, 15]
    stamps = _of_cpu_stamps(path)
    assert run.throughput == pytest.approx(10 * 2 * 4 / (stamps[15] - stamps[5]))
    assert run.reported_throughput is not None and run.reported_throughput > 0  # the seed's mean of prints 2..
    assert all(r.loss is not None and 0 < r.loss < 10 for r in run.records)
    # the seed's default window (warm-up 20) does not fit 15 iterations
    (short,) = parse(path.read_text(), OF)
    assert short.status == "failed" and short.reason.startswith("too few iterations")


def test_oneflow_cpu_real_log_nan_loss() -> None:
    """--learning_rate 1e12: the driver prints loss: nan from the first train line on."""
    (run,) = parse((OF_CPU_LOGS / "oneflow_nan.log").read_text(), OF, warmup=2, measured=4)
    assert run.status == "failed" and run.reason == "loss is NaN/inf at iteration 2" and run.throughput is None
    assert run.gpus == 1 and run.batch_size_per_device == 4
