"""The ``capture_environment`` step: probe the environment every case will run in, store each distinct
one once, and tag every planned case run with its ``environment_id`` (store_result links the results).

* local runtime: the probe runs on this machine (the worker), with the Python that runs the workload.
* docker runtime: the probe runs in a one-shot container of each case image on each node, started from a
  ``ContainerSpec`` through the node's Docker connection as the cases are (``docker_runtime``), so
  CUDA/cuDNN/NCCL and the framework version are the image's; the image digest comes from the node's engine.

Capturing never fails the run: a probe that cannot run (no engine, image missing, timeout) leaves the
cases it concerns without an environment and says why in the task log. On a machine without GPUs
the environment records what exists and lists what does not (``environments.missing``).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from dlperf_core.environment import PROBE_SCRIPT, Environment, NodeProbe, capture_local, combine, parse_probe
from dlperf_core.frameworks import get_adapter
from dlperf_core.handoff import Plan, PlannedRun
from dlperf_core.inventory import Inventory, Node, load_inventory
from dlperf_core.model import ContainerSpec, RunIds
from dlperf_core.storage import ResultStore, default_db_url

log = logging.getLogger("dlperf")

PROBE_TIMEOUT_S = 300


@dataclass(frozen=True)
class EnvironmentKey:
    """What decides a case's environment: its framework, its image and how many nodes it uses."""

    framework: str
    image: str | None
    nodes: int


def environment_key(planned: PlannedRun, inventory: Inventory | None) -> EnvironmentKey:
    """``inventory`` is None on the local runtime: every local "node" is this machine, and there is no
    image; on the docker runtime the image depends on the nodes (CPU nodes run the CPU image)."""
    case = planned.run.case
    if inventory is None:
        return EnvironmentKey(case.framework, None, 1)
    image = get_adapter(case.framework).image(case, inventory.first(case.nodes))
    return EnvironmentKey(case.framework, image, case.nodes)


# --------------------------------------------------------------------------- docker probe


def _digest(client, image: str) -> str | None:
    """The image's repo digest when it has one (pulled images), else its content id (local builds)."""
    info = client.inspect_image(image)
    digests = info.get("RepoDigests") or []
    return digests[0] if digests else info.get("Id")


def probe_in_container(node: Node, image: str, ids: RunIds) -> tuple[NodeProbe, str | None]:
    """Run the probe in a one-shot container of ``image`` on ``node``; (probe, image digest)."""
    output, digest = probe_output(node, image, ids)
    return parse_probe(output), digest


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


def probe_output(node: Node, image: str, ids: RunIds) -> tuple[str, str | None]:
    """The probe's raw output from a one-shot container of ``image`` on ``node``, and the image digest.

    The container is started the way the docker runtime starts every container (``run_to_completion``,
    through the node's Docker connection)."""
    from dlperf_airflow.docker_runtime import run_to_completion

    output, client = run_to_completion(node, probe_spec(node, image, ids), PROBE_TIMEOUT_S)
    return output, _digest(client, image)


def _joined(values: list[str | None]) -> str | None:
    distinct = list(dict.fromkeys(v for v in values if v))
    return ",".join(distinct) if distinct else None


ProbeCache = dict[tuple[str, str], tuple[NodeProbe, str | None]]
"""(node name, image) -> that image's probe on that node and the image's digest there."""


def capture_docker(key: EnvironmentKey, inventory: Inventory, ids: RunIds, cache: ProbeCache) -> Environment:
    """The environment of a docker case: its image probed on each node it uses (cached per node)."""
    assert key.image is not None
    probes, digests = [], []
    for node in inventory.first(key.nodes):
        if (node.name, key.image) not in cache:
            cache[(node.name, key.image)] = probe_in_container(node, key.image, ids)
        probe, digest = cache[(node.name, key.image)]
        probes.append(probe)
        digests.append(digest)
    return combine(probes, framework=key.framework, image=key.image, image_digest=_joined(digests))


# --------------------------------------------------------------------------- the step


def capture_step(plan: Plan, ids: RunIds) -> list[PlannedRun]:
    """Capture and store the environments of the plan's case runs; return them, each with an
    ``environment_id`` (None where its environment could not be captured). Never raises."""
    items = list(plan.cases)
    if not items:
        return items
    runtime = items[0].runtime
    ids_by_key: dict[EnvironmentKey, int | None] = {}
    try:
        inventory = load_inventory(items[0].inventory) if runtime == "docker" else None
        keys = {environment_key(item, inventory) for item in items}
        store = ResultStore(default_db_url())
        store.ensure_schema()  # plan_cases did it already; cheap and idempotent
    except Exception as exc:  # noqa: BLE001 - capturing must not fail the run
        log.warning("environment capture skipped: %s: %s", type(exc).__name__, exc)
        return [item.with_environment(None) for item in items]
    cache: ProbeCache = {}
    local_probe: str | None = None
    for key in sorted(keys, key=lambda k: (k.framework, k.image or "", k.nodes)):
        try:
            if inventory is not None:
                environment = capture_docker(key, inventory, ids, cache)
            else:
                if local_probe is None:
                    from dlperf_core.environment import run_probe_locally

                    local_probe = run_probe_locally()
                environment = capture_local(key.framework, local_probe)
            ids_by_key[key] = store.upsert_environment(environment, datetime.now(UTC))
            log.info(
                "environment %s for %s%s: %s",
                ids_by_key[key],
                key.framework,
                f" ({key.image}, {key.nodes} node(s))" if key.image else "",
                describe(environment),
            )
        except Exception as exc:  # noqa: BLE001 - one environment that cannot be probed is not fatal
            ids_by_key[key] = None
            log.warning("could not capture the environment of %s: %s: %s", key, type(exc).__name__, exc)
    store.dispose()
    return [item.with_environment(ids_by_key.get(environment_key(item, inventory))) for item in items]


def describe(environment: Environment) -> str:
    """One line for the task log: what was found, and what was not."""
    gpus = f"{environment.gpu_count} x {environment.gpu_model}" if environment.gpu_count else "no GPU"
    found = (
        f"{gpus}, driver {environment.driver_version or '-'}, CUDA {environment.cuda_version or '-'}, "
        f"{environment.framework} {environment.framework_version or '-'}, "
        f"hosts {','.join(environment.hostnames)}"
    )
    return found + (f"; missing: {'; '.join(environment.missing)}" if environment.missing else "")
