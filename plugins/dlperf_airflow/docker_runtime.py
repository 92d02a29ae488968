"""The ``docker`` runtime: every node of a case is a framework container on that node's Docker Engine.

Each node is reached with the Docker provider's own ``DockerHook``, as :class:`DockerEndpoint` says: its
engine's URL as ``base_url``, its TLS client as ``tls`` and, when the node has a registry login, its Airflow
Docker connection (``dlperf_docker_<name>``, written by ``dlperf cluster sync`` from ``docker.registry``) as
``docker_conn_id``, with which the hook logs in itself. The URL, the TLS client and the login's connection are
the node's engine connection's (``dlperf_engine_<name>``, type ``dlperf_docker_engine``, written by sync and
editable in Airflow's Connections UI: :mod:`dlperf_core.cluster.engine_connection`) when it exists, else the
inventory's ``docker_url`` and ``docker:`` block. Every container dlperf starts
(cases, max batch trials, the environment probe) is made by :func:`create_container` from a
:class:`ContainerSpec`. The containers of a case are created and started together (a multi-node job needs all
ranks up at once, and Airflow has no gang scheduling, so one task starts them all rather than one
DockerOperator per node, which would block on its own container). Logs are streamed to files while the job
runs, so the shared supervisor's watchdog sees progress; containers are always removed.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tarfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from airflow.providers.docker.hooks.docker import DockerHook
from docker.errors import APIError, ImageNotFound, NotFound
from docker.tls import TLSConfig
from docker.types import DeviceRequest, Mount, Ulimit

from dlperf_airflow.connections import connection_or_none
from dlperf_core.cluster.cpu_placement import HostCores
from dlperf_core.cluster.engine_connection import EngineConnection, engine_conn_id
from dlperf_core.cluster.gpu_sampling import GpuSampler, GpuSamples, SampleQuery, sampled_gpu_ids
from dlperf_core.cluster.inventory import (
    DOCKER_CONN_PREFIX,
    DockerTls,
    Inventory,
    Node,
    insecure_docker_nodes,
    unprotected_tcp,
)
from dlperf_core.errors import ConfigError
from dlperf_core.model import CaseJob, CaseOutcome, ContainerSpec
from dlperf_core.run.launch_spec import ImageRef, NodeSpec, docker_node, pick_digest
from dlperf_core.run.runtime.base import CaseRunning, run_to_end

log = logging.getLogger("dlperf")

WORKLOAD_DIR_IN_IMAGE = "/opt/dlperf/workload"
USER_NETWORKS_EXCLUDED = ("host", "bridge", "none")  # docker's own networks: no aliases, never created


class EngineTls(TLSConfig):
    """docker-py's ``TLSConfig`` (what ``DockerHook`` takes as ``tls``) whose verification holds against
    ``$REQUESTS_CA_BUNDLE`` and ``$CURL_CA_BUNDLE``: requests lets those replace a session's own ``verify``
    (docker/docker-py#2433, still open), so with either set, as dlperf's Airflow image sets the first, an
    engine certificate signed by the engine's own CA would never verify (and ``verify: false`` would still
    verify against the bundle). The client keeps the ``verify`` this config gives it; proxies from the
    environment still apply."""

    def configure_client(self, client) -> None:
        super().configure_client(client)
        merge = client.merge_environment_settings

        def keep_verify(url, proxies, stream, verify, cert):
            settings = merge(url, proxies, stream, verify, cert)
            if verify is None or verify is True:  # the request asked nothing of its own: the engine's CA
                settings["verify"] = client.verify
            return settings

        client.merge_environment_settings = keep_verify


def reached_node(node: Node) -> tuple[Node, str | None]:
    """``node`` as its engine is reached: with the URL, TLS client and registry login of its engine connection
    (``dlperf_engine_<name>``) when that exists, and that connection's id; else the inventory's node and None.
    Raises ConfigError naming the connection when it is not a usable engine connection."""
    conn_id = engine_conn_id(node)
    conn = connection_or_none(conn_id)
    if conn is None:
        return node, None
    engine = EngineConnection.from_fields(conn_id, conn.conn_type, conn.host, conn.extra_dejson)
    return engine.applied_to(node, conn_id), conn_id


def registry_conn_id(node: Node) -> str | None:
    """The Airflow Docker connection that logs the node's engine in to its registry, or None (no login).

    In the Docker provider a Docker connection is a registry login (host[:port] = the registry, login,
    password; extras ``email``, ``reauth``), done by ``DockerHook(docker_conn_id=...)`` itself. The node's
    connection is ``node.docker_conn_id`` (``docker.conn_id``, else ``dlperf_docker_<name>``); it is used when
    it exists. It must exist when the inventory says the node has a registry (``docker.registry``, which
    ``dlperf cluster sync`` writes to it, or an explicit ``docker.conn_id``), and it must name a registry host
    and login (the provider refuses one without). Raises ConfigError saying which and what to do."""
    conn_id = node.docker_conn_id
    conn = connection_or_none(conn_id)
    if conn is None:
        declared = node.docker.registry is not None or node.docker.conn_id is not None
        if not declared:
            return None
        said = (
            f"docker.registry {node.docker.registry.server}"
            if node.docker.registry is not None
            else f"docker.conn_id {conn_id}"
        )
        raise ConfigError(
            f"node {node.name}",
            [
                f"{said}: the Airflow Docker connection {conn_id} that logs in to the registry does not exist; "
                "run `dlperf cluster sync --inventory <this inventory>` (it writes the registry login there), or "
                "create it yourself (conn type docker: host = the registry, login, password)"
            ],
        )
    if not conn.host or not conn.login:
        raise ConfigError(
            f"node {node.name}",
            [
                f"the Airflow Docker connection {conn_id} has no registry {'host' if not conn.host else 'login'}: "
                "a Docker connection is a registry login (the Docker provider's DockerHook refuses one without "
                "host and login), and the engine's TLS client is the node's engine connection's "
                f"({engine_conn_id(node)}) or the inventory's docker.tls. Give the connection "
                f"the registry's host and login, or delete it (`dlperf cluster sync --prune` removes a "
                f"{DOCKER_CONN_PREFIX}* connection the inventory does not ask for)"
            ],
        )
    return conn_id


def _tls_of(tls: DockerTls | None) -> EngineTls | None:
    if tls is None:
        return None
    return EngineTls(client_cert=(tls.client_cert, tls.client_key), ca_cert=tls.ca_cert, verify=tls.verify)


@dataclass(frozen=True)
class DockerEndpoint:
    """How to reach one node's Docker Engine: its ``docker_url``, its TLS client, its registry login.

    All three go to the Docker provider's hook the way it takes them:
    ``DockerHook(docker_conn_id=conn_id, base_url=base_url, tls=tls)``. ``tls`` is the TLSConfig of the
    inventory's ``docker.tls`` (PEM files on the workers; :class:`EngineTls`); the hook turns tcp:// into
    https:// under TLS and pings the engine. ``conn_id`` is the node's Airflow Docker connection
    (:func:`registry_conn_id`; None: no registry login), with which the hook logs in itself. A node on TCP
    without TLS is refused unless it says ``insecure: true`` (as planning does). A registry login that cannot
    be made (its connection missing, or not a registry login) is raised by the first client that logs in;
    clients that do not (log streams, the cleanup sweep) still reach the engine."""

    base_url: str
    tls: TLSConfig | None = None
    conn_id: str | None = None  # the Airflow Docker connection the hook logs in with (None: no login)
    login_error: ConfigError | None = field(default=None, repr=False, compare=False)

    @property
    def logs_in(self) -> bool:
        """Whether clients of this endpoint log in to a registry (then an image the engine lacks is pulled)."""
        return self.conn_id is not None

    @classmethod
    def for_url(cls, docker_url: str) -> DockerEndpoint:
        """A bare engine address (a unix socket, or a test's engine): no TLS, no login."""
        return cls(docker_url)

    @classmethod
    def for_engine(cls, engine: EngineConnection) -> DockerEndpoint:
        """An engine connection's endpoint without its registry login (the hook's Test button)."""
        if unprotected_tcp(engine.docker_url, engine.tls, engine.insecure):
            raise ConfigError(
                engine.docker_url,
                ["a Docker socket on TCP without TLS: give the connection its TLS files, or set insecure on a "
                 "trusted test network only"],
            )  # fmt: skip
        return cls(engine.docker_url, _tls_of(engine.tls))

    @classmethod
    def for_node(cls, node: Node) -> DockerEndpoint:
        """The endpoint of ``node``'s engine, as its engine connection says (:func:`reached_node`), else its
        inventory entry."""
        node, engine_conn = reached_node(node)
        if problems := insecure_docker_nodes([node]):
            raise ConfigError(f"node {node.name}" + (f" (connection {engine_conn})" if engine_conn else ""), problems)
        tls = _tls_of(node.docker.tls)
        conn_id, login_error = None, None
        try:
            conn_id = registry_conn_id(node)
        except ConfigError as exc:
            login_error = exc
        if tls or conn_id or engine_conn:
            log.info(
                "node %s: Docker engine %s%s%s%s",
                node.name,
                node.docker_url,
                f" (connection {engine_conn})" if engine_conn else "",
                " with TLS" if tls else "",
                f", registry login by the Docker provider with connection {conn_id}" if conn_id else "",
            )
        return cls(node.docker_url, tls, conn_id, login_error)

    def client(self, timeout: int = 120, *, login: bool = True):
        """A docker APIClient on this engine from the provider's hook (pinged), logged in by the hook with the
        node's Docker connection when it has one (``login=False``: a second client of the same engine, e.g. a
        log stream, needs no login)."""
        if login and self.login_error is not None:
            raise self.login_error
        hook = DockerHook(
            docker_conn_id=self.conn_id if login else None, base_url=self.base_url, tls=self.tls, timeout=timeout
        )
        return hook.api_client


def endpoint_of(target: DockerEndpoint | Node | str) -> DockerEndpoint:
    """A node's (or a bare URL's) endpoint; an endpoint as it is."""
    if isinstance(target, DockerEndpoint):
        return target
    if isinstance(target, Node):
        return DockerEndpoint.for_node(target)
    return DockerEndpoint.for_url(target)


def device_requests_for(spec: ContainerSpec) -> list[DeviceRequest] | None:
    """The NVIDIA runtime's device request of ``spec``: exactly its GPUs (``device_ids``, by index or UUID as the
    inventory names them), never every GPU of the node; None on a CPU node."""
    if not spec.gpu_ids:
        return None
    return [DeviceRequest(device_ids=list(spec.gpu_ids), capabilities=[["gpu"]])]


def host_config_for(client, spec: ContainerSpec) -> dict:
    """Docker host config from a ContainerSpec: GPUs, InfiniBand, host network/IPC, memlock, mounts, CPU limits."""
    return client.create_host_config(
        network_mode=spec.network,
        ipc_mode="host" if spec.ipc_host else None,
        shm_size=spec.shm_size,
        cap_add=list(spec.cap_add) or None,
        ulimits=[Ulimit(name="memlock", soft=-1, hard=-1)] if spec.memlock_unlimited else None,
        device_requests=device_requests_for(spec),
        devices=[f"{d}:{d}:rwm" for d in spec.devices] or None,
        mounts=[Mount(target=m.target, source=m.source, type="bind", read_only=m.read_only) for m in spec.mounts]
        or None,
        mem_limit=f"{spec.memory_limit_mb}m" if spec.memory_limit_mb else None,
        memswap_limit=f"{spec.memory_limit_mb}m" if spec.memory_limit_mb else None,  # no swap: a real limit
        cpuset_cpus=spec.cpuset_cpus,
        nano_cpus=round(spec.cpu_quota * 1e9) if spec.cpu_quota else None,  # docker run --cpus
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
    """Create the user-defined bridge network ``name`` for stand-in nodes if it does not exist, and leave one of
    that name.

    The node tasks of a case on stand-in nodes of one engine, started together on a fresh engine, each created
    ``dlperf-net`` (dlperf did not ask Docker to refuse a name taken; it asks now, but that check is best effort)
    and every container then failed to start ("network dlperf-net is ambiguous (2 matches found on name)"). Every caller keeps the oldest network of
    the name (the same one for all: a network is listed once created, so whoever lists after creating its own sees
    every older one) and removes the others; nobody's container is on those."""
    if name in USER_NETWORKS_EXCLUDED:
        return
    if not _networks_named(client, name):
        try:
            client.create_network(name, driver="bridge", labels={"dlperf.network": "1"}, check_duplicate=True)
        except APIError:  # created meanwhile by a concurrent run
            if not _networks_named(client, name):
                raise
    for extra in _networks_named(client, name)[1:]:
        with contextlib.suppress(APIError):  # gone already: another caller removed it
            client.remove_network(extra["Id"])
            log.info("removed network %s (%s): another of the same name was made first", name, extra["Id"][:12])


def _networks_named(client, name: str) -> list[dict]:
    """The engine's networks called exactly ``name`` (its filter also matches longer names), oldest first."""
    return sorted(
        (n for n in client.networks(names=[name]) if n["Name"] == name), key=lambda n: (n["Created"], n["Id"])
    )


def start_container(client, cid: str, network: str) -> None:
    """Start a container made by :func:`create_container`; if a concurrent caller of :func:`ensure_network` had
    not removed its duplicate of ``network`` yet, once more after removing it."""
    try:
        client.start(cid)
    except APIError as exc:
        if "is ambiguous" not in str(exc):
            raise
        ensure_network(client, network)
        client.start(cid)


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
    except APIError as exc:
        if exc.status_code != 409 or not remove_earlier_try(client, spec):
            raise
        container = create()
    if spec.files:
        client.put_archive(container["Id"], "/", tar_of(spec.files))
    return container["Id"]


def remove_earlier_try(client, spec: ContainerSpec) -> bool:
    """The name of ``spec`` is taken: when the container holding it is an earlier try of the same case run of the
    same DAG run (same name, same ``dlperf.run_id`` and ``dlperf.dag_id`` labels: its task was killed with its
    worker and the run was cleared and re-run), remove it and say True; anything else keeps its name (False)."""
    try:
        found = client.inspect_container(spec.name)
    except NotFound:
        return True  # gone meanwhile: the name is free again
    labels = (found.get("Config") or {}).get("Labels") or {}
    run = ("dlperf.dag_id", "dlperf.run_id")
    if any(key not in spec.labels or labels.get(key) != spec.labels[key] for key in run):
        return False
    log.warning(
        "removing %s (%s), left by an earlier try of this case run, before starting it again",
        spec.name,
        (found.get("State") or {}).get("Status", "unknown state"),
    )
    with contextlib.suppress(NotFound):
        client.remove_container(found["Id"], force=True)
    return True


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
    cid = create_container(client, spec, pull=endpoint.logs_in)
    try:
        start_container(client, cid, spec.network)
        client.wait(cid, timeout=timeout_s)
        output = client.logs(cid, stdout=True, stderr=False).decode(errors="replace")
    finally:
        with contextlib.suppress(NotFound):
            client.remove_container(cid, force=True)
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
        self.id = create_container(self._client, spec, pull=self._endpoint.logs_in)
        # what the engine runs (the launch spec of the result): read before start, the tag may move meanwhile
        self.image, self.working_dir = image_ran(self._client, self.id, spec.image)
        start_container(self._client, self.id, spec.network)
        self._log_thread = threading.Thread(target=self._stream_log, daemon=True)
        self._log_thread.start()

    def _stream_log(self) -> None:
        client = self._endpoint.client(login=False)  # its own connection: this one blocks on the stream
        with self.log_path.open("wb") as out:
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
            with contextlib.suppress(APIError, NotFound):
                self._client.kill(self.id)
            self._client.wait(self.id, timeout=30)
            self.poll()

    def close(self) -> None:
        self.kill()
        if self.sampler is not None:
            self.sampler.stop()
        self._log_thread.join(timeout=30)
        with contextlib.suppress(NotFound):
            self._client.remove_container(self.id, force=True)


def container_query(target: DockerEndpoint | Node | str, container_id: str, gpu_ids: tuple[str, ...] = ()):
    """How :class:`GpuSampler` runs nvidia-smi in a container (a :class:`SampleQuery` of ``gpu_ids``; empty: every
    GPU the container sees): its output, or None once the container is gone (or has no nvidia-smi), which ends
    the sampling."""
    client = endpoint_of(target).client(login=False)

    def run(command: tuple[str, ...]) -> str | None:
        try:
            exec_id = client.exec_create(container_id, list(command), stdout=True, stderr=True)
            return client.exec_start(exec_id).decode(errors="replace")
        except (APIError, NotFound):
            return None

    return SampleQuery(run, gpu_ids)


class DockerRuntime:
    """Runs case jobs as containers on each node's Docker Engine."""

    name = "docker"
    python = "python3"
    workload_dir = WORKLOAD_DIR_IN_IMAGE

    def __init__(self, inventory: Inventory):
        self.inventory = inventory
        self._endpoints: dict[str, DockerEndpoint] = {}
        self._ran: dict[tuple[str, int], tuple[ImageRef, str | None]] = {}  # (run label, launch): image, workdir
        self._hosts: dict[str, HostCores] = {}  # docker_url: its engine's host and cores

    def endpoint(self, node: Node) -> DockerEndpoint:
        """The node's endpoint, its Airflow connection read once per runtime."""
        if node.name not in self._endpoints:
            self._endpoints[node.name] = DockerEndpoint.for_node(node)
        return self._endpoints[node.name]

    def host_cores(self, node: Node) -> HostCores:
        """The node's engine (its name, as ``docker info`` gives it: nodes on one engine share its cores) and its
        cores, 0 .. NCPU - 1; pinned: the containers of a case get cores of their own (``cpuset_cpus``). Read
        once per engine and runtime."""
        url = self.endpoint(node).base_url
        if url not in self._hosts:
            info = self.endpoint(node).client(login=False).info()
            self._hosts[url] = HostCores(
                host=str(info.get("Name") or url), cores=tuple(range(int(info.get("NCPU", 1))))
            )
        return self._hosts[url]

    def start_node(self, job: CaseJob, i: int, files: tuple | None = None, samples: GpuSamples | None = None):
        """Start launch ``i`` of ``job`` as a container on its node's engine (``files``: replace the spec's ssh
        files; ``samples``: sample nvidia-smi's memory and power into it while it runs, on nvidia nodes)."""
        launch, spec = job.launches[i], job.containers[i]
        if files is not None:
            spec = replace(spec, files=files)
        endpoint = self.endpoint(launch.node)
        proc = ContainerProcess(endpoint, spec, job.log_dir / f"node{launch.node_rank}.log")
        self._ran[(job.run_label, i)] = (proc.image, proc.working_dir)
        if spec.gpu_ids and samples is not None:  # nvidia nodes: sample nvidia-smi in the container while it runs
            gpus = sampled_gpu_ids(spec.gpu_ids, in_container=True)  # the container has the case's GPUs only
            proc.sampler = GpuSampler(container_query(endpoint, proc.id, gpus), samples, period_s=1.0)
        return proc

    def node_specs(self, job: CaseJob) -> tuple[NodeSpec, ...]:
        """What ran on each node of ``job`` (:mod:`dlperf_core.run.launch_spec`): its container spec, and the image
        and working directory the engine reported for the containers this runtime started (only the tag for a
        node it did not start: another node's task, or a start that failed)."""
        out = []
        for i, (launch, spec) in enumerate(zip(job.launches, job.containers)):
            image, working_dir = self._ran.get((job.run_label, i), (ImageRef(spec.image), None))
            out.append(docker_node(launch, spec, image, working_dir))
        return tuple(out)

    def submit(self, job: CaseJob) -> CaseRunning:
        samples = {launch.node.name: GpuSamples() for launch in job.launches}  # a container sees its case's GPUs
        start = lambda i: self.start_node(job, i, samples=samples[job.launches[i].node.name])  # noqa: E731
        return CaseRunning(job, start, poll_s=0.5, samples=samples)

    def execute(self, job: CaseJob) -> CaseOutcome:
        return run_to_end(self.submit(job))

    def engines_not_answering(self, nodes: Iterable[Node]) -> list[str]:
        """For each engine of ``nodes`` that does not answer a ping now: "<node>'s Docker Engine at <url> does not
        answer (<error>)" (what a case's runtime error names: the engine, not only the client's exception)."""
        silent = []
        engines: dict[str, tuple[Node, DockerEndpoint]] = {}
        for n in nodes:
            try:
                endpoint = self.endpoint(n)
            except ConfigError as exc:  # its engine connection is not usable
                silent.append(f"{n.name}'s Docker Engine cannot be reached: {exc}")
                continue
            engines.setdefault(endpoint.base_url, (n, endpoint))
        for url, (node, endpoint) in engines.items():
            try:
                endpoint.client(timeout=10, login=False)  # the provider's hook pings the engine
            except Exception as exc:  # noqa: BLE001 - whatever the client raises, the engine did not answer
                first = str(exc).splitlines()[0][:160] if str(exc) else ""
                silent.append(f"{node.name}'s Docker Engine at {url} does not answer ({type(exc).__name__}: {first})")
        return silent

    def cleanup(self, labels: dict[str, str]) -> list[str]:
        """Remove every container carrying ``labels`` on every node; return their names.

        A node whose engine does not answer does not stop the sweep of the others; the cleanup then fails
        naming it, so the leftover containers on it are not forgotten."""
        removed = []
        unreachable = []
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        engines: dict[str, DockerEndpoint] = {}  # one sweep per engine, through the first node on it
        for n in self.inventory.nodes:
            try:
                endpoint = self.endpoint(n)
            except ConfigError as exc:  # its engine connection is not usable: the other nodes are still swept
                unreachable.append(f"{n.name} ({exc})")
                continue
            engines.setdefault(endpoint.base_url, endpoint)
        for url, endpoint in engines.items():
            try:
                client = endpoint.client(login=False)
                found = client.containers(all=True, filters=filters)
            except Exception as exc:  # noqa: BLE001 - the engine is down or unreachable: sweep the other nodes first
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
