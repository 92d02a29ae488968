"""The runtime a planned run names (``local`` or ``docker``), for the steps that start or clean up nodes, what a
case says when its runtime raised, and where its GPUs' health is read (the docker runtime: a probe container on the
node, :mod:`dlperf_core.cluster.gpu_health_probe`)."""

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
    return LocalRuntime()


def runtime_error(runtime: Runtime | None, nodes: Sequence[Node], exc: Exception) -> str:
    """A case's reason when its runtime raised: the exception, after the Docker engines of ``nodes`` that do not
    answer now (a client's ``ConnectionError`` alone does not say which engine went away)."""
    from dlperf_airflow.docker_runtime import DockerRuntime

    silent: list[str] = []
    if isinstance(runtime, DockerRuntime):
        try:
            silent = runtime.engines_not_answering(nodes)
        except Exception as probe:  # noqa: BLE001 - the reason keeps the exception alone
            log.warning("could not ping the case's Docker engines: %s: %s", type(probe).__name__, probe)
    return "runtime error: " + "".join(f"{s}; " for s in silent) + f"{type(exc).__name__}: {exc}"


def read_gpus(planned: PlannedRun, ids: RunIds) -> ReadGpus:
    """Where a case's GPUs are read before it starts: on the docker runtime a one-shot probe container of the case's
    image on each node (:func:`~dlperf_core.cluster.gpu_health_probe.health_probe_spec`), started like every
    container dlperf starts; else in this process (:func:`~dlperf_core.run.case_run.read_in_process`)."""
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
