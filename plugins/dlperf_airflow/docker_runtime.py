"""The ``docker`` runtime: every node of a case is a framework container on that node's Docker Engine.

Each node is reached through its own ``docker_url`` with the Docker provider's ``DockerHook``, as
:class:`DockerEndpoint` says: with the TLS client and registry login of the node's Airflow Docker connection
(``dlperf_docker_<name>``, made by ``dlperf cluster sync``) when it exists, else those of the inventory. Every
container dlperf starts (cases, max batch probes, the environment probe) is made by :func:`create_container`
from a :class:`ContainerSpec`. The containers of a case are created and started together (a multi-node job needs all ranks up at once, and
Airflow has no gang scheduling, so one task starts them all rather than one DockerOperator per node, which
would block on its own container). Logs are streamed to files while the job runs, so the shared supervisor's
watchdog sees progress; containers are always removed.
"""

from __future__ import annotations

import io
import logging
import os
import tarfile
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from airflow.providers.docker.hooks.docker import DockerHook
from docker.errors import APIError, ImageNotFound, NotFound
from docker.tls import TLSConfig
from docker.types import DeviceRequest, Mount, Ulimit

from dlperf_core.errors import ConfigError
from dlperf_core.gpu_sampling import QUERY_COMMAND, GpuSampler, GpuSamples
from dlperf_core.inventory import Inventory, Node, insecure_docker_nodes
from dlperf_core.launch_spec import ImageRef, NodeSpec, docker_node, pick_digest
from dlperf_core.model import CaseJob, CaseOutcome, ContainerSpec
from dlperf_core.runtime.base import run_supervised, with_gpu_samples

log = logging.getLogger("dlperf")

WORKLOAD_DIR_IN_IMAGE = "/opt/dlperf/workload"
USER_NETWORKS_EXCLUDED = ("host", "bridge", "none")  # docker's own networks: no aliases, never created


def _connection_or_none(conn_id: str):
    """The Airflow connection ``conn_id``, or None when it is not defined."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def _flag(value, default: bool = True) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() in ("y", "yes", "t", "true", "on", "1")
    return bool(value)


@dataclass(frozen=True)
class RegistryLogin:
    """A registry login, as the provider's Docker connection holds it (host[:port], login, password)."""

    registry: str
    username: str
    password: str | None = field(default=None, repr=False)
    email: str | None = None
    reauth: bool = True


@dataclass(frozen=True)
class DockerEndpoint:
    """How to reach one node's Docker Engine, resolved once: ``docker_url``, TLS client, registry login.

    :meth:`for_node` reads the node's Airflow Docker connection (``node.docker_conn_id``) when it exists:
    its extras ``tls_ca_cert``, ``tls_client_cert``, ``tls_client_key`` (``tls_verify``) give the TLS client,
    its host/port, login and password (extras ``email``, ``reauth``) the registry login, as for the
    provider's ``DockerOperator``. What the connection lacks comes from the inventory's ``docker`` block;
    without a connection all of it does, and a unix:// socket is reached as it is. A node on TCP without TLS
    is refused unless it says ``insecure: true`` (as planning does). Clients are made by the provider's
    ``DockerHook`` (it pings the engine, and turns tcp:// into https:// under TLS)."""

    base_url: str
    tls: TLSConfig | None = None
    registry: RegistryLogin | None = None
    source: str = "docker_url"  # where TLS/registry came from, for logs: connection <id> | inventory

    @classmethod
    def for_url(cls, docker_url: str) -> DockerEndpoint:
        """A bare engine address (a unix socket, or a test's engine): no TLS, no login."""
        return cls(docker_url)

    @classmethod
    def for_node(cls, node: Node, *, use_connection: bool = True) -> DockerEndpoint:
        conn = _connection_or_none(node.docker_conn_id) if use_connection else None
        extra = conn.extra_dejson if conn is not None else {}
        ca_cert, client_cert, client_key = (extra.get(k) for k in ("tls_ca_cert", "tls_client_cert", "tls_client_key"))
        tls = None
        if ca_cert and client_cert and client_key:
            tls = DockerHook.construct_tls_config(
                ca_cert, client_cert, client_key, verify=_flag(extra.get("tls_verify"))
            )
        elif node.docker.tls is not None:
            t = node.docker.tls
            tls = DockerHook.construct_tls_config(t.ca_cert, t.client_cert, t.client_key, verify=t.verify)
        if tls is None and (problems := insecure_docker_nodes([node])):
            raise ConfigError(f"node {node.name}", problems)
        registry = None
        if conn is not None and conn.host and conn.login:
            registry = RegistryLogin(
                f"{conn.host}:{conn.port}" if conn.port else conn.host,
                conn.login,
                conn.password or None,
                extra.get("email") or None,
                _flag(extra.get("reauth")),
            )
        elif node.docker.registry is not None:
            r = node.docker.registry
            password = os.environ.get(r.password_env) if r.password_env else None
            if r.password_env and password is None:
                log.warning("node %s: $%s is not set; not logging in to %s", node.name, r.password_env, r.server)
            else:
                registry = RegistryLogin(r.server, r.username, password, r.email)
        source = f"connection {node.docker_conn_id}" if conn is not None else "inventory"
        if tls or registry:
            log.info(
                "node %s: Docker engine %s%s%s (from the %s)",
                node.name,
                node.docker_url,
                " with TLS" if tls else "",
                f", registry login {registry.registry}" if registry else "",
                source,
            )
        return cls(node.docker_url, tls or None, registry, source)

    def client(self, timeout: int = 120, *, login: bool = True):
        """A docker APIClient on this engine (pinged), logged in to the registry when one is configured
        (``login=False``: a second client of the same engine, e.g. a log stream, needs no login)."""
        client = DockerHook(docker_conn_id=None, base_url=self.base_url, tls=self.tls, timeout=timeout).api_client
        if login and self.registry is not None:
            r = self.registry
            client.login(username=r.username, password=r.password, registry=r.registry, email=r.email, reauth=r.reauth)
        return client


def endpoint_of(target: DockerEndpoint | Node | str) -> DockerEndpoint:
    """A node's (or a bare URL's) endpoint; an endpoint as it is."""
    if isinstance(target, DockerEndpoint):
        return target
    if isinstance(target, Node):
        return DockerEndpoint.for_node(target)
    return DockerEndpoint.for_url(target)


def docker_client(target: DockerEndpoint | Node | str, timeout: int = 120):
    """A docker APIClient for one node (its connection/inventory TLS and login) or a bare docker_url,
    through the provider's hook (pings the daemon)."""
    return endpoint_of(target).client(timeout)


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
    if name in USER_NETWORKS_EXCLUDED or client.networks(names=[name]):
        return
    try:
        client.create_network(name, driver="bridge", labels={"dlperf.network": "1"})
    except APIError as exc:  # created meanwhile by a concurrent run
        if not client.networks(names=[name]):
            raise exc


def create_container(client, spec: ContainerSpec, *, pull: bool = False) -> str:
    """Create (not start) the container of ``spec``: its network (created if missing), its hostname as an
    alias on a user-defined network, the host config, the files put in. Returns its id. The one way dlperf
    makes a container. ``pull``: an image the engine lacks is pulled (through the client's registry login)
    and the creation tried again."""
    if spec.network not in USER_NETWORKS_EXCLUDED:
        ensure_network(client, spec.network)
    networking = None
    if spec.hostname and spec.network not in USER_NETWORKS_EXCLUDED:
        networking = client.create_networking_config(
            {spec.network: client.create_endpoint_config(aliases=[spec.hostname])}
        )

    def create() -> dict:
        return client.create_container(
            image=spec.image,
            command=list(spec.command),
            environment=spec.environment,
            labels=spec.labels,
            name=spec.name,
            hostname=spec.hostname,
            working_dir=spec.working_dir,
            host_config=host_config_for(client, spec),
            networking_config=networking,
            detach=True,
        )

    try:
        container = create()
    except ImageNotFound:
        if not pull:
            raise
        log.info("pulling %s", spec.image)
        client.pull(spec.image)
        container = create()
    if spec.files:
        client.put_archive(container["Id"], "/", tar_of(spec.files))
    return container["Id"]


def image_ran(client, container_id: str, tag: str) -> tuple[ImageRef, str | None]:
    """The image a created container runs (its ID, and its registry digest where it came from a registry) and
    its working directory, as the engine says; only the tag (and None) if the engine cannot say."""
    try:
        info = client.inspect_container(container_id)
        image_id = info.get("Image") or None
        working_dir = (info.get("Config") or {}).get("WorkingDir") or None
        digests = client.inspect_image(image_id).get("RepoDigests") if image_id else None
    except Exception as exc:  # noqa: BLE001 - what ran is recorded where it can be; it never fails the case
        log.warning("could not read the image of container %s: %s: %s", container_id[:12], type(exc).__name__, exc)
        return ImageRef(tag), None
    return ImageRef(tag, image_id, pick_digest(digests, tag)), working_dir


def run_to_completion(target: DockerEndpoint | Node | str, spec: ContainerSpec, timeout_s: float) -> tuple[str, object]:
    """Run a one-shot container of ``spec`` (:func:`create_container`), wait for it (at most ``timeout_s``)
    and remove it; (its stdout, the client, for more questions to the same engine)."""
    endpoint = endpoint_of(target)
    client = endpoint.client()
    cid = create_container(client, spec, pull=endpoint.registry is not None)
    try:
        client.start(cid)
        client.wait(cid, timeout=timeout_s)
        output = client.logs(cid, stdout=True, stderr=False).decode(errors="replace")
    finally:
        try:
            client.remove_container(cid, force=True)
        except NotFound:
            pass
    return output, client


class ContainerProcess:
    """One node as a container: created, started, its log streamed to a file.

    ``target``: the node's :class:`DockerEndpoint` (or the node, or a bare docker_url)."""

    def __init__(self, target: DockerEndpoint | Node | str, spec: ContainerSpec, log_path: Path):
        self.node_name = spec.labels.get("dlperf.node", spec.name)
        self.log_path = log_path
        self._endpoint = endpoint_of(target)
        self._client = self._endpoint.client()
        self._exit: int | None = None
        self.oom_killed = False  # the kernel's OOM killer ended it (memory limit of the container)
        self.sampler: GpuSampler | None = None  # set by DockerRuntime.start_node on nvidia nodes
        self.id = create_container(self._client, spec, pull=self._endpoint.registry is not None)
        # what the engine runs (the launch spec of the result): read before start, the tag may move meanwhile
        self.image, self.working_dir = image_ran(self._client, self.id, spec.image)
        self._client.start(self.id)
        self._log_thread = threading.Thread(target=self._stream_log, daemon=True)
        self._log_thread.start()

    def _stream_log(self) -> None:
        client = self._endpoint.client(login=False)  # its own connection: this one blocks on the stream
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


def container_query(target: DockerEndpoint | Node | str, container_id: str):
    """How :class:`GpuSampler` runs nvidia-smi in a container: its output, or None once the container is gone
    (or has no nvidia-smi), which ends the sampling."""
    client = endpoint_of(target).client(login=False)

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
        self._endpoints: dict[str, DockerEndpoint] = {}
        self._ran: dict[tuple[str, int], tuple[ImageRef, str | None]] = {}  # (run label, launch): image, workdir

    def endpoint(self, node: Node) -> DockerEndpoint:
        """The node's endpoint, its Airflow connection read once per runtime."""
        if node.name not in self._endpoints:
            self._endpoints[node.name] = DockerEndpoint.for_node(node)
        return self._endpoints[node.name]

    def cpu_threads_per_process(self, processes: int) -> int | None:
        """CPU stand-in nodes share one engine's cores: split them between the processes."""
        ncpu = self.endpoint(self.inventory.nodes[0]).client(login=False).info().get("NCPU", 1)
        return max(1, int(ncpu) // max(1, processes))

    def start_node(self, job: CaseJob, i: int, files: tuple | None = None, samples: GpuSamples | None = None):
        """Start launch ``i`` of ``job`` as a container on its node's engine (``files``: replace the spec's ssh
        files; ``samples``: sample nvidia-smi's memory and power into it while it runs, on nvidia nodes)."""
        launch, spec = job.launches[i], job.containers[i]
        if files is not None:
            spec = replace(spec, files=files)
        endpoint = self.endpoint(launch.node)
        proc = ContainerProcess(endpoint, spec, job.log_dir / f"node{launch.node_rank}.log")
        self._ran[(job.run_label, i)] = (proc.image, proc.working_dir)
        if spec.gpus and samples is not None:  # nvidia nodes: sample nvidia-smi in the container while it runs
            proc.sampler = GpuSampler(container_query(endpoint, proc.id), samples, period_s=1.0)
        return proc

    def node_specs(self, job: CaseJob) -> tuple[NodeSpec, ...]:
        """What ran on each node of ``job`` (:mod:`dlperf_core.launch_spec`): its container spec, and the image
        and working directory the engine reported for the containers this runtime started (only the tag for a
        node it did not start: another node's task, or a start that failed)."""
        out = []
        for i, (launch, spec) in enumerate(zip(job.launches, job.containers)):
            image, working_dir = self._ran.get((job.run_label, i), (ImageRef(spec.image), None))
            out.append(docker_node(launch, spec, image, working_dir))
        return tuple(out)

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
        engines: dict[str, Node] = {}  # one sweep per engine, through the first node on it
        for n in self.inventory.nodes:
            engines.setdefault(n.docker_url, n)
        for url, node in engines.items():
            try:
                client = self.endpoint(node).client(login=False)
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
                f"removed {len(removed)} container(s); could not reach the Docker engine of " + "; ".join(unreachable)
            )
        return removed
