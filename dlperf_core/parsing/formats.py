"""The format registry, kept as data. Adding a format = one new module exposing a ``LogFormat`` and one
line in ``FORMATS``. Detection tries the formats in this order; the first whose ``detect`` says yes wins.

A ``detect`` runs on every log of the formats after it, so it must be cheap on text it does not recognise:
a literal first (``values.find_literal``/``search_literal`` jump with memchr between occurrences of a
character rare in logs), the regex only where that literal is."""

from __future__ import annotations

from dlperf_core.parsing import dllogger, mindspore, mllog, mxnet, oneflow, paddleclas, plsc, tf2
from dlperf_core.parsing.records import LogFormat

FORMATS: tuple[LogFormat, ...] = (
    mllog.FORMAT,  # "mlperf_mllog": MLPerf Training result logs (:::MLLOG events), whatever framework lines they also hold
    dllogger.FORMAT,  # "ngc_pytorch_dllogger": NGC PyTorch DLLogger and dlperf's own workload
    mxnet.FORMAT,  # "ngc_mxnet": NGC MXNet DeepLearningExamples RN50 v1.5 / benchmark.py (Horovod), one run per GPU count
    tf2.FORMAT,  # "tf2_official_resnet": TensorFlow 2 official ResNet TimeHistory / BenchmarkMetric lines
    mindspore.FORMAT,  # "mindspore_model_zoo": MindSpore model_zoo ResNet, LossMonitor + TimeMonitor (DLPerf)
    oneflow.FORMAT,  # "oneflow_cnns": OneFlow-Benchmark Classification/cnns "train: epoch N, iter M" lines
    paddleclas.FORMAT,  # "paddleclas": PaddleClas ResNet50 (running-average per-card ips) and PaddleCV "[Pass p, train batch b]"
    plsc.FORMAT,  # "paddle_plsc_arcface": PLSC arcface_paddle (throughput / ips lines) and PLSC entry.py qps lines
)

BY_NAME: dict[str, LogFormat] = {f.name: f for f in FORMATS}


def get_format(name: str) -> LogFormat:
    """The registered format called ``name``; ValueError names the known ones otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown log format {name!r}; known: {', '.join(sorted(BY_NAME))}") from None


def detect_format(text: str) -> str | None:
    """Name of the first registered format that recognises ``text``, else None."""
    for fmt in FORMATS:
        if fmt.detect(text):
            return fmt.name
    return None
