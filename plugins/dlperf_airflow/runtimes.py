"""The runtime a planned run names (``local`` or ``docker``), for the steps that start or clean up nodes, and
what a case says when its runtime raised."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.model import Runtime
from dlperf_core.run.case_run import CaseRunner
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


RUNNER = CaseRunner(make_runtime, runtime_error)
"""This deployment's runtimes and how their errors read, for :mod:`dlperf_core.run.case_run`."""
