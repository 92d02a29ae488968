"""The runtime a planned run names (``local``, ``docker`` or ``slurm``), for the steps that start or clean up nodes,
what a case says when its runtime raised, and where its GPUs' health is read (the docker runtime: a probe container
on the node, :mod:`dlperf_core.cluster.gpu_health_probe`; the slurm runtime: not before its job starts)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from dlperf_core.cluster.gpu_health import ReadGpus, named_as_case, readings_of_output
from dlperf_core.cluster.gpu_health_probe import PROBE_TIMEOUT_S, health_probe_spec
from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.cluster.nvml_readings import NodeReadings
from dlperf_core.model import RunIds, Runtime
from dlperf_core.run.case_run import CaseRunner, read_in_process
from dlperf_core.run.handoff import PlannedRun
from dlperf_core.run.runtime.local import LocalRuntime

log = logging.getLogger("dlperf")


def make_runtime(name: str, inventory: Inventory) -> Runtime:
    if name == "docker":
        from dlperf_airflow.docker_runtime import DockerRuntime  # the docker SDK: only where it is used

        return DockerRuntime(inventory)
    if name == "slurm":
        from dlperf_airflow.slurm_shell import SshLoginShell
        from dlperf_core.run.runtime.slurm import SlurmRuntime

        if inventory.slurm is None:
            raise ValueError(f"runtime slurm, but inventory {inventory.name} has no slurm: block")
        return SlurmRuntime(inventory.slurm, SshLoginShell(inventory.slurm.connection))
    return LocalRuntime()


def runtime_error(runtime: Runtime | None, nodes: Sequence[Node], exc: Exception) -> str:
    """A case's reason when its runtime raised: the exception, after the Docker engines of ``nodes`` that do not
    answer now (a client's ``ConnectionError`` alone does not say which engine went away); on the Slurm runtime,
    after the login node it could not reach (:class:`~dlperf_airflow.slurm_shell.SshLoginShell`)."""
    from dlperf_airflow.docker_runtime import DockerRuntime

    if getattr(runtime, "name", None) == "slurm":
        return "runtime error: " + _login_node_error(runtime, exc)
    silent: list[str] = []
    if isinstance(runtime, DockerRuntime):
        try:
            silent = runtime.engines_not_answering(nodes)
        except Exception as probe:  # noqa: BLE001 - the reason keeps the exception alone
            log.warning("could not ping the case's Docker engines: %s: %s", type(probe).__name__, probe)
    return "runtime error: " + "".join(f"{s}; " for s in silent) + f"{type(exc).__name__}: {exc}"


def _login_node_error(runtime: object, exc: Exception) -> str:
    """An error of the Slurm runtime, naming the login node when the exception does not already (an SSH failure
    raised outside its shell: paramiko's, a socket's)."""
    from dlperf_airflow.slurm_shell import LoginNodeError

    text = f"{type(exc).__name__}: {exc}"
    shell = getattr(runtime, "shell", None)
    if isinstance(exc, LoginNodeError) or shell is None:
        return text
    return f"{getattr(shell, 'where', 'the login node')}: {text}"


SLURM_GPUS_UNREAD = "not read before the job: the Slurm runtime's nodes are the scheduler's until the job starts"


def read_gpus(planned: PlannedRun, ids: RunIds) -> ReadGpus:
    """Where a case's GPUs are read before it starts: on the docker runtime a one-shot probe container of the case's
    image on each node (:func:`~dlperf_core.cluster.gpu_health_probe.health_probe_spec`), started like every
    container dlperf starts; else in this process (:func:`~dlperf_core.run.case_run.read_in_process`)."""
    if planned.runtime == "slurm":  # which hosts run the job is Slurm's choice, made when it starts

        def not_yet(node: Node, gpus: tuple[str, ...]) -> NodeReadings:  # noqa: ARG001 - a ReadGpus' signature
            return NodeReadings(node.name, error=SLURM_GPUS_UNREAD)

        return not_yet
    image = planned.image
    if planned.runtime != "docker" or image is None:
        return read_in_process(planned, ids)

    def in_probe_container(node: Node, gpus: tuple[str, ...]) -> NodeReadings:
        from dlperf_airflow.docker_runtime import run_to_completion  # the docker SDK: only where it is used

        output, _ = run_to_completion(node, health_probe_spec(node, image, ids, gpus), PROBE_TIMEOUT_S)
        return named_as_case(readings_of_output(node.name, output), gpus)

    return in_probe_container


RUNNER = CaseRunner(make_runtime, runtime_error, read_gpus)
"""This deployment's runtimes, how their errors read and where GPUs are read, for :mod:`dlperf_core.run.case_run`."""
