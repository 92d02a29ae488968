"""A container past its memory limit on the Docker runtime (dlperf_airflow.docker_runtime): a CPU stand-in node's
device memory becomes the container's memory limit, the kernel's OOM killer ends it, and the supervisor names it,
so a max batch size search on docker CPU nodes sees "out of memory" too (the search and the local runtime's limit:
tests/core/measure/test_maxbatch.py)."""

from __future__ import annotations

import pytest

from dlperf_airflow.docker_runtime import ContainerProcess
from dlperf_core.cluster.container import container_spec_for
from dlperf_core.cluster.inventory import Node
from dlperf_core.run.runtime.base import supervise
from helpers import docker_available, image_present

IMAGE = "dlperf/pytorch-reference:cpu"


@pytest.mark.docker
@pytest.mark.skipif(not docker_available(), reason="no Docker engine answers (make test starts one)")
@pytest.mark.skipif(docker_available() and not image_present(IMAGE), reason=f"{IMAGE} not built (make images)")
def test_a_container_past_its_memory_limit_fails_as_out_of_memory(tmp_path):
    node = Node(name="node0", device_memory_mb=64)
    spec = container_spec_for(
        node,
        name=f"dlperf-oom-{tmp_path.name[-12:]}".replace("_", "-"),
        image=IMAGE,
        command=("python3", "-c", "b = bytearray(512 << 20); print(len(b))"),
        environment={},
        labels={"dlperf.test": "oom", "dlperf.node": "node0"},
    )
    proc = ContainerProcess(node.docker_url, spec, tmp_path / "node0.log")
    try:
        reason = supervise([proc], timeout_s=120, watchdog_s=None)
    finally:
        proc.close()
    assert proc.oom_killed
    # the words the search reads as out of memory (tests/core/measure/test_maxbatch.py: every runtime's reason)
    assert reason == "node0: out of memory: killed by the kernel's OOM killer (exit code 137)"
