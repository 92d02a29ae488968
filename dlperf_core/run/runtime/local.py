"""The ``local`` runtime: every node of a case is a process group on this machine (the embedded default).

Node 0 .. N-1 each run their launch command (torchrun) as their own session, so a kill takes the whole
tree. Logs go to ``<log_dir>/node<i>.log``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from dlperf_core.cluster.cpu_placement import HostCores
from dlperf_core.cluster.gpu_sampling import GpuSampler, GpuSamples, local_query, sampled_gpu_ids
from dlperf_core.cluster.inventory import Node
from dlperf_core.cluster.sshkeys import ContainerFile
from dlperf_core.model import CaseJob, CaseOutcome
from dlperf_core.run.launch_spec import NodeSpec, local_node
from dlperf_core.run.runtime.base import CaseRunning, run_to_end

WORKLOAD_DIR = Path(__file__).resolve().parents[2] / "workload"

_LIMIT_THEN_EXEC = (
    "import os, resource, sys; "
    "limit = int(sys.argv[1]) << 20; "
    "resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); "
    "os.environ['DLPERF_DEVICE_MEMORY_MB'] = sys.argv[1]; "
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def visible_devices(node: Node, devices_per_node: int | None) -> dict[str, str]:
    """``CUDA_VISIBLE_DEVICES`` of a launch on ``node`` (local runtime): the case's GPUs on an ``accelerator: nvidia``
    node (:meth:`Node.case_gpu_ids`: the first ``devices_per_node`` the inventory names; None: all of them), by
    index or UUID, so that its ranks' ``cuda:0 ..`` are those GPUs and no other; nothing on a CPU node."""
    if node.accelerator != "nvidia":
        return {}
    return {"CUDA_VISIBLE_DEVICES": ",".join(node.case_gpu_ids(devices_per_node or node.gpu_count))}


def case_gpus_here(job: CaseJob) -> tuple[str, ...]:
    """The GPUs of this machine a case on the local runtime uses: every nvidia launch's ``CUDA_VISIBLE_DEVICES``,
    once each, in order (every local "node" is this machine), which is what its sampler is asked for."""
    ids = [
        gpu
        for launch in job.launches
        for gpu in visible_devices(launch.node, job.devices_per_node).get("CUDA_VISIBLE_DEVICES", "").split(",")
        if gpu
    ]
    return tuple(dict.fromkeys(ids))


def with_memory_limit(argv: tuple[str, ...], limit_mb: int | None) -> tuple[str, ...]:
    """``argv`` run under an address-space limit of ``limit_mb`` (inherited by every process it starts), the
    CPU stand-in for a device's memory (``Node.device_memory_mb``): an allocation past it fails with ENOMEM,
    which the framework reports as out of memory (``DLPERF_DEVICE_MEMORY_MB`` tells the reference workload, which
    then reports every failed allocation as the allocator's ENOMEM). Done by exec in a small wrapper rather than ``preexec_fn``,
    which is unsafe in a threaded process such as an Airflow worker."""
    if not limit_mb:
        return argv
    return (sys.executable, "-c", _LIMIT_THEN_EXEC, str(limit_mb), *argv)


class LocalProcess:
    """One node as a local process group."""

    oom_killed = False  # an allocation past RLIMIT_AS fails inside the process, which reports it in its log

    def __init__(self, node_name: str, argv: tuple[str, ...], env: dict[str, str], log_path: Path):
        self.node_name = node_name
        self.log_path = log_path
        self._log = log_path.open("wb")  # open while the process runs, closed by close()
        try:
            self._proc = subprocess.Popen(
                argv,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **env},
                start_new_session=True,
            )
        except OSError:
            self._log.close()
            raise

    def poll(self) -> int | None:
        return self._proc.poll()

    def kill(self) -> None:
        """Kill the launcher and every process under it, also those in their own session: torchrun starts
        each worker with ``start_new_session=True``, so killing torchrun's group alone orphans the workers,
        which then train on. The launcher's group is frozen first so it cannot start anything new."""
        if self._proc.poll() is not None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGSTOP)
            tree = psutil.Process(self._proc.pid).children(recursive=True)
        except (ProcessLookupError, psutil.NoSuchProcess):
            tree = []
        for child in tree:
            with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
                os.killpg(child.pid, signal.SIGKILL) if os.getpgid(child.pid) == child.pid else child.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        psutil.wait_procs(tree, timeout=10)

    def close(self) -> None:
        self.kill()
        self._log.close()


class LocalRuntime:
    """Runs case jobs as local process groups."""

    name = "local"
    python = sys.executable
    workload_dir = str(WORKLOAD_DIR)

    def host_cores(self, node: Node) -> HostCores:  # noqa: ARG002 - every local node is this machine
        """Every node is this machine, with the cores this process may use; not pinned: other work that dlperf
        does not schedule (another run, a test beside it) shares them, and fixed cores would stack two runs on
        one core while another idles."""
        try:
            cores = tuple(sorted(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            cores = tuple(range(os.cpu_count() or 1))
        return HostCores(host="this machine", cores=cores, pin=False)

    def node_command(self, job: CaseJob, i: int) -> tuple[tuple[str, ...], dict[str, str]]:
        """The argv and the environment (on top of this process's) that launch ``i`` of ``job`` runs with."""
        launch = job.launches[i]
        env = {
            **launch.env,
            "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo"),
            **visible_devices(launch.node, job.devices_per_node),
        }
        return with_memory_limit(launch.argv, launch.node.device_memory_mb), env

    def start_node(  # the Runtime protocol's signature: files and samples are the docker runtime's
        self,
        job: CaseJob,
        i: int,
        files: tuple[ContainerFile, ...] | None = None,  # noqa: ARG002
        samples: GpuSamples | None = None,  # noqa: ARG002
    ) -> LocalProcess:
        """Start launch ``i`` of ``job`` as a process group (``files``: container-only, unused here;
        ``samples``: unused, :meth:`execute` samples this machine's GPUs once for every node)."""
        launch = job.launches[i]
        argv, env = self.node_command(job, i)
        return LocalProcess(launch.node.name, argv, env, job.log_dir / f"node{launch.node_rank}.log")

    def node_specs(self, job: CaseJob) -> tuple[NodeSpec, ...]:
        """What each node of ``job`` runs (:mod:`dlperf_core.run.launch_spec`): its command and the environment the
        launch sets, in this process's working directory (the rest of the environment is inherited)."""
        cwd = str(Path.cwd())
        return tuple(local_node(launch, *self.node_command(job, i), cwd) for i, launch in enumerate(job.launches))

    def submit(self, job: CaseJob) -> CaseRunning:
        """The case, ready to start (:class:`~dlperf_core.run.runtime.base.CaseRunning`); on ``accelerator: nvidia``
        nodes this machine's GPUs the case uses (:func:`case_gpus_here`, its ``CUDA_VISIBLE_DEVICES``) and no other
        are sampled with nvidia-smi while it runs, by the same sampler as the docker runtime's."""
        start = lambda i: self.start_node(job, i)  # noqa: E731
        gpus = sampled_gpu_ids(case_gpus_here(job), in_container=False)
        if not gpus:
            return CaseRunning(job, start)
        # every local "node" is this machine: one sampler, asked for the case's GPUs only (and, where they are
        # named by index, counting only those lines of its answer)
        samples = GpuSamples(gpus={int(g) for g in gpus} if all(g.isdigit() for g in gpus) else None)
        sampler = GpuSampler(local_query(gpus), samples, period_s=1.0)
        return CaseRunning(job, start, samples={job.launches[0].node.name: samples}, on_collect=sampler.stop)

    def execute(self, job: CaseJob) -> CaseOutcome:
        return run_to_end(self.submit(job))

    def cleanup(self, labels: dict[str, str]) -> list[str]:  # noqa: ARG002 - the Runtime protocol's signature
        """Nothing outlives a local case: its process groups are killed when it ends."""
        return []
