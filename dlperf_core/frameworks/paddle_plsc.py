"""PaddlePaddle PLSC ArcFace (seed 004): ResNet-50 backbone, synthetic data, stops after a fixed count.

Two model names, one per size, so that a row says what was trained:

* ``arcface_resnet50`` (GPU images, the seed's model): an IResNet-50 ArcFace at the seed's size (112x112 input,
  512-d embedding, 85742 classes). In the seed's release 1.8.5 it is PLSC 1.8's ``plsc.models.resnet.ResNet50``,
  which the seed's report calls ResNet50; it is itself an IResNet-50 (insightface's LResNet50E-IR, not
  torchvision's ResNet-50): a 3x3 stride-1 stem, stages of (3, 4, 14, 3) blocks of two 3x3 convolutions with
  BN-PReLU between them and the stride on the second, a 1x1 projection shortcut, then BN, dropout, a 512-d FC
  embedding and BN. In the engine releases (the default ``3.2.0``: PaddlePaddle 3, which cannot run PLSC 1.8's
  static-graph Entry API) it is PLSC 2.4's ``IResNet50`` with its ArcFace ``MarginLoss``, the same layers (a
  PReLU per channel, no dropout in the config) at the same size, so that a release's rows compare with the
  seed's under one name and their FLOPs are those of the size trained. Whether PLSC 2.4 trains on PaddlePaddle
  3 on GPUs is unverified (nothing was run on a GPU).
* ``arcface_iresnet50`` (CPU image): PLSC 2.4's ``IResNet50`` at the CPU config's size (32x32 input, 1000
  classes unless ``-o Model.*`` overrides say otherwise).

Each image trains its own size only: planning refuses ``arcface_resnet50`` on CPU nodes and
``arcface_iresnet50`` on GPU nodes (:meth:`PaddlePlsc.refuses`), unless the suite names its own ``image:``.

``paddle.distributed.launch`` on every node at once with the cluster's ips and this node's ip, as the seed's
``run_two_node.sh <model> <batch> <dtype> <NODE_IP>``. The training entry is ``docker/paddle-plsc/train.py``
(PLSC's Entry API: dist_arcface loss, synthetic data, no test); the seed's edit of ``plsc/entry.py`` (exit
after 150 batches) is ``docker/paddle-plsc/entry.py.patch``, reading the count from ``DLPERF_MAX_ITERS``.
The seed's window: 50 warm-up of 150 iterations, 100 measured.

On CPU nodes (``accelerator: cpu``) the row trains for real with PaddlePaddle 3.3's CPU build and plsc 2.4
from PyPI (image ``dlperf/paddle:cpu``, ``docker/paddle-cpu/``): PLSC 2.4's own engine and logger
(``plsc.engine.Engine``: IResNet-50 backbone, ArcFace MarginLoss, data parallel over gloo) run by PLSC's
``tools/train.py`` with a PaddlePaddle 3 CPU shim (``/workspace/plsc/train.py``) on a small config (32x32
input, 1000 classes, synthetic image folder). Launched the same way: ``paddle.distributed.launch`` on every
node at once, PaddlePaddle 3's flags (``--master node0:port --nnodes N --rank r --nproc_per_node G``; node 0
itself names the master 127.0.0.1), one
process per "GPU"; the launcher echoes local rank 0's log, and PLSC's logger prints on global rank 0 only.
The run stops after warm-up + measured steps (``Global.max_train_step``, PLSC's own stop).
"""

from __future__ import annotations

from typing import ClassVar

from dlperf_core.cluster.inventory import Node
from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext, fp32_env, on_cpu
from dlperf_core.frameworks.releases import DEFAULT_RELEASE, default_release, release_names
from dlperf_core.frameworks.shape import FullSize, ModelShape, as_int, flag_values, overrides, shape_against
from dlperf_core.measure.origin import Figure
from dlperf_core.model import Case, NodeLaunch, OptionValue

PLSC = "/workspace/PLSC"
PLSC_CPU = "/workspace/plsc"  # docker/paddle-cpu: PLSC 2.4's train.py + the CPU config
PLSC_CPU_CONFIG = f"{PLSC_CPU}/configs/IResNet50_arcface_synthetic_cpu.yaml"
# the GPU image of an engine release (docker/paddle-plsc/, PLSC 2.4 on PaddlePaddle 3): the same train.py, a GPU config
PLSC_GPU_CONFIG = f"{PLSC_CPU}/configs/IResNet50_arcface_synthetic_gpu.yaml"
# the releases whose GPU image runs PLSC 1.8's Entry API (the seed's); the others PLSC 2.4's engine
ENTRY_RELEASES = frozenset({"1.8.5"})
ENGINE_FIGURE = Figure("framework", "PLSC 2.4's Engine and logger on PaddlePaddle 3 (GPU)")

GPU_MODEL = "arcface_resnet50"  # the seed's IResNet-50 at the seed's size: the GPU images, the seed's name
CPU_MODEL = "arcface_iresnet50"  # PLSC 2.4's IResNet50 at the CPU config's size: the CPU image
MODEL_WORDS = {
    GPU_MODEL: "the seed's IResNet-50 ArcFace at 112x112, 85742 classes",
    CPU_MODEL: "PLSC 2.4's IResNet50 at the CPU config's size",
}
# Full size of each: (embedding, input side, classes). GPU: 112x112 synthetic images (docker/paddle-plsc/
# train.py), the seed's 85742 classes; CPU: PLSC 2.4's IResNet defaults (112x112, MS1MV3's 93431 classes).
FULL_SIZE = {GPU_MODEL: FullSize(512, 112, 85742), CPU_MODEL: FullSize(512, 112, 93431)}
# What docker/paddle-cpu/configs/IResNet50_arcface_synthetic_cpu.yaml trains without overrides.
CPU_CONFIG_SIZE = FullSize(512, 32, 1000)


def paddle_launch(*flags: str) -> list[str]:
    """``python -m paddle.distributed.launch`` with the launcher's own ``flags``, its logs in /tmp/paddle-launch-log
    (the script to launch and its arguments follow)."""
    return ["python", "-m", "paddle.distributed.launch", *flags, "--log_dir=/tmp/paddle-launch-log"]


def engine_argv(
    case: Case,
    nodes: tuple[Node, ...],
    rank: int,
    ctx: LaunchContext,
    config: str,
    launcher_flags: list[str],
    overrides: list[str],
) -> tuple[str, ...]:
    """PLSC 2.4's engine under PaddlePaddle 3's launcher on node ``rank``: PLSC's train.py with ``config``, the
    case's batch and step count as ``-o`` overrides, then ``overrides`` and the suite's extra arguments. Paddle 3's
    launcher starts the rendezvous server only where ``--master``'s host is 127.0.0.1 or the node's own IP (a
    hostname never matches: "master not ready" forever), so node 0 names itself 127.0.0.1 and the others node 0's
    address; the trainers' endpoints are the nodes' IPs."""
    return (
        *paddle_launch(
            f"--master={'127.0.0.1' if rank == 0 else nodes[0].reach_address}:{ctx.master_port}",
            f"--nnodes={len(nodes)}",
            f"--rank={rank}",
            f"--nproc_per_node={case.gpus_per_node}",
            *launcher_flags,
            "--max_restart=0",
        ),
        f"{PLSC_CPU}/train.py",
        "-c",
        config,
        "-o",
        f"DataLoader.Train.sampler.batch_size={case.batch_size_per_device}",
        "-o",
        f"Global.max_train_step={case.warmup_iterations + case.measured_iterations}",
        *overrides,
        *case.extra_args,
    )


class PaddlePlsc(FrameworkAdapter):
    name: ClassVar[str] = "paddle_plsc"
    models: ClassVar[frozenset[str]] = frozenset({GPU_MODEL, CPU_MODEL})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32", "amp"})
    log_format: ClassVar[str] = "paddle_plsc_arcface"
    default_image: ClassVar[str] = default_release("paddle_plsc").image
    cpu_image: ClassVar[str | None] = "dlperf/paddle:cpu"
    cpu_precisions: ClassVar[frozenset[str] | None] = frozenset({"fp32"})  # PLSC's FP16 is a no-op on CPU
    gpu_figure: ClassVar[Figure] = Figure("framework", "PLSC's Entry and its logger (PLSC 1.8, the seed's stop patch)")
    cpu_figure: ClassVar[Figure | None] = Figure(
        "framework", "PLSC 2.4's Engine and logger, with dlperf's substitute margin_cross_entropy (no CPU kernel)"
    )
    default_batch: ClassVar[dict[str, int]] = {"fp32": 128, "amp": 128}
    default_warmup: ClassVar[int | None] = 50
    default_measured: ClassVar[int | None] = 100
    option_defaults: ClassVar[dict[str, OptionValue]] = {
        "loss_type": "dist_arcface",
        "num_classes": 85742,
        "release": DEFAULT_RELEASE["paddle_plsc"],
    }
    option_choices: ClassVar[dict[str, tuple[OptionValue, ...] | None]] = {
        "loss_type": ("dist_arcface", "dist_softmax", "arcface", "softmax"),
        "release": release_names("paddle_plsc"),
    }

    def uses_engine(self, case: Case) -> bool:
        """Whether the case's release trains with PLSC 2.4's engine on PaddlePaddle 3 (the default) rather than
        PLSC 1.8's Entry API (the seed's 1.8.5)."""
        return str(self.option(case, "release")) not in ENTRY_RELEASES

    def figure(self, case: Case, nodes: tuple[Node, ...]) -> Figure:
        """The GPU image of an engine release prints PLSC 2.4's engine lines (as the CPU image, without its
        substitute loss)."""
        if not self.uses_cpu_image(case, nodes) and self.uses_engine(case):  # a suite's image: the GPU path's
            return ENGINE_FIGURE
        return super().figure(case, nodes)

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        if on_cpu(nodes):
            return self.cpu_launches(case, nodes, ctx)
        if self.uses_engine(case):
            return self.engine_launches(case, nodes, ctx)
        ips = ",".join(n.reach_address for n in nodes)
        gpus = ",".join(str(i) for i in range(case.gpus_per_node))
        iterations = case.warmup_iterations + case.measured_iterations
        out = []
        for rank, node in enumerate(nodes):
            argv = [
                *paddle_launch(
                    f"--cluster_node_ips={ips}", f"--node_ip={node.reach_address}", f"--selected_gpus={gpus}"
                ),
                f"{PLSC}/train.py",
                "--model",
                "ResNet50",
                "--batch_size",
                str(case.batch_size_per_device),
                "--loss_type",
                str(self.option(case, "loss_type")),
                "--num_classes",
                str(self.option(case, "num_classes")),
                "--dtype",
                "fp16" if case.precision == "amp" else "fp32",
                *case.extra_args,
            ]
            env = {
                "PYTHONUNBUFFERED": "1",
                "DLPERF_MAX_ITERS": str(iterations),
                "FLAGS_cudnn_exhaustive_search": "0",
                **fp32_env(case),
            }
            out.append(NodeLaunch(node=node, node_rank=rank, argv=tuple(argv), env=env))
        return out

    def engine_launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        """GPU nodes in an engine release (PaddlePaddle 3 + PLSC 2.4, docker/paddle-plsc/): the CPU path's launch
        (:func:`engine_argv`) with the GPU config (112x112), the case's GPUs as ``--devices``, the ``num_classes``
        option as the class count and, for amp, PLSC's FP16 at level O1. Trains ``arcface_resnet50``, the seed's
        network at the seed's size."""
        overrides = ["-o", f"Model.class_num={self.option(case, 'num_classes')}"]
        if case.precision == "amp":
            overrides += ["-o", "FP16.level=O1"]
        devices = ",".join(str(i) for i in range(case.gpus_per_node))  # the container's own numbering of its GPUs
        env = {"PYTHONUNBUFFERED": "1", "FLAGS_cudnn_exhaustive_search": "0", **fp32_env(case)}
        return [
            NodeLaunch(
                node=node,
                node_rank=rank,
                argv=engine_argv(case, nodes, rank, ctx, PLSC_GPU_CONFIG, [f"--devices={devices}"], overrides),
                env=dict(env),
            )
            for rank, node in enumerate(nodes)
        ]

    def cpu_launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        """PLSC 2.4's engine on PaddlePaddle 3.3 CPU (see the module docstring): ``arcface_iresnet50``, the only
        model planning lets onto CPU nodes. fp32 only: PLSC's FP16 needs a GPU, and planning refuses another
        precision on CPU nodes (``cpu_precisions``). The loss type is PLSC 2.4's MarginLoss (ArcFace margins)
        whatever ``loss_type`` says: the ``dist_*`` variants are model parallel (NCCL), and the config's class
        count is the CPU config's (``num_classes`` is the GPU seed's 85742; shrink or change it with
        ``-o Model.class_num=N`` in extra_args)."""
        out = []
        for rank, node in enumerate(nodes):
            argv = engine_argv(case, nodes, rank, ctx, PLSC_CPU_CONFIG, [], [])
            env = {"PYTHONUNBUFFERED": "1"}
            if ctx.cpu_threads_per_process:
                env["OMP_NUM_THREADS"] = str(ctx.cpu_threads_per_process)
            out.append(NodeLaunch(node=node, node_rank=rank, argv=tuple(argv), env=env))
        return out

    def refuses(self, case: Case, nodes: tuple[Node, ...]) -> str | None:
        """The base class's refusals, then the model: the CPU image trains ``arcface_iresnet50`` only, the GPU
        images (every release) ``arcface_resnet50`` only (a suite's own ``image:`` is not second-guessed)."""
        refusal = super().refuses(case, nodes)
        if refusal or case.image:
            return refusal
        cpu = self.uses_cpu_image(case, nodes)
        trains, where, image = (CPU_MODEL if cpu else GPU_MODEL, "CPU" if cpu else "GPU", self.image(case, nodes))
        if case.model == trains:
            return None
        return (
            f"{case.key}: {self.name} on {where} nodes ({image}) trains {trains} only ({MODEL_WORDS[trains]}),"
            f" not {case.model} ({MODEL_WORDS.get(case.model, 'unknown')}): name the model {trains} there"
        )

    def model_shape(self, model: str, extra_args: tuple[str, ...]) -> ModelShape | None:
        """``arcface_iresnet50`` (the CPU image): the CPU config's 32x32 input and 1000 classes, changed by
        ``-o Model.input_image_width=``/``input_image_height=``/``class_num=``/``num_features=`` (the
        embedding), against PLSC 2.4's IResNet defaults. ``arcface_resnet50`` (the GPU images): the seed's size,
        changed by ``--num_classes`` (release 1.8.5's train.py; the last one wins over the ``num_classes`` option's,
        which comes first) or, in the engine releases, the same ``-o Model.*`` overrides; the 1.8.5 train.py has no
        flag for its 112x112 input and 512-d embedding."""
        if model == CPU_MODEL:
            found = overrides(extra_args)
            base = CPU_CONFIG_SIZE
            side = as_int(found.get("Model.input_image_width")) or base.image_size
            return shape_against(
                FULL_SIZE[CPU_MODEL],
                width=as_int(found.get("Model.num_features")) or base.width,
                image_size=side,
                image_height=as_int(found.get("Model.input_image_height")) or base.image_size,
                num_classes=as_int(found.get("Model.class_num")) or base.num_classes,
                width_name="embedding",
            )
        if model == GPU_MODEL:
            found = overrides(extra_args)
            classes = as_int(flag_values(extra_args, ["--num_classes"]).get("--num_classes"))
            width = as_int(found.get("Model.input_image_width"))
            return shape_against(
                FULL_SIZE[GPU_MODEL],
                width=as_int(found.get("Model.num_features")),
                image_size=width,
                image_height=as_int(found.get("Model.input_image_height")) or width,
                num_classes=classes or as_int(found.get("Model.class_num")),
                width_name="embedding",
            )
        return None
