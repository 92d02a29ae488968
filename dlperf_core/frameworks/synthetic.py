"""The synthetic workload as a framework (``framework: synthetic``, ``model: synthetic``): a process per node
that trains nothing and prints NGC PyTorch's DLLogger lines (``dlperf_core/workload/synthetic.py``, standard
library only). It exists to measure dlperf and Airflow around a case (``bench/growth.py``: a matrix of a
thousand case runs, a case over eight nodes) without a framework's start-up in the figures; it never appears in
a suite of ``suites/`` and its figures are no one's throughput.
"""

from __future__ import annotations

from typing import ClassVar

from dlperf_core.cluster.inventory import Node
from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext
from dlperf_core.frameworks.pytorch_reference import PytorchReference
from dlperf_core.measure.origin import Figure
from dlperf_core.model import Case, NodeLaunch

SYNTHETIC = "synthetic"


class Synthetic(FrameworkAdapter):
    name: ClassVar[str] = SYNTHETIC
    models: ClassVar[frozenset[str]] = frozenset({SYNTHETIC})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32"})
    log_format: ClassVar[str] = "ngc_pytorch_dllogger"
    default_image: ClassVar[str] = PytorchReference.default_image  # any image with python3 and the workload folder
    gpu_figure: ClassVar[Figure] = Figure(
        "dlperf", "dlperf's synthetic workload (dlperf_core/workload/synthetic.py): sleeps, trains nothing"
    )
    default_batch: ClassVar[dict[str, int]] = {"fp32": 1}
    default_warmup: ClassVar[int | None] = 2
    default_measured: ClassVar[int | None] = 10

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        """One plain ``python3 synthetic.py`` per node, all started at once (no launcher, no rendezvous)."""
        return [
            NodeLaunch(
                node=node,
                node_rank=rank,
                argv=(
                    ctx.python,
                    f"{ctx.workload_dir}/synthetic.py",
                    "--batch-size",
                    str(case.batch_size_per_device),
                    "--world-size",
                    str(case.nodes * case.gpus_per_node),
                    "--node-rank",
                    str(rank),
                    "--warmup-iterations",
                    str(case.warmup_iterations),
                    "--iterations",
                    str(case.measured_iterations),
                    *case.extra_args,
                ),
                env={"PYTHONUNBUFFERED": "1"},
            )
            for rank, node in enumerate(nodes)
        ]
