"""The ``docker`` runtime: every node of a case is a framework container on that node's Docker Engine.

Each node is reached through its own ``docker_url`` with the Docker provider's ``DockerHook``. The
containers of a case are created and started together (a multi-node job needs all ranks up at once, and
Airflow has no gang scheduling, so one task starts them all rather than one DockerOperator per node, which
would block on its own container). Logs are streamed to files while the job runs, so the shared supervisor's
watchdog sees progress; containers are always removed.
"""

from __future__ import annotations

import io
import tarfile
import threading
from dataclasses import replace
from pathlib import Path, PurePosixPath

from docker.errors import APIError, NotFound
from docker.types import DeviceRequest, Mount, Ulimit

from airflow.providers.docker.hooks.docker import DockerHook
from dlperf_core.container import ContainerSpec
from dlperf_core.gpu_sampling import QUERY_COMMAND, GpuSampler, GpuSamples
from dlperf_core.inventory import Inventory
from dlperf_core.runtime.base import CaseJob, CaseOutcome, run_supervised, with_gpu_samples

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
        mem_limit=f"{spec.memory_limit_mb}m" if spec.memory_limit_mb else None,
        memswap_limit=f"{spec.memory_limit_mb}m" if spec.memory_limit_mb else None,  # no swap: a real limit
    )


def tar_of(files) -> bytes:
    """A tar archive (paths relative to /, owned by root) of ContainerFiles, for ``put_archive``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        dirs = sorted({str(PurePosixPath(f.path).parent) for f in files})
        for d in dirs:
            info = tarfile.TarInfo(d.lstrip("/"))
            info.type, info.mode = tarfile.DIRTYPE, 0o700
            tar.addfile(info)
        for f in files:
            info = tarfile.TarInfo(f.path.lstrip("/"))
            info.size, info.mode = len(f.content), f.mode
            tar.addfile(info, io.BytesIO(f.content))
    return buf.getvalue()


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
        self.oom_killed = False  # the kernel's OOM killer ended it (memory limit of the container)
        self.sampler: GpuSampler | None = None  # set by DockerRuntime.start_node on nvidia nodes
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
        if spec.files:
            self._client.put_archive(self.id, "/", tar_of(spec.files))
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
            self.oom_killed = bool(state.get("OOMKilled"))
            self._exit = int(state["ExitCode"]) or (137 if self.oom_killed else 0)
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
        if self.sampler is not None:
            self.sampler.stop()
        self._log_thread.join(timeout=30)
        try:
            self._client.remove_container(self.id, force=True)
        except NotFound:
            pass


def container_query(docker_url: str, container_id: str):
    """How :class:`GpuSampler` runs nvidia-smi in a container: its output, or None once the container is gone
    (or has no nvidia-smi), which ends the sampling."""
    client = docker_client(docker_url)

    def query() -> str | None:
        try:
            exec_id = client.exec_create(container_id, list(QUERY_COMMAND), stdout=True, stderr=False)
            return client.exec_start(exec_id).decode(errors="replace")
        except (APIError, NotFound):
            return None

    return query


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

    def start_node(self, job: CaseJob, i: int, files: tuple | None = None, samples: GpuSamples | None = None):
        """Start launch ``i`` of ``job`` as a container on its node's engine (``files``: replace the spec's ssh
        files; ``samples``: sample nvidia-smi's memory and power into it while it runs, on nvidia nodes)."""
        launch, spec = job.launches[i], job.containers[i]
        if files is not None:
            spec = replace(spec, files=files)
        proc = ContainerProcess(launch.node.docker_url, spec, job.log_dir / f"node{launch.node_rank}.log")
        if spec.gpus and samples is not None:  # nvidia nodes: sample nvidia-smi in the container while it runs
            proc.sampler = GpuSampler(container_query(launch.node.docker_url, proc.id), samples, period_s=1.0)
        return proc

    def execute(self, job: CaseJob) -> CaseOutcome:
        samples = {launch.node.name: GpuSamples() for launch in job.launches}  # a container sees its node's GPUs
        start = lambda i: self.start_node(job, i, samples=samples[job.launches[i].node.name])  # noqa: E731
        outcome = run_supervised(job, start, poll_s=0.5)
        return with_gpu_samples(outcome, samples)

    def cleanup(self, labels: dict[str, str]) -> list[str]:
        """Remove every container carrying ``labels`` on every node; return their names.

        A node whose engine does not answer does not stop the sweep of the others; the cleanup then fails
        naming it, so the leftover containers on it are not forgotten."""
        removed = []
        unreachable = []
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        for url in dict.fromkeys(n.docker_url for n in self.inventory.nodes):
            try:
                client = docker_client(url)
                found = client.containers(all=True, filters=filters)
            except Exception as exc:  # the engine is down or unreachable: sweep the other nodes first
                unreachable.append(f"{url} ({type(exc).__name__}: {exc})")
                continue
            for c in found:
                try:
                    client.remove_container(c["Id"], force=True)
                    removed.append(c["Names"][0].lstrip("/"))
                except NotFound:
                    pass
        if unreachable:
            raise RuntimeError(
                f"removed {len(removed)} container(s); could not reach the Docker engine of "
                + "; ".join(unreachable)
            )
        return removed
