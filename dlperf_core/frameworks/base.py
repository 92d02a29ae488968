"""The one interface every framework adapter implements: launch commands, container specs, log format.

An adapter is pure: given a case, the nodes it runs on and where things live on those nodes, it returns the
exact command and environment for every node. Runtimes (local processes, Docker containers) execute them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from dlperf_core.cluster.container import container_spec_for
from dlperf_core.cluster.inventory import Node
from dlperf_core.frameworks.releases import Release, release_named
from dlperf_core.frameworks.shape import ModelShape
from dlperf_core.measure.origin import Figure, FigureOrigin
from dlperf_core.model import Case, ContainerSpec, NodeLaunch, OptionValue


@dataclass(frozen=True)
class LaunchContext:
    """Where things are on the nodes of one case run, as the runtime sees them."""

    python: str  # interpreter on the node: "python3" in a container, sys.executable locally
    workload_dir: str  # folder holding dlperf's reference workload on the node
    master_port: int = 29500
    cpu_threads_per_process: int | None = None  # set for CPU stand-in nodes sharing one machine
    ssh_port: int = 2222  # port of the per-case sshd in mpirun containers (not the host's sshd)
    ssh_dir: str = "/etc/dlperf-ssh"  # where the per-case keys are put in mpirun containers


MIN_COMPILE_WARMUP = 3
"""Fewest warm-up iterations of a compiled case: the first compiles forward and backward, a guard failure
may recompile on the second; the workload fails a run that still compiles inside the measured window."""


def on_cpu(nodes: tuple[Node, ...]) -> bool:
    """True when the case runs on CPU stand-in nodes only (``accelerator: cpu``)."""
    return bool(nodes) and all(node.accelerator == "cpu" for node in nodes)


TF32_OFF = {"NVIDIA_TF32_OVERRIDE": "0"}
"""NVIDIA's switch that keeps cuBLAS and cuDNN from computing float32 matmuls and convolutions in TF32 on Ampere and
later (docs/metrics.md, "fp32 means fp32"), whatever the framework asks of them."""


def fp32_env(case: Case, **own: str) -> dict[str, str]:
    """The variables that make an ``fp32`` case compute in float32 on every GPU: :data:`TF32_OFF` and the
    framework's ``own`` switches; nothing for another precision (AMP, or ``tf32`` itself)."""
    return {**TF32_OFF, **own} if case.precision == "fp32" else {}


def rendezvous_flags(rank: int, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[str]:
    """The node rank and rendezvous master (node 0) flags of torchrun-style launchers (``torch.distributed.run``,
    ``oneflow.distributed.launch``), for the launcher on node ``rank``."""
    return ["--node_rank", str(rank), "--master_addr", nodes[0].reach_address, "--master_port", str(ctx.master_port)]


class FrameworkAdapter(ABC):
    """A framework benchmark: models, precisions, image, per-node launch, log format."""

    name: ClassVar[str]
    # "benchmark": a training run measured in samples/s (rows of ``results``); "fabric": the fabric benchmark, a
    # measurement of the cluster itself launched the same way (the all-reduce bus bandwidth: rows of
    # ``fabric_probes``).
    kind: ClassVar[Literal["benchmark", "fabric"]] = "benchmark"
    models: ClassVar[frozenset[str]]
    precisions: ClassVar[frozenset[str]]
    log_format: ClassVar[str]  # name of the parser format in dlperf_core.parsing
    default_image: ClassVar[str]
    # The image for CPU nodes (every node of the case ``accelerator: cpu``): the framework's CPU build from
    # PyPI, trained for real at a small size (docker/<framework>-cpu/). None: the GPU image everywhere.
    cpu_image: ClassVar[str | None] = None
    # The precisions the CPU image trains (None: every one of ``precisions``). Another precision on CPU nodes
    # is refused when the suite is planned, before anything runs (see :meth:`refuses`).
    cpu_precisions: ClassVar[frozenset[str] | None] = None
    # Who prints the lines the parser reads the throughput from (dlperf_core.measure.origin): on the GPU image (and a
    # suite's own ``image:``), and on the CPU image (None: as on the GPU image). Confirm against the image
    # recipes (docker/<framework>/, docker/<framework>-cpu/README.md) before changing one.
    gpu_figure: ClassVar[Figure]
    cpu_figure: ClassVar[Figure | None] = None
    # Whether the adapter's workload has a torch.compile mode (``compile: true`` in a suite).
    supports_compile: ClassVar[bool] = False
    shm_size: ClassVar[str | None] = None
    # "per_node": one launcher per node, all started at once (torchrun, paddle.distributed.launch, OneFlow);
    # "mpirun": sshd in the containers of nodes 1..N-1, then mpirun on node 0 (keys made per case run).
    launcher: ClassVar[Literal["per_node", "mpirun"]] = "per_node"
    # The seed's settings, used when the suite does not set them.
    default_batch: ClassVar[dict[str, int]] = {}
    default_warmup: ClassVar[int | None] = None
    default_measured: ClassVar[int | None] = None
    # Adapter options a suite may set (``options: {name: value}``), with their defaults and allowed values
    # (None: any value of the default's type).
    option_defaults: ClassVar[dict[str, OptionValue]] = {}
    option_choices: ClassVar[dict[str, tuple[OptionValue, ...] | None]] = {}

    def option(self, case: Case, name: str) -> OptionValue:
        """The value of adapter option ``name`` for ``case`` (the suite's, else the adapter default)."""
        return dict(case.options).get(name, self.option_defaults[name])

    @classmethod
    def check_options(cls, options: Mapping[str, OptionValue]) -> list[str]:
        """Problems with a suite's ``options`` for this adapter (empty when they are fine)."""
        problems = []
        for key, value in options.items():
            if key not in cls.option_defaults:
                known = ", ".join(sorted(cls.option_defaults)) or "none"
                problems.append(f"{cls.name} has no option {key!r} (known: {known})")
                continue
            choices = cls.option_choices.get(key)
            default = cls.option_defaults[key]
            if choices is not None and value not in choices:
                problems.append(f"option {key}={value!r} is not one of {', '.join(map(str, choices))}")
            elif choices is None and default is not None and type(value) is not type(default):
                problems.append(f"option {key}={value!r} should be a {type(default).__name__}")
        return problems

    @abstractmethod
    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        """The command on every node of ``case``; node 0 is the rendezvous master."""

    def uses_cpu_image(self, case: Case, nodes: tuple[Node, ...]) -> bool:
        """Whether ``case`` on ``nodes`` runs in the adapter's CPU image (no suite ``image:``, CPU nodes only)."""
        return not case.image and self.cpu_image is not None and on_cpu(nodes)

    def release(self, case: Case) -> Release | None:
        """The release whose GPU image ``case`` trains in (the ``release`` option, else the adapter's default);
        None for an adapter without a release catalog."""
        if "release" not in self.option_defaults:
            return None
        return release_named(self.name, str(self.option(case, "release")))

    def image(self, case: Case, nodes: tuple[Node, ...] = ()) -> str:
        """The suite's image, else the CPU image on CPU nodes (when the adapter has one), else the GPU image of the
        case's release (the adapter's ``default_image`` without a release catalog)."""
        if case.image:
            return case.image
        if self.uses_cpu_image(case, nodes):
            return self.cpu_image or self.default_image  # (uses_cpu_image: cpu_image is set)
        release = self.release(case)
        return release.image if release is not None else self.default_image

    def figure(self, case: Case, nodes: tuple[Node, ...]) -> Figure:
        """Where the throughput lines of ``case`` on ``nodes`` come from: the CPU image's answer in the CPU
        image, else the GPU image's (a suite's own ``image:`` gets the GPU path's answer)."""
        if self.cpu_figure is not None and self.uses_cpu_image(case, nodes):
            return self.cpu_figure
        return self.gpu_figure

    def figure_origin(self, case: Case, nodes: tuple[Node, ...]) -> FigureOrigin:
        """``framework`` (the framework's own code prints the lines the parser reads) or ``dlperf`` (a dlperf
        driver or workload prints them in the seed's format) for ``case`` on ``nodes``."""
        return self.figure(case, nodes).origin

    def figure_source(self, case: Case, nodes: tuple[Node, ...]) -> str:
        """Who prints the figure of ``case`` on ``nodes``, in one line (e.g. "MindSpore's TimeMonitor in
        Model.train")."""
        return self.figure(case, nodes).source

    def container_specs(
        self, case: Case, launches: list[NodeLaunch], *, run_label: str, labels: dict[str, str]
    ) -> list[ContainerSpec]:
        """One container spec per node launch, following what each node supports; on nvidia nodes with the case's
        GPUs only (``case.gpus_per_node`` of them: :func:`~dlperf_core.cluster.container.container_spec_for`)."""
        return [
            container_spec_for(
                launch.node,
                name=f"{run_label}-n{launch.node_rank}",
                image=self.image(case, tuple(launch.node for launch in launches)),
                command=launch.argv,
                environment=launch.env,
                labels={**labels, "dlperf.node": launch.node.name, "dlperf.node_rank": str(launch.node_rank)},
                shm_size=self.shm_size,
                gpus=case.gpus_per_node,
            )
            for launch in launches
        ]

    def refuses(self, case: Case, nodes: tuple[Node, ...]) -> str | None:
        """Why ``case`` cannot run on ``nodes`` with this adapter's image, else None (checked at planning).

        Here only the CPU image has limits: a precision it cannot train (e.g. AMP on MXNet's CPU build) would
        otherwise fail at run time or, worse, measure fp32 under another name. An adapter may add its own
        (``paddle_plsc``: each of its images trains one of its models). A suite's own ``image:`` is the user's
        choice and is not second-guessed."""
        if case.compile and case.warmup_iterations < MIN_COMPILE_WARMUP:
            return (
                f"{case.key}: torch.compile needs at least {MIN_COMPILE_WARMUP} warm-up iterations (it has"
                f" {case.warmup_iterations}) to keep compilation out of the measured window"
            )
        if not self.uses_cpu_image(case, nodes):
            return None
        allowed = self.cpu_precisions
        if allowed is not None and case.precision not in allowed:
            return (
                f"{case.key}: {self.name} on CPU nodes ({self.cpu_image}) trains {', '.join(sorted(allowed))} only,"
                f" not {case.precision} (run it on accelerator: nvidia nodes, or leave {case.precision} out)"
            )
        return None

    def model_shape(self, model: str, extra_args: tuple[str, ...]) -> ModelShape | None:  # noqa: ARG002 - the default knows no flags
        """How ``model`` launched with ``extra_args`` differs from the full-size model (smaller images, fewer
        classes, narrower layers), read from the flags this adapter's training program takes; None when
        nothing differs, or where the adapter knows no such flags. Pure: for reports."""
        return None

    def parse_window(self, case: Case) -> tuple[int, int | None]:
        """(warm-up, measured) iterations the parser uses for this case's logs."""
        return case.warmup_iterations, case.measured_iterations
