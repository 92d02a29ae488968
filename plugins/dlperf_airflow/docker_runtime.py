"""The ``docker`` runtime: every node of a case is a framework container on that node's Docker Engine.

Each node is reached through its own ``docker_url`` with the Docker provider's ``DockerHook``. The
containers of a case are created and started together (a multi-node job needs all ranks up at once, and
Airflow has no gang scheduling, so one task starts them all rather than one DockerOperator per node, which
would block on its own container). Logs are streamed to files while the job runs, so the shared supervisor's
watchdog sees progress; containers are always removed.
"""

from __future__ import annotations

import threading
from pathlib import Path

from docker.errors import APIError, NotFound
from docker.types import DeviceRequest, Mount, Ulimit

from airflow.providers.docker.hooks.docker import DockerHook
from dlperf_core.container import ContainerSpec
from dlperf_core.inventory import Inventory
from dlperf_core.runtime.base import CaseJob, CaseOutcome, run_supervised

WORKLOAD_DIR_IN_IMAGE = "/opt/dlperf/workload"


def docker_client(docker_url: str, timeout: int = 120):
    """A docker APIClient for one node, through the provider's hook (pings the daemon)."""
    return DockerHook(docker_conn_id=None, base_url=docker_url, timeout=timeout).api_client


def host_config_for(client, spec: ContainerSpec) -> dict:
    """Docker host config from a ContainerSpec: GPUs, InfiniBand, host network/IPC, memlock, mounts."""
    return client.create_host_config(
        network_mode=spec.network,
        ipc_mode="host" if spec.ipc_host else None,
        shm_size=spec.shm_size,
        cap_add=list(spec.cap_add) or None,
        ulimits=[Ulimit(name="memlock", soft=-1, hard=-1)] if spec.memlock_unlimited else None,
        device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])] if spec.gpus else None,
        devices=[f"{d}:{d}:rwm" for d in spec.devices] or None,
        mounts=[Mount(target=m.target, source=m.source, type="bind", read_only=m.read_only) for m in spec.mounts]
        or None,
    )


def ensure_network(client, name: str) -> None:
    """Create a user-defined bridge network for stand-in nodes if it does not exist."""
    if name in ("host", "bridge", "none") or client.networks(names=[name]):
        return
    try:
        client.create_network(name, driver="bridge", labels={"dlperf.network": "1"})
    except APIError as exc:  # created meanwhile by a concurrent run
        if not client.networks(names=[name]):
            raise exc


class ContainerProcess:
    """One node as a container: created, started, its log streamed to a file."""

    def __init__(self, docker_url: str, spec: ContainerSpec, log_path: Path):
        self.node_name = spec.labels.get("dlperf.node", spec.name)
        self.log_path = log_path
        self._client = docker_client(docker_url)
        self._exit: int | None = None
        if spec.network != "host":
            ensure_network(self._client, spec.network)
        networking = None
        if spec.hostname:
            networking = self._client.create_networking_config(
                {spec.network: self._client.create_endpoint_config(aliases=[spec.hostname])}
            )
        container = self._client.create_container(
            image=spec.image,
            command=list(spec.command),
            environment=spec.environment,
            labels=spec.labels,
            name=spec.name,
            hostname=spec.hostname,
            working_dir=spec.working_dir,
            host_config=host_config_for(self._client, spec),
            networking_config=networking,
            detach=True,
        )
        self.id = container["Id"]
        self._client.start(self.id)
        self._log_thread = threading.Thread(target=self._stream_log, args=(docker_url,), daemon=True)
        self._log_thread.start()

    def _stream_log(self, docker_url: str) -> None:
        client = docker_client(docker_url)  # its own connection: this one blocks on the stream
        with open(self.log_path, "wb") as out:
            try:
                for chunk in client.logs(self.id, stdout=True, stderr=True, stream=True, follow=True):
                    out.write(chunk)
                    out.flush()
            except (APIError, NotFound, OSError):
                pass  # the container went away; what arrived is kept

    def poll(self) -> int | None:
        if self._exit is not None:
            return self._exit
        try:
            state = self._client.inspect_container(self.id)["State"]
        except NotFound:
            self._exit = 137
            return self._exit
        if state["Status"] in ("exited", "dead"):
            self._exit = int(state["ExitCode"]) or (137 if state.get("OOMKilled") else 0)
        return self._exit

    def kill(self) -> None:
        if self.poll() is None:
            try:
                self._client.kill(self.id)
            except (APIError, NotFound):
                pass
            self._client.wait(self.id, timeout=30)
            self.poll()

    def close(self) -> None:
        self.kill()
        self._log_thread.join(timeout=30)
        try:
            self._client.remove_container(self.id, force=True)
        except NotFound:
            pass


class DockerRuntime:
    """Runs case jobs as containers on each node's Docker Engine."""

    name = "docker"
    python = "python3"
    workload_dir = WORKLOAD_DIR_IN_IMAGE

    def __init__(self, inventory: Inventory):
        self.inventory = inventory

    def cpu_threads_per_process(self, processes: int) -> int | None:
        """CPU stand-in nodes share one engine's cores: split them between the processes."""
        ncpu = docker_client(self.inventory.nodes[0].docker_url).info().get("NCPU", 1)
        return max(1, int(ncpu) // max(1, processes))

    def execute(self, job: CaseJob) -> CaseOutcome:
        def start(i: int) -> ContainerProcess:
            launch, spec = job.launches[i], job.containers[i]
            return ContainerProcess(launch.node.docker_url, spec, job.log_dir / f"node{launch.node_rank}.log")

        return run_supervised(job, start, poll_s=0.5)

    def cleanup(self, labels: dict[str, str]) -> list[str]:
        """Remove every container carrying ``labels`` on every node; return their names."""
        removed = []
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        for url in dict.fromkeys(n.docker_url for n in self.inventory.nodes):
            client = docker_client(url)
            for c in client.containers(all=True, filters=filters):
                try:
                    client.remove_container(c["Id"], force=True)
                    removed.append(c["Names"][0].lstrip("/"))
                except NotFound:
                    pass
        return removed
