"""A real Slurm cluster on this machine's Docker Engine, for the tests of ``runtime: slurm`` (issue 37).

Debian bookworm's Slurm 22.05 and MUNGE (docker/slurm/, built by docker/slurm/build.sh, cached by its inputs' hash):

- ``slurmctl``: slurmctld and the login node, sshd on port 22, published on 127.0.0.1:<free port> (the Airflow worker
  runs on the host); user ``dlperf`` (uid 2000), key authentication only, with the key this module makes per cluster;
- ``torch0``, ``torch1`` (partition ``torch``, the default): slurmd in containers built FROM
  dlperf/pytorch-reference:cpu; ``mxnet0``, ``mxnet1`` (partition ``mxnet``): FROM dlperf/ngc-mxnet:cpu. Each node
  declares 2 CPUs whatever the host has (1n2g: 2 tasks on a node; 2n1g: 1 task on each of 2); no GPUs, no gres;
- a Docker volume at ``/shared`` in every container: the cluster's shared file system (batch scripts and outputs);
- a network of its own (``dlperf-slurm-<id>``), where the hostnames above resolve; every container, the network and
  the volume carry the label ``dlperf.slurm-cluster=<id>`` and are removed when the cluster ends.

No accounting (no slurmdbd): a job's state is ``scontrol show job``'s, kept ``MinJobAge`` (300) seconds after its
end. ``KillWait`` is 5 s: a job past its ``--time`` is killed 5 s after its SIGTERM. ``DLPERF_SLURM_KEEP=1`` leaves the
cluster running after the block, for a look (``teardown(cluster_id)`` removes it).

Open MPI (Debian's 4.1.4, in both node images) under Slurm: ``mpirun`` in an allocation starts its daemons with srun
(``plm slurm``: no ssh, no hostfile); ``srun --mpi=pmix`` starts ranks directly; ``--mpi=pmi2`` does not work (Debian's
Open MPI has no Slurm PMI-2 component).

The software on the nodes is the images' own (dlperf's ``software: none``): a job gets the login shell's
environment (sbatch's default ``--export=ALL``), whose PATH has no ``/opt/venv/bin``: a batch script puts it first
itself (as a site's ``module load`` would).

    with slurm_cluster() as cluster:  # about 4 s with the images built (docker/slurm/build.sh: 40 s from nothing)
        job = cluster.submit("#!/bin/bash\\nsrun hostname\\n", "-N2", "--ntasks-per-node=1", partition="torch")
        cluster.wait(job, "COMPLETED")
        print(cluster.read(cluster.output_of(job)))
"""

from __future__ import annotations

import base64
import contextlib
import os
import posixpath
import re
import shlex
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from helpers import REPO

SLURM_DIR = REPO / "docker" / "slurm"
CONTROLLER_IMAGE = "dlperf/slurm-controller:22.05"
NODE_IMAGES = {"torch": "dlperf/slurm-node-torch:cpu", "mxnet": "dlperf/slurm-node-mxnet:cpu"}
"""partition -> the image of its nodes (docker/slurm/node.Dockerfile FROM the framework CPU image below)."""
FRAMEWORK_IMAGES = {"torch": "dlperf/pytorch-reference:cpu", "mxnet": "dlperf/ngc-mxnet:cpu"}
PARTITIONS = {"torch": ("torch0", "torch1"), "mxnet": ("mxnet0", "mxnet1")}
"""partition -> its nodes' hostnames (docker/slurm/slurm.conf)."""
CONTROLLER = "slurmctl"
USER = "dlperf"
SHARED = "/shared"
LABEL = "dlperf.slurm-cluster"
KILL_WAIT_S = 5
MIN_JOB_AGE_S = 300
END_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
)


def _docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise RuntimeError(f"docker {shlex.join(args)} failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    return out


def build_images() -> float:
    """Bring the cluster's three images up to date (docker/slurm/build.sh: skipped when the inputs are unchanged);
    the framework images must exist. Returns the seconds it took."""
    started = time.monotonic()
    out = subprocess.run(["bash", str(SLURM_DIR / "build.sh")], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(
            f"docker/slurm/build.sh failed ({out.returncode}):\n{out.stdout[-3000:]}{out.stderr[-5000:]}"
        )
    return time.monotonic() - started


def parse_scontrol(line: str) -> dict[str, str]:
    """``scontrol show job -o`` / ``show node -o``'s one line -> its fields (a value may hold spaces: Command=...)."""
    return {m[1]: m[2] for m in re.finditer(r"(?:^|\s)([A-Za-z][\w:/]*)=(.*?)(?=\s[A-Za-z][\w:/]*=|\s*$)", line)}


class SlurmError(RuntimeError):
    """The cluster did not do what was asked; the message ends with the daemons' logs."""


@dataclass
class SlurmCluster:
    """A started cluster: where its login node answers and how to use it (see the module's docstring)."""

    cluster_id: str
    network: str
    volume: str
    containers: dict[str, str]  # hostname -> container name
    ssh_host: str
    ssh_port: int
    ssh_user: str
    ssh_key_file: Path  # the private key (OpenSSH PEM) that logs in as ssh_user
    host_key: str  # the login node's public host key, "ssh-ed25519 AAAA..."
    shared_dir: str = SHARED
    partitions: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(PARTITIONS))
    timings: dict[str, float] = field(default_factory=dict)
    _client: object | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ SSH to the login node

    def airflow_connection(self) -> dict[str, object]:
        """The login node as an Airflow SSH connection (JSON for ``AIRFLOW_CONN_<NAME>``): key file, host key checked."""
        return {
            "conn_type": "ssh",
            "host": self.ssh_host,
            "port": self.ssh_port,
            "login": self.ssh_user,
            "extra": {"key_file": str(self.ssh_key_file), "host_key": self.host_key, "no_host_key_check": False},
        }

    @property
    def known_hosts_line(self) -> str:
        """The login node's line for a known_hosts file (``[127.0.0.1]:PORT ssh-ed25519 AAAA...``)."""
        return f"[{self.ssh_host}]:{self.ssh_port} {self.host_key}"

    def ssh(self):  # -> paramiko.SSHClient
        """An SSH client logged in to the login node, its host key checked (kept and reused)."""
        import paramiko

        if self._client is not None and self._client.get_transport() and self._client.get_transport().is_active():
            return self._client
        client = paramiko.SSHClient()
        keytype, blob = self.host_key.split()[:2]
        client.get_host_keys().add(
            f"[{self.ssh_host}]:{self.ssh_port}",
            keytype,
            paramiko.PKey.from_type_string(keytype, base64.b64decode(blob)),
        )
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect(
            self.ssh_host,
            port=self.ssh_port,
            username=self.ssh_user,
            key_filename=str(self.ssh_key_file),
            look_for_keys=False,
            allow_agent=False,
            timeout=20,
        )
        self._client = client
        return client

    def run(self, command: str, *, timeout: float = 60, check: bool = True) -> tuple[int, str, str]:
        """``command`` in a shell on the login node as the cluster's user: (exit status, stdout, stderr)."""
        _, stdout, stderr = self.ssh().exec_command(command, timeout=timeout)
        out, err = stdout.read().decode(), stderr.read().decode()
        rc = stdout.channel.recv_exit_status()
        if check and rc != 0:
            raise SlurmError(f"{command!r} on the login node exited {rc}: {err.strip() or out.strip()}")
        return rc, out, err

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        """Write ``text`` to ``path`` on the login node (over SFTP), making its folder."""
        self.run(f"mkdir -p {shlex.quote(posixpath.dirname(path))}")
        with self.ssh().open_sftp() as sftp:
            with sftp.open(path, "w") as out:
                out.write(text)
            sftp.chmod(path, mode)

    def read(self, path: str) -> str:
        """The text of ``path`` on the login node (over SFTP)."""
        with self.ssh().open_sftp() as sftp, sftp.open(path) as found:
            return found.read().decode()

    # ------------------------------------------------------------------ jobs

    def submit(self, script: str, *sbatch_args: str, name: str = "job", partition: str = "torch") -> str:
        """Write ``script`` to ``/shared/jobs/<name>-<uuid>.sbatch`` and sbatch it there (its output:
        ``output_of(job)``); returns the job id."""
        path = f"{self.shared_dir}/jobs/{name}-{uuid.uuid4().hex[:8]}.sbatch"
        self.write(path, script, 0o755)
        args = [
            "sbatch",
            "--parsable",
            f"--job-name={name}",
            f"--partition={partition}",
            f"--chdir={self.shared_dir}/jobs",
            f"--output={path[: -len('.sbatch')]}-%j.out",
            *sbatch_args,
            path,
        ]
        _, out, _ = self.run(shlex.join(args))
        return out.strip().split(";")[0]

    def output_of(self, job: str) -> str:
        """The job's output file (StdOut of ``scontrol show job``)."""
        return self.job(job)["StdOut"]

    def job(self, job: str) -> dict[str, str]:
        """``scontrol show job -o JOB``'s fields (JobState, Reason, NodeList, ExitCode, StdOut, ...)."""
        _, out, _ = self.run(f"scontrol show job -o {shlex.quote(job)}")
        return parse_scontrol(out.strip())

    def wait(self, job: str, *states: str, timeout: float = 300, poll: float = 1.0) -> dict[str, str]:
        """Poll the job until its state is one of ``states`` (or, when ``states`` has only end states, until it
        ends in another: a SlurmError then, with its fields and the logs). Returns its fields."""
        deadline = time.monotonic() + timeout
        while True:
            fields = self.job(job)
            state = fields.get("JobState", "")
            if state in states:
                return fields
            if state in END_STATES and set(states) <= END_STATES:
                raise SlurmError(
                    f"job {job} ended {state}, not {'/'.join(states)}: {fields}\n{self._job_output(fields)}"
                )
            if time.monotonic() > deadline:
                raise SlurmError(
                    f"job {job} still {state} after {timeout:.0f} s (waited for {'/'.join(states)}): "
                    f"{fields}\n{self.logs()}"
                )
            time.sleep(poll)

    def _job_output(self, fields: dict[str, str]) -> str:
        with contextlib.suppress(Exception):
            return f"--- {fields['StdOut']}:\n{self.read(fields['StdOut'])[-4000:]}"
        return ""

    # ------------------------------------------------------------------ nodes

    def nodes(self) -> dict[str, str]:
        """hostname -> its state as sinfo prints it (idle, alloc, drain, ...)."""
        out = _docker("exec", self.containers[CONTROLLER], "sinfo", "-h", "-N", "-o", "%N %t").stdout
        return dict(line.split()[:2] for line in out.splitlines() if line.strip())

    def node(self, name: str) -> dict[str, str]:
        """``scontrol show node -o NAME``'s fields (State, Reason, ...)."""
        _, out, _ = self.run(f"scontrol show node -o {shlex.quote(name)}")
        return parse_scontrol(out.strip())

    def drain(self, node: str, reason: str) -> None:
        """Drain ``node`` (as root on the controller: an operator's action, not the cluster user's)."""
        _docker(
            "exec",
            self.containers[CONTROLLER],
            "scontrol",
            "update",
            f"nodename={node}",
            "state=drain",
            f"reason={reason}",
        )

    def resume(self, node: str) -> None:
        """Give a drained node back to the scheduler."""
        _docker("exec", self.containers[CONTROLLER], "scontrol", "update", f"nodename={node}", "state=resume")

    def logs(self, tail: int = 40) -> str:
        """The last lines of every container's log (slurmctld's, each slurmd's, sshd's), for error messages."""
        parts = []
        for host, container in self.containers.items():
            out = _docker("logs", "--tail", str(tail), container, check=False, timeout=30)
            parts.append(f"--- {host} ({container}) docker logs:\n{out.stdout}{out.stderr}")
        return "\n".join(parts)


def _free_port_publish(container: str) -> int:
    out = _docker("port", container, "22/tcp").stdout.strip().splitlines()[0]
    return int(out.rsplit(":", 1)[1])


@contextlib.contextmanager
def slurm_cluster(*, build: bool = True, ready_timeout: float = 120) -> Iterator[SlurmCluster]:
    """A fresh cluster (module docstring), every node idle; torn down (containers, network, volume) when the block
    ends, whatever happened. ``build``: bring the images up to date first (docker/slurm/build.sh)."""
    import paramiko

    timings: dict[str, float] = {}
    if build:
        timings["build_s"] = build_images()
    cluster_id = uuid.uuid4().hex[:10]
    prefix = f"dlperf-slurm-{cluster_id}"
    network, volume = prefix, prefix
    label = f"{LABEL}={cluster_id}"
    containers = {CONTROLLER: f"{prefix}-{CONTROLLER}"} | {
        host: f"{prefix}-{host}" for hosts in PARTITIONS.values() for host in hosts
    }
    workdir = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    started = time.monotonic()
    cluster: SlurmCluster | None = None
    try:
        (workdir / "munge.key").write_bytes(os.urandom(1024))
        key = paramiko.RSAKey.generate(2048)
        key_file = workdir / "id_rsa"
        key.write_private_key_file(str(key_file))
        key_file.chmod(0o600)
        (workdir / "authorized_keys").write_text(f"{key.get_name()} {key.get_base64()} dlperf-slurm-test\n")
        _docker("network", "create", "--label", label, network)
        _docker("volume", "create", "--label", label, volume)
        for host, container in containers.items():
            if host == CONTROLLER:
                image, role, extra = CONTROLLER_IMAGE, "controller", ["-p", "127.0.0.1::22"]
            else:
                partition = next(p for p, hosts in PARTITIONS.items() if host in hosts)
                image, role, extra = NODE_IMAGES[partition], "node", ["--shm-size", "1g"]
            _docker(
                "create", "--name", container, "--hostname", host, "--network", network, "--network-alias", host,
                "--label", label, "-v", f"{volume}:{SHARED}", *extra, image, role,
            )  # fmt: skip
            _docker("cp", str(workdir / "munge.key"), f"{container}:/etc/dlperf-slurm/munge.key")
            if host == CONTROLLER:
                _docker("cp", str(workdir / "authorized_keys"), f"{container}:/etc/dlperf-slurm/authorized_keys")
        for container in containers.values():
            _docker("start", container)
        host_key = ""
        cluster = SlurmCluster(
            cluster_id=cluster_id,
            network=network,
            volume=volume,
            containers=containers,
            ssh_host="127.0.0.1",
            ssh_port=_free_port_publish(containers[CONTROLLER]),
            ssh_user=USER,
            ssh_key_file=key_file,
            host_key=host_key,
            timings=timings,
        )
        _wait_ready(cluster, ready_timeout)
        timings["start_s"] = time.monotonic() - started
        yield cluster
    finally:
        if cluster is not None and cluster._client is not None:
            with contextlib.suppress(Exception):
                cluster._client.close()  # type: ignore[attr-defined]
        if os.environ.get("DLPERF_SLURM_KEEP") == "1":  # for a look: remove it later with teardown(id)
            print(f"DLPERF_SLURM_KEEP=1: Slurm cluster {cluster_id} left running (label {label}, key in {workdir})")
        else:
            teardown(cluster_id)
            for path in workdir.iterdir():
                path.unlink()
            workdir.rmdir()


@contextlib.contextmanager
def module_cluster(seconds: dict[str, float], title: str) -> Iterator[SlurmCluster]:
    """A test module's cluster (its ``cluster`` fixture): started, its start's timings added to ``seconds``, removed
    after its tests with nothing left on the engine, and ``seconds`` printed under ``title``."""
    with slurm_cluster() as started:
        seconds.update(started.timings)
        yield started
    assert leftovers(started.cluster_id) == []
    print(f"\n{title} seconds:", {k: round(v, 1) for k, v in seconds.items()})


def _wait_ready(cluster: SlurmCluster, timeout: float) -> None:
    """Until every node is idle in sinfo and the login node answers SSH; else a SlurmError with the logs."""
    deadline = time.monotonic() + timeout
    expected = {host for hosts in cluster.partitions.values() for host in hosts}
    states: dict[str, str] = {}
    last_error = ""
    while time.monotonic() < deadline:
        for container in cluster.containers.values():
            running = _docker("inspect", "-f", "{{.State.Running}}", container, check=False).stdout.strip()
            if running != "true":
                raise SlurmError(f"container {container} exited while the cluster started\n{cluster.logs(80)}")
        try:
            states = cluster.nodes()
        except RuntimeError as exc:  # slurmctld not answering yet
            last_error = str(exc)
            states = {}
        if set(states) == expected and set(states.values()) == {"idle"}:
            break
        time.sleep(0.5)
    else:
        raise SlurmError(
            f"the Slurm cluster was not ready within {timeout:.0f} s: sinfo says {states or last_error}\n{cluster.logs(80)}"
        )
    pub = _docker("exec", cluster.containers[CONTROLLER], "cat", "/etc/ssh/ssh_host_ed25519_key.pub").stdout.split()
    cluster.host_key = f"{pub[0]} {pub[1]}"
    while True:
        try:
            cluster.run("true", timeout=20)
        except Exception as exc:
            if time.monotonic() > deadline:
                raise SlurmError(
                    f"the login node's sshd does not let {cluster.ssh_user} in: {exc}\n{cluster.logs()}"
                ) from exc
            time.sleep(0.5)
        else:
            return


def teardown(cluster_id: str) -> None:
    """Remove the cluster's containers, network and volume (those labelled with ``cluster_id``)."""
    label = f"label={LABEL}={cluster_id}"
    ids = _docker("ps", "-aq", "--filter", label, check=False).stdout.split()
    if ids:
        _docker("rm", "-f", "-v", *ids, check=False, timeout=120)
    for kind in ("network", "volume"):
        names = _docker(kind, "ls", "-q", "--filter", label, check=False).stdout.split()
        if names:
            _docker(kind, "rm", *names, check=False)


def leftovers(cluster_id: str = "") -> list[str]:
    """Containers, networks and volumes of the Slurm test cluster ``cluster_id`` (any, when empty) still there."""
    label = f"label={LABEL}={cluster_id}" if cluster_id else f"label={LABEL}"
    found = []
    for kind, cmd, name in (
        ("container", ["ps", "-a"], "{{.Names}}"),
        ("network", ["network", "ls"], "{{.Name}}"),
        ("volume", ["volume", "ls"], "{{.Name}}"),
    ):
        listed = _docker(*cmd, "--filter", label, "--format", name, check=False).stdout.split()
        found += [f"{kind} {one}" for one in listed]
    return found


def drained(cluster: SlurmCluster, node: str, reason: str) -> contextlib.AbstractContextManager[None]:
    """``with drained(cluster, "mxnet1", "why"):`` the node drained in the block, resumed after it."""

    @contextlib.contextmanager
    def _block() -> Iterator[None]:
        cluster.drain(node, reason)
        try:
            yield
        finally:
            cluster.resume(node)

    return _block()
