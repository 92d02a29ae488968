"""PaddlePaddle PLSC ArcFace (seed 004): ResNet-50 backbone, synthetic data, stops after a fixed count.

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

from typing import Any, ClassVar

from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext, on_cpu
from dlperf_core.inventory import Node
from dlperf_core.model import Case, NodeLaunch
from dlperf_core.origin import Figure

PLSC = "/workspace/PLSC"
PLSC_CPU = "/workspace/plsc"  # docker/paddle-cpu: PLSC 2.4's train.py + the CPU config
PLSC_CPU_CONFIG = f"{PLSC_CPU}/configs/IResNet50_arcface_synthetic_cpu.yaml"


def paddle_launch(*flags: str) -> list[str]:
    """``python -m paddle.distributed.launch`` with the launcher's own ``flags``, its logs in /tmp/paddle-launch-log
    (the script to launch and its arguments follow)."""
    return ["python", "-m", "paddle.distributed.launch", *flags, "--log_dir=/tmp/paddle-launch-log"]


class PaddlePlsc(FrameworkAdapter):
    name: ClassVar[str] = "paddle_plsc"
    models: ClassVar[frozenset[str]] = frozenset({"arcface_resnet50"})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32", "amp"})
    log_format: ClassVar[str] = "paddle_plsc_arcface"
    default_image: ClassVar[str] = "dlperf/paddle-plsc:1.8.5"
    cpu_image: ClassVar[str | None] = "dlperf/paddle:cpu"
    cpu_precisions: ClassVar[frozenset[str] | None] = frozenset({"fp32"})  # PLSC's FP16 is a no-op on CPU
    gpu_figure: ClassVar[Figure] = Figure("framework", "PLSC's Entry and its logger (PLSC 1.8, the seed's stop patch)")
    cpu_figure: ClassVar[Figure | None] = Figure(
        "framework", "PLSC 2.4's Engine and logger, with dlperf's substitute margin_cross_entropy (no CPU kernel)"
    )
    default_batch: ClassVar[dict[str, int]] = {"fp32": 128, "amp": 128}
    default_warmup: ClassVar[int | None] = 50
    default_measured: ClassVar[int | None] = 100
    option_defaults: ClassVar[dict[str, Any]] = {"loss_type": "dist_arcface", "num_classes": 85742}
    option_choices: ClassVar[dict[str, tuple[Any, ...] | None]] = {
        "loss_type": ("dist_arcface", "dist_softmax", "arcface", "softmax"),
    }

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        if on_cpu(nodes):
            return self.cpu_launches(case, nodes, ctx)
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
            env = {"PYTHONUNBUFFERED": "1", "DLPERF_MAX_ITERS": str(iterations), "FLAGS_cudnn_exhaustive_search": "0"}
            out.append(NodeLaunch(node=node, node_rank=rank, argv=tuple(argv), env=env))
        return out

    def cpu_launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        """PLSC 2.4's engine on PaddlePaddle 3.3 CPU (see the module docstring). fp32 only: PLSC's FP16 needs
        a GPU, and planning refuses another precision on CPU nodes (``cpu_precisions``). The loss type is PLSC 2.4's MarginLoss (ArcFace margins) whatever ``loss_type`` says: the
        ``dist_*`` variants are model parallel (NCCL), and the config's class count is the CPU config's
        (``num_classes`` is the GPU seed's 85742; shrink or change it with ``-o Model.class_num=N`` in
        extra_args)."""
        iterations = case.warmup_iterations + case.measured_iterations
        out = []
        for rank, node in enumerate(nodes):
            # Paddle 3's launcher starts the rendezvous server only where --master's host is 127.0.0.1 or
            # the node's own IP (a hostname never matches: "master not ready" forever), so node 0 names
            # itself 127.0.0.1 and the others node 0's address; the trainers' endpoints are the nodes' IPs.
            argv = [
                *paddle_launch(
                    f"--master={'127.0.0.1' if rank == 0 else nodes[0].reach_address}:{ctx.master_port}",
                    f"--nnodes={len(nodes)}",
                    f"--rank={rank}",
                    f"--nproc_per_node={case.gpus_per_node}",
                    "--max_restart=0",
                ),
                f"{PLSC_CPU}/train.py",
                "-c",
                PLSC_CPU_CONFIG,
                "-o",
                f"DataLoader.Train.sampler.batch_size={case.batch_size_per_device}",
                "-o",
                f"Global.max_train_step={iterations}",
                *case.extra_args,
            ]
            env = {"PYTHONUNBUFFERED": "1"}
            if ctx.cpu_threads_per_process:
                env["OMP_NUM_THREADS"] = str(ctx.cpu_threads_per_process)
            out.append(NodeLaunch(node=node, node_rank=rank, argv=tuple(argv), env=env))
        return out
