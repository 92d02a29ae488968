"""The node inventory: the machines (or stand-in containers) a suite runs on, described once.

An inventory is a YAML file::

    name: docker-local
    nodes:
      - name: node0
        address: 10.0.0.1          # what other nodes use to reach it (torchrun master address)
        gpus: 8                    # devices per node: GPUs 0..7 (processes per node on a CPU-only node);
                                   # or the GPUs by index or UUID: [4, 5, 6, 7], ["GPU-3f0c...", ...]
        accelerator: nvidia        # nvidia | cpu
        docker_url: unix:///var/run/docker.sock
        network: host              # "host", or a user-defined docker network (test nodes)
        infiniband: true           # pass /dev/infiniband into the container
        infiniband_devices: [mlx5_0, mlx5_1]   # HCAs preflight expects with an ACTIVE port (empty: any)
        memlock: true              # ulimit memlock=-1 and IPC_LOCK (refused by some sandboxes)
        ipc_host: true
        shm_size: 16g              # used when ipc_host is false
        mounts: [{source: /data/imagenet, target: /data, read_only: true}]
        log_dir: /var/log/dlperf    # mounted at /dlperf/logs (must exist on the node)
        env: {NCCL_SOCKET_IFNAME: ens1f0, NCCL_IB_HCA: "mlx5_0,mlx5_1"}   # set on every rank on this node
        queue: node0               # Celery queue of the worker that sits on this node
        data_paths: [/data/imagenet]   # must exist on the node (preflight; mount sources are checked too)
        min_free_disk_gb: 50       # free space preflight wants on Docker's root dir and log_dir
        device_memory_mb: 2048     # CPU stand-in nodes only: the memory of one "device" (see Node)
        cpu_quota: 0.5             # the CPU time its containers may use, in CPUs (docker run --cpus; see Node)
        ssh: {user: dlperf, port: 22, key_file: /home/airflow/.ssh/id_ed25519,
              host_key: "ssh-ed25519 AAAA..."}   # preflight; host_key pins the node's key
        docker:                    # how Airflow reaches docker_url (see DockerAccess); all optional
          tls: {ca_cert: /etc/dlperf/docker/ca.pem, client_cert: /etc/dlperf/docker/cert.pem,
                client_key: /etc/dlperf/docker/key.pem}   # required for a tcp:// docker_url ...
          insecure: false                        # ... unless this says true (a trusted test network only)
          registry: {server: registry.example.com:5000, username: bench, password_env: DLPERF_REGISTRY_PASSWORD}
          conn_id: dlperf_docker_node0           # the default: the Airflow Docker connection (registry login)

Everything has a sensible default so a laptop inventory is two lines per node.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from dlperf_core.errors import ConfigError, format_validation_error


class Mount(BaseModel):
    """A host path bound into every framework container on the node."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    source: str
    target: str
    read_only: bool = True


class SshAccess(BaseModel):
    """How Airflow's SSH connection reaches the node (preflight, mpirun frameworks).

    ``key_file`` is a path on the Airflow workers. ``host_key`` (``"ssh-ed25519 AAAA..."``, as in
    ``/etc/ssh/ssh_host_ed25519_key.pub``) pins the node's host key; without it the workers' own
    ``~/.ssh/known_hosts`` must know the node (the SSH provider verifies host keys by default).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    user: str = "root"
    port: int = Field(22, ge=1, le=65535)
    key_file: str | None = None
    host_key: str | None = Field(None, pattern=r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp\d+) [A-Za-z0-9+/=]+( .*)?$")
    connect_timeout_s: int = Field(10, ge=1, le=300)


class DockerTls(BaseModel):
    """The TLS client of a Docker Engine listening on TCP (``dockerd --tlsverify``): PEM files on the Airflow
    workers, as made by Docker's "Protect the Docker daemon socket" guide."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ca_cert: str  # the CA that signed the engine's certificate (and the client's)
    client_cert: str
    client_key: str
    verify: bool = True  # verify the engine's certificate against ca_cert


class DockerRegistry(BaseModel):
    """A container registry the node's engine logs in to, as ``dlperf cluster sync`` writes it to the node's
    Airflow Docker connection (the Docker provider's registry login: host = ``server``, login = ``username``,
    password, extra ``email``). The docker runtime logs in only through that connection, with the provider's
    own ``DockerHook(docker_conn_id=...)``.

    The password is never written in the inventory: ``password_env`` names an environment variable that
    ``dlperf cluster sync`` reads; without it, set the password on the Airflow connection yourself."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    server: str = Field(min_length=1)  # host[:port] of the registry
    username: str = Field(min_length=1)
    password_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    email: str | None = None


MAX_GPUS = 64
"""The most devices a node may declare."""
GPU_ID = re.compile(r"\d{1,3}|(GPU|MIG)-[0-9A-Za-z][0-9A-Za-z/-]*")
"""A GPU as the NVIDIA runtime (``DeviceRequest(device_ids=...)``), ``CUDA_VISIBLE_DEVICES`` and ``nvidia-smi --id``
take it: its index, or its UUID (``nvidia-smi -L``; a MIG instance's ``MIG-...``)."""

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""The name of an environment variable a suite, benchmark or node sets (``env:``)."""


def check_env(value: object) -> object:
    """An ``env:`` mapping (suite, benchmark, inventory node): names as the shell writes them, values scalars (a
    number or a boolean is written as YAML would print it: ``1``, ``true``), each kept as a string."""
    if not isinstance(value, dict):
        return value
    out: dict[str, str] = {}
    for name, raw in value.items():
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise ValueError(f"env: {name!r} is not a variable name (letters, digits, _; not starting with a digit)")
        if isinstance(raw, bool):
            out[name] = "true" if raw else "false"
        elif isinstance(raw, str | int | float):
            out[name] = str(raw)
        else:
            raise ValueError(f"env: {name} must be a string or a number, not {type(raw).__name__}")  # noqa: TRY004 - pydantic reports a ValueError by field, not a TypeError
    return out


ClusterEnv = Annotated[dict[str, str], BeforeValidator(check_env)]
"""An ``env:`` mapping as suites, benchmarks and inventory nodes declare it, checked by :func:`check_env`."""


NETWORK_DOCKER_SCHEMES = ("tcp", "http", "https")
"""docker_url schemes that reach the engine over the network (``unix://`` and ``ssh://`` do not need TLS)."""
DOCKER_CONN_PREFIX = "dlperf_docker_"
"""Default id of a node's Airflow Docker connection: ``dlperf_docker_<name>``."""


class DockerAccess(BaseModel):
    """How Airflow reaches the node's Docker Engine at ``docker_url``.

    ``tls``: the engine's TLS client, given to the Docker provider's hook as ``tls`` (with ``docker_url`` as
    ``base_url``); it lives here only (the provider's Docker connection has no TLS fields). A Docker socket on
    TCP without TLS is root on the node for anyone who can reach it: a ``tcp://`` docker_url needs ``tls``, or
    ``insecure: true`` said explicitly (stand-in nodes on a trusted test network).

    ``conn_id`` names the node's Airflow Docker connection, which in the Docker provider is a registry login
    (default ``dlperf_docker_<name>``, written by ``dlperf cluster sync`` from ``registry``). When it exists
    the provider's hook logs in with it; a node that declares ``registry`` (or names ``conn_id``) needs it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    conn_id: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+$")
    tls: DockerTls | None = None
    registry: DockerRegistry | None = None
    insecure: bool = False

    @model_validator(mode="after")
    def _tls_or_insecure(self) -> DockerAccess:
        if self.tls is not None and self.insecure:
            raise ValueError("tls and insecure: true exclude each other; keep tls")
        return self


class Node(BaseModel):
    """One node of the cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    address: str = "127.0.0.1"
    # devices per node, or (nvidia nodes) the GPUs themselves by index or UUID: see gpu_ids
    gpus: int | tuple[str, ...] = Field(1)
    accelerator: Literal["nvidia", "cpu"] = "cpu"
    docker_url: str = "unix:///var/run/docker.sock"
    network: str = "host"
    hostname: str | None = None
    infiniband: bool = False
    memlock: bool = False
    ipc_host: bool = True
    shm_size: str = "1g"
    mounts: tuple[Mount, ...] = ()
    log_dir: str | None = None  # host folder mounted read-write at /dlperf/logs for files a framework writes
    queue: str = "default"
    ssh: SshAccess | None = None
    docker: DockerAccess = DockerAccess(conn_id=None)
    infiniband_devices: tuple[str, ...] = ()  # HCA names (/sys/class/infiniband/<name>) that must be up
    data_paths: tuple[str, ...] = ()  # host paths that must exist (datasets); mount sources are checked too
    min_free_disk_gb: float = Field(0, ge=0)  # on Docker's root dir and log_dir; 0 = only report
    # CPU stand-in nodes: what a GPU's memory is on a real node, enforced by the kernel, so that a batch too
    # large really runs out of memory (max batch search). Local runtime: RLIMIT_AS of each process; docker:
    # the container's memory limit, device_memory_mb x gpus. Unset: no limit.
    device_memory_mb: int | None = Field(None, ge=64)
    # The CPU time each container of a case on this node may use, in CPUs (docker runtime: ``docker run --cpus``,
    # the engine's NanoCpus; the local runtime has no such limit). Unset: no limit. What a node slower than its peers
    # looks like on stand-in nodes (tests/e2e/test_node_sweep.py slows one on purpose), or a cap on a shared node.
    cpu_quota: float | None = Field(None, gt=0, le=1024)
    # Environment variables set on every rank of a case on this node (the cluster's settings: NCCL_SOCKET_IFNAME,
    # NCCL_IB_HCA, UCX_NET_DEVICES, ...); over the suite's and the benchmark's (dlperf_core.model.cluster_env).
    env: ClusterEnv = Field(default_factory=dict)

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpu_list(cls, value: object) -> object:
        """A list of GPUs: each an index (``0``, ``"0"``) or a UUID (``GPU-...``, ``MIG-...``), named once."""
        if not isinstance(value, list | tuple):
            return value
        ids = tuple(str(v).strip() if isinstance(v, int | str) and not isinstance(v, bool) else "" for v in value)
        bad = [repr(v) for v, i in zip(value, ids) if not GPU_ID.fullmatch(i)]
        if bad:
            raise ValueError(f"a GPU is an index (0, 1, ...) or a UUID (GPU-..., MIG-...), not {', '.join(bad)}")
        ids = tuple(str(int(i)) if i.isdigit() else i for i in ids)
        if dupes := sorted({i for i in ids if ids.count(i) > 1}):
            raise ValueError(f"GPUs named twice: {', '.join(dupes)}")
        return ids

    @field_validator("gpus")
    @classmethod
    def _gpu_count(cls, value: int | tuple[str, ...]) -> int | tuple[str, ...]:
        count = value if isinstance(value, int) else len(value)
        if not 1 <= count <= MAX_GPUS:
            raise ValueError(f"1 to {MAX_GPUS} devices per node, not {count}")
        return value

    @model_validator(mode="after")
    def _gpu_list_on_nvidia(self) -> Node:
        if not isinstance(self.gpus, int) and self.accelerator != "nvidia":
            raise ValueError("a list of GPUs is for accelerator: nvidia nodes; a CPU node takes a count (gpus: 2)")
        return self

    @model_validator(mode="after")
    def _device_memory_on_cpu_only(self) -> Node:
        if self.device_memory_mb is not None and self.accelerator != "cpu":
            raise ValueError("device_memory_mb is for CPU stand-in nodes; a GPU brings its own memory")
        return self

    @model_validator(mode="after")
    def _tls_needs_tcp(self) -> Node:
        if self.docker.tls is not None and self.docker_scheme not in NETWORK_DOCKER_SCHEMES:
            raise ValueError(f"docker.tls is for a tcp:// docker_url, not {self.docker_url!r}")
        return self

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        """The node's devices as the NVIDIA runtime and CUDA name them: ``gpus: 8`` is ``("0", ..., "7")``, a list
        is itself (indexes as strings, UUIDs as written). On a CPU node: ``"0" .. "<gpus - 1>"``, its ranks."""
        if isinstance(self.gpus, int):
            return tuple(str(i) for i in range(self.gpus))
        return self.gpus

    @property
    def gpu_count(self) -> int:
        """How many devices the node has (processes per node on a CPU-only node)."""
        return len(self.gpu_ids)

    def case_gpu_ids(self, count: int) -> tuple[str, ...]:
        """The devices a case of ``count`` devices per node gets on this node: the first ``count`` of
        :attr:`gpu_ids`, in the inventory's order. The first, not a choice per run: the same case runs on the same
        GPUs every night (its figures compare), and the GPUs a node lends out are the ones its ``gpus`` lists
        first, so a node shared with other work lists its own GPUs first (or only)."""
        if not 1 <= count <= self.gpu_count:
            raise ValueError(f"node {self.name} has {self.gpu_count} devices, not {count}")
        return self.gpu_ids[:count]

    @property
    def airflow_id(self) -> str:
        """Id of this node's Airflow SSH connection and one-slot pool (``dlperf cluster sync``)."""
        return f"dlperf_node_{self.name}"

    @property
    def docker_conn_id(self) -> str:
        """Id of this node's Airflow Docker connection: ``docker.conn_id``, else ``dlperf_docker_<name>``."""
        return self.docker.conn_id or f"{DOCKER_CONN_PREFIX}{self.name}"

    @property
    def docker_scheme(self) -> str:
        """The scheme of ``docker_url`` (``unix``, ``tcp``, ``ssh``, ...)."""
        return urlsplit(self.docker_url).scheme.lower()

    @property
    def container_hostname(self) -> str:
        """Hostname (and network alias) of this node's container on a user-defined network."""
        return self.hostname or self.name

    @property
    def reach_address(self) -> str:
        """The address other ranks use to reach this node."""
        return self.address if self.network == "host" else self.container_hostname


def insecure_docker_nodes(nodes: Iterable[Node]) -> list[str]:
    """Why each node's engine would be reached over the network without TLS (empty: none is).

    Pure: it looks at the inventory only, where a node's TLS client is declared (``docker.tls``)."""
    return [
        f"node {n.name}: docker_url {n.docker_url} is a Docker socket on TCP without TLS, which is root on the "
        "node for anyone who can reach that port; configure TLS (docker: {tls: {ca_cert: ..., client_cert: ..., "
        "client_key: ...}}) or, on a trusted test network only, set docker: {insecure: true} explicitly"
        for n in nodes
        if n.docker_scheme in NETWORK_DOCKER_SCHEMES and n.docker.tls is None and not n.docker.insecure
    ]


def check_docker_access(inventory: Inventory, source: str) -> None:
    """Refuse (planning, docker runtime) an inventory with a node whose Docker Engine is on TCP without TLS
    and without an explicit ``insecure: true``."""
    problems = insecure_docker_nodes(inventory.nodes)
    if problems:
        raise ConfigError(source, problems)


class Inventory(BaseModel):
    """The nodes a suite may use, in order: node 0 is the rendezvous master."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = "inventory"
    nodes: tuple[Node, ...] = Field(min_length=1)

    @field_validator("nodes")
    @classmethod
    def _unique_names(cls, nodes: tuple[Node, ...]) -> tuple[Node, ...]:
        names = [n.name for n in nodes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate node names: {', '.join(dupes)}")
        return nodes

    @model_validator(mode="after")
    def _one_network_kind(self) -> Inventory:
        if len({n.network == "host" for n in self.nodes}) > 1:
            raise ValueError("nodes mix network 'host' with docker networks; use one kind per inventory")
        return self

    def first(self, count: int) -> tuple[Node, ...]:
        """The nodes a case of ``count`` nodes runs on."""
        return self.nodes[:count]

    def case_nodes(self, count: int, pinned: str | None = None) -> tuple[Node, ...]:
        """The nodes a case runs on: the node it is pinned to (``pinned``: a per-node sweep's case,
        ``Case.node``), else the first ``count``. KeyError for a pinned name the inventory does not have."""
        if pinned is None:
            return self.first(count)
        found = [n for n in self.nodes if n.name == pinned]
        if not found:
            raise KeyError(f"inventory {self.name!r} has no node {pinned!r} (it has {', '.join(self.names)})")
        return (found[0],)

    @property
    def names(self) -> tuple[str, ...]:
        """The nodes' names, in order."""
        return tuple(n.name for n in self.nodes)


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate an inventory file; errors name the file and the field."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(str(path), ["file not found"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [f"not valid YAML: {exc}"]) from None
    if not isinstance(raw, dict):
        raise ConfigError(str(path), ["expected a mapping with a 'nodes' list at the top level"])
    try:
        return Inventory.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(str(path), format_validation_error(exc)) from None
