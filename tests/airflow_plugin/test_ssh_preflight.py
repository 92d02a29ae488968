"""Preflight (dlperf_airflow.ssh_preflight) against a real sshd on loopback: a good node passes, bad nodes are
reported with the reason, and the DAG steps skip only the cases of a bad node (with "preflight: <node>: <problem>")
while the rest run.

Each test module gets its own sshd (``/usr/sbin/sshd -D`` on a free 127.0.0.1 port) with a fresh host key,
client key, authorized_keys and config in a temporary folder; the system sshd is never touched.
``scripts/ensure-sshd.sh`` installs openssh-server when missing (``make test`` runs it).
The pure judgement of check output, without any server: tests/core/cluster/test_preflight.py.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlperf_airflow import steps
from dlperf_airflow.ssh_preflight import check_node
from dlperf_core.cluster.inventory import Inventory, Node, SshAccess
from dlperf_core.cluster.preflight import PreflightReport
from dlperf_core.model import RunIds
from dlperf_core.storage import ResultStore
from helpers import REPO, docker_available, image_present

SSHD = "/usr/sbin/sshd"
BASE_IMAGE = os.environ.get("DLPERF_BASE_IMAGE", "dlperf/debian-base:bookworm")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sshd:
    """A private sshd on 127.0.0.1:port accepting ``client_key`` for the current user."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.port = _free_port()
        self.user = getpass.getuser()
        self.host_key = folder / "ssh_host_ed25519_key"
        self.client_key = folder / "id_ed25519"
        for key in (self.host_key, self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        (folder / "authorized_keys").write_text(Path(f"{self.client_key}.pub").read_text())
        (folder / "authorized_keys").chmod(0o600)
        self.config = folder / "sshd_config"
        self.config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\nPidFile {folder}/sshd.pid\n"
            f"AuthorizedKeysFile {folder}/authorized_keys\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n"
            f"AllowUsers {self.user}\nLogLevel VERBOSE\n"
        )
        self.log = folder / "sshd.log"
        self.proc: subprocess.Popen | None = None

    @property
    def host_public_key(self) -> str:
        return " ".join(Path(f"{self.host_key}.pub").read_text().split()[:2])

    def start(self) -> None:
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation folder (empty, root-owned)
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.config)], stderr=self.log.open("w"))
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited {self.proc.returncode}: {self.log.read_text()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"sshd did not listen on {self.port}: {self.log.read_text()}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def access(self, **overrides) -> SshAccess:
        fields = dict(
            user=self.user,
            port=self.port,
            key_file=str(self.client_key),
            host_key=self.host_public_key,
            connect_timeout_s=5,
        )
        fields.update(overrides)
        return SshAccess(**fields)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory) -> Iterator[Sshd]:
    if not Path(SSHD).exists() or shutil.which("ssh-keygen") is None:
        pytest.skip("openssh-server not installed (scripts/ensure-sshd.sh installs it)")
    if os.geteuid() != 0 and not Path("/run/sshd").is_dir():
        pytest.skip("sshd needs /run/sshd, which only root can create")
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def docker_engine() -> None:
    if not docker_available():
        pytest.skip("no Docker engine (scripts/ensure-docker.sh starts one)")


def _good_node(sshd: Sshd, data: Path, **overrides) -> Node:
    fields = dict(
        name="good",
        address="127.0.0.1",
        gpus=1,
        accelerator="cpu",
        ssh=sshd.access(),
        data_paths=(str(data),),
        log_dir=str(data),
        min_free_disk_gb=0.01,
    )
    fields.update(overrides)
    return Node(**fields)


# --------------------------------------------------------------------------- against the real sshd


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_good_node_passes_over_real_ssh(sshd, tmp_path):
    if not image_present(BASE_IMAGE):
        pytest.skip(f"{BASE_IMAGE} not built (scripts/build-images.sh)")
    health = check_node(_good_node(sshd, tmp_path), [BASE_IMAGE], use_connection=False)
    assert health.ok, health.problems
    assert health.problems == ()
    assert health.checks["docker"].startswith("server ")
    assert health.checks["nvidia_runtime"].startswith("not applicable")
    assert health.checks["gpus"].startswith("not applicable")
    assert health.checks["infiniband"].startswith("not applicable")
    assert health.checks["paths"] == "1 present, 0 missing"
    assert "GB free" in health.checks["disk"]
    assert health.checks[f"image {BASE_IMAGE}"] == "present"


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_node_declaring_8_nvidia_gpus_is_reported(sshd, tmp_path):
    node = _good_node(
        sshd,
        tmp_path,
        name="gpu",
        accelerator="nvidia",
        gpus=8,
        infiniband=True,
        infiniband_devices=("mlx5_0",),
        data_paths=(str(tmp_path), "/no/such/dataset"),
        min_free_disk_gb=10_000_000,
    )
    health = check_node(node, [], use_connection=False)
    assert not health.ok
    text = "\n".join(health.problems)
    assert "NVIDIA container runtime missing" in text
    assert "nvidia-smi failed" in text  # no driver on this machine: the GPU count cannot be confirmed
    assert "InfiniBand declared but /dev/infiniband is missing" in text
    assert "path missing: /no/such/dataset" in text
    assert "GB wanted" in text  # 10 PB of free disk is not there
    assert health.reason.startswith("gpu: ")


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_missing_image_that_cannot_be_pulled_is_reported(sshd, tmp_path):
    image = "dlperf-test/no-such-image:never"  # not dlperf's own: pulled (and the pull fails here)
    health = check_node(_good_node(sshd, tmp_path), [image], use_connection=False)
    assert not health.ok
    assert health.checks[f"image {image}"] == "missing"
    (problem,) = health.problems
    assert problem.startswith(f"image {image} missing and could not be pulled: ")
    assert len(problem) > len(f"image {image} missing and could not be pulled: ")  # the daemon's reason


def test_wrong_port_is_unreachable(sshd, tmp_path):
    node = _good_node(sshd, tmp_path, name="badport", ssh=sshd.access(port=_free_port()))
    started = time.monotonic()
    health = check_node(node, [], use_connection=False)
    assert not health.ok
    (problem,) = health.problems
    assert problem.startswith("unreachable over ssh: ")
    assert "Unable to connect" in problem or "refused" in problem.lower(), problem
    assert time.monotonic() - started < 30  # one attempt, not the provider's three with back-off


def test_wrong_host_key_is_refused(sshd, tmp_path):
    other = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    wrong = " ".join(Path(f"{other}.pub").read_text().split()[:2])
    health = check_node(
        _good_node(sshd, tmp_path, name="spoofed", ssh=sshd.access(host_key=wrong)), [], use_connection=False
    )
    assert not health.ok
    assert "unreachable over ssh" in health.problems[0]
    assert "key" in health.problems[0].lower(), health.problems


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_airflow_connection_is_used_when_it_exists(sshd, tmp_path, monkeypatch):
    """The connection `dlperf cluster sync` would write (here through AIRFLOW_CONN_*) wins over the
    inventory's ssh block: the inventory below points at a dead port, the connection at the sshd."""
    from dlperf_airflow.ssh_preflight import check_node
    from dlperf_cli.cluster_cmd import ConnectionSpec

    node = _good_node(sshd, tmp_path, name="viaconn")
    spec = ConnectionSpec.for_node(node)
    import json

    monkeypatch.setenv(
        f"AIRFLOW_CONN_{spec.conn_id.upper()}",
        json.dumps(
            {"conn_type": "ssh", "host": spec.host, "login": spec.login, "port": spec.port, "extra": spec.extra}
        ),
    )
    dead = node.model_copy(update={"ssh": sshd.access(port=_free_port())})
    health = check_node(dead, [], use_connection=True)
    assert health.ok, health.problems
    assert check_node(dead, [], use_connection=False).ok is False


# --------------------------------------------------------------------------- the DAG steps


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_cases_on_a_bad_node_fail_with_the_reason_and_the_rest_run(sshd, tmp_path, monkeypatch, sqlite_url):
    """plan -> preflight -> run_case -> store_result with a real ResultStore: 1n1g runs on the good node,
    2n1g needs the bad one too and is stored as failed with "preflight: bad: ..." without starting."""

    monkeypatch.setenv("DLPERF_DB_URL", sqlite_url)
    monkeypatch.setenv("DLPERF_LOG_DIR", str(tmp_path / "logs"))
    good = _good_node(sshd, tmp_path)
    bad = _good_node(sshd, tmp_path, name="bad", ssh=sshd.access(port=_free_port()))
    inventory = tmp_path / "inventory.yaml"
    import yaml

    inventory.write_text(yaml.safe_dump(Inventory(name="two", nodes=(good, bad)).model_dump(mode="json")))
    ids = RunIds("dlperf_benchmark", "manual__preflight_test")
    params = {
        "suite": str(REPO / "suites/smoke.yaml"),
        "runtime": "local",
        "inventory": str(inventory),
        "topologies": ["1n1g", "2n1g"],
        "repeats": 1,
        "frameworks": ["pytorch_reference"],
    }
    plan = steps.plan_step(params, ids, "manual")
    assert len(plan.cases) == 2

    health = steps.preflight_step(plan)
    assert health.status == "checked: 1 ok, 1 failed"
    nodes = {h.name: h for h in health.nodes}
    assert nodes["good"].ok is True
    assert nodes["bad"].problems[0].startswith("unreachable over ssh")

    verdicts = {}
    for item in plan.cases:
        executed = steps.execute_step(item, ids, health)
        verdicts[item.label] = (executed.outcome, steps.store_step(executed, ids))
    one = next(v for k, v in verdicts.items() if "/1n1g" in k)
    two = next(v for k, v in verdicts.items() if "/2n1g" in k)
    assert one[1].status == "ok" and one[1].throughput > 0
    assert two[1].status == "failed"
    assert two[1].reason.startswith("preflight: bad: unreachable over ssh: ")
    assert two[0].nodes == []  # nothing was started

    rows = ResultStore(sqlite_url).results(run_id=ids.run_id)
    by_topology = {f"{r.nodes}n{r.gpus_per_node}g": r for r in rows.itertuples()}
    assert by_topology["1n1g"].status == "ok"
    assert by_topology["2n1g"].status == "failed"
    assert by_topology["2n1g"].reason.startswith("preflight: bad: ")


def test_preflight_is_skipped_without_ssh(monkeypatch, sqlite_url):

    monkeypatch.setenv("DLPERF_DB_URL", sqlite_url)
    for inventory in ("inventories/local.yaml", "inventories/docker-local.yaml"):
        params = {
            "suite": str(REPO / "suites/smoke.yaml"),
            "runtime": "local",
            "inventory": str(REPO / inventory),
            "topologies": ["2n1g"],
            "repeats": 1,
        }
        plan = steps.plan_step(params, RunIds("dlperf_benchmark", f"manual__noss_{Path(inventory).stem}"), "manual")
        assert steps.preflight_step(plan) == PreflightReport(steps.PREFLIGHT_NO_SSH)
