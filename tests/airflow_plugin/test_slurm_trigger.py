"""The wait on a Slurm job (dlperf_airflow.slurm_trigger.SlurmJobTrigger) against a real sshd on loopback, the login
node: the trigger connects with the SSH provider's SSHHookAsync through a real Airflow connection (an
``AIRFLOW_CONN_...`` variable, host key checked), and the login node's ``scontrol``, ``sacct`` and ``scancel`` are
small scripts on its PATH (sshd's ``SetEnv``) that print Slurm 22.05's recorded outputs (tests/data/slurm/) one call
after another and record each scancel. A real Slurm: tests/e2e/test_slurm_cluster.py.

Checked: one event when the job ends (its parsed state; a job that did not end well never reads as a success), the
forgotten job (scontrol and sacct do not know it) and the one sacct still knows, slurmctld or the login node away
for longer than the limit, ``on_drained: fail`` (scancel, Slurm's reason) and ``wait``, ``on_kill`` (scancel) and a
cancelled wait that is no user's action (a triggerer restarting: no scancel), and the trigger's serialized form.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_ssh_preflight import SSHD, Sshd, _free_port

from dlperf_airflow.slurm_trigger import SlurmJobTrigger, WaitEnd
from helpers import REPO

RECORDED = REPO / "tests" / "data" / "slurm"
JOB = "42"  # the recorded outputs' job
CONN_ID = "dlperf_slurm_test_login"
DOWN = "slurmctld-down"  # a state file's line: scontrol cannot reach slurmctld

SCONTROL = r"""#!/bin/sh
# fake scontrol show job -o ID: its Nth call prints the recorded output named on line N of $LOGIN/ID.states (the
# last line from then on); no such file: the job is not known
eval id=\${$#}
f="$LOGIN/$id.states"
if [ ! -f "$f" ]; then cat "$RECORDED/scontrol-forgotten.txt" >&2; exit 1; fi
n=$(( $(cat "$LOGIN/$id.count" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$LOGIN/$id.count.new" && mv "$LOGIN/$id.count.new" "$LOGIN/$id.count"  # whole, never read half-written
name=$(sed -n "${n}p" "$f"); [ -n "$name" ] || name=$(tail -n 1 "$f")
case "$name" in
  slurmctld-down) echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1;;
  scontrol-forgotten.txt) cat "$RECORDED/$name" >&2; exit 1;;
esac
cat "$RECORDED/$name"
"""
SACCT = r"""#!/bin/sh
# fake sacct --jobs=ID ...: $LOGIN/ID.sacct names a recorded output; else no slurmdbd
for a in "$@"; do case "$a" in --jobs=*) id="${a#--jobs=}";; esac; done
if [ -f "$LOGIN/$id.sacct" ]; then cat "$RECORDED/$(cat "$LOGIN/$id.sacct")"; exit 0; fi
cat "$RECORDED/sacct-no-slurmdbd.txt" >&2; exit 1
"""
SCANCEL = r"""#!/bin/sh
# fake scancel ID: records the call
echo "$*" >> "$LOGIN/scancel.calls"
"""


class LoginNode:
    """A login node on a private sshd: fake Slurm commands on its PATH, their state in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.bin = folder / "bin"
        self.bin.mkdir()
        for name, text in (("scontrol", SCONTROL), ("sacct", SACCT), ("scancel", SCANCEL)):
            script = self.bin / name
            script.write_text(text.replace("$LOGIN", str(folder)).replace("$RECORDED", str(RECORDED)))
            script.chmod(0o755)
        self.sshd = Sshd(folder / "sshd")

    def start(self) -> None:
        with self.sshd.config.open("a") as config:  # the fake commands first on the sessions' PATH
            config.write(f"SetEnv PATH={self.bin}:/usr/local/bin:/usr/bin:/bin\n")
        self.sshd.start()

    def connection(self, port: int | None = None, host_key: str | None = None) -> str:
        """The Airflow connection of this login node (as ``AIRFLOW_CONN_<ID>`` holds it), host key checked."""
        extra = {"key_file": str(self.sshd.client_key), "host_key": host_key or self.sshd.host_public_key}
        return json.dumps(
            {
                "conn_type": "ssh",
                "host": "127.0.0.1",
                "port": port or self.sshd.port,
                "login": self.sshd.user,
                "extra": extra,
            }
        )

    def job(self, job_id: str, *states: str, sacct: str | None = None) -> None:
        """What scontrol says of ``job_id`` call after call (recorded file names, or :data:`DOWN`), and sacct."""
        for suffix in (".states", ".count", ".sacct"):
            (self.folder / f"{job_id}{suffix}").unlink(missing_ok=True)
        (self.folder / "scancel.calls").unlink(missing_ok=True)
        if states:
            (self.folder / f"{job_id}.states").write_text("\n".join(states) + "\n")
        if sacct:
            (self.folder / f"{job_id}.sacct").write_text(sacct)

    def looks(self, job_id: str) -> int:
        count = self.folder / f"{job_id}.count"
        return int(count.read_text()) if count.exists() else 0

    @property
    def cancelled(self) -> list[str]:
        calls = self.folder / "scancel.calls"
        return calls.read_text().split() if calls.exists() else []


@pytest.fixture(scope="module")
def login(tmp_path_factory) -> Iterator[LoginNode]:
    if not Path(SSHD).exists() or shutil.which("ssh-keygen") is None:
        pytest.skip("openssh-server not installed (scripts/ensure-sshd.sh installs it)")
    if os.geteuid() != 0 and not Path("/run/sshd").is_dir():
        pytest.skip("sshd needs /run/sshd, which only root can create")
    folder = tmp_path_factory.mktemp("login")
    (folder / "sshd").mkdir()
    node = LoginNode(folder)
    node.start()
    yield node
    node.sshd.stop()


@pytest.fixture
def conn(login, monkeypatch) -> LoginNode:
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", login.connection())
    return login


def wait(trigger: SlurmJobTrigger, limit_s: float = 60) -> list[WaitEnd]:
    """Every event the trigger fires (it returns after its first)."""

    async def events() -> list[WaitEnd]:
        return [WaitEnd.from_json(e.payload) async for e in trigger.run()]

    return asyncio.run(asyncio.wait_for(events(), limit_s))


def trigger(**overrides) -> SlurmJobTrigger:
    fields = {"ssh_conn_id": CONN_ID, "job_id": JOB, "poll_s": 0.05, "unreachable_s": 30.0, "command_timeout_s": 20}
    return SlurmJobTrigger(**{**fields, **overrides})


def test_serialized_form_makes_the_same_trigger():
    t = trigger(on_drained="fail", poll_s=15)
    classpath, kwargs = t.serialize()
    module, _, name = classpath.rpartition(".")
    cls = getattr(__import__(module, fromlist=[name]), name)
    assert cls is SlurmJobTrigger and classpath == "dlperf_airflow.slurm_trigger.SlurmJobTrigger"
    assert json.loads(json.dumps(kwargs)) == kwargs  # JSON, as the triggerer's table keeps it
    assert cls(**kwargs).serialize() == (classpath, kwargs)
    assert kwargs["on_drained"] == "fail" and kwargs["poll_s"] == 15.0 and kwargs["job_id"] == JOB


def test_a_job_that_runs_then_completes_fires_one_event(conn):
    conn.job(JOB, "scontrol-pending-resources.txt", "scontrol-running.txt", "scontrol-running.txt",
             "scontrol-completed.txt")  # fmt: skip
    (end,) = wait(trigger())
    assert (end.status, end.state, end.reason) == ("ended", "COMPLETED", None)
    assert end.wait_failure is None and end.end_reason is None
    assert end.job is not None and end.job["node_list"] == "c[1-2]" and end.job["exit_code"] == 0
    assert conn.looks(JOB) == 4 and conn.cancelled == []


@pytest.mark.parametrize(
    ("recorded", "state", "words"),
    [
        ("scontrol-failed.txt", "FAILED", "FAILED"),
        ("scontrol-timeout.txt", "TIMEOUT", "time limit"),
        ("scontrol-node-fail.txt", "NODE_FAIL", "NODE_FAIL"),
        ("scontrol-cancelled.txt", "CANCELLED", "cancelled"),
        ("scontrol-oom.txt", "OUT_OF_MEMORY", "out of memory"),
        ("scontrol-preempted.txt", "PREEMPTED", "PREEMPTED"),
    ],
)
def test_a_job_that_did_not_end_well_ends_the_wait_with_slurms_reason(conn, recorded, state, words):
    conn.job(JOB, "scontrol-running.txt", recorded)
    (end,) = wait(trigger())
    assert (end.status, end.state) == ("ended", state)
    assert end.end_reason is not None and words in end.end_reason and f"slurm job {JOB}" in end.end_reason
    assert end.wait_failure is None  # the job ended: the runtime reads it back, Slurm's reason if it has none


def test_a_forgotten_job_ends_the_wait_with_the_reason(conn):
    conn.job(JOB)  # scontrol: Invalid job id specified; sacct: accounting storage is disabled
    (end,) = wait(trigger())
    assert end.status == "forgotten" and end.state is None
    assert end.wait_failure is not None and "its end is not known" in end.wait_failure
    assert "MinJobAge" in end.wait_failure and "sacct" in end.wait_failure


def test_a_job_scontrol_forgot_is_read_from_sacct(conn):
    conn.job(JOB, "scontrol-running.txt", "scontrol-forgotten.txt", sacct="sacct-completed.txt")
    (end,) = wait(trigger())
    assert (end.status, end.state, end.reason) == ("ended", "COMPLETED", None)
    assert end.job is not None and end.job["source"] == "sacct"


def test_slurmctld_away_for_longer_than_the_limit_ends_the_wait(conn):
    conn.job(JOB, "scontrol-running.txt", DOWN)
    (end,) = wait(trigger(unreachable_s=1.0))
    assert end.status == "unreachable" and end.wait_failure is not None
    assert "Unable to contact slurm controller" in end.wait_failure and CONN_ID in end.wait_failure
    assert conn.looks(JOB) > 3  # it kept looking until the limit


def test_slurmctld_away_for_a_moment_is_waited_out(conn):
    conn.job(JOB, "scontrol-running.txt", DOWN, DOWN, "scontrol-running.txt", "scontrol-completed.txt")
    (end,) = wait(trigger(unreachable_s=30.0))
    assert (end.status, end.state) == ("ended", "COMPLETED")


def test_a_login_node_that_does_not_answer_ends_the_wait(login, monkeypatch):
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", login.connection(port=_free_port()))
    (end,) = wait(trigger(unreachable_s=1.0))
    assert end.status == "unreachable" and end.wait_failure is not None
    assert f"ssh connection {CONN_ID}" in end.wait_failure
    assert "refused" in end.wait_failure.lower() or "connect" in end.wait_failure.lower(), end.wait_failure


def test_a_login_node_with_another_host_key_is_refused(login, monkeypatch):
    other = login.folder / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    key = " ".join(Path(f"{other}.pub").read_text().split()[:2])
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", login.connection(host_key=key))
    login.job(JOB, "scontrol-completed.txt")
    (end,) = wait(trigger(unreachable_s=0.5))
    assert end.status == "unreachable" and "HostKeyNotVerifiable" in (end.wait_failure or ""), end.wait_failure
    assert login.looks(JOB) == 0


def test_on_drained_fail_cancels_a_job_pending_on_drained_nodes(conn):
    conn.job(JOB, "scontrol-pending-resources.txt", "scontrol-pending-reqnodenotavail.txt")
    (end,) = wait(trigger(on_drained="fail"))
    assert (end.status, end.state) == ("drained", "PENDING")
    assert end.wait_failure is not None and "ReqNodeNotAvail,_UnavailableNodes:c2" in end.wait_failure
    assert "cancelled (on_drained: fail)" in end.wait_failure
    assert conn.cancelled == [JOB]
    assert conn.looks(JOB) == 3  # two looks in a row saw it wait on drained nodes


def test_on_drained_wait_keeps_waiting(conn):
    conn.job(JOB, *["scontrol-pending-drained.txt"] * 4, "scontrol-running.txt", "scontrol-completed.txt")
    (end,) = wait(trigger(on_drained="wait"))
    assert (end.status, end.state) == ("ended", "COMPLETED") and conn.cancelled == []


def test_on_kill_cancels_the_job(conn):
    conn.job(JOB, "scontrol-running.txt")
    asyncio.run(asyncio.wait_for(trigger().on_kill(), 30))
    assert conn.cancelled == [JOB]


def test_a_wait_cancelled_by_no_users_action_leaves_the_job_running(conn):
    """A triggerer that stops (restart, hand-over) cancels its triggers' tasks: the job must keep running (only a
    user's action calls on_kill)."""
    conn.job(JOB, "scontrol-running.txt")

    async def cancelled_after_a_few_looks() -> None:
        task = asyncio.ensure_future(wait_async(trigger()))
        while conn.looks(JOB) < 3:
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(cancelled_after_a_few_looks(), 60))
    assert conn.cancelled == []


async def wait_async(t: SlurmJobTrigger) -> list[dict]:
    return [e.payload async for e in t.run()]
