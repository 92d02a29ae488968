"""dlperf's own PyTorch ResNet-50 v1.5 workload (dlperf_core/workload), launched by torchrun.

One torchrun per node (gloo on CPU, nccl on GPU); rank 0 prints the NGC PyTorch DLLogger format, so the
same parser serves this workload and the NGC images.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from dlperf_core.cluster.inventory import Node
from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext, rendezvous_flags
from dlperf_core.frameworks.mpi import mpi_launches
from dlperf_core.frameworks.shape import FullSize, ModelShape, as_int, flag_values, shape_against
from dlperf_core.measure.origin import Figure
from dlperf_core.model import Case, NodeLaunch, OptionValue
from dlperf_core.workload.llm_config import SIZES as LLM_SIZES

LLM_PREFIX = "llm_"  # models llm_tiny .. llm_1b: the Llama-style decoder (train_llm.py --size tiny ...)
RESNET50_FULL = FullSize(64, 224, 1000)  # ResNet-50 v1.5: width 64, 224x224, 1000 classes


def reference_resnet_shape(extra_args: tuple[str, ...]) -> ModelShape | None:
    """The shape of dlperf's ResNet-50 v1.5 (``train.py``) launched with ``extra_args``: ``--image-size``,
    ``--width`` (the base width: every layer's channels scale with it) and ``--num-classes``."""
    found = flag_values(extra_args, ["--image-size", "--width", "--num-classes"])
    return shape_against(
        RESNET50_FULL,
        width=as_int(found.get("--width")),
        image_size=as_int(found.get("--image-size")),
        num_classes=as_int(found.get("--num-classes")),
    )


def torchrun_launches(case: Case, nodes: tuple[Node, ...], ctx: LaunchContext, script: list[str]) -> list[NodeLaunch]:
    """One ``torch.distributed.run`` per node, all started at once, ``gpus_per_node`` processes each, node 0
    the rendezvous master: how dlperf's PyTorch workloads (and the fabric benchmark) are launched."""
    out = []
    for rank, node in enumerate(nodes):
        argv = [
            ctx.python,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            str(case.nodes),
            "--nproc_per_node",
            str(case.gpus_per_node),
            *rendezvous_flags(rank, nodes, ctx),
            *script,
        ]
        out.append(NodeLaunch(node=node, node_rank=rank, argv=tuple(argv), env={"PYTHONUNBUFFERED": "1"}))
    return out


class PytorchReference(FrameworkAdapter):
    name: ClassVar[str] = "pytorch_reference"
    models: ClassVar[frozenset[str]] = frozenset({"resnet50_v1.5", *(LLM_PREFIX + size for size in LLM_SIZES)})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32", "tf32", "amp"})
    log_format: ClassVar[str] = "ngc_pytorch_dllogger"
    default_image: ClassVar[str] = "dlperf/pytorch-reference:cpu"
    supports_compile: ClassVar[bool] = True  # train.py --compile
    gpu_figure: ClassVar[Figure] = Figure(
        "dlperf", "dlperf's reference workload (dlperf_core/workload) printing NGC PyTorch's DLLogger lines"
    )

    default_warmup: ClassVar[int | None] = 20
    default_measured: ClassVar[int | None] = 100
    default_batch: ClassVar[dict[str, int]] = {"fp32": 128, "tf32": 128, "amp": 256}
    # AMP's autocast dtype (fp16: the seeds' AMP, with a loss scaler; bf16: the default) and fp16's loss scale
    # (static when given, else dynamic): each makes its own case (+amp_dtype=fp16, +static_loss_scale=128).
    option_defaults: ClassVar[dict[str, OptionValue]] = {"amp_dtype": "bf16", "static_loss_scale": None}
    option_choices: ClassVar[dict[str, tuple[OptionValue, ...] | None]] = {"amp_dtype": ("bf16", "fp16")}

    @staticmethod
    def train_args(case: Case, ctx: LaunchContext) -> list[str]:
        """The workload script and its arguments (the same under torchrun and mpirun): ``train.py`` for
        ResNet-50, ``train_llm.py --size S`` for the transformer (batch: sequences per device)."""
        if case.model.startswith(LLM_PREFIX):
            script = [f"{ctx.workload_dir}/train_llm.py", "--size", case.model[len(LLM_PREFIX) :]]
        else:
            script = [f"{ctx.workload_dir}/train.py"]
        train = [
            *script,
            "--batch-size",
            str(case.batch_size_per_device),
            "--precision",
            case.precision,
            "--warmup-iterations",
            str(case.warmup_iterations),
            "--iterations",
            str(case.measured_iterations),
        ]
        options = dict(case.options)
        if "amp_dtype" in options:
            train += ["--amp-dtype", str(options["amp_dtype"])]
        if options.get("static_loss_scale") is not None:
            train += ["--static-loss-scale", str(options["static_loss_scale"])]
        if case.compile:
            train.append("--compile")
        if ctx.cpu_threads_per_process:
            train += ["--threads", str(ctx.cpu_threads_per_process)]
        return train + list(case.extra_args)

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        return torchrun_launches(case, nodes, ctx, self.train_args(case, ctx))

    def model_shape(self, model: str, extra_args: tuple[str, ...]) -> ModelShape | None:
        """ResNet-50 v1.5: ``--image-size``, ``--width``, ``--num-classes``; the transformers: None (their size
        is the model name)."""
        return None if model.startswith(LLM_PREFIX) else reference_resnet_shape(extra_args)


class PytorchReferenceMpi(PytorchReference):
    """The same workload launched the way the MPI frameworks are: sshd on nodes 1..N-1, mpirun on node 0.

    It exercises dlperf's mpirun path (per-case keys, sshd, ordering, teardown) on CPU stand-in nodes, where
    the MPI frameworks' own images cannot run; train.py maps Open MPI's rank variables to torch's.
    """

    name: ClassVar[str] = "pytorch_reference_mpi"
    launcher: ClassVar[Literal["per_node", "mpirun"]] = "mpirun"

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        env = {
            "MASTER_ADDR": nodes[0].reach_address,
            "MASTER_PORT": str(ctx.master_port),
            "PYTHONUNBUFFERED": "1",
        }
        return mpi_launches(case, nodes, ctx, [ctx.python, *self.train_args(case, ctx)], env=env)
