"""NGC MXNet ResNet-50 v1.5 (seed 001): DeepLearningExamples' RN50v1.5 in the NGC MXNet image, Horovod.

One rank per GPU through mpirun with ``--kv-store horovod`` (what DLE's ``runner`` does), across nodes over
the case's sshd. FP32 trains in float32/NCHW, AMP in float16/NHWC as DLE's benchmark configs do. The seed
ran DLE's ``benchmark.py`` (``-b`` 128/256, 1 and 8 GPUs, ``--benchmark-iters 500``, display every 20
batches); here each topology is its own case with warm-up + measured = benchmark iterations.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext, NodeLaunch
from dlperf_core.frameworks.mpi import mpi_launches
from dlperf_core.inventory import Node
from dlperf_core.plan import Case

RN50 = "/workspace/rn50"


class NgcMxnet(FrameworkAdapter):
    name: ClassVar[str] = "ngc_mxnet"
    models: ClassVar[frozenset[str]] = frozenset({"resnet50_v1.5"})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32", "amp"})
    log_format: ClassVar[str] = "ngc_mxnet"
    default_image: ClassVar[str] = "dlperf/ngc-mxnet:19.07"
    launcher: ClassVar[Literal["per_node", "mpirun"]] = "mpirun"
    default_batch: ClassVar[dict[str, int]] = {"fp32": 128, "amp": 256}
    default_warmup: ClassVar[int | None] = 100
    default_measured: ClassVar[int | None] = 400
    option_defaults: ClassVar[dict[str, Any]] = {
        "data_backend": "dali-gpu",
        "data_root": "/data/imagenet/train-val-recordio-passthrough",
        "display_batches": 20,
    }
    option_choices: ClassVar[dict[str, tuple[Any, ...] | None]] = {
        "data_backend": ("dali-gpu", "dali-cpu", "mxnet", "synthetic"),
    }

    def train_args(self, case: Case) -> list[str]:
        root = self.option(case, "data_root")
        half = case.precision == "amp"
        layout = "NHWC" if half else "NCHW"
        args = [
            "python", f"{RN50}/train.py",
            "--arch", "resnetv15",
            "--num-layers", "50",
            "--mode", "train",
            "--kv-store", "horovod",
            "--gpus", "0",
            "--batch-size", str(case.batch_size_per_device),
            "--dtype", "float16" if half else "float32",
            "--input-layout", "NCHW",
            "--conv-layout", layout,
            "--batchnorm-layout", layout,
            "--pooling-layout", layout,
            "--num-epochs", "1",
            "--benchmark-iters", str(case.warmup_iterations + case.measured_iterations),
            "--disp-batches", str(self.option(case, "display_batches")),
            "--no-metrics",
            "--data-backend", self.option(case, "data_backend"),
        ]
        if self.option(case, "data_backend") != "synthetic":
            args += [
                "--data-train", f"{root}/train.rec",
                "--data-train-idx", f"{root}/train.idx",
                "--data-val", f"{root}/val.rec",
                "--data-val-idx", f"{root}/val.idx",
            ]
        return args + list(case.extra_args)

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        env = {"PYTHONUNBUFFERED": "1", "MXNET_UPDATE_ON_KVSTORE": "0", "NCCL_DEBUG": "WARN"}
        return mpi_launches(case, nodes, ctx, self.train_args(case), env=env, cwd=RN50)
