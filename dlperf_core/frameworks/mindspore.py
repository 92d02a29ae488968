"""MindSpore ResNet-50 v1.5 (seed 000): model_zoo ResNet at the seed's commit in the MindSpore GPU image.

Release ``1.1.0`` (the seed's, below) has the 1.1 model zoo. The default, ``2.3.1`` (MindSpore's last GPU release;
CUDA 11.6: Ampere, not Ada or Hopper; MindSpore has no CUDA 12 GPU build), and ``2.0.0`` (CUDA 11.1) have the ResNet
``train.py`` of mindspore-ai/models (d70060f3 and r2.0: the same file), which reads a YAML config and makes a flag
of each key: the same settings go in as ``--config_path`` (dlperf's config) and keys (``--net_name``,
``--data_path``, ``--train_steps``, ...), and ``docker/mindspore/train-r2.0.py.patch`` makes it honour them
(:meth:`MindsporeResnet.models_train_args`).

The seed's changes to ``train.py`` (batch size, train steps, sink steps, fp32/fp16 dtype, dynamic loss
scale, no checkpoints) are the patch ``docker/mindspore/train.py.patch``, applied when the image is built.
1n1g runs train.py directly (the seed's ``run_standalone_pretrain_for_gpu.sh``); more GPUs run under mpirun
with ``--run_distribute=True`` (``run_distributed_pretrain_for_gpu.sh``), across nodes over the case's sshd.
TimeMonitor prints one line per sink of ``data_sink_steps`` steps; ``--tag-output`` keeps every rank's line
(the parser's device multiplier relies on all ranks' lines, see log-formats.md). The seed's window: 100
warm-up steps, 100 measured (``train_steps`` = 200).

On CPU stand-in nodes (every node ``accelerator: cpu``) the image is ``dlperf/mindspore:cpu``
(``docker/mindspore-cpu/``): MindSpore 2.10 from PyPI, MindCV's ResNet-50 and a thin ``train.py`` taking the
same flags, trained by MindSpore's own ``Model.train`` + TimeMonitor/LossMonitor on synthetic data. Same
launch shape (standalone at 1 device, else mpirun over the case's sshd, ``--tag-output``), with
``--device_target=CPU``, no dataset path, ``OMP_NUM_THREADS`` from the runtime's CPU split, and for mpirun
``MS_SCHED_HOST``/``MS_SCHED_PORT`` (node 0, the case's port): MindSpore's CPU collectives need its dynamic
cluster, whose scheduler rank 0 of the driver starts (see the recipe's README.md).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from dlperf_core.cluster.inventory import Node
from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext, fp32_env, on_cpu
from dlperf_core.frameworks.mpi import mpi_launches
from dlperf_core.frameworks.releases import DEFAULT_RELEASE, default_release, release_names
from dlperf_core.frameworks.shape import FullSize, ModelShape, as_int, flag_values, shape_against
from dlperf_core.measure.origin import Figure
from dlperf_core.model import Case, NodeLaunch, OptionValue

RESNET = "/workspace/resnet"
# the releases whose GPU image has the 1.1 model zoo (the seed's train.py.patch flags); the others the model zoo of
# mindspore-ai/models, whose train.py makes a flag of every key of dlperf's config (docker/mindspore/config/)
MODEL_ZOO_1_RELEASES = frozenset({"1.1.0"})
MODELS_CONFIG = f"{RESNET}/config/resnet50_imagenet2012_GPU_dlperf.yaml"


class MindsporeResnet(FrameworkAdapter):
    name: ClassVar[str] = "mindspore"
    models: ClassVar[frozenset[str]] = frozenset({"resnet50_v1.5"})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32", "amp"})
    log_format: ClassVar[str] = "mindspore_model_zoo"
    default_image: ClassVar[str] = default_release("mindspore").image
    cpu_image: ClassVar[str | None] = "dlperf/mindspore:cpu"
    launcher: ClassVar[Literal["per_node", "mpirun"]] = "mpirun"
    gpu_figure: ClassVar[Figure] = Figure("framework", "MindSpore's TimeMonitor in Model.train (model_zoo train.py)")
    cpu_figure: ClassVar[Figure | None] = Figure(
        "framework", "MindSpore's TimeMonitor in Model.train, started by dlperf's thin train.py"
    )
    default_batch: ClassVar[dict[str, int]] = {"fp32": 128, "amp": 256}
    default_warmup: ClassVar[int | None] = 100
    default_measured: ClassVar[int | None] = 100
    option_defaults: ClassVar[dict[str, OptionValue]] = {
        "dataset_path": "/data/imagenet/train",
        "data_sink_steps": 10,
        "release": DEFAULT_RELEASE["mindspore"],
    }
    option_choices: ClassVar[dict[str, tuple[OptionValue, ...] | None]] = {"release": release_names("mindspore")}

    def train_args(self, case: Case, cpu: bool = False) -> list[str]:
        """The model zoo's ``train.py`` flags; on CPU (the CPU image's ``train.py``) ``--device_target=CPU`` and
        no dataset path (the data is synthetic); shrink flags (``--image_size``, ...) come in ``extra_args``."""
        args = [
            "python",
            f"{RESNET}/train.py",
            "--net=resnet50",
            "--dataset=imagenet2012",
            f"--device_target={'CPU' if cpu else 'GPU'}",
            *([] if cpu else [f"--dataset_path={self.option(case, 'dataset_path')}"]),
            f"--batch_size={case.batch_size_per_device}",
            f"--train_steps={case.warmup_iterations + case.measured_iterations}",
            f"--data_sink_steps={self.option(case, 'data_sink_steps')}",
            f"--dtype={'fp16' if case.precision == 'amp' else 'fp32'}",
        ]
        if not cpu and str(self.option(case, "release")) not in MODEL_ZOO_1_RELEASES:
            return self.models_train_args(case)
        if case.total_gpus > 1:
            args.insert(3, "--run_distribute=True")
        return args + list(case.extra_args)

    def models_train_args(self, case: Case) -> list[str]:
        """MindSpore 2.x on GPUs (docker/mindspore/, mindspore-ai/models' ResNet): the same settings as the seed's,
        spelled as that train.py's config keys (``--net_name``, ``--data_path``) after dlperf's config."""
        args = [
            "python",
            f"{RESNET}/train.py",
            f"--config_path={MODELS_CONFIG}",
            "--net_name=resnet50",
            "--dataset=imagenet2012",
            "--device_target=GPU",
            f"--data_path={self.option(case, 'dataset_path')}",
            f"--batch_size={case.batch_size_per_device}",
            f"--train_steps={case.warmup_iterations + case.measured_iterations}",
            f"--data_sink_steps={self.option(case, 'data_sink_steps')}",
            f"--dtype={'fp16' if case.precision == 'amp' else 'fp32'}",
        ]
        if case.total_gpus > 1:
            args.insert(4, "--run_distribute=True")
        return args + list(case.extra_args)

    def model_shape(self, model: str, extra_args: tuple[str, ...]) -> ModelShape | None:  # noqa: ARG002 - the same flags for every model
        """The CPU driver's ``--image_size``, ``--num_classes`` and ``--base_width``: MindCV's ``base_width``,
        the bottlenecks' inner width (their convolutions have planes x base_width / 64 channels; the stem and
        the blocks' outputs keep theirs)."""
        found = flag_values(extra_args, ["--image_size", "--num_classes", "--base_width"])
        return shape_against(
            FullSize(64, 224, 1000),
            width=as_int(found.get("--base_width")),
            image_size=as_int(found.get("--image_size")),
            num_classes=as_int(found.get("--num_classes")),
            width_name="bottleneck width",
        )

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        if on_cpu(nodes):
            return self.cpu_launches(case, nodes, ctx)
        env = {"PYTHONUNBUFFERED": "1", **fp32_env(case)}
        if case.total_gpus == 1:  # standalone: no MPI at all, as the seed's standalone script
            argv = ("bash", "-c", f"cd {RESNET} && exec " + " ".join(self.train_args(case)))
            return [NodeLaunch(node=nodes[0], node_rank=0, argv=argv, env=env)]
        return mpi_launches(case, nodes, ctx, self.train_args(case), env=env, cwd=RESNET)

    def cpu_launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        """CPU stand-in nodes: one process per "GPU", standalone at 1, else under mpirun as on GPUs."""
        env = {"PYTHONUNBUFFERED": "1"}
        if ctx.cpu_threads_per_process:
            env["OMP_NUM_THREADS"] = str(ctx.cpu_threads_per_process)
        if case.total_gpus == 1:
            argv = ("bash", "-c", f"cd {RESNET} && exec " + " ".join(self.train_args(case, cpu=True)))
            return [NodeLaunch(node=nodes[0], node_rank=0, argv=argv, env=env)]
        env["MS_SCHED_HOST"] = nodes[0].reach_address  # the dynamic cluster's scheduler: on rank 0's node
        env["MS_SCHED_PORT"] = str(ctx.master_port)
        return mpi_launches(case, nodes, ctx, self.train_args(case, cpu=True), env=env, cwd=RESNET)
