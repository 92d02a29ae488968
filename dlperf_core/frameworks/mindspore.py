"""MindSpore ResNet-50 v1.5 (seed 000): model_zoo ResNet at the seed's commit in the MindSpore GPU image.

The seed's changes to ``train.py`` (batch size, train steps, sink steps, fp32/fp16 dtype, dynamic loss
scale, no checkpoints) are the patch ``docker/mindspore/train.py.patch``, applied when the image is built.
1n1g runs train.py directly (the seed's ``run_standalone_pretrain_for_gpu.sh``); more GPUs run under mpirun
with ``--run_distribute=True`` (``run_distributed_pretrain_for_gpu.sh``), across nodes over the case's sshd.
TimeMonitor prints one line per sink of ``data_sink_steps`` steps; ``--tag-output`` keeps every rank's line
(the parser's device multiplier relies on all ranks' lines, see log-formats.md). The seed's window: 100
warm-up steps, 100 measured (``train_steps`` = 200).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext, NodeLaunch
from dlperf_core.frameworks.mpi import mpi_launches
from dlperf_core.inventory import Node
from dlperf_core.plan import Case

RESNET = "/workspace/resnet"


class MindsporeResnet(FrameworkAdapter):
    name: ClassVar[str] = "mindspore"
    models: ClassVar[frozenset[str]] = frozenset({"resnet50_v1.5"})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32", "amp"})
    log_format: ClassVar[str] = "mindspore_model_zoo"
    default_image: ClassVar[str] = "dlperf/mindspore:1.1.0"
    launcher: ClassVar[Literal["per_node", "mpirun"]] = "mpirun"
    default_batch: ClassVar[dict[str, int]] = {"fp32": 128, "amp": 256}
    default_warmup: ClassVar[int | None] = 100
    default_measured: ClassVar[int | None] = 100
    option_defaults: ClassVar[dict[str, Any]] = {
        "dataset_path": "/data/imagenet/train",
        "data_sink_steps": 10,
    }

    def train_args(self, case: Case) -> list[str]:
        args = [
            "python", f"{RESNET}/train.py",
            "--net=resnet50",
            "--dataset=imagenet2012",
            "--device_target=GPU",
            f"--dataset_path={self.option(case, 'dataset_path')}",
            f"--batch_size={case.batch_size_per_device}",
            f"--train_steps={case.warmup_iterations + case.measured_iterations}",
            f"--data_sink_steps={self.option(case, 'data_sink_steps')}",
            f"--dtype={'fp16' if case.precision == 'amp' else 'fp32'}",
        ]
        if case.total_gpus > 1:
            args.insert(3, "--run_distribute=True")
        return args + list(case.extra_args)

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        env = {"PYTHONUNBUFFERED": "1"}
        if case.total_gpus == 1:  # standalone: no MPI at all, as the seed's standalone script
            argv = ("bash", "-c", f"cd {RESNET} && exec " + " ".join(self.train_args(case)))
            return [NodeLaunch(node=nodes[0], node_rank=0, argv=argv, env=env)]
        return mpi_launches(case, nodes, ctx, self.train_args(case), env=env, cwd=RESNET)
