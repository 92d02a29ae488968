"""Capturing the environment a case runs in, the same way whichever worker starts its nodes.

What decides a case's environment is its :class:`EnvironmentKey` (framework, image, how many nodes); the
environment is the probe (:data:`dlperf_core.cluster.environment.PROBE_SCRIPT`) of that image on each of those nodes,
combined (:func:`dlperf_core.cluster.environment.combine`). A probe runs once per node and image in a DAG run: a
:class:`ProbeCache` keeps its output in memory and, given a folder, next to the run's logs, so the central
``capture_environment`` task and the node tasks of node routing (one per node, each probing its own node) share
one cache and one rule. How a probe container is started is the runtime's business (``probe``: a function of
node and image); what it is (:func:`probe_spec`) is decided here.

* local runtime: no image; the probe runs on this machine with the Python that runs the workload.
* docker runtime: a one-shot container of each case image on each node, so CUDA/cuDNN/NCCL and the framework
  version are the image's; the image digest comes from the node's engine.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlperf_core.cluster.environment import PROBE_SCRIPT, Environment, capture_local, combine, parse_probe
from dlperf_core.cluster.inventory import Node
from dlperf_core.model import ContainerSpec, RunIds
from dlperf_core.run.handoff import PlannedRun, ProbeOutput

PROBE_TIMEOUT_S = 300

Probe = Callable[[Node, str], ProbeOutput]
"""Runs the environment probe of an image on a node: (node, image) -> its output and the image's digest there."""


@dataclass(frozen=True)
class EnvironmentKey:
    """What decides a case's environment: its framework, its image and how many nodes it uses."""

    framework: str
    image: str | None
    nodes: int

    def describe(self) -> str:
        return f"{self.framework}" + (f" ({self.image}, {self.nodes} node(s))" if self.image else "")


def environment_key(planned: PlannedRun) -> EnvironmentKey:
    """The local runtime has no image and every local "node" is this machine; on the docker runtime the image
    planning chose depends on the nodes (CPU nodes run the CPU image)."""
    case = planned.run.case
    if planned.image is None:
        return EnvironmentKey(case.framework, None, 1)
    return EnvironmentKey(case.framework, planned.image, case.nodes)


def probe_spec(node: Node, image: str, ids: RunIds) -> ContainerSpec:
    """The one-shot probe container of ``image`` on ``node``: the node's GPUs and InfiniBand as a case gets
    them, on the host network (stand-in nodes: docker's default bridge, with the node's hostname), nothing
    mounted, labelled with the DAG run (cleanup finds it) and the node."""
    host = node.network == "host"
    return ContainerSpec(
        name=f"dlperf-probe-{ids.short}-{node.name}-{uuid.uuid4().hex[:8]}",
        image=image,
        command=("sh", "-c", PROBE_SCRIPT),
        environment={"DLPERF_PYTHON": "python3"},
        labels={**ids.labels, "dlperf.probe": node.name},
        network="host" if host else "bridge",
        hostname=None if host else node.container_hostname,
        gpus=node.accelerator == "nvidia",
        devices=("/dev/infiniband",) if node.infiniband else (),
        ipc_host=False,
    )


class ProbeCache:
    """The probe of each (node, image) once per DAG run: in memory, and in ``folder`` when given (a node task of
    node routing runs in a process of its own for every case run)."""

    def __init__(self, probe: Probe, folder: Path | None = None) -> None:
        self._probe = probe
        self._folder = folder
        self._known: dict[tuple[str, str], ProbeOutput] = {}

    def _file(self, node: Node, image: str) -> Path | None:
        if self._folder is None:
            return None
        return self._folder / f"{node.name}-{hashlib.sha1(image.encode()).hexdigest()[:12]}.json"

    def get(self, node: Node, image: str) -> ProbeOutput:
        key = (node.name, image)
        if key in self._known:
            return self._known[key]
        path = self._file(node, image)
        if path is not None and path.exists():
            found = ProbeOutput(**json.loads(path.read_text()))
        else:
            found = self._probe(node, image)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({"output": found.output, "digest": found.digest}))
        self._known[key] = found
        return found


def probe_folder(log_root: Path, ids: RunIds) -> Path:
    """Where a DAG run's probes are kept (beside its logs)."""
    return log_root / ".probes" / ids.short


def environment_of(key: EnvironmentKey, probes: Sequence[ProbeOutput]) -> Environment:
    """The environment of a docker case from its nodes' probes (one per node, in rank order)."""
    digests = list(dict.fromkeys(p.digest for p in probes if p.digest))
    return combine(
        [parse_probe(p.output) for p in probes],
        framework=key.framework,
        image=key.image,
        image_digest=",".join(digests) or None,
    )


def capture(planned: PlannedRun, cache: ProbeCache | None, local_probe: Callable[[], str]) -> Environment:
    """The environment of ``planned``: its image probed on each of its nodes (docker; ``cache``), or this
    machine (local runtime; ``local_probe`` gives the probe's output)."""
    key = environment_key(planned)
    if key.image is None or cache is None:
        return capture_local(key.framework, local_probe())
    return environment_of(key, [cache.get(node, key.image) for node in planned.nodes[: key.nodes]])


def describe(environment: Environment) -> str:
    """One line for the task log: what was found, and what was not."""
    gpus = f"{environment.gpu_count} x {environment.gpu_model}" if environment.gpu_count else "no GPU"
    found = (
        f"{gpus}, driver {environment.driver_version or '-'}, CUDA {environment.cuda_version or '-'}, "
        f"{environment.framework} {environment.framework_version or '-'}, "
        f"hosts {','.join(environment.hostnames)}"
    )
    return found + (f"; missing: {'; '.join(environment.missing)}" if environment.missing else "")
