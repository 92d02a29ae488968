"""Robustness of every registered log format: whatever the text, parsing it returns runs that keep the
invariants of ``parsing_checks.check_run`` (an ok run has a finite positive throughput and a window, a failed
one a reason, never "parser error") and never raises.

One property test, parametrized over the format registry (``dlperf_core.parsing.FORMATS``) and the kind of
input, so a format is fuzzed as soon as it is registered; ``FUZZ`` holds each format's fragments and sample
logs, and ``test_every_registered_format_has_a_corpus`` fails until a new format has its own entry.
Examples per case: ``$DLPERF_HYPOTHESIS_EXAMPLES`` (default 150; raise it for a deeper search).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlperf_core.parsing import (
    FORMATS,
    LogFormat,
    detect_format,
    dllogger,
    mindspore,
    mllog,
    mxnet,
    oneflow,
    paddleclas,
    plsc,
    tf2,
)
from helpers import REPO, SHARED  # SHARED: seeds and reallogs, $DLPERF_SHARED
from parsing_checks import SETTINGS, check_all, parse_with
from parsing_logs import (
    OF_END,
    OF_SEED_LINES,
    arc_log,
    clas_log,
    iter_line,
    mllog_log,
    ms_log,
    mx_bench,
    mx_run,
    of_header,
    of_train,
    of_ts_log,
    param_line,
    steady,
    synthetic,
    tf_log,
)

CPU_LOGS = REPO / "tests" / "data" / "cpu_logs"  # real logs of the CPU images
REAL_LOGS = SHARED / "reallogs"  # real logs of the seeds' GPU clusters (PROVENANCE.md)


@dataclass(frozen=True)
class Corpus:
    """What a format's fuzz inputs are made of: the fragments its lines are built from, the largest window
    drawn (its default window and more), and synthetic logs of it (the stored real logs that the registry
    detects as this format are added to those)."""

    pieces: tuple[str, ...]
    max_warmup: int
    max_measured: int
    synthetic: Callable[[], list[str]]


# The vocabularies keep many short strings a line.
# fmt: off
_DLLOGGER = Corpus(
    pieces=(
        "DLL ", "DLL 2020-12-16 11:34:01.884827 - ", "Epoch: ", "Iteration: ", "Summary: ", "PARAMETER ",
        "train.loss : ", "train.total_ips : ", " img/s", "nan", "inf", "-1", "0", "1e308", "99999999999",
        "batch_size : ", "world_size : ", "print_freq : ", "prof : ", "epochs : ", "[1,0]<stdout>:",
        "[1,3]<stderr>:", "out of", " ", "  ", "\n", "\r\n", "\x00", "\ufffd", "9" * 50, ":",
    ),
    max_warmup=20,
    max_measured=50,
    synthetic=lambda: [synthetic(20), synthetic(30, epochs=2, print_freq=5, zero_based=True, prefix="[1,0]<stdout>:")],
)
_MXNET_TF2 = (
    "[1,0]<stderr>:", "[1,3]<stderr>:", "2020-12-16 08:02:43,201:INFO: ", "Epoch[", "] Batch [", "0-19", "]\tSpeed: ",
    " samples/sec", "\tcross-entropy=", "Start with arguments Namespace(", "batch_size=", "gpus=[0, 1]", "gpus=[",
    "benchmark_iters=", "num_epochs=", "disp_batches=", "Experiment took: ", "train.total_ips\n", "     |  96  |\n",
    "     8     |   2998.1  |\n", "I0115 10:13:05.543210 1402 keras_utils.py:145] ", "TimeHistory: ", " seconds, ",
    " examples/second between steps ", " and ", "BenchmarkMetric: {'global step':", ", 'time_taken': ",
    ",'examples_per_second': ", "}", "- loss: ", "'train_loss': ", "Epoch 1/3", "Run stats:",
    "Using MirroredStrategy with devices (", "'/device:GPU:0', ", ")", "num_workers = ", ", local_devices = (",
    "MultiWorkerMirroredStrategy with cluster_spec = ", "Created TensorFlow device (/job:localhost/device:GPU:",
    "nan", "inf", "-1", "0", "1e308", "99999999999", "out of", " ", "\t", "\n", "\r", "\r\n", "\x00", "\ufffd",
    "9" * 50, ":", "|", ",",
)
_MINDSPORE_ONEFLOW = (
    "epoch: ", "epoch: 1 step: 10, loss is ", "loss is ", "Epoch time: ", "epoch time: 1142.590 ms, ",
    "per step time: ", " ms", "nan", "inf", "-1", "0", "0.000", "1e308", "99999999999", "9" * 40,
    "args_opt: Namespace(", "batch_size=128, ", "device_num=8, ", "run_distribute=True, ", "data_sink_steps=10, ",
    "train_steps=200)", "NCCL INFO comm 0x1 rank 0 nranks ", ". Invalid loss", "value= ",
    "train: epoch 0, iter ", "20, loss: ", "7.087004, top_1: 0.000000, top_k: 0.000000, samples/s: ",
    "3988.891", " 1597933942.9863544", "validation: epoch ", "num_nodes = ", "gpu_num_per_node = ",
    "batch_size_per_device = ", "loss_print_every_n_iter = ", "num_epochs = ", " iter per epoch...",
    "Running resnet50: num_gpu_per_node = 8, num_nodes = 2.", "End time: ", "[1,0]<stdout>:",
    "[1,3]<stderr>:", "memory isn't enough", " ", "\n", "\r\n", "\x00", "\ufffd", ",", ":",
)
_PADDLE = (
    "2020-12-16 18:57:37 INFO: ", "epoch:0   ", "train step:", "20   ", "loss: ", " 7.98 ", "elapse: ", "0.280s",
    " ips: ", "343.06149", " images/sec.", "END epoch:0   train ", "INFO: TRAIN : ", "    batch_size : ", "96",
    "is_distributed : False", "PADDLE_TRAINERS_NUM ", "size: {'_worker': 8}", "[Pass 0, train batch 10] \tloss ",
    "6.9, ", "elapse 0.36 sec", "batch_size: 256", "Training: 2021-09-28 11:10:24,823 - ", "loss 37.6, lr: 0.2, ",
    "epoch: 0, step: ", "100", ", eta: 4.72 hours, ", "throughput: ", "9729.78 imgs/sec", "avg_samples: 128, ",
    "ips: 9.5 images/sec", "world_size: 8", "total_batch_size: 1024", "total_steps: 500", "log_interval_step: 100",
    "[lfw][2000]XNorm: 4.2", "test time: 12.9", "Save model to x/0.", "--------args----------",
    "Pass:0 batch:50 lr:0.1 loss:45.3 qps:2607.10", "[1,0]<stdout>:", "[1,3]<stderr>:", "nan", "inf", "-1", "0",
    "1e308", "9" * 30, "\u00b2", "\u0663", " ", "\n", "\r\n", "\x00", "\ufffd",
)
_MLLOG = (
    ":::MLLOG ", "I0518 21:43:27.300133 431419 mllog.py:168] ", '{"namespace": "", ', '"time_ms": ', "1621118646492",
    ", ", '"event_type": "INTERVAL_START", ', '"key": ', '"run_start"', '"run_stop"', '"epoch_start"',
    '"epoch_stop"', '"block_start"', '"block_stop"', '"train_samples"', '"global_batch_size"', '"throughput"',
    '"tracked_stats"', '"value": ', "null", "1281167", '{"imgs_sec": 26706.5}', '"metadata": {', '"epoch_num": ',
    '"first_epoch_num": ', '"epoch_count": ', '"status": "success"', '"status": "aborted"', "}", "}}", "1", "4",
    "0.0", "-1", "1e308", "9" * 40, "NaN", "Infinity", "[", "]", '"', "\\", " ", "\n", "\r\n", "\x00", "\ufffd",
)
# fmt: on

FUZZ: dict[str, Corpus] = {
    mllog.NAME: Corpus(
        _MLLOG,
        5,
        40,
        lambda: [mllog_log(), mllog_log(kind="block", prefix="I0518 21:43:27.300133 431419 mllog.py:168] ")],
    ),
    dllogger.NAME: _DLLOGGER,
    mxnet.NAME: Corpus(_MXNET_TF2, 1600, 1000, lambda: [mx_bench(64, iters=100), mx_bench()]),
    tf2.NAME: Corpus(_MXNET_TF2, 1600, 1000, lambda: [tf_log(), tf_log(legacy=True)]),
    mindspore.NAME: Corpus(
        _MINDSPORE_ONEFLOW,
        200,
        200,
        lambda: [
            ms_log(nodes=1, per_node=4, rate=1418.66, nccl=True),
            ms_log(nodes=1, per_node=2, rate=710.68, prefix=True),
        ],
    ),
    oneflow.NAME: Corpus(_MINDSPORE_ONEFLOW, 200, 200, lambda: [of_header() + OF_SEED_LINES + OF_END, of_ts_log()]),
    paddleclas.NAME: Corpus(_PADDLE, 30, 50, lambda: [clas_log(steady(200, 0.1))]),
    plsc.NAME: Corpus(_PADDLE, 30, 50, lambda: [arc_log(30)]),
}
FILES = st.sampled_from(["<text>", "x/2n8g/rn50_b128_fp32_1.log", "0n0g/a_b0_.log", "99n9999g/_b9999999_x"])
KINDS = ("text", "binary", "fragments", "truncated", "shuffled")


@cache
def _stored_logs() -> dict[str, tuple[str, ...]]:
    """Every stored real log (the CPU images' and, where $DLPERF_SHARED has them, the seeds'), by the format
    the registry detects."""
    found: dict[str, list[str]] = {}
    paths = sorted(CPU_LOGS.glob("*.log"))
    if REAL_LOGS.is_dir():
        paths += sorted(p for p in REAL_LOGS.rglob("*") if p.is_file() and p.suffix != ".md")
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        name = detect_format(text)
        if name is not None:
            found.setdefault(name, []).append(text)
    return {name: tuple(texts) for name, texts in found.items()}


@cache
def samples(name: str) -> tuple[str, ...]:
    """Whole logs of format ``name``: its synthetic ones, then the stored real ones."""
    return (*FUZZ[name].synthetic(), *_stored_logs().get(name, ()))


@cache
def sample_lines(name: str) -> tuple[str, ...]:
    return tuple(sorted({line for text in samples(name) for line in text.splitlines(keepends=True)}))


def texts(kind: str, name: str) -> st.SearchStrategy[str]:
    """Inputs of one kind for format ``name``."""
    if kind == "text":
        return st.text()
    if kind == "binary":
        return st.binary().flatmap(
            lambda b: st.sampled_from([b.decode("utf-8", errors="replace"), b.decode("latin-1")])
        )
    if kind == "fragments":  # the format's own vocabulary in random order
        return st.lists(st.sampled_from(FUZZ[name].pieces), max_size=80).map("".join)
    if kind == "truncated":  # a log cut anywhere, sometimes with garbage after the cut
        return st.builds(
            lambda text, where, tail: text[: int(where * len(text))] + tail.decode("utf-8", errors="replace"),
            st.sampled_from(samples(name)),
            st.floats(0, 1),
            st.binary(max_size=20),
        )
    assert kind == "shuffled"  # real lines of the format in any order and number
    return st.lists(st.sampled_from(sample_lines(name)), max_size=60).map("".join)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@SETTINGS
@given(data=st.data())
def test_parsing_never_crashes(fmt: LogFormat, kind: str, data: st.DataObject) -> None:
    corpus = FUZZ[fmt.name]
    text = data.draw(texts(kind, fmt.name), label="text")
    warmup = data.draw(st.none() | st.integers(0, corpus.max_warmup), label="warmup")
    measured = data.draw(st.none() | st.integers(1, corpus.max_measured), label="measured")
    file = data.draw(FILES, label="file")
    assert isinstance(fmt.detect(text), bool)
    parse_with(fmt, text, warmup, measured, file)  # as this format
    check_all(text, file=file, warmup=warmup, measured=measured)  # detected among all the formats


@cache
def huge_texts() -> tuple[str, ...]:
    """Lines of millions of characters, digits where numbers go, repeats of a line's start, extreme values."""
    big = 2_000_000
    ts = "DLL 2020-12-16 11:34:01.884827 - "
    pre = "[1,0]<stderr>:2020-12-16 08:02:43,201:INFO: "
    th = "I0115 10:13:05.543210 1402 keras_utils.py:145] TimeHistory: "
    return (
        "x" * big,
        "\n" * big,
        # ngc_pytorch_dllogger
        "DLL " * (big // 4),
        ts + "Epoch: 0 Iteration: " + "9" * big + "  train.loss : 1  train.total_ips : 5 img/s\n",
        ts + "Epoch: 0 Iteration: 7  train.loss : " + "9" * big + "  train.total_ips : " + "1" * big + " img/s\n",
        ts + "PARAMETER " + "batch_size : 8  " * (big // 16) + "\n",
        ts + "Summary: train.total_ips : " + "5" * big,
        param_line() + "".join(iter_line(0.1 * i, 0, i, 7.0, 1e308) for i in range(1, 30)),
        # ngc_mxnet, tf2_official_resnet
        "Epoch[" * (big // 6),
        pre + "Epoch[0] Batch [0-19]\tSpeed: " + "9" * big + " samples/sec\n",
        pre + "Epoch[0] Batch [0-" + "9" * big + "]\tSpeed: 5 samples/sec\n",
        pre + "Start with arguments Namespace(" + "batch_size=8, " * (big // 14) + "gpus=[" + "0, " * 1000 + "])\n",
        "train.total_ips\n           |" + "   96   |" * (big // 9) + "\n---\n     1     |   387.07  |\n",
        th + "9" * big + " seconds, 5 examples/second between steps 0 and 100\n",
        th + "1.0 seconds, 5 examples/second between steps 0 and " + "9" * big + "\n",
        "".join(
            th + f"1e-300 seconds, 1e308 examples/second between steps {i} and {i + 100}\n" for i in range(0, 3000, 100)
        ),
        "Using MirroredStrategy with devices (" + "'/GPU:0', " * (big // 10) + ")\n",
        mx_run(1, 32, iters=100).replace("Speed: 128.0", "Speed: 1e308") + "\r" * big,
        # mindspore_model_zoo, oneflow_cnns
        "epoch: " * (big // 7),
        "epoch: 1 step: " + "9" * big + ", loss is 1\nepoch time: 1.0 ms, per step time: 0.1 ms\n",
        "epoch: 1 step: 10, loss is " + "9" * big + "\nepoch time: " + "1" * big + " ms, per step time: 1 ms\n",
        "args_opt: Namespace(" + "batch_size=8, " * (big // 14) + ")\n",
        "epoch time: 1e308 ms, per step time: 1e-300 ms\n" * 30,
        "train: epoch 0, iter " + "9" * big + ", loss: 1, top_1: 0, top_k: 0, samples/s: 5\n",
        "train: epoch 0, iter 20, loss: 1, top_1: 0, top_k: 0, samples/s: " + "5" * big,
        "num_nodes = " + "9" * big + "\n",
        "".join(of_train(0, 20 * k, 1e308, stamp=1e308) for k in range(1, 30)),
        # mlperf_mllog
        ":::MLLOG " * (big // 9),
        ':::MLLOG {"time_ms": ' + "9" * big + ', "key": "run_start"}\n',
        ':::MLLOG {"time_ms": 1, "key": "train_samples", "value": 1' + "0" * 400 + "}\n" + mllog_log(noise=False),
        mllog_log().replace('"epoch_num": 2', '"epoch_num": 1' + "0" * big),
        # paddleclas, paddle_plsc_arcface
        "train step:1 " * (big // 13),
        "train step:1 loss: 1 " + "elapse: 1s ips: x " * (big // 18),
        "[Pass 0, train batch 1] loss 1, " * (big // 32),
        "loss 1, lr: 1, epoch: 0, step: 1, eta: " * (big // 40),
        "Pass:0 batch:1 " + "loss:1 " * (big // 7),
        "2020 INFO: a : " * (big // 15),
        "2020-12-16 18:57:37 INFO: epoch:0   train step:" + "9" * big + " loss: 1 elapse: 1s ips: 5 images/sec\n",
        "Training: 2021-09-28 11:10:24,823 - loss 1, lr: 1, epoch: 0, step: 100, eta: 1 hours, throughput: "
        + "9" * big
        + " imgs/sec\n",
        clas_log(steady(40, 0.1)).replace("ips: ", "ips: 1e308"),
    )


@pytest.mark.parametrize("fmt", [*FORMATS, None], ids=lambda f: f.name if f is not None else "detected")
def test_huge_lines_never_crash(fmt: LogFormat | None) -> None:
    for text in huge_texts():
        if fmt is None:
            check_all(text)
            continue
        assert isinstance(fmt.detect(text), bool)
        parse_with(fmt, text)
        parse_with(fmt, text, warmup=0)


def test_every_registered_format_has_a_corpus() -> None:
    """A new format gets its fragments and a synthetic log here; each has samples to cut and shuffle."""
    assert set(FUZZ) == {f.name for f in FORMATS}
    for name in FUZZ:
        assert samples(name) and sample_lines(name), name
        assert all(detect_format(text) == name for text in FUZZ[name].synthetic()), name
