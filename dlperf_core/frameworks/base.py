"""The one interface every framework adapter implements: launch commands, container specs, log format.

An adapter is pure: given a case, the nodes it runs on and where things live on those nodes, it returns the
exact command and environment for every node. Runtimes (local processes, Docker containers) execute them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from dlperf_core.container import ContainerSpec, container_spec_for
from dlperf_core.inventory import Node
from dlperf_core.plan import Case


@dataclass(frozen=True)
class LaunchContext:
    """Where things are on the nodes of one case run, as the runtime sees them."""

    python: str  # interpreter on the node: "python3" in a container, sys.executable locally
    workload_dir: str  # folder holding dlperf's reference workload on the node
    master_port: int = 29500
    cpu_threads_per_process: int | None = None  # set for CPU stand-in nodes sharing one machine


@dataclass(frozen=True)
class NodeLaunch:
    """What to start on one node: argv and extra environment."""

    node: Node
    node_rank: int
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


class FrameworkAdapter(ABC):
    """A framework benchmark: models, precisions, image, per-node launch, log format."""

    name: ClassVar[str]
    models: ClassVar[frozenset[str]]
    precisions: ClassVar[frozenset[str]]
    log_format: ClassVar[str]  # name of the parser format in dlperf_core.parsing
    default_image: ClassVar[str]
    shm_size: ClassVar[str | None] = None

    @abstractmethod
    def launches(self, case: Case, nodes: tuple[Node, ...], ctx: LaunchContext) -> list[NodeLaunch]:
        """The command on every node of ``case``; node 0 is the rendezvous master."""

    def image(self, case: Case) -> str:
        return case.image or self.default_image

    def container_specs(
        self, case: Case, launches: list[NodeLaunch], *, run_label: str, labels: dict[str, str]
    ) -> list[ContainerSpec]:
        """One container spec per node launch, following what each node supports."""
        return [
            container_spec_for(
                launch.node,
                name=f"{run_label}-n{launch.node_rank}",
                image=self.image(case),
                command=launch.argv,
                environment=launch.env,
                labels={**labels, "dlperf.node": launch.node.name, "dlperf.node_rank": str(launch.node_rank)},
                shm_size=self.shm_size,
            )
            for launch in launches
        ]

    def parse_window(self, case: Case) -> tuple[int, int | None]:
        """(warm-up, measured) iterations the parser uses for this case's logs."""
        return case.warmup_iterations, case.measured_iterations
