"""The exact commands and containers of a suite's cases, as text (``dlperf commands``, the golden files).

A dry run of :func:`dlperf_core.run.jobs.build_job` for the docker runtime: what every node would run, with
which container settings, for repeat 0 of every case. Per-case SSH keys are listed by path only.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.model import CaseJob, CaseRun, RunIds
from dlperf_core.plan.cases import PlanFilters, expand_cases
from dlperf_core.plan.suite import Suite
from dlperf_core.run.jobs import build_job

if TYPE_CHECKING:
    from dlperf_core.cluster.gpu_sampling import GpuSamples
    from dlperf_core.cluster.sshkeys import ContainerFile

GOLDEN_IDS = RunIds(dag_id="dlperf_benchmark", run_id="commands")


@dataclass(frozen=True)
class DryRunDocker:
    """The docker runtime's view of the nodes, without a Docker Engine (nothing is executed)."""

    name: str = "docker"
    python: str = "python3"
    workload_dir: str = "/opt/dlperf/workload"

    # The Runtime protocol's methods. A dry run executes and starts nothing: the three that would are not implemented.
    def host_cores(self, node: Node) -> None:  # noqa: ARG002 - the protocol's signature
        """Not known without the engine: a dry run shows commands without a CPU placement."""
        return

    def submit(self, job: CaseJob) -> NoReturn:  # pragma: no cover - never executes
        raise NotImplementedError("a dry run executes nothing")

    def execute(self, job: CaseJob) -> NoReturn:  # pragma: no cover - never executes
        raise NotImplementedError("a dry run executes nothing")

    def start_node(  # pragma: no cover - never starts
        self, job: CaseJob, i: int, files: tuple[ContainerFile, ...] | None = None, samples: GpuSamples | None = None
    ) -> NoReturn:
        raise NotImplementedError("a dry run starts nothing")

    def cleanup(self, labels: dict[str, str]) -> list[str]:  # noqa: ARG002 - the protocol's signature  # pragma: no cover
        return []


def describe_job(job: CaseJob) -> list[str]:
    """Node by node: role, container settings, environment and the command line."""
    lines = []
    for launch, spec in zip(job.launches, job.containers):
        lines.append(f"## node {launch.node_rank}: {launch.node.name} ({launch.role})")
        flags = [f"image={spec.image}", f"network={spec.network}"]
        if spec.hostname:
            flags.append(f"hostname={spec.hostname}")
        if spec.gpu_ids:
            flags.append(f"gpus={','.join(spec.gpu_ids)}")
        flags += [f"device={d}" for d in spec.devices]
        if spec.ipc_host:
            flags.append("ipc=host")
        elif spec.shm_size:
            flags.append(f"shm={spec.shm_size}")
        flags += [f"cap_add={c}" for c in spec.cap_add]
        if spec.memlock_unlimited:
            flags.append("ulimit=memlock=-1")
        flags += [f"mount={m.source}:{m.target}:{'ro' if m.read_only else 'rw'}" for m in spec.mounts]
        flags += [f"file={f.path} (made per case run)" for f in spec.files]
        if spec.cpu_quota:
            flags.append(f"cpus={spec.cpu_quota:g}")
        lines.append("container: " + " ".join(flags))
        if launch.env:
            lines.append("env: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(launch.env.items())))
        lines.append("$ " + shlex.join(launch.argv))
    return lines


def suite_commands(suite: Suite, inventory: Inventory, filters: PlanFilters = PlanFilters()) -> str:
    """Every case of ``suite`` (repeat 0) on ``inventory``, as text."""
    out: list[str] = []
    cases = expand_cases(suite, filters, inventory)
    for index, (case, _) in enumerate(cases):
        out.append(f"# {case.key}  (warm-up {case.warmup_iterations}, measured {case.measured_iterations})")
        if case.nodes > len(inventory.nodes):
            out.append(f"(needs {case.nodes} nodes; inventory {inventory.name!r} has {len(inventory.nodes)})")
            out.append("")
            continue
        job = build_job(
            CaseRun(case, 0, index, len(cases)),
            inventory,
            DryRunDocker(),
            GOLDEN_IDS,
            timeout_s=suite.timeout_s,
            watchdog_s=suite.watchdog_s,
        )
        out += describe_job(job)
        out.append("")
    return "\n".join(out)
