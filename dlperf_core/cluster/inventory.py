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

A cluster run by Slurm (``runtime: slurm``) says so with a ``slurm:`` block; its nodes are then *slots* of the job's
allocation, not hosts (Slurm chooses the hosts; see :class:`SlurmSettings`)::

    name: slurm-a100
    slurm:
      connection: dlperf_slurm_login     # Airflow SSH connection to the login node (required)
      partition: gpu                     # account, qos, constraint: as sbatch takes them (all optional)
      time_limit: "01:00:00"             # minutes (30), [HH:]MM:SS, D-HH[:MM[:SS]]
      exclusive: true                    # the default: no other job on the case's nodes
      software: none                     # none | {container_image: nvcr.io#nvidia/pytorch:24.01-py3}
                                         #      | {apptainer: /shared/images/pytorch.sif}
      work_dir: /shared/dlperf           # on the shared filesystem: the same path on login and compute nodes
      on_drained: wait                   # wait | fail: a job pending on drained/down nodes
      poll_s: 15
      setup: ["module load cuda/12.4"]   # shell lines run before srun starts the nodes (a venv: export PATH=...)
    nodes:                               # slots: how many nodes a case may get and what each has
      - {name: slot0, gpus: 8, accelerator: nvidia, env: {NCCL_SOCKET_IFNAME: ib0}}
      - {name: slot1, gpus: 8, accelerator: nvidia, env: {NCCL_SOCKET_IFNAME: ib0}}
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


SLOT_ADDRESS = "$DLPERF_NODE{rank}_ADDR"
"""The address of slot ``rank`` of a Slurm inventory: a shell variable the batch script sets from the job's node list
(``scontrol show hostnames "$SLURM_JOB_NODELIST"``, :mod:`dlperf_core.run.runtime.slurm_jobs`), so the frameworks'
launch commands (torchrun's ``--master_addr``, mpirun's hosts) name the host Slurm chose."""
SLOT_ADDRESS_PATTERN = re.compile(r"\$DLPERF_NODE(\d+)_ADDR")
"""What :data:`SLOT_ADDRESS` looks like (the batch script expands exactly these in a launch's arguments)."""

TIME_LIMIT = re.compile(
    r"(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?)"  # D-HH, D-HH:MM, D-HH:MM:SS
    r"|(?:(?P<h>\d+):(?P<m>\d+):(?P<s>\d+))"  # HH:MM:SS
    r"|(?:(?P<mm>\d+):(?P<ss>\d+))"  # MM:SS
    r"|(?P<minutes>\d+)"  # minutes
)
"""The forms of sbatch's ``--time`` (Slurm's "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
"days-hours:minutes", "days-hours:minutes:seconds")."""


def time_limit_seconds(value: str) -> int:
    """The seconds of a Slurm time limit in one of :data:`TIME_LIMIT`'s forms (``30`` -> 1800, ``1:00:00`` -> 3600,
    ``2-12`` -> 216000); ValueError for anything else."""
    m = TIME_LIMIT.fullmatch(value.strip())
    if not m:
        raise ValueError(
            f"time_limit {value!r} is not a Slurm time: minutes (30), MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"
        )
    g = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    if "days" in g:
        return ((g["days"] * 24 + g["dh"]) * 60 + g.get("dm", 0)) * 60 + g.get("ds", 0)
    if "h" in g:
        return (g["h"] * 60 + g["m"]) * 60 + g["s"]
    if "mm" in g:
        return g["mm"] * 60 + g["ss"]
    return g["minutes"] * 60


SBATCH_WORD = r"^[^\s'\"\\$`]+$"
"""A value written into an ``#SBATCH`` line (partition, account, QoS, constraint, image): no blanks, quotes, ``$``."""


class ContainerImage(BaseModel):
    """``software: {container_image: ...}``: every rank runs in this image through pyxis/enroot
    (``srun --container-image=... --container-mounts=...``, the node's ``mounts`` as its mounts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    container_image: str = Field(min_length=1, pattern=SBATCH_WORD)


class ApptainerImage(BaseModel):
    """``software: {apptainer: /path/image.sif}``: every rank runs in this image through Apptainer
    (``srun apptainer exec --nv image.sif ...``, the node's ``mounts`` as ``--bind``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    apptainer: str = Field(min_length=2, pattern=r"^/[^\s'\"\\$`]+$")


SlurmSoftware = Literal["none"] | ContainerImage | ApptainerImage
"""How the ranks of a Slurm job get their software: ``none`` (a module or a venv on the nodes: what the framework's
image holds is assumed installed on them), a pyxis/enroot image, or an Apptainer image."""


class SlurmSettings(BaseModel):
    """An inventory's ``slurm:`` block: dlperf submits each case run as one Slurm job from a login node.

    ``connection``: the Airflow SSH connection to the login node (sbatch, scontrol, scancel run there).
    ``partition``, ``account``, ``qos``, ``constraint``: as sbatch takes them (None: the cluster's default).
    ``time_limit``: sbatch's ``--time`` (:func:`time_limit_seconds`'s forms; None: the partition's default).
    ``exclusive``: the case's nodes run no other job (the default: a benchmark shares no node).
    ``software``: :data:`SlurmSoftware`. ``work_dir``: a folder on the cluster's shared filesystem, the same path
    on the login and the compute nodes: the batch scripts and the nodes' logs are written under it. ``on_drained``:
    a job pending because its nodes are drained or down keeps waiting (``wait``), or is cancelled and fails with
    Slurm's reason (``fail``). ``poll_s``: seconds between two looks at the job's state. ``setup``: shell lines the
    batch script runs before srun starts the nodes (``module load``, a venv's PATH), whose environment they inherit."""

    @field_validator("setup", mode="before")
    @classmethod
    def _setup_lines(cls, value: object) -> object:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list | tuple) and any(not isinstance(v, str) or "\n" in v for v in value):
            raise ValueError("setup: a list of shell lines, one command per line")
        return value

    model_config = ConfigDict(extra="forbid", frozen=True)
    connection: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    partition: str | None = Field(None, pattern=SBATCH_WORD)
    account: str | None = Field(None, pattern=SBATCH_WORD)
    qos: str | None = Field(None, pattern=SBATCH_WORD)
    time_limit: str | None = None
    constraint: str | None = Field(None, pattern=SBATCH_WORD)
    exclusive: bool = True
    software: SlurmSoftware = "none"
    work_dir: str = Field(pattern=r"^/[^\s'\"\\$`]*$")
    on_drained: Literal["wait", "fail"] = "wait"
    poll_s: float = Field(15, ge=1, le=3600)
    # shell lines the batch script runs first, on the job's first node, before srun starts the nodes (which inherit
    # the environment they make): a site's `module load ...`, a venv's `export PATH=/opt/venv/bin:$PATH`
    setup: tuple[str, ...] = ()

    @field_validator("time_limit", mode="before")
    @classmethod
    def _time_limit(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # YAML's 30: 30 minutes
        if isinstance(value, str) and time_limit_seconds(value) == 0:
            raise ValueError(f"time_limit {value!r} is no time: Slurm reads 0 as no limit at all; leave it out instead")
        return value

    @property
    def time_limit_s(self) -> int | None:
        """The time limit in seconds (None: the partition's default)."""
        return None if self.time_limit is None else time_limit_seconds(self.time_limit)

    @property
    def software_kind(self) -> Literal["none", "pyxis", "apptainer"]:
        if isinstance(self.software, ContainerImage):
            return "pyxis"
        if isinstance(self.software, ApptainerImage):
            return "apptainer"
        return "none"


SLOT_REFUSED = (
    "docker_url",
    "network",
    "hostname",
    "docker",
    "ipc_host",
    "shm_size",
    "memlock",
    "infiniband",
    "infiniband_devices",
    "log_dir",
    "queue",
    "ssh",
    "data_paths",
    "min_free_disk_gb",
    "device_memory_mb",
    "cpu_quota",
)
"""A node's fields that mean nothing for a slot of a Slurm job (Docker's engine and container settings, node
routing's queue, preflight's ssh and checks, the CPU stand-ins' limits): a Slurm inventory that sets one is refused."""


def slot_problems(node: Node, software: SlurmSoftware) -> list[str]:
    """Why ``node``, a slot of a Slurm inventory, is refused (empty: it is fine): an address (Slurm chooses
    the hosts), a field of :data:`SLOT_REFUSED` other than its default, mounts without a container."""
    problems = []
    defaults = Node.model_validate({"name": node.name})
    if node.address != defaults.address and not SLOT_ADDRESS_PATTERN.fullmatch(node.address):
        problems.append(
            f"node {node.name}: address {node.address!r}: the nodes of a Slurm inventory are slots of the job, and "
            "Slurm chooses their hosts; leave address out (the batch script sets it)"
        )
    for name in SLOT_REFUSED:
        if getattr(node, name) != getattr(defaults, name):
            problems.append(
                f"node {node.name}: {name} is not for a Slurm inventory (its nodes are slots of a Slurm job, run by "
                "srun, not containers on a Docker engine); leave it out"
            )
    if node.mounts and software == "none":
        problems.append(
            f"node {node.name}: mounts are for a container (software: container_image or apptainer); with software: "
            "none the ranks see the nodes' own filesystem"
        )
    return problems


def unprotected_tcp(docker_url: str, tls: DockerTls | None, insecure: bool) -> bool:
    """Whether an engine at ``docker_url`` would be reached over the network without TLS, not said ``insecure``."""
    return urlsplit(docker_url).scheme.lower() in NETWORK_DOCKER_SCHEMES and tls is None and not insecure


def insecure_docker_nodes(nodes: Iterable[Node]) -> list[str]:
    """Why each node's engine would be reached over the network without TLS (empty: none is).

    Pure: it looks at the inventory only, where a node's TLS client is declared (``docker.tls``)."""
    return [
        f"node {n.name}: docker_url {n.docker_url} is a Docker socket on TCP without TLS, which is root on the "
        "node for anyone who can reach that port; configure TLS (docker: {tls: {ca_cert: ..., client_cert: ..., "
        "client_key: ...}}) or, on a trusted test network only, set docker: {insecure: true} explicitly"
        for n in nodes
        if unprotected_tcp(n.docker_url, n.docker.tls, n.docker.insecure)
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
    # a cluster run by Slurm: its nodes are slots of a job (each one's address SLOT_ADDRESS); None: dlperf's own nodes
    slurm: SlurmSettings | None = None

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

    @model_validator(mode="after")
    def _slurm_slots(self) -> Inventory:
        """A Slurm inventory's nodes are slots: refused where they say what only a host has; each one's address is
        :data:`SLOT_ADDRESS` of its position (a case's nodes made an inventory again, ``PlannedRun.cluster``, are
        numbered from 0 again: the batch script sets the variables in that order). Frozen: set once, in place, as the
        validated value."""
        if self.slurm is None:
            return self
        problems = [p for node in self.nodes for p in slot_problems(node, self.slurm.software)]
        if problems:
            raise ValueError("; ".join(problems))
        slots = tuple(
            node.model_copy(update={"address": SLOT_ADDRESS.format(rank=rank)}) for rank, node in enumerate(self.nodes)
        )
        object.__setattr__(self, "nodes", slots)
        return self

    @property
    def runtime(self) -> str | None:
        """The runtime this inventory's nodes need, where only one fits: ``slurm`` for a Slurm inventory, else None
        (local or docker, as the suite or the trigger says)."""
        return "slurm" if self.slurm is not None else None

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
