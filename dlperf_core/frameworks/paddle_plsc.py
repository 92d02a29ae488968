"""PaddlePaddle PLSC ArcFace (seed 004): ResNet-50 backbone, synthetic data, stops after a fixed count.

``paddle.distributed.launch`` on every node at once with the cluster's ips and this node's ip, as the seed's
``run_two_node.sh <model> <batch> <dtype> <NODE_IP>``. The training entry is ``docker/paddle-plsc/train.py``
(PLSC's Entry API: dist_arcface loss, synthetic data, no test); the seed's edit of ``plsc/entry.py`` (exit
after 150 batches) is ``docker/paddle-plsc/entry.py.patch``, reading the count from ``DLPERF_MAX_ITERS``.
The seed's window: 50 warm-up of 150 iterations, 100 measured.
"""

from __future__ import annotations

from typing import Any, ClassVar

from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext, NodeLaunch
from dlperf_core.inventory import Node
from dlperf_core.plan import Case

PLSC = "/workspace/PLSC"


class PaddlePlsc(FrameworkAdapter):
    name: ClassVar[str] = "paddle_plsc"
    models: ClassVar[frozenset[str]] = frozenset({"arcface_resnet50"})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32", "amp"})
    log_format: ClassVar[str] = "paddle_plsc_arcface"
    default_image: ClassVar[str] = "dlperf/paddle-plsc:1.8.5"
    default_batch: ClassVar[dict[str, int]] = {"fp32": 128, "amp": 128}
    default_warmup: ClassVar[int | None] = 50
    default_measured: ClassVar[int | None] = 100
    option_defaults: ClassVar[dict[str, Any]] = {"loss_type": "dist_arcface", "num_classes": 85742}
    option_choices: ClassVar[dict[str, tuple[Any, ...] | None]] = {
        "loss_type": ("dist_arcface", "dist_softmax", "arcface", "softmax"),
    }

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        ips = ",".join(n.reach_address for n in nodes)
        gpus = ",".join(str(i) for i in range(case.gpus_per_node))
        iterations = case.warmup_iterations + case.measured_iterations
        out = []
        for rank, node in enumerate(nodes):
            argv = [
                "python", "-m", "paddle.distributed.launch",
                f"--cluster_node_ips={ips}",
                f"--node_ip={node.reach_address}",
                f"--selected_gpus={gpus}",
                "--log_dir=/tmp/paddle-launch-log",
                f"{PLSC}/train.py",
                "--model", "ResNet50",
                "--batch_size", str(case.batch_size_per_device),
                "--loss_type", str(self.option(case, "loss_type")),
                "--num_classes", str(self.option(case, "num_classes")),
                "--dtype", "fp16" if case.precision == "amp" else "fp32",
                *case.extra_args,
            ]
            env = {"PYTHONUNBUFFERED": "1", "DLPERF_MAX_ITERS": str(iterations), "FLAGS_cudnn_exhaustive_search": "0"}
            out.append(NodeLaunch(node=node, node_rank=rank, argv=tuple(argv), env=env))
        return out
