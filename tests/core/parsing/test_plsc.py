"""Tests of the PLSC arcface parser (dlperf_core.parsing.plsc): PLSC arcface_paddle, PLSC entry.py and the
PLSC 2.4 engine lines. The PaddleClas parser: tests/core/parsing/test_paddleclas.py; both through the registry:
tests/core/parsing/test_formats.py.

Real logs live in ``$DLPERF_SHARED/reallogs`` (default: the repository's ``../shared``); see PROVENANCE.md.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from dlperf_core.parsing import formats, paddleclas, plsc
from dlperf_core.parsing.records import ParsedRun
from dlperf_core.parsing.window import WindowResult, measure
from helpers import REPO, SHARED  # SHARED: seeds and reallogs, $DLPERF_SHARED
from parsing_checks import parse_with, print_table
from parsing_logs import arc_log

ARCFACE = SHARED / "reallogs" / "paddle_plsc_arcface"
PLSC = plsc.NAME
needs_arcface = pytest.mark.skipif(not ARCFACE.is_dir(), reason=f"no real logs at {ARCFACE}")


def _arcface_logs() -> list[Path]:
    return sorted(ARCFACE.glob("*/*/training.log")) if ARCFACE.is_dir() else []


def arc(text: str, warmup: int | None = None, measured: int | None = None) -> list[ParsedRun]:
    return parse_with(plsc.FORMAT, text, warmup, measured)


# ==================================================================================== real logs
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


# ==================================================================================== synthetic
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


# ---- PLSC 2.4 engine lines (dlperf/paddle:cpu, docker/paddle-cpu): real CPU log of a 2n1g run
CPU_PLSC = REPO / "tests" / "data" / "cpu_logs" / "paddle_plsc_2n1g.log"


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
