"""Tests of the format registry and detection (dlperf_core.parsing.formats): each format's ``detect`` is
specific (it never claims another format's log, synthetic or real), and formats registered side by side are
detected and parsed through the API."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf_core.parsing import api, detect_format, dllogger, formats, mindspore, mxnet, oneflow, paddleclas, plsc, tf2
from dlperf_core.parsing.api import parse_log
from dlperf_core.parsing.records import LogFormat
from helpers import SHARED  # seeds and reallogs, $DLPERF_SHARED
from parsing_checks import parse_as as parse
from parsing_logs import (
    MS_ARGS,
    OF_SEED_LINES,
    arc_log,
    clas_log,
    cv_log,
    ms_log,
    mx_bench,
    of_header,
    of_log,
    steady,
    tf_log,
)

REAL = SHARED / "reallogs"
MS, OF = mindspore.NAME, oneflow.NAME
CLAS, PLSC = paddleclas.NAME, plsc.NAME
MX, TF = mxnet.NAME, tf2.NAME
MX_DIR = REAL / "ngc_mxnet"
OTHERS = [REAL / "ngc_pytorch", MX_DIR]


# ==================================================================================== PaddleClas, PLSC
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


# ==================================================================================== MindSpore, OneFlow
def _registry(monkeypatch: pytest.MonkeyPatch) -> None:
    fmts: tuple[LogFormat, ...] = (dllogger.FORMAT, mindspore.FORMAT, oneflow.FORMAT)
    monkeypatch.setattr(formats, "FORMATS", fmts)
    monkeypatch.setattr(formats, "BY_NAME", {f.name: f for f in fmts})


def test_detection_and_api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _registry(monkeypatch)
    assert formats.detect_format(ms_log()) == MS
    assert formats.detect_format(MS_ARGS.format(batch=1, sink=1, device_num=1, dtype="fp32", dist=False, steps=1)) == MS
    assert formats.detect_format(of_log([1.0, 2.0])) == OF and formats.detect_format(OF_SEED_LINES) == OF
    assert formats.detect_format(of_header()) == OF
    # a lone LossMonitor line is not enough (tests/core/parsing/test_api.py expects it unrecognised)
    assert formats.detect_format("epoch: 1 step: 10, loss is 6.906126\n") is None
    for other in (
        "DLL 2020-12-16 11:34:01.884827 - Epoch: 0 Iteration: 1  train.loss : 6.98  train.total_ips : 34.97 img/s\n",
        "2020-12-16 18:57:37 INFO: epoch:0   train step:20   loss:  7.9820 top1: 0.0000 ips: 343.06 images/sec.\n",
        "[1,0]<stderr>:2020-12-16 08:02:43,201:INFO: Epoch[0] Batch [40-59]\tSpeed: 391.99 samples/sec\t\n",
    ):
        assert not mindspore.detect(other) and not oneflow.detect(other)
    (run,) = api.parse_log(ms_log(nodes=1, per_node=2, rate=710.68))
    assert run.format == MS and run.window == (101, 200) and run.gpus == 2
    path = tmp_path / "2n8g" / "rn50_b128_fp32_1.log"
    path.parent.mkdir()
    path.write_text(ms_log(nodes=2, per_node=8, rate=5483.22, logged="rank0"))
    (run,) = api.parse_file(path)
    assert run.gpus == 16 and run.throughput == pytest.approx(5483.22, rel=1e-3)
    (run,) = api.parse_log(of_header() + OF_SEED_LINES, format=OF, warmup=0)
    assert run.window == (21, 200)  # nothing printed before iteration 20 starts the clock


OTHER_REAL_LOGS = sorted(p for p in REAL.rglob("*") if p.is_file() and p.suffix != ".md") if REAL.is_dir() else []


@pytest.mark.skipif(not OTHER_REAL_LOGS, reason=f"no real logs at {REAL}")
def test_real_logs_of_other_formats_are_not_claimed() -> None:
    """Detectors are specific: none of the stored real logs (NGC PyTorch/MXNet, Paddle) is taken."""
    for path in OTHER_REAL_LOGS:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert not mindspore.detect(text) and not oneflow.detect(text), path
        for fmt in (MS, OF):  # and parsing them as ours fails cleanly
            for run in parse(text, fmt):
                assert run.status == "failed"


# ==================================================================================== NGC MXNet, TF2
@pytest.mark.skipif(not MX_DIR.is_dir(), reason=f"no real logs at {MX_DIR}")
def test_detection_is_specific() -> None:
    dll = (
        "DLL 2020-12-16 11:34:01.884827 - Epoch: 0 Iteration: 1  train.loss : 6.98774  train.total_ips : 34.97 img/s\n"
    )
    assert not mxnet.detect(dll) and not tf2.detect(dll)
    assert not tf2.detect((MX_DIR / "mxnet_gpu1_gpu8_fp32_bs96.txt").read_text(encoding="utf-8"))
    assert not mxnet.detect(tf_log()) and not mxnet.detect(tf_log(legacy=True))
    assert detect_format(tf_log()) == TF and detect_format(mx_bench()) == MX
    ngc = REAL / "ngc_pytorch"
    for path in sorted(ngc.glob("*.txt")) if ngc.is_dir() else []:
        text = path.read_text(encoding="utf-8")
        assert not mxnet.detect(text) and not tf2.detect(text), path.name
