"""The fabric benchmark as a case: the all-reduce bus bandwidth, nccl-tests' measurement through ``torch.distributed``
(``dlperf_core/workload/allreduce.py``), launched exactly like the PyTorch benchmarks of the same topology (one
launcher per node, one process per device, torch.distributed's launcher, the same image and containers), so it
crosses the same fabric. Its result is not a throughput: ``store_result`` keeps it in ``fabric_probes`` (bus
and algorithm bandwidth per message size), and the regression detector reads it to tell a slower fabric from a
slower framework.

A suite asks for it with ``fabric_benchmark: {...}`` (one fabric case per topology of its benchmarks, see
:class:`dlperf_core.plan.suite.FabricBenchmark`) or as a benchmark ``{framework: allreduce_probe, model: allreduce}``.
The adapter's name ``allreduce_probe`` (and so the case keys, the ``fabric_probes`` rows' ``probe_key`` and the
suites' ``framework:``) is older than the name "fabric benchmark" and is kept: it is stored.
The case's warm-up and measured iterations are the untimed and timed all-reduces per size; precision
``fp32`` sends float32 messages, ``amp`` bfloat16.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from dlperf_core.cluster.inventory import Node
from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext
from dlperf_core.frameworks.pytorch_reference import PytorchReference, torchrun_launches
from dlperf_core.measure.origin import Figure
from dlperf_core.model import Case, NodeLaunch

FABRIC_MODEL = "allreduce"


class AllreduceFabric(FrameworkAdapter):
    """The fabric benchmark's adapter (module docstring)."""

    name: ClassVar[str] = "allreduce_probe"  # stored in case keys: kept
    kind: ClassVar[Literal["benchmark", "fabric"]] = "fabric"  # the fabric benchmark's tag (FrameworkAdapter.kind)
    models: ClassVar[frozenset[str]] = frozenset({FABRIC_MODEL})
    precisions: ClassVar[frozenset[str]] = frozenset({"fp32", "amp"})
    log_format: ClassVar[str] = "allreduce_probe"  # dlperf_core.parsing.fabric (not a training-log format)
    default_image: ClassVar[str] = PytorchReference.default_image
    # never in ``results`` (fabric benchmarks go to ``fabric_probes``); dlperf's own workload prints its table
    gpu_figure: ClassVar[Figure] = Figure("dlperf", "dlperf's all-reduce probe (dlperf_core/workload/allreduce.py)")
    default_batch: ClassVar[dict[str, int]] = {"fp32": 1, "amp": 1}  # unused: the messages have their sizes
    default_warmup: ClassVar[int | None] = 5  # untimed all-reduces per size
    default_measured: ClassVar[int | None] = 20  # timed all-reduces per size

    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        command = [
            f"{ctx.workload_dir}/allreduce.py",
            "--warmup",
            str(case.warmup_iterations),
            "--iters",
            str(case.measured_iterations),
            "--dtype",
            "bfloat16" if case.precision == "amp" else "float32",
        ]
        if ctx.cpu_threads_per_process:
            command += ["--threads", str(ctx.cpu_threads_per_process)]
        command += list(case.extra_args)  # --min-bytes / --max-bytes, --device
        return torchrun_launches(case, nodes, ctx, command)
