"""Where a case's GPU health (:mod:`dlperf_core.cluster.gpu_health`) is read: where the NVIDIA driver's NVML is.

* local runtime: every node is this machine; the worker reads the case's GPUs through nvidia-ml-py in its own process
  (:func:`~dlperf_core.cluster.gpu_health.read_here`).
* docker runtime: a one-shot container of the case's own image on the node, with the case's GPUs and no other
  (:func:`health_probe_spec`). The NVIDIA container runtime mounts the driver's ``libnvidia-ml`` into every GPU
  container (what nvidia-smi in it uses), so the framework images need not carry NVML's bindings: before the
  container starts, dlperf puts two files into it, :mod:`dlperf_core.cluster.nvml_readings` (the standard library
  only) and ``pynvml.py`` from the nvidia-ml-py the worker has, and ``python3`` runs the first, which prints the
  readings as JSON. No image of its own: an image dlperf would have to build and load on every node.

In a container NVML still lists every compute process on a GPU, by its host PID (the driver does not know PID
namespaces: NVIDIA/nvidia-docker#1483), so another container's job on a case's GPU is seen. The container numbers
the case's GPUs from 0; :func:`~dlperf_core.cluster.gpu_health.named_as_case` names them as the inventory does.
"""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

from dlperf_core.cluster import nvml_readings
from dlperf_core.cluster.inventory import Node
from dlperf_core.cluster.sshkeys import ContainerFile
from dlperf_core.model import ContainerSpec, RunIds

PROBE_DIR = "/opt/dlperf-health"
"""Where the probe's two files go in its container."""

PROBE_TIMEOUT_S = 120
"""How long the probe container may take (it reads a few NVML values per GPU: seconds)."""


def pynvml_source() -> bytes | None:
    """nvidia-ml-py's ``pynvml.py`` as this worker has it (one file, pure Python), None when it is not installed."""
    spec = importlib.util.find_spec("pynvml")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).read_bytes()


def probe_files() -> tuple[ContainerFile, ...]:
    """The probe's files for its container; raises when the worker has no nvidia-ml-py (the gate then flags the
    node with the reason)."""
    pynvml = pynvml_source()
    if pynvml is None:
        raise RuntimeError("nvidia-ml-py (pynvml) is not installed on this worker: nothing to put into the probe")
    readings = Path(nvml_readings.__file__).read_bytes()
    return (
        ContainerFile(f"{PROBE_DIR}/nvml_readings.py", readings, 0o644),
        ContainerFile(f"{PROBE_DIR}/pynvml.py", pynvml, 0o644),
    )


def health_probe_spec(node: Node, image: str, ids: RunIds, gpu_ids: tuple[str, ...]) -> ContainerSpec:
    """The one-shot health probe of a case on ``node``: ``image`` (the case's), exactly the case's GPUs
    ``gpu_ids``, nothing mounted, not on the case's network (the host's, or docker's default bridge), labelled with
    the DAG run (cleanup finds it) and the node; ``python3`` runs :mod:`~dlperf_core.cluster.nvml_readings` over
    every GPU it sees."""
    host = node.network == "host"
    return ContainerSpec(
        name=f"dlperf-health-{ids.short}-{node.name}-{uuid.uuid4().hex[:8]}",
        image=image,
        command=("python3", f"{PROBE_DIR}/nvml_readings.py", "--node", node.name),
        environment={},
        labels={**ids.labels, "dlperf.health": node.name},
        network="host" if host else "bridge",
        hostname=None if host else node.container_hostname,
        gpu_ids=gpu_ids,
        ipc_host=False,
        files=probe_files(),
    )
