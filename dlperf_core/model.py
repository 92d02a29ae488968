"""The domain model: the plain data every part of dlperf passes around, in one place.

A *topology* (nodes x devices) and a *case* (framework, model, precision, batch, topology, options) come out of
a suite; a *case run* is one repeat of a case. A runtime turns a case run into a *case job* (one *node launch*
and one *container spec* per node), executes it through the *Runtime* protocol, and reports a *case outcome*
(how each node ended, before the log is parsed). *Run ids* name the Airflow DAG run it belongs to. Exit codes
that dlperf itself gives a node are defined here too.

Nothing here knows a framework adapter, a runtime implementation or Airflow: every other module imports from
this one, and it imports only plain types of :mod:`dlperf_core.cluster` (the inventory's, a container file, a GPU's
health and clock samples) and :mod:`dlperf_core.json_form` (the JSON forms of a case, a case run and an outcome are
generated from their types).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dlperf_core.cluster.clock_events import ClockSample
from dlperf_core.cluster.gpu_health import GpuHealth
from dlperf_core.cluster.inventory import Mount, Node
from dlperf_core.cluster.sshkeys import ContainerFile
from dlperf_core.json_form import JsonForm

if TYPE_CHECKING:
    from dlperf_core.cluster.cpu_placement import HostCores
    from dlperf_core.cluster.gpu_sampling import GpuSamples

# Exit codes dlperf gives a node itself (the runtime's supervisor names them in a failure's reason)
SSH_SETUP_EXIT = 97  # mpirun's node 0 could not reach a peer's sshd (dlperf_core.frameworks.mpi)
PEER_LOST_EXIT = -1000  # a peer node's task stopped reporting: its worker is gone (dlperf_core.run.runtime.gang)


_TOPOLOGY = re.compile(r"^(\d+)n(\d+)g$")


class Topology(BaseModel):
    """Nodes x devices per node, written ``{nodes}n{gpus}g`` as in the seeds' folders (1n1g ... 4n8g)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    nodes: int = Field(ge=1, le=1024)
    gpus_per_node: int = Field(ge=1, le=64)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            match = _TOPOLOGY.match(value.strip())
            if not match:
                raise ValueError(f"invalid topology {value!r}: expected like '1n8g' (nodes 'n' gpus-per-node 'g')")
            return {"nodes": int(match.group(1)), "gpus_per_node": int(match.group(2))}
        return value

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def __str__(self) -> str:
        return f"{self.nodes}n{self.gpus_per_node}g"


ARGS_MARK = "args="
"""What comes before a configuration's fingerprint in a case key and variant (``...+args=1f0c9a2e``)."""
UNKNOWN_ARGS = "unknown"
"""The fingerprint part of a row stored before configurations were recorded (migration 0010): its extra
arguments and window are not known, so it is not given a fingerprint."""


OptionValue = str | int | float | bool | None
"""The value of an adapter option (a suite's ``options: {name: value}``; None: an adapter default that means
"not set")."""

TOPOLOGY_FIELDS = ("nodes", "gpus_per_node")
"""The topology's fields of a configuration, which its fingerprint leaves out (:attr:`Case.fingerprint`)."""

NODE_MARK = "node="
"""What comes before the node a case is pinned to in its key and variant (``.../1n8g+node=gpu07+args=1f0c9a2e``): a
case of a per-node sweep (a suite benchmark's ``per_node: true``) runs on that node of the inventory only. Its
fingerprint leaves the node out, as it leaves the topology out, so the cases of one sweep differ by this part
alone."""

_PINNED = re.compile(r"\+" + NODE_MARK + r"(?P<node>[A-Za-z0-9][A-Za-z0-9_.-]*)(?=\+" + ARGS_MARK + r"|$)")


def configuration_fingerprint(configuration: dict[str, Any]) -> str:
    """A short stable fingerprint of a configuration: the first 8 hex digits of the SHA-256 of its canonical JSON
    (keys sorted, no spaces). The same configuration gives the same fingerprint on every machine and version."""
    text = json.dumps(configuration, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def fingerprint_of(key_or_variant: str | None) -> str | None:
    """The fingerprint a case key or variant ends with (``1f0c9a2e``; :data:`UNKNOWN_ARGS` for rows stored before
    configurations were recorded), None when it has none."""
    marker = "+" + ARGS_MARK
    text = key_or_variant or ""
    i = text.rfind(marker)
    return None if i < 0 else text[i + len(marker) :]


def pinned_node(key_or_variant: str | None) -> str | None:
    """The node a case key or variant is pinned to (``.../1n8g+node=gpu07+args=...`` -> ``gpu07``), None when it
    is not (the case runs on the first nodes of the inventory)."""
    found = _PINNED.search(key_or_variant or "")
    return found["node"] if found else None


def unpinned(key_or_variant: str) -> str:
    """``key_or_variant`` without its pinned node: the key of the sweep a per-node case belongs to, the same for
    every node of the sweep (``.../1n8g+node=gpu07+args=1f0c9a2e`` -> ``.../1n8g+args=1f0c9a2e``)."""
    return _PINNED.sub("", key_or_variant, count=1)


def series_base(case_key: str) -> str:
    """``case_key`` without its ``+args=...`` part: the configuration as the readable fields and options say it,
    whatever its extra arguments and window (``.../1n1g+compile+args=1f0c9a2e`` -> ``.../1n1g+compile``)."""
    i = case_key.find("+" + ARGS_MARK)
    return case_key if i < 0 else case_key[:i]


@dataclass(frozen=True)
class Case(JsonForm):
    """One configuration to measure: framework, model, precision, batch per device, topology. Its JSON form
    (:meth:`to_json`) is generated from the fields; :attr:`configuration` is the stored one."""

    framework: str
    model: str
    precision: str
    batch_size_per_device: int
    nodes: int
    gpus_per_node: int
    warmup_iterations: int
    measured_iterations: int
    image: str | None = None
    extra_args: tuple[str, ...] = ()
    options: tuple[tuple[str, OptionValue], ...] = ()  # adapter options, sorted by name
    compile: bool = False  # run under torch.compile
    # Variables set on every rank (the suite's and the benchmark's ``env``, sorted by name): the cluster's settings,
    # part of the stored environment, not of the configuration (not in :attr:`configuration`, key or fingerprint)
    env: tuple[tuple[str, str], ...] = ()
    # The inventory node the case runs on (a per-node sweep: ``per_node: true``; one node, ``nodes`` is 1); None: the
    # first ``nodes`` nodes of the inventory. Part of the key and the configuration, not of the fingerprint.
    node: str | None = None

    @property
    def topology(self) -> str:
        return f"{self.nodes}n{self.gpus_per_node}g"

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def key(self) -> str:
        """Stable identity of the configuration, e.g. ``pytorch_reference/resnet50_v1.5/fp32/b8/1n2g+args=1f0c9a2e``:
        the readable fields, then :attr:`options_key`."""
        key = f"{self.framework}/{self.model}/{self.precision}/b{self.batch_size_per_device}/{self.topology}"
        return key + self.options_key

    @property
    def options_key(self) -> str:
        """``+name=value`` per adapter option, then ``+compile`` for a torch.compile run, then ``+args=`` and
        the :attr:`fingerprint` of the whole configuration: options make a different configuration (e.g. NGC
        PyTorch AMP with static vs dynamic loss scale), and so do the extra arguments and the measured window,
        which only the fingerprint shows. Stored as the result's ``variant``."""
        return f"{self.readable_options}+{ARGS_MARK}{self.fingerprint}"

    @property
    def readable_options(self) -> str:
        """The part of :attr:`options_key` before its fingerprint: ``+name=value``..., ``+compile`` and the pinned
        node (``+node=gpu07``, :data:`NODE_MARK`)."""
        options = "".join(f"+{name}={value}" for name, value in self.options) + ("+compile" if self.compile else "")
        return options + (f"+{NODE_MARK}{self.node}" if self.node else "")

    @property
    def configuration(self) -> dict[str, Any]:
        """Everything that changes what is trained or measured, as JSON-ready data: the key's fields, the
        options, compile, the extra arguments and the measured window. Stored on every result
        (``results.configuration``); :attr:`fingerprint` identifies it. A pinned case also names its ``node``
        (a key only such a case has: every other configuration, and its fingerprint, is as before)."""
        configuration: dict[str, Any] = {
            "framework": self.framework,
            "model": self.model,
            "precision": self.precision,
            "batch_size_per_device": self.batch_size_per_device,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "options": {name: value for name, value in self.options},
            "compile": self.compile,
            "extra_args": list(self.extra_args),
            "warmup_iterations": self.warmup_iterations,
            "measured_iterations": self.measured_iterations,
        }
        return configuration | ({"node": self.node} if self.node else {})

    @property
    def fingerprint(self) -> str:
        """:func:`configuration_fingerprint` of :attr:`configuration` without the topology and the pinned node, which
        the key says in its own words: every topology of one configuration has the same fingerprint, so its speedup
        finds its 1n1g baseline (same framework, model, precision, batch and variant), and every node of a per-node
        sweep has the fingerprint of the sweep."""
        return self.fingerprint_without()

    def fingerprint_without(self, *names: str) -> str:
        """The fingerprint of :attr:`configuration` without the topology and ``names`` (a max batch search, whose
        probes vary the batch, leaves out ``batch_size_per_device``)."""
        left_out = (*TOPOLOGY_FIELDS, "node", *names)
        return configuration_fingerprint({k: v for k, v in self.configuration.items() if k not in left_out})


def cluster_env(case: Case, node: Node) -> dict[str, str]:
    """The variables every rank of ``case`` on ``node`` gets: the case's (suite, then benchmark), the node's over
    them (an interface name differs per node). An adapter's own variables go over these (they make the case)."""
    return {**dict(case.env), **node.env}


def with_cluster_env(case: Case, nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    """``nodes`` with each one's ``env`` resolved for ``case`` (:func:`cluster_env`): what planning keeps and the
    adapters launch with. Resolving again changes nothing (the node's own variables already won)."""
    return tuple(node if not case.env else node.model_copy(update={"env": cluster_env(case, node)}) for node in nodes)


@dataclass(frozen=True)
class CaseRun(JsonForm):
    """One repeat of one case: the unit that holds the nodes' GPUs."""

    case: Case
    repeat: int  # 0-based
    index: int = 0  # position in the plan
    total: int = 1


@dataclass(frozen=True)
class RunIds:
    """The Airflow DAG run a case run belongs to."""

    dag_id: str
    run_id: str

    @property
    def short(self) -> str:
        return hashlib.sha1(f"{self.dag_id}/{self.run_id}".encode()).hexdigest()[:10]

    @property
    def labels(self) -> dict[str, str]:
        """Docker labels that find every container of this DAG run (cleanup)."""
        return {"dlperf.dag_id": self.dag_id, "dlperf.run_id": self.run_id}


@dataclass(frozen=True)
class NodeLaunch:
    """What to start on one node: argv and extra environment."""

    node: Node
    node_rank: int
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    # "launcher": its exit ends the case (all launchers must exit 0); "sshd": serves mpirun's remote ranks,
    # is started before the launchers and stopped after them.
    role: Literal["launcher", "sshd"] = "launcher"


@dataclass(frozen=True)
class ContainerSpec:
    """One framework container on one node."""

    name: str
    image: str
    command: tuple[str, ...]
    environment: dict[str, str]
    labels: dict[str, str]
    network: str  # "host" or a user-defined docker network
    hostname: str | None  # set (and used as network alias) on user-defined networks only
    # the GPUs it gets through the NVIDIA runtime (DeviceRequest(device_ids=...)), by index or UUID as the inventory
    # names them: the case's devices on this node, no other (empty: none, a CPU node)
    gpu_ids: tuple[str, ...]
    devices: tuple[str, ...] = ()  # e.g. /dev/infiniband
    ipc_host: bool = True
    shm_size: str | None = None
    cap_add: tuple[str, ...] = ()
    memlock_unlimited: bool = False
    mounts: tuple[Mount, ...] = ()
    working_dir: str | None = None
    extra_hosts: dict[str, str] = field(default_factory=dict)
    files: tuple[ContainerFile, ...] = field(default=(), repr=False)  # put in before start (per-case keys)
    memory_limit_mb: int | None = None  # CPU stand-in nodes: device_memory_mb x devices (no swap)
    cpuset_cpus: str | None = (
        None  # CPU stand-in nodes: the cores of this node's ranks ("0,1"; dlperf_core.cluster.cpu_placement)
    )
    cpu_quota: float | None = None  # the CPU time it may use, in CPUs (docker run --cpus): the node's Node.cpu_quota


@dataclass(frozen=True)
class CaseJob:
    """Everything a runtime needs to execute one case run."""

    run_label: str  # unique, docker-name-safe id of this case run
    launches: tuple[NodeLaunch, ...]
    containers: tuple[ContainerSpec, ...]  # one per launch (used by container runtimes)
    log_dir: Path
    timeout_s: float
    watchdog_s: float | None
    devices_per_node: int | None = None  # GPUs (or CPU processes) each node runs: which GPUs to sample
    # CPU stand-in nodes whose host has fewer cores than their ranks (dlperf_core.cluster.cpu_placement); None: each has its own
    oversubscription: str | None = None


@dataclass
class NodeOutcome:
    node: str
    rank: int
    exit_code: int | None
    log_path: str


@dataclass
class CaseOutcome(JsonForm):
    """How a case run ended, before its log is parsed."""

    started_at: datetime
    finished_at: datetime
    nodes: list[NodeOutcome]
    failure: str | None  # runtime-level reason (exit code, timeout, watchdog, start error)
    gpu_memory_peak_mb: float | None = None  # highest memory used on one GPU, sampled during the run
    # per node, (unix time, W summed over its GPUs) of each sample with a power reading (nvidia nodes)
    gpu_power: dict[str, list[tuple[float, float]]] | None = None
    oversubscription: str | None = None  # the job's (CaseJob.oversubscription): its figures are flagged
    # the case's GPUs before it started (dlperf_core.cluster.gpu_health); None: not checked (a fabric case, an import)
    gpu_health: GpuHealth | None = None
    # per node, each GPU's clocks per sample (clock-event reasons, SM clock, temperature, PCIe generation)
    gpu_clocks: dict[str, list[ClockSample]] | None = None

    @property
    def log_path(self) -> str | None:
        """The log the parser reads: node 0's (rank 0 prints the figures)."""
        return self.nodes[0].log_path if self.nodes else None


class NodeProcess(Protocol):
    """A running node of a case: a process group or a container."""

    node_name: str
    log_path: Path

    @property
    def oom_killed(self) -> bool:
        """The runtime saw the kernel's OOM killer end it (a container's memory limit)."""
        ...

    def poll(self) -> int | None:
        """Exit code, or None while running."""

    def kill(self) -> None:
        """Stop it now (idempotent)."""

    def close(self) -> None:
        """Release everything: remove the container, close files (idempotent)."""


class CaseInPhases(Protocol):
    """One case run in three phases, so that what waits between them need not hold a worker (a runtime whose jobs
    queue in a scheduler defers between polls): :meth:`submit` starts every node, :meth:`poll` looks once (True:
    the case ended, however), :meth:`collect` stops and removes every node and gives the outcome. The runtimes'
    is :class:`dlperf_core.run.runtime.base.CaseRunning`."""

    poll_s: float  # how long to wait between two polls

    def submit(self) -> None: ...

    def poll(self) -> bool: ...

    def collect(self) -> CaseOutcome: ...


class Runtime(Protocol):
    """Where case jobs run: ``local`` processes or ``docker`` containers."""

    @property
    def name(self) -> str:
        """``local`` or ``docker``."""
        ...

    @property
    def python(self) -> str:
        """The interpreter on the nodes: ``python3`` in a container, ``sys.executable`` locally."""
        ...

    @property
    def workload_dir(self) -> str:
        """The folder holding dlperf's reference workload on the nodes."""
        ...

    def host_cores(self, node: Node) -> HostCores | None:
        """The host ``node`` runs on and its cores (:mod:`dlperf_core.cluster.cpu_placement`), None where not known."""
        ...

    def submit(self, job: CaseJob) -> CaseInPhases:
        """``job`` ready to run in phases (submit, poll, collect), nothing started yet."""
        ...

    def execute(self, job: CaseJob) -> CaseOutcome:
        """``job`` run to its end on this worker (``run_to_end(self.submit(job))``)."""
        ...

    def start_node(
        self, job: CaseJob, i: int, files: tuple[ContainerFile, ...] | None = None, samples: GpuSamples | None = None
    ) -> NodeProcess:
        """Start only launch ``i`` of ``job`` (a node's own share, :mod:`dlperf_core.run.runtime.gang`);
        ``files`` replace the container's ssh files (None: the job's own); ``samples`` collect the node's GPU
        memory and power while it runs, where the runtime samples per node (docker)."""
        ...

    def cleanup(self, labels: dict[str, str]) -> list[str]: ...
