"""The runtime a planned run names (``local`` or ``docker``), for the steps that start or clean up nodes."""

from __future__ import annotations

from dlperf_core.inventory import Inventory
from dlperf_core.model import Runtime
from dlperf_core.runtime.local import LocalRuntime


def make_runtime(name: str, inventory: Inventory) -> Runtime:
    if name == "docker":
        from dlperf_airflow.docker_runtime import DockerRuntime  # the docker SDK: only where it is used

        return DockerRuntime(inventory)
    return LocalRuntime()
