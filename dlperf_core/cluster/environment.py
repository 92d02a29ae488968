"""The environment a benchmark ran in: GPUs, driver, clocks, CUDA/cuDNN/NCCL, framework, image, topology,
InfiniBand, hosts, CPU and memory.

A shell *probe* (:data:`PROBE_SCRIPT`) runs on a node (locally, or in a one-shot container of the case
image) and prints one section per source, each introduced by ``@@dlperf:<name>@@``. Everything below the
probe is pure: :func:`parse_probe` turns its output into a :class:`NodeProbe`, :func:`combine` turns the
probes of the nodes a case uses into one :class:`Environment`, whose :attr:`Environment.content_hash` is
the identity under which it is stored once (and linked to every result measured in it).

A source that is absent (no GPU, no ``nvidia-smi``, no InfiniBand tools, no framework installed) is not
an error: the field stays ``None`` and :attr:`Environment.missing` says what was not found and why.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from dlperf_core.json_form import JsonForm

SECTION = re.compile(r"^@@dlperf:([a-z_]+)@@$", re.M)
MISSING = "@@missing@@"

#: The nvidia-smi fields queried per GPU, in order (``--format=csv,noheader,nounits``).
GPU_QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "driver_version",
    "power.limit",
    "clocks.max.sm",
    "clocks.max.mem",
    "clocks.applications.graphics",
    "memory.total",
    "pci.bus_id",
    "uuid",
)

#: Python run by the probe: framework distribution versions (without importing them) and the CUDA,
#: cuDNN and NCCL versions torch was built with (importing torch only when it is installed).
PYTHON_PROBE = r"""
import json, os, sys
from importlib import metadata
out = {"python": sys.version.split()[0], "frameworks": {}, "env": {}}
for dist in ("torch", "paddlepaddle", "paddlepaddle-gpu", "mxnet", "mxnet-cu112", "mindspore",
             "mindspore-gpu", "oneflow", "tensorflow", "jax", "horovod"):
    try:
        out["frameworks"][dist] = metadata.version(dist)
    except metadata.PackageNotFoundError:
        pass
for var in ("CUDA_VERSION", "CUDA_DRIVER_VERSION", "CUDNN_VERSION", "NCCL_VERSION",
            "NVIDIA_PYTORCH_VERSION", "PYTORCH_VERSION"):
    if os.environ.get(var):
        out["env"][var] = os.environ[var]
if "torch" in out["frameworks"]:
    try:
        import torch
        out["torch_cuda"] = torch.version.cuda
        out["torch_cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        try:
            nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
        except Exception:
            nccl = None
        out["torch_nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl
    except Exception as exc:
        out["torch_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""

PythonProbe = dict[str, Any]
"""What :data:`PYTHON_PROBE` prints, read as it is (a JSON edge: its keys are the probe's, not a type of dlperf's;
``frameworks`` and ``env`` map names to versions, ``torch_*`` are there only where torch is installed)."""

#: The shell probe. ``$DLPERF_PYTHON`` (default ``python3``) runs :data:`PYTHON_PROBE`.
PROBE_SCRIPT = (
    r"""
section() { echo "@@dlperf:$1@@"; }
have() { command -v "$1" >/dev/null 2>&1; }
section hostname; hostname 2>/dev/null || cat /etc/hostname 2>/dev/null || echo "@@missing@@ hostname"
section gpus
if have nvidia-smi; then
  nvidia-smi --query-gpu="""
    + ",".join(GPU_QUERY_FIELDS)
    + r""" --format=csv,noheader,nounits 2>&1 || echo "@@missing@@ nvidia-smi failed"
else echo "@@missing@@ nvidia-smi not found"; fi
section smi_header
if have nvidia-smi; then nvidia-smi 2>&1 | head -n 5; else echo "@@missing@@ nvidia-smi not found"; fi
section topology
if have nvidia-smi; then nvidia-smi topo -m 2>&1 || echo "@@missing@@ nvidia-smi topo -m failed"
else echo "@@missing@@ nvidia-smi not found"; fi
section ibstat
if have ibstat; then ibstat 2>&1 || echo "@@missing@@ ibstat failed"
else echo "@@missing@@ ibstat not found"; fi
section ibv_devinfo
if have ibv_devinfo; then ibv_devinfo 2>&1 || echo "@@missing@@ ibv_devinfo failed"
else echo "@@missing@@ ibv_devinfo not found"; fi
section cpuinfo; cat /proc/cpuinfo 2>/dev/null || echo "@@missing@@ /proc/cpuinfo not readable"
section meminfo; cat /proc/meminfo 2>/dev/null || echo "@@missing@@ /proc/meminfo not readable"
section python
PY="${DLPERF_PYTHON:-python3}"
if have "$PY"; then "$PY" -c '"""
    + PYTHON_PROBE.replace("'", "'\"'\"'")
    + r"""' 2>&1 | tail -n 1; else echo "@@missing@@ $PY not found"; fi
section end
"""
)


# --------------------------------------------------------------------------- parsed pieces


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as nvidia-smi reports it."""

    index: int
    name: str
    driver_version: str
    power_limit_w: float | None
    sm_clock_max_mhz: float | None
    mem_clock_max_mhz: float | None
    app_clock_mhz: float | None
    memory_total_mb: float | None
    pci_bus_id: str | None
    uuid: str | None = None  # GPU-...: the GPU whatever its index (a container numbers its GPUs from 0)


@dataclass(frozen=True)
class InfinibandPort:
    """One port of an InfiniBand HCA."""

    device: str
    port: int
    state: str  # "Active", "Down", "PORT_ACTIVE", ...
    rate: str | None = None
    link_layer: str | None = None


@dataclass(frozen=True)
class NodeProbe:
    """What the probe found on one node (or in one container on it)."""

    hostname: str | None
    gpus: tuple[GpuInfo, ...] = ()
    cuda_driver_version: str | None = None  # "CUDA Version" of the nvidia-smi header (driver's)
    topology: str | None = None  # `nvidia-smi topo -m` matrix, legend dropped
    infiniband: tuple[InfinibandPort, ...] = ()
    cpu_model: str | None = None
    cpu_count: int | None = None
    memory_total_mb: float | None = None
    python: PythonProbe = field(default_factory=dict)
    missing: tuple[str, ...] = ()  # what was not found, e.g. "gpus: nvidia-smi not found"


def _num(text: str) -> float | None:
    """A float from an nvidia-smi value, None for [N/A], [Not Supported] and the like."""
    try:
        return float(text.strip())
    except ValueError:
        return None


def split_sections(text: str) -> dict[str, str]:
    """The probe's output cut into ``{section name: body}``."""
    marks = list(SECTION.finditer(text))
    out = {}
    for mark, nxt in zip(marks, marks[1:] + [None]):
        end = nxt.start() if nxt is not None else len(text)
        out[mark.group(1)] = text[mark.end() : end].strip("\n")
    return out


def parse_gpu_csv(text: str) -> tuple[GpuInfo, ...]:
    """Rows of ``nvidia-smi --query-gpu=<GPU_QUERY_FIELDS> --format=csv,noheader,nounits``."""
    gpus = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        if not row or not row[0].strip().isdigit():
            continue  # a warning line or an error message
        row = [c.strip() for c in row] + [""] * (len(GPU_QUERY_FIELDS) - len(row))
        gpus.append(
            GpuInfo(
                index=int(row[0]),
                name=row[1],
                driver_version=row[2],
                power_limit_w=_num(row[3]),
                sm_clock_max_mhz=_num(row[4]),
                mem_clock_max_mhz=_num(row[5]),
                app_clock_mhz=_num(row[6]),
                memory_total_mb=_num(row[7]),
                pci_bus_id=row[8] or None,
                uuid=row[9] or None,
            )
        )
    return tuple(gpus)


def parse_smi_header(text: str) -> str | None:
    """The driver's CUDA version from the ``nvidia-smi`` banner (``CUDA Version: 12.4``)."""
    found = re.search(r"CUDA Version:\s*([0-9.]+)", text)
    return found.group(1) if found else None


def parse_topology(text: str) -> str | None:
    """The ``nvidia-smi topo -m`` matrix without its legend (the legend is the same everywhere)."""
    if not re.search(r"^\s*GPU0\b", text, re.M):
        return None
    matrix = text.split("Legend:")[0]
    return "\n".join(line.rstrip() for line in matrix.strip("\n").splitlines() if line.strip())


def _ib_ports(text: str, device_line: str, port_line: str, fields: dict[str, str]) -> tuple[InfinibandPort, ...]:
    """Ports from a listing that names a device (``device_line`` matches, group 1: its name), then each of its
    ports (``port_line``, group 1: the number) and the port's fields (``fields``: a pattern, group 1 the value,
    to its key: state, rate or link). A port without a state is left out."""
    ports: list[InfinibandPort] = []
    device = None
    port: dict[str, str] | None = None  # "n": the port's number, then its fields

    def flush() -> None:
        if device and port and "state" in port:
            ports.append(InfinibandPort(device, int(port["n"]), port["state"], port.get("rate"), port.get("link")))

    for line in text.splitlines():
        stripped = line.strip()
        if m := re.match(device_line, stripped):
            flush()
            device, port = m.group(1), None
        elif m := re.match(port_line, stripped):
            flush()
            port = {"n": m.group(1)}
        elif port is not None:
            for pattern, key in fields.items():
                if m := re.match(pattern, stripped):
                    port[key] = m.group(1).strip()
                    break
    flush()
    return tuple(ports)


def parse_ibstat(text: str) -> tuple[InfinibandPort, ...]:
    """Ports from ``ibstat`` (``CA 'mlx5_0'`` ... ``Port 1:`` ... ``State: Active``)."""
    fields = {r"State:\s*(.+)": "state", r"Rate:\s*(.+)": "rate", r"Link layer:\s*(.+)": "link"}
    return _ib_ports(text, r"CA '([^']+)'", r"Port (\d+):$", fields)


def parse_ibv_devinfo(text: str) -> tuple[InfinibandPort, ...]:
    """Ports from ``ibv_devinfo`` (``hca_id: mlx5_0`` ... ``port: 1`` ... ``state: PORT_ACTIVE (4)``); it gives no
    rate."""
    fields = {r"state:\s*(\S+)": "state", r"link_layer:\s*(\S+)": "link"}
    return _ib_ports(text, r"hca_id:\s*(\S+)", r"port:\s*(\d+)$", fields)


def parse_cpuinfo(text: str) -> tuple[str | None, int | None]:
    """(CPU model name, logical CPU count) from /proc/cpuinfo (x86 and ARM layouts)."""
    processors = len(re.findall(r"^processor\s*:", text, re.M))
    model = re.search(r"^(?:model name|Model|cpu model)\s*:\s*(.+)$", text, re.M)
    return (model.group(1).strip() if model else None), (processors or None)


def parse_meminfo(text: str) -> float | None:
    """MemTotal in MiB from /proc/meminfo."""
    found = re.search(r"^MemTotal:\s*(\d+)\s*kB", text, re.M)
    return round(int(found.group(1)) / 1024, 1) if found else None


def _missing_reason(body: str) -> str | None:
    """The probe's own "not found" note in a section, if it left one."""
    for line in body.splitlines():
        if line.startswith(MISSING):
            return line[len(MISSING) :].strip() or "not found"
    return None


def parse_probe(text: str) -> NodeProbe:
    """Parse the output of :data:`PROBE_SCRIPT` from one node."""
    sections = split_sections(text)
    missing: list[str] = []

    def body(name: str) -> str:
        content = sections.get(name)
        if content is None:
            missing.append(f"{name}: no output from the probe")
            return ""
        reason = _missing_reason(content)
        if reason:
            missing.append(f"{name}: {reason}")
            return ""
        return content

    hostname = body("hostname").strip() or None
    gpus = parse_gpu_csv(body("gpus"))
    if not gpus and sections.get("gpus") and not _missing_reason(sections["gpus"]):
        missing.append(f"gpus: nvidia-smi reported no GPU ({sections['gpus'].strip()[:200]})")
    topology = parse_topology(body("topology"))
    ib_text = sections.get("ibstat", "")
    infiniband = parse_ibstat(ib_text) if not _missing_reason(ib_text) else ()
    ib_missing = [f"ibstat: {_missing_reason(ib_text)}"] if _missing_reason(ib_text) else []
    if not infiniband:
        devinfo = sections.get("ibv_devinfo", "")
        infiniband = parse_ibv_devinfo(devinfo) if not _missing_reason(devinfo) else ()
        if _missing_reason(devinfo):
            ib_missing.append(f"ibv_devinfo: {_missing_reason(devinfo)}")
        if not infiniband:
            missing.append("infiniband: no port found (" + "; ".join(ib_missing or ["no HCA"]) + ")")
    cpu_model, cpu_count = parse_cpuinfo(body("cpuinfo"))
    memory = parse_meminfo(body("meminfo"))
    python_info: PythonProbe = {}
    raw = body("python").strip()
    if raw:
        try:
            python_info = json.loads(raw.splitlines()[-1])
        except json.JSONDecodeError:
            missing.append(f"python: probe output is not JSON ({raw[-200:]})")
    return NodeProbe(
        hostname=hostname,
        gpus=gpus,
        cuda_driver_version=parse_smi_header(sections.get("smi_header", "")),
        topology=topology,
        infiniband=infiniband,
        cpu_model=cpu_model,
        cpu_count=cpu_count,
        memory_total_mb=memory,
        python=python_info,
        missing=tuple(missing),
    )


# --------------------------------------------------------------------------- the environment

#: Python distribution holding each dlperf framework adapter's framework.
FRAMEWORK_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "pytorch_reference": ("torch",),
    "ngc_pytorch": ("torch",),
    "pytorch": ("torch",),
    "paddle": ("paddlepaddle-gpu", "paddlepaddle"),
    "paddleclas": ("paddlepaddle-gpu", "paddlepaddle"),
    "plsc": ("paddlepaddle-gpu", "paddlepaddle"),
    "mxnet": ("mxnet", "mxnet-cu112"),
    "ngc_mxnet": ("mxnet", "mxnet-cu112"),
    "mindspore": ("mindspore-gpu", "mindspore"),
    "oneflow": ("oneflow",),
    "tensorflow": ("tensorflow",),
    "tf2": ("tensorflow",),
}

#: Fields whose change between two nights marks an infrastructure change (see dlperf_core.measure.regression).
INFRASTRUCTURE_FIELDS: tuple[str, ...] = (
    "gpu_model",
    "gpu_count",
    "driver_version",
    "cuda_version",
    "cudnn_version",
    "nccl_version",
    "framework_version",
    "image_digest",
    "power_limit_w",
    "sm_clock_max_mhz",
    "cluster_env",
    "scheduler_text",
)
SETTINGS_FIELD = "cluster_env"
"""One of :data:`INFRASTRUCTURE_FIELDS` that is not a column of ``environments``: the cluster's settings (a
suite's, benchmark's and node's ``env:``), read from the stored environment's ``data``
(:meth:`Environment.cluster_env`)."""
SCHEDULER_FIELD = "scheduler_text"
"""The other one: the scheduler the case's job ran under, its release and partition (``slurm 22.05.8, partition
gpu``), read from the stored environment's ``data`` (:meth:`Environment.scheduler_text`)."""
DATA_FIELDS: tuple[str, ...] = (SETTINGS_FIELD, SCHEDULER_FIELD)
INFRASTRUCTURE_COLUMNS: tuple[str, ...] = tuple(name for name in INFRASTRUCTURE_FIELDS if name not in DATA_FIELDS)
"""The infrastructure fields that are columns of ``environments``."""


@dataclass(frozen=True)
class Environment(JsonForm):
    """The environment of one case: the nodes it runs on, seen from inside its image. Its JSON form
    (:meth:`to_json`, generated from the fields) is what the ``data`` column holds and what
    :attr:`content_hash` hashes."""

    framework: str | None
    framework_version: str | None
    image: str | None
    image_digest: str | None
    hostnames: tuple[str, ...]
    gpu_model: str | None
    gpu_count: int  # over all nodes; 0 when there is none
    driver_version: str | None
    cuda_version: str | None
    cudnn_version: str | None
    nccl_version: str | None
    power_limit_w: float | None
    sm_clock_max_mhz: float | None
    cpu_model: str | None
    cpu_count: int | None  # over all nodes
    memory_total_mb: float | None  # over all nodes
    topology: str | None  # node 0's `nvidia-smi topo -m`
    infiniband: tuple[InfinibandPort, ...]
    missing: tuple[str, ...]
    nodes: tuple[NodeProbe, ...] = ()
    # per node (rank order): the GPUs the case got there, by index or UUID as the inventory names them (the GPUs
    # above are these; empty in environments stored before dlperf gave a case only its own GPUs)
    gpu_ids: tuple[tuple[str, ...], ...] = ()
    # the cluster's settings each node's ranks ran with (node name -> variable -> value: a suite's, benchmark's and
    # the node's ``env:``, dlperf_core.model.cluster_env; secret-looking ones left out). Not a configuration's
    # identity: a change of them is a change of the environment, as a driver's is
    settings: dict[str, dict[str, str]] = field(default_factory=dict)
    # the scheduler's job the case ran as (the slurm runtime: scheduler, version, partition, job_id, node_list;
    # empty where dlperf started the nodes itself). Its job id and node list make every such environment a row of
    # its own; what a change between nights is told by is its release and partition (scheduler_text)
    scheduler: dict[str, str] = field(default_factory=dict)

    @property
    def cluster_env(self) -> str | None:
        """:attr:`settings` in one line (``node0: NCCL_SOCKET_IFNAME=eth0; node1: ...``), None when there are none:
        what an environment change names."""
        return settings_text(self.settings)

    @property
    def scheduler_text(self) -> str | None:
        """:attr:`scheduler`'s release and partition in one line (``slurm 22.05.8, partition gpu``), None when the
        case ran under no scheduler: what an environment change names (not the job id, new every run)."""
        return scheduler_text(self.scheduler)

    LEFT_OUT_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ("settings", "gpu_ids", "scheduler")
    """Fields added after environments were first stored, left out of the JSON form while empty: an environment
    without them keeps the form, and so the content hash (its row), it had before they existed."""

    def to_json(self) -> dict[str, Any]:
        """The generated JSON form, less the :attr:`LEFT_OUT_WHEN_EMPTY` fields that are empty."""
        data = super().to_json()
        for name in self.LEFT_OUT_WHEN_EMPTY:
            if not data.get(name):
                data.pop(name, None)
        for node in data.get("nodes", ()):  # a GPU's uuid, likewise, where the probe did not ask for it
            for gpu in node.get("gpus", ()):
                if gpu.get("uuid") is None:
                    gpu.pop("uuid", None)
        return data

    @property
    def content_hash(self) -> str:
        """sha256 of everything that describes the environment (so equal environments share a row)."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()

    def infrastructure(self) -> dict[str, object]:
        """The fields compared between nights to tell an infrastructure change from a slowdown."""
        return {name: getattr(self, name) for name in INFRASTRUCTURE_FIELDS}


def settings_text(settings: Mapping[str, Mapping[str, str]] | None) -> str | None:
    """The cluster's settings of an environment in one line (node by node, names sorted), None when none."""
    text = "; ".join(
        f"{node}: " + " ".join(f"{name}={value}" for name, value in sorted(env.items()))
        for node, env in (settings or {}).items()
        if env
    )
    return text or None


def scheduler_text(scheduler: Mapping[str, str] | None) -> str | None:
    """An environment's scheduler (:attr:`Environment.scheduler`) by its release and partition, None when none."""
    if not scheduler or not scheduler.get("scheduler"):
        return None
    text = " ".join(v for v in (scheduler.get("scheduler"), scheduler.get("version")) if v)
    return text + (f", partition {scheduler['partition']}" if scheduler.get("partition") else "")


def _one(values: Sequence[object]) -> object | None:
    """The single distinct value, or the distinct values joined by ',' when nodes differ, or None."""
    distinct = list(dict.fromkeys(v for v in values if v not in (None, "")))
    if not distinct:
        return None
    return distinct[0] if len(distinct) == 1 else ",".join(map(str, distinct))


def _framework_version(framework: str | None, python: PythonProbe) -> str | None:
    installed: dict[str, str] = python.get("frameworks", {})
    for dist in FRAMEWORK_DISTRIBUTIONS.get(framework or "", ()):
        if dist in installed:
            return installed[dist]
    return None


def combine(
    nodes: list[NodeProbe] | tuple[NodeProbe, ...],
    *,
    framework: str | None = None,
    image: str | None = None,
    image_digest: str | None = None,
    gpu_ids: tuple[tuple[str, ...], ...] = (),
) -> Environment:
    """One :class:`Environment` from the probes of the nodes a case runs on (node 0 first); ``gpu_ids``: the GPUs
    the case got on each node, as the inventory names them (the probes saw those only)."""
    if not nodes:
        raise ValueError("an environment needs at least one node probe")
    missing = [f"{n.hostname or f'node{i}'}: {m}" for i, n in enumerate(nodes) for m in n.missing]
    gpus = [g for n in nodes for g in n.gpus]
    py = [n.python for n in nodes]
    framework_version = _one([_framework_version(framework, p) for p in py])
    if framework and framework_version is None:
        wanted = ", ".join(FRAMEWORK_DISTRIBUTIONS.get(framework, ())) or "unknown distribution"
        missing.append(f"framework_version: {framework} ({wanted}) not installed where the probe ran")
    cuda = _one([p.get("env", {}).get("CUDA_VERSION") or p.get("torch_cuda") for p in py])
    cudnn = _one([p.get("env", {}).get("CUDNN_VERSION") or p.get("torch_cudnn") for p in py])
    nccl = _one([p.get("env", {}).get("NCCL_VERSION") or p.get("torch_nccl") for p in py])
    for name, value in (("cuda_version", cuda), ("cudnn_version", cudnn), ("nccl_version", nccl)):
        if value is None:
            missing.append(
                f"{name}: not found (no CUDA build of the framework, no {name.split('_')[0].upper()}_VERSION)"
            )
    if image and image_digest is None:
        missing.append("image_digest: the image could not be inspected")
    cpu_counts = [n.cpu_count for n in nodes if n.cpu_count]
    memory = [n.memory_total_mb for n in nodes if n.memory_total_mb]
    return Environment(
        framework=framework,
        framework_version=framework_version,  # type: ignore[arg-type]
        image=image,
        image_digest=image_digest,
        hostnames=tuple(n.hostname or f"node{i}" for i, n in enumerate(nodes)),
        gpu_model=_one([g.name for g in gpus]),  # type: ignore[arg-type]
        gpu_count=len(gpus),
        driver_version=_one([g.driver_version for g in gpus]),  # type: ignore[arg-type]
        cuda_version=None if cuda is None else str(cuda),
        cudnn_version=None if cudnn is None else str(cudnn),
        nccl_version=None if nccl is None else str(nccl),
        power_limit_w=_num(str(_one([g.power_limit_w for g in gpus]))) if gpus else None,
        sm_clock_max_mhz=_num(str(_one([g.sm_clock_max_mhz for g in gpus]))) if gpus else None,
        cpu_model=_one([n.cpu_model for n in nodes]),  # type: ignore[arg-type]
        cpu_count=sum(cpu_counts) if cpu_counts else None,
        memory_total_mb=round(sum(memory), 1) if memory else None,
        topology=nodes[0].topology,
        infiniband=tuple(p for n in nodes for p in n.infiniband),
        missing=tuple(missing),
        nodes=tuple(nodes),
        gpu_ids=gpu_ids,
    )


def only_gpus(probe: NodeProbe, gpu_ids: tuple[str, ...]) -> NodeProbe:
    """``probe`` (of a whole machine: the local runtime) with only the GPUs named in ``gpu_ids`` (by index or UUID,
    as the inventory names them), the ones the case used."""
    wanted = set(gpu_ids)
    kept = tuple(g for g in probe.gpus if str(g.index) in wanted or (g.uuid is not None and g.uuid in wanted))
    return replace(probe, gpus=kept)


def environment_changes(before: Mapping[str, object] | None, after: Mapping[str, object] | None) -> list[str]:
    """``"field: old -> new"`` for every infrastructure field that differs between two environments
    (given as :meth:`Environment.infrastructure` dicts or rows with those keys)."""
    if before is None or after is None:
        return []
    return [
        f"{name}: {before.get(name)} -> {after.get(name)}"
        for name in INFRASTRUCTURE_FIELDS
        if before.get(name) != after.get(name)
    ]


# --------------------------------------------------------------------------- running the probe


def run_probe_locally(python: str | None = None, timeout_s: float = 120) -> str:
    """Run :data:`PROBE_SCRIPT` on this machine (``python`` answers the framework questions)."""
    env = {**os.environ, "DLPERF_PYTHON": python or sys.executable}
    done = subprocess.run(
        ["sh", "-c", PROBE_SCRIPT], capture_output=True, text=True, timeout=timeout_s, env=env, check=False
    )
    return done.stdout + (f"\n{done.stderr}" if done.returncode and done.stderr else "")


def capture_local(framework: str | None = None, probe_output: str | None = None) -> Environment:
    """The environment of this machine (the local runtime), from a fresh probe or the given output."""
    probe = parse_probe(probe_output if probe_output is not None else run_probe_locally())
    return combine([probe], framework=framework)
