"""Capturing the environment a case runs in, the same way whichever worker starts its nodes.

What decides a case's environment is its :class:`EnvironmentKey` (framework, image, how many nodes, how many GPUs
on each); the environment is the probe (:data:`dlperf_core.cluster.environment.PROBE_SCRIPT`) of that image on each of
those nodes with the case's GPUs there (and no other), combined (:func:`dlperf_core.cluster.environment.combine`),
naming those GPUs (``Environment.gpu_ids``). A probe runs once per node and image in a DAG run: a
:class:`ProbeCache` keeps its output in memory and, given a folder, next to the run's logs, so the central
``capture_environment`` task and the node tasks of node routing (one per node, each probing its own node) share
one cache and one rule. How a probe container is started is the runtime's business (``probe``: a function of
node and image); what it is (:func:`probe_spec`) is decided here.

* local runtime: no image; the probe runs on this machine with the Python that runs the workload, and keeps the
  case's GPUs (its ``CUDA_VISIBLE_DEVICES``) of those it lists.
* docker runtime: a one-shot container of each case image on each node, so CUDA/cuDNN/NCCL and the framework
  version are the image's; the image digest comes from the node's engine.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dlperf_core.cluster.container import gpu_ids_for
from dlperf_core.cluster.environment import (
    PROBE_SCRIPT,
    Environment,
    combine,
    only_gpus,
    parse_probe,
    settings_text,
)
from dlperf_core.cluster.inventory import Node
from dlperf_core.model import ContainerSpec, RunIds, cluster_env
from dlperf_core.run.handoff import PlannedRun, ProbeOutput
from dlperf_core.run.launch_spec import scrub_env

PROBE_TIMEOUT_S = 300

Probe = Callable[[Node, str, tuple[str, ...]], ProbeOutput]
"""Runs the environment probe of an image on a node with some of its GPUs: (node, image, GPU ids) -> its output and
the image's digest there."""


@dataclass(frozen=True)
class EnvironmentKey:
    """What decides a case's environment: its framework, its image, how many nodes it uses and how many GPUs
    (devices) on each (which decides which GPUs: :meth:`Node.case_gpu_ids`)."""

    framework: str
    image: str | None
    nodes: int
    gpus_per_node: int = 0  # 0: a key made before the case's GPUs decided (read as: all the node's)
    settings: str | None = None  # the cluster's settings on its nodes (settings_text of settings_of; None: none)

    def describe(self) -> str:
        return f"{self.framework}" + (f" ({self.image}, {self.nodes} node(s))" if self.image else "")


def environment_key(planned: PlannedRun) -> EnvironmentKey:
    """The local runtime has no image and every local "node" is this machine; on the docker runtime the image
    planning chose depends on the nodes (CPU nodes run the CPU image)."""
    case = planned.run.case
    settings = settings_text(settings_of(planned))  # cases with other settings are in another environment
    if planned.image is None:
        return EnvironmentKey(case.framework, None, 1, case.gpus_per_node, settings)
    return EnvironmentKey(case.framework, planned.image, case.nodes, case.gpus_per_node, settings)


def case_gpu_ids(key: EnvironmentKey, nodes: Sequence[Node]) -> tuple[tuple[str, ...], ...]:
    """The GPUs a case of ``key`` gets on each of ``nodes`` (:func:`~dlperf_core.cluster.container.gpu_ids_for`;
    none on a CPU node), as the inventory names them."""
    return tuple(gpu_ids_for(node, key.gpus_per_node or None) for node in nodes[: key.nodes])


def probe_spec(node: Node, image: str, ids: RunIds, gpu_ids: tuple[str, ...] | None = None) -> ContainerSpec:
    """The one-shot probe container of ``image`` on ``node``: the case's GPUs (``gpu_ids``; None: every GPU the
    inventory names) and the node's InfiniBand as a case gets them, on the host network (stand-in nodes: docker's
    default bridge, with the node's hostname), nothing mounted, labelled with the DAG run (cleanup finds it) and
    the node."""
    host = node.network == "host"
    return ContainerSpec(
        name=f"dlperf-probe-{ids.short}-{node.name}-{uuid.uuid4().hex[:8]}",
        image=image,
        command=("sh", "-c", PROBE_SCRIPT),
        environment={"DLPERF_PYTHON": "python3"},
        labels={**ids.labels, "dlperf.probe": node.name},
        network="host" if host else "bridge",
        hostname=None if host else node.container_hostname,
        gpu_ids=gpu_ids_for(node) if gpu_ids is None else gpu_ids,
        devices=("/dev/infiniband",) if node.infiniband else (),
        ipc_host=False,
    )


class ProbeCache:
    """The probe of each (node, image, GPUs) once per DAG run: in memory, and in ``folder`` when given (a node task
    of node routing runs in a process of its own for every case run)."""

    def __init__(self, probe: Probe, folder: Path | None = None) -> None:
        self._probe = probe
        self._folder = folder
        self._known: dict[tuple[str, str, tuple[str, ...]], ProbeOutput] = {}

    def _file(self, node: Node, image: str, gpu_ids: tuple[str, ...]) -> Path | None:
        if self._folder is None:
            return None
        digest = hashlib.sha1("\n".join((image, *gpu_ids)).encode()).hexdigest()[:12]
        return self._folder / f"{node.name}-{digest}.json"

    def get(self, node: Node, image: str, gpu_ids: tuple[str, ...] = ()) -> ProbeOutput:
        """The probe of ``image`` on ``node`` with the GPUs ``gpu_ids`` (a case's, as the inventory names them)."""
        key = (node.name, image, gpu_ids)
        if key in self._known:
            return self._known[key]
        path = self._file(node, image, gpu_ids)
        if path is not None and path.exists():
            found = ProbeOutput(**json.loads(path.read_text()))
        else:
            found = self._probe(node, image, gpu_ids)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({"output": found.output, "digest": found.digest}))
        self._known[key] = found
        return found


def probe_folder(log_root: Path, ids: RunIds) -> Path:
    """Where a DAG run's probes are kept (beside its logs)."""
    return log_root / ".probes" / ids.short


def environment_of(
    key: EnvironmentKey, probes: Sequence[ProbeOutput], gpu_ids: tuple[tuple[str, ...], ...] = ()
) -> Environment:
    """The environment of a docker case from its nodes' probes (one per node, in rank order), each run with the
    case's GPUs on its node (``gpu_ids``, named in the environment)."""
    digests = list(dict.fromkeys(p.digest for p in probes if p.digest))
    return combine(
        [parse_probe(p.output) for p in probes],
        framework=key.framework,
        image=key.image,
        image_digest=",".join(digests) or None,
        gpu_ids=gpu_ids,
    )


def capture(planned: PlannedRun, cache: ProbeCache | None, local_probe: Callable[[], str]) -> Environment:
    """The environment of ``planned``: its image probed on each of its nodes with the case's GPUs there (docker;
    ``cache``), or this machine (local runtime; ``local_probe`` gives the probe's output), of whose GPUs it keeps
    the case's."""
    key = environment_key(planned)
    gpus = case_gpu_ids(key, planned.nodes)
    if key.image is None or cache is None:
        here = tuple(dict.fromkeys(g for ids in gpus for g in ids))  # every local "node" is this machine
        local = combine([only_gpus(parse_probe(local_probe()), here)], framework=key.framework, gpu_ids=(here,))
        return with_settings(local, planned)
    nodes = planned.nodes[: key.nodes]
    found = environment_of(key, [cache.get(node, key.image, ids) for node, ids in zip(nodes, gpus)], gpus)
    return with_settings(found, planned)


def settings_of(planned: PlannedRun) -> dict[str, dict[str, str]]:
    """The cluster's settings of ``planned`` per node (its nodes' ``env``, resolved for the case at planning), as the
    launch spec records them: without secret-looking variables or URL passwords; nodes without any left out."""
    nodes = planned.nodes[: planned.run.case.nodes] or planned.nodes
    kept = {node.name: scrub_env(cluster_env(planned.run.case, node))[0] for node in nodes}
    return {name: env for name, env in kept.items() if env}


def with_settings(environment: Environment, planned: PlannedRun) -> Environment:
    """``environment`` with the cluster's settings of ``planned`` (:func:`settings_of`): part of the environment, so
    that a change of them is an environment change (a new row, named by the regression detector)."""
    return replace(environment, settings=settings_of(planned))


def describe(environment: Environment) -> str:
    """One line for the task log: what was found, and what was not."""
    gpus = f"{environment.gpu_count} x {environment.gpu_model}" if environment.gpu_count else "no GPU"
    found = (
        f"{gpus}, driver {environment.driver_version or '-'}, CUDA {environment.cuda_version or '-'}, "
        f"{environment.framework} {environment.framework_version or '-'}, "
        f"hosts {','.join(environment.hostnames)}"
    )
    return found + (f"; missing: {'; '.join(environment.missing)}" if environment.missing else "")
