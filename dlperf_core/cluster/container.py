"""What a framework container needs on a node, as plain data (the Docker runtime turns it into API calls).

Built from the node inventory (GPUs, InfiniBand, host network and IPC, memlock) and the framework adapter
(image, command, environment, shm). Keeping it as data means it can be checked in tests and golden files
without a Docker engine.
"""

from __future__ import annotations

from dlperf_core.cluster.inventory import Mount, Node
from dlperf_core.model import ContainerSpec

LOG_MOUNT = "/dlperf/logs"


def gpu_ids_for(node: Node, gpus: int | None = None) -> tuple[str, ...]:
    """The GPUs a container on ``node`` gets: the first ``gpus`` of the node's (all with None) on an
    ``accelerator: nvidia`` node, none on a CPU node."""
    if node.accelerator != "nvidia":
        return ()
    return node.case_gpu_ids(node.gpu_count if gpus is None else gpus)


def container_spec_for(
    node: Node,
    *,
    name: str,
    image: str,
    command: tuple[str, ...],
    environment: dict[str, str],
    labels: dict[str, str],
    shm_size: str | None = None,
    gpus: int | None = None,
) -> ContainerSpec:
    """The container spec of a framework process on ``node``, following what the node supports.

    ``gpus``: how many of the node's GPUs the case uses (its devices per node; None: all of them). On an
    ``accelerator: nvidia`` node the container gets exactly those, :meth:`Node.case_gpu_ids` (the first ones the
    inventory names), and no other GPU of the node."""
    host_net = node.network == "host"
    mounts = node.mounts
    if node.log_dir:
        mounts += (Mount(source=node.log_dir, target=LOG_MOUNT, read_only=False),)
        environment = {**environment, "DLPERF_CASE_LOG_DIR": f"{LOG_MOUNT}/{name}"}
    return ContainerSpec(
        name=name,
        image=image,
        command=command,
        environment=environment,
        labels=labels,
        network=node.network,
        hostname=None if host_net else node.container_hostname,
        gpu_ids=gpu_ids_for(node, gpus),
        devices=("/dev/infiniband",) if node.infiniband else (),
        ipc_host=node.ipc_host,
        shm_size=None if node.ipc_host else (shm_size or node.shm_size),
        cap_add=("IPC_LOCK",) if node.memlock else (),
        memlock_unlimited=node.memlock,
        mounts=mounts,
        memory_limit_mb=node.device_memory_mb * node.gpu_count if node.device_memory_mb else None,
        cpu_quota=node.cpu_quota,
    )
