"""Framework adapters, by name. Adding a framework = one module + one line here."""

from __future__ import annotations

from dlperf_core.frameworks.allreduce_probe import AllreduceFabric
from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext
from dlperf_core.frameworks.mindspore import MindsporeResnet
from dlperf_core.frameworks.ngc_mxnet import NgcMxnet
from dlperf_core.frameworks.ngc_pytorch import NgcPytorch
from dlperf_core.frameworks.oneflow import OneflowResnet
from dlperf_core.frameworks.paddle_plsc import PaddlePlsc
from dlperf_core.frameworks.pytorch_reference import (
    PytorchReference,
    PytorchReferenceMpi,
)
from dlperf_core.frameworks.shape import ModelShape
from dlperf_core.frameworks.synthetic import Synthetic
from dlperf_core.model import NodeLaunch

ADAPTERS: dict[str, type[FrameworkAdapter]] = {
    adapter.name: adapter
    for adapter in (
        PytorchReference,
        PytorchReferenceMpi,
        NgcPytorch,
        NgcMxnet,
        MindsporeResnet,
        OneflowResnet,
        PaddlePlsc,
        AllreduceFabric,  # not a framework: the fabric benchmark, launched like one (kind "fabric")
        Synthetic,  # not a framework: trains nothing, for measuring dlperf itself (bench/growth.py)
    )
}


def get_adapter(name: str) -> FrameworkAdapter:
    """An adapter instance for a framework name (names are validated when the suite loads)."""
    try:
        return ADAPTERS[name]()
    except KeyError:
        raise KeyError(f"unknown framework {name!r}; known: {', '.join(sorted(ADAPTERS))}") from None


__all__ = ["ADAPTERS", "FrameworkAdapter", "LaunchContext", "ModelShape", "NodeLaunch", "get_adapter"]
