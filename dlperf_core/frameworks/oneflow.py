"""OneFlow ResNet-50 v1.5 (seed 003): OneFlow-Benchmark ``Classification/cnns`` in a OneFlow GPU image.

Release ``0.1.8`` (the seed's, below) runs OneFlow-Benchmark's own script. The default, ``1.0.0`` (CUDA 12.2),
cannot: that script is written for OneFlow's legacy API. Its image (docker/oneflow/) runs dlperf's driver, the CPU
image's (below), patched for CUDA while the image is built, launched as on CPU nodes (``oneflow.distributed.launch``
on every node, one process per GPU, synthetic data); ``--use_fp16`` there is ``flow.autocast``.

One ``of_cnn_train_val.py`` per node, all started at once, each given every node's ip (``--node_ips``), as
the seed's ``launch_all.sh`` / ``local_run.sh`` did over ssh. ``num_examples`` = nodes x GPUs x batch x
iterations, so one epoch is exactly the window; loss and samples/s are printed every 20 iterations and the
first print is discarded (the seed's rule), so warm-up is 20 and measured 180 of the seed's 200 iterations.
Without ``data_dir`` OneFlow-Benchmark trains on synthetic data. The seed also reported GPU memory per run:
the docker runtime samples nvidia-smi on nvidia nodes while a case runs (``gpu_memory_peak_mb``).

On CPU stand-in nodes (``dlperf/oneflow:cpu``, docker/oneflow-cpu/): OneFlow 0.9.0 from PyPI trains
flowvision's ResNet-50 for real, eager, one process per "GPU" started on every node at once by
``python3 -m oneflow.distributed.launch`` (gradients all-reduced by OneFlow's DistributedDataParallel over
the network), with dlperf's thin ``of_cnn_train_val.py`` in place of OneFlow-Benchmark's (same flags, same
log lines, printed by that driver; synthetic data). Loss and samples/s are printed every
gcd(warm-up, measured) iterations (every iteration without warm-up) so that the window's ends are printed.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import ClassVar

from dlperf_core.cluster.inventory import Node
from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext, fp32_env, on_cpu, rendezvous_flags
from dlperf_core.frameworks.releases import DEFAULT_RELEASE, default_release, release_names
from dlperf_core.frameworks.shape import FullSize, ModelShape, as_int, flag_values, shape_against
from dlperf_core.measure.origin import Figure
from dlperf_core.model import Case, NodeLaunch, OptionValue

CNNS = "/workspace/cnns"
PRINT_EVERY = 20
# the releases whose GPU image runs OneFlow-Benchmark's own of_cnn_train_val.py (the others: dlperf's driver)
BENCHMARK_RELEASES = frozenset({"0.1.8"})
DRIVER_FIGURE = Figure(
    "dlperf", "dlperf's thin of_cnn_train_val.py printing OneFlow-Benchmark's lines (OneFlow 1.0 trains on the GPU)"
)


def cnn_flags(case: Case, nodes: tuple[Node, ...], print_every: int) -> list[str]:
    """``of_cnn_train_val.py``'s flags of the seed, GPU and CPU alike (after the data flags)."""
    return [
        f"--num_nodes={case.nodes}",
        f"--gpu_num_per_node={case.gpus_per_node}",
        "--model_update=momentum",
        "--learning_rate=0.001",
        f"--loss_print_every_n_iter={print_every}",
        f"--batch_size_per_device={case.batch_size_per_device}",
        "--val_batch_size_per_device=125",
        "--num_epoch=1",
        "--log_dir=/tmp/oneflow-log",
        f"--node_ips={','.join(n.reach_address for n in nodes)}",
        "--model=resnet50",
    ]


class OneflowResnet(FrameworkAdapter):
    name: ClassVar[str] = "oneflow"
    models: ClassVar[frozenset[str]] = frozenset({"resnet50_v1.5"})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32", "amp"})
    log_format: ClassVar[str] = "oneflow_cnns"
    default_image: ClassVar[str] = default_release("oneflow").image
    cpu_image: ClassVar[str | None] = "dlperf/oneflow:cpu"
    cpu_precisions: ClassVar[frozenset[str] | None] = frozenset({"fp32"})  # OneFlow's AMP needs a GPU
    gpu_figure: ClassVar[Figure] = Figure("framework", "OneFlow-Benchmark's of_cnn_train_val.py (its loss printer)")
    cpu_figure: ClassVar[Figure | None] = Figure(
        "dlperf", "dlperf's thin of_cnn_train_val.py printing OneFlow-Benchmark's lines (OneFlow 0.9 trains)"
    )
    default_batch: ClassVar[dict[str, int]] = {"fp32": 128, "amp": 256}
    default_warmup: ClassVar[int | None] = PRINT_EVERY
    default_measured: ClassVar[int | None] = 180
    option_defaults: ClassVar[dict[str, OptionValue]] = {
        "data_dir": "/data/ofrecord",
        "data_part_num": 44,
        "release": DEFAULT_RELEASE["oneflow"],
    }
    option_choices: ClassVar[dict[str, tuple[OptionValue, ...] | None]] = {"release": release_names("oneflow")}

    def model_shape(self, model: str, extra_args: tuple[str, ...]) -> ModelShape | None:  # noqa: ARG002 - the same flags for every model
        """The CPU driver's ``--image_size``, ``--num_classes`` and ``--width_per_group``: flowvision's
        ``width_per_group``, the bottlenecks' inner width (planes x width_per_group / 64 channels)."""
        found = flag_values(extra_args, ["--image_size", "--num_classes", "--width_per_group"])
        return shape_against(
            FullSize(64, 224, 1000),
            width=as_int(found.get("--width_per_group")),
            image_size=as_int(found.get("--image_size")),
            num_classes=as_int(found.get("--num_classes")),
            width_name="bottleneck width",
        )

    def uses_driver(self, case: Case) -> bool:
        """Whether the case's release trains with dlperf's driver (OneFlow 1.0: OneFlow-Benchmark's script needs
        the legacy API) rather than OneFlow-Benchmark's own of_cnn_train_val.py (the seed's 0.1.8)."""
        return str(self.option(case, "release")) not in BENCHMARK_RELEASES

    def figure(self, case: Case, nodes: tuple[Node, ...]) -> Figure:
        """The GPU image of a driver release prints dlperf's driver's lines, as the CPU image does."""
        if not self.uses_cpu_image(case, nodes) and self.uses_driver(case):  # a suite's image: the GPU path's
            return DRIVER_FIGURE
        return super().figure(case, nodes)

    def refuses(self, case: Case, nodes: tuple[Node, ...]) -> str | None:
        """The base class's refusals, then real data in a driver release on GPUs: dlperf's driver trains on
        synthetic data only (it has no OFRecord reader), so a suite that names ``data_dir`` there is refused."""
        refusal = super().refuses(case, nodes)
        if refusal or case.image or on_cpu(nodes) or not self.uses_driver(case):
            return refusal
        if dict(case.options).get("data_dir"):
            return (
                f"{case.key}: oneflow {self.option(case, 'release')} trains with dlperf's driver on synthetic data"
                " only (no OFRecord reader): leave data_dir out, or choose release 0.1.8"
            )
        return None

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        if on_cpu(nodes):
            return self.cpu_launches(case, nodes, ctx)
        if self.uses_driver(case):
            return self.driver_launches(case, nodes, ctx)
        iterations = case.warmup_iterations + case.measured_iterations
        args = [
            "python3",
            f"{CNNS}/of_cnn_train_val.py",
            f"--num_examples={case.total_gpus * case.batch_size_per_device * iterations}",
        ]
        if self.option(case, "data_dir"):
            args += [
                f"--train_data_dir={self.option(case, 'data_dir')}/train",
                f"--train_data_part_num={self.option(case, 'data_part_num')}",
            ]
        args += cnn_flags(case, nodes, PRINT_EVERY)
        if case.precision == "amp":
            args.append("--use_fp16")
        args += list(case.extra_args)
        # OneFlow asks cuBLAS for TF32 itself (CUBLAS_TF32_TENSOR_OP_MATH) unless its own switch says 0
        env = {"PYTHONUNBUFFERED": "1", **fp32_env(case, ONEFLOW_EP_CUDA_ENABLE_TF32_EXECUTION="0")}
        return [NodeLaunch(node=node, node_rank=rank, argv=tuple(args), env=env) for rank, node in enumerate(nodes)]

    def driver_launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        """GPU nodes in a driver release (OneFlow 1.0): the CPU path's launch (``oneflow.distributed.launch`` on
        every node, one process per GPU, synthetic data, a print every gcd(warm-up, measured) iterations) with
        the driver built for CUDA (docker/oneflow/) and ``--use_fp16`` for AMP."""
        launches = self.cpu_launches(case, nodes, ctx)
        # OneFlow asks cuBLAS for TF32 itself (CUBLAS_TF32_TENSOR_OP_MATH) unless its own switch says 0
        env = {"PYTHONUNBUFFERED": "1", **fp32_env(case, ONEFLOW_EP_CUDA_ENABLE_TF32_EXECUTION="0")}
        return [replace(launch, env={**launch.env, **env}) for launch in launches]

    def cpu_launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        """CPU nodes: ``oneflow.distributed.launch`` on every node (gpus_per_node processes each), all at
        once, rendezvous at node 0; the seed's flags without the OFRecord data (synthetic data), printing
        every gcd(warm-up, measured) iterations; the suite's ``extra_args`` (e.g. --image_size 64) last."""
        iterations = case.warmup_iterations + case.measured_iterations
        # no warm-up: print every iteration (the window then starts at the first print)
        every = math.gcd(case.warmup_iterations, case.measured_iterations) if case.warmup_iterations else 1
        train = [
            f"{CNNS}/of_cnn_train_val.py",
            f"--num_examples={case.total_gpus * case.batch_size_per_device * iterations}",
            *cnn_flags(case, nodes, every),
        ]
        if case.precision == "amp":
            train.append("--use_fp16")  # the CPU driver refuses it (no AMP on CPU): a failed case, not fp32
        train += list(case.extra_args)
        env = {"PYTHONUNBUFFERED": "1"}
        if ctx.cpu_threads_per_process:
            env["OMP_NUM_THREADS"] = str(ctx.cpu_threads_per_process)
        return [
            NodeLaunch(
                node=node,
                node_rank=rank,
                argv=(
                    "python3",
                    "-m",
                    "oneflow.distributed.launch",
                    "--nproc_per_node",
                    str(case.gpus_per_node),
                    "--nnodes",
                    str(case.nodes),
                    *rendezvous_flags(rank, nodes, ctx),
                    *train,
                ),
                env=env,
            )
            for rank, node in enumerate(nodes)
        ]
