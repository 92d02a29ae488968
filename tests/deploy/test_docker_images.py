"""The locally built PyTorch reference image, and a real 2-node torchrun (gloo) between two containers.

Needs a Docker engine (skipped with the reason when ``docker info`` fails). The image is brought up to date
with ``scripts/build-images.sh`` (a few seconds when nothing changed, about 3 minutes from nothing); set
``DLPERF_TEST_NO_BUILD=1`` to use whatever ``dlperf/pytorch-reference:cpu`` is there instead.

The docker CLI is used through subprocess on purpose: this checks the images, not the runtime code.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("DLPERF_REFERENCE_IMAGE", "dlperf/pytorch-reference:cpu")
TRAIN_PY = "/opt/dlperf/workload/train.py"
BUILD_TIMEOUT_S = 900
RUN_TIMEOUT_S = 300

# Used when the image has no train.py yet: one gloo all-reduce across the two nodes.
ALLREDUCE_PY = """\
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(t)
ws = dist.get_world_size()
assert torch.equal(t, torch.full((4,), ws * (ws + 1) / 2)), t
print(f"allreduce ok rank={dist.get_rank()} world={ws} host={os.uname().nodename}", flush=True)
dist.destroy_process_group()
"""


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one docker CLI command and capture its output."""
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def docker_engine() -> None:
    if shutil.which("docker") is None:
        pytest.skip("docker CLI not installed (scripts/ensure-docker.sh installs and starts an engine)")
    try:
        proc = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.skip("`docker info` did not answer within 30 s (run scripts/ensure-docker.sh)")
    if proc.returncode != 0:
        reason = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        pytest.skip(f"`docker info` failed, no Docker engine (run scripts/ensure-docker.sh): {reason[0]}")


@pytest.fixture(scope="module")
def reference_image(docker_engine: None) -> str:  # noqa: ARG001 - requested for its skip (no engine)
    """The reference image, built or refreshed by scripts/build-images.sh unless DLPERF_TEST_NO_BUILD=1."""
    if os.environ.get("DLPERF_TEST_NO_BUILD") == "1":
        if docker("image", "inspect", IMAGE, check=False).returncode != 0:
            pytest.fail(f"{IMAGE} not present and DLPERF_TEST_NO_BUILD=1: run scripts/build-images.sh")
        return IMAGE
    start = time.monotonic()
    proc = subprocess.run(
        [str(REPO / "scripts" / "build-images.sh")],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        env={**os.environ, "TAG": IMAGE},
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"scripts/build-images.sh failed ({proc.returncode}):\n{output[-6000:]}"
    print(f"build-images.sh: {time.monotonic() - start:.1f} s")
    return IMAGE


def test_reference_image_contents(reference_image: str) -> None:
    # Default CMD prints the torch version.
    version = docker("run", "--rm", reference_image, timeout=120).stdout.strip().splitlines()[-1]
    assert re.match(r"^\d+\.\d+\.\d+", version), version

    labels = docker("image", "inspect", "--format", "{{json .Config.Labels}}", reference_image).stdout
    assert "org.opencontainers.image.title" in labels
    assert "dlperf.inputs-hash" in labels

    check = (
        "set -e; test -d /opt/dlperf/workload; command -v ps ip >/dev/null;"
        " python3 -c 'import sys, numpy, torch, torch.distributed as d;"
        " assert sys.version_info[:2] >= (3, 10); assert d.is_gloo_available(); print(sys.prefix)'"
    )
    out = docker("run", "--rm", reference_image, "bash", "-c", check, timeout=120).stdout
    assert out.strip().splitlines()[-1] == "/opt/venv", out


def _has_train_py(image: str) -> bool:
    return docker("run", "--rm", image, "test", "-f", TRAIN_PY, check=False, timeout=60).returncode == 0


def _node_command(node_rank: int, script: Sequence[str]) -> list[str]:
    return [
        "python3", "-m", "torch.distributed.run",
        "--nnodes", "2", "--nproc_per_node", "1", "--node_rank", str(node_rank),
        "--master_addr", "node0", "--master_port", "29500",
        *script,
    ]  # fmt: skip


@pytest.fixture
def docker_network(docker_engine: None) -> Iterator[tuple[str, list[str]]]:  # noqa: ARG001 - requested for its skip
    """A fresh user-defined network, and a list the test fills with container names; all removed after."""
    suffix = uuid.uuid4().hex[:10]
    network = f"dlperf-test-{suffix}"
    containers: list[str] = []
    docker("network", "create", network)
    try:
        yield network, containers
    finally:
        for name in containers:
            docker("rm", "-f", name, check=False, timeout=60)
        docker("network", "rm", network, check=False, timeout=60)


def test_two_node_torchrun_on_a_docker_network(reference_image: str, docker_network: tuple[str, list[str]]) -> None:
    network, containers = docker_network
    use_train_py = _has_train_py(reference_image)
    if use_train_py:
        script = [
            TRAIN_PY,
            "--image-size", "32", "--width", "8", "--batch-size", "4",
            "--warmup-iterations", "1", "--iterations", "3", "--device", "cpu",
        ]  # fmt: skip
    else:
        script = ["/tmp/allreduce.py"]

    start = time.monotonic()
    for rank in (0, 1):
        name = f"{network}-node{rank}"
        containers.append(name)
        inner = _node_command(rank, script)
        env = ["--env", "OMP_NUM_THREADS=1"]
        if not use_train_py:
            # No bind mount (works with any daemon): the script travels in an environment variable.
            inner = ["bash", "-c", 'printf "%s" "$ALLREDUCE_PY" > /tmp/allreduce.py && exec "$@"', "bash", *inner]
            env += ["--env", f"ALLREDUCE_PY={ALLREDUCE_PY}"]
        # --hostname: what the node calls itself (gloo binds to the address its hostname resolves to);
        # --network-alias: how the other node finds it (Docker's DNS knows names and aliases, not hostnames).
        docker(
            "run", "--detach", "--name", name,
            "--network", network, "--hostname", f"node{rank}", "--network-alias", f"node{rank}",
            *env, reference_image, *inner,
        )  # fmt: skip

    codes: dict[str, int] = {}
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        for name in containers:
            left = max(1.0, deadline - time.monotonic())
            codes[name] = int(docker("wait", name, timeout=left).stdout.strip())
    except subprocess.TimeoutExpired:
        pass
    elapsed = time.monotonic() - start
    logs = {}
    for name in containers:
        proc = docker("logs", name, check=False)
        logs[name] = proc.stdout + proc.stderr
    report = "\n".join(
        f"----- {name} (exit {codes.get(name, 'still running')})\n{logs[name][-4000:]}" for name in containers
    )
    print(f"2-node run ({'train.py' if use_train_py else 'all-reduce'}): {elapsed:.1f} s")

    assert len(codes) == 2, f"2-node run did not finish within {RUN_TIMEOUT_S} s\n{report}"
    assert all(code == 0 for code in codes.values()), f"a node failed\n{report}"
    node0, node1 = (logs[name] for name in containers)
    if use_train_py:
        # Rank 0 logs the summary with the global throughput; rank 1 logs no DLLogger lines.
        assert "Summary" in node0 and "train.total_ips" in node0, report
    else:
        assert "allreduce ok rank=0 world=2 host=node0" in node0, report
        assert "allreduce ok rank=1 world=2 host=node1" in node1, report
