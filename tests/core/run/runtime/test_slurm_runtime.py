"""The slurm runtime (dlperf_core/run/runtime/slurm.py) against a login node played in memory: what it writes and runs
there, how it follows the job (recorded scontrol/sacct text, tests/data/slurm/), what it collects, how it resumes from
a SubmittedJob's JSON form (a deferred task), cancels and cleans up, and what the launch spec and ``dlperf reproduce``
keep of the job. The real cluster's tests are tests/e2e/test_slurm_cluster.py."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.model import Case, CaseRun, RunIds
from dlperf_core.run.jobs import build_job
from dlperf_core.run.launch_spec import LaunchSpec, launch_spec_of, shell_script
from dlperf_core.run.runtime.base import run_to_end
from dlperf_core.run.runtime.slurm import (
    DRAINED_LOOKS,
    POLL_ERRORS_TOLERATED,
    RemoteResult,
    SlurmRuntime,
    SubmittedJob,
    collect_job,
    job_name_prefix,
)
from helpers import REPO

DATA = REPO / "tests" / "data" / "slurm"
IDS = RunIds(dag_id="dlperf_benchmark", run_id="slurm-unit")


def recorded(name: str) -> str:
    return (DATA / name).read_text()


@dataclass
class FakeLogin:
    """A login node in memory: files by path, and the answers of scontrol in order (the last one repeats)."""

    states: list[str] = field(default_factory=lambda: [recorded("scontrol-completed.txt")])
    sacct: str = recorded("sacct-no-slurmdbd.txt")
    sbatch: RemoteResult = RemoteResult(0, "42\n", "")
    queue: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    unreachable: int = 0  # how many commands fail before the node answers

    def run(self, command: str, timeout_s: float) -> RemoteResult:
        assert timeout_s > 0
        self.commands.append(command)
        if self.unreachable:
            self.unreachable -= 1
            raise OSError("login node unreachable")
        word = command.split()[0]
        if word == "sbatch":
            return self.sbatch
        if word == "scontrol":
            text = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            return RemoteResult(1, "", text) if "Invalid job id" in text else RemoteResult(0, text, "")
        if word == "sacct":
            return RemoteResult(1, "", self.sacct) if "error" in self.sacct else RemoteResult(0, self.sacct, "")
        if word == "sinfo":
            return RemoteResult(0, recorded("sinfo-version.txt"), "")
        if word == "squeue":
            return RemoteResult(0, self.queue, "")
        if word == "rm":
            folder = command.split()[-1]
            self.files = {p: d for p, d in self.files.items() if not p.startswith(folder + "/")}
        return RemoteResult(0, "", "")

    def write_file(self, path: str, text: str) -> None:
        self.files[path] = text.encode()

    def read_file(self, path: str) -> bytes:
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]


def make_job(tmp_path: Path, framework: str = "pytorch_reference", topology: str = "2n1g", inventory="inventory.yaml"):
    inv = load_inventory(DATA / inventory)
    nodes, gpus = (int(x) for x in re.fullmatch(r"(\d+)n(\d+)g", topology).groups())
    case = Case(framework, "resnet50_v1.5", "fp32", 8, nodes, gpus, 2, 5, env=(("HF_TOKEN", "hf_secret"),))
    login = FakeLogin()
    runtime = SlurmRuntime(inv.slurm, login)
    job = build_job(CaseRun(case, 0), inv, runtime, IDS, timeout_s=600, watchdog_s=None, log_root=tmp_path)
    return runtime, login, job


def node_logs(login: FakeLogin, job, text: str = "DLL train throughput\n") -> None:
    folder = f"/shared/dlperf/{job.run_label}"
    for rank in range(len(job.launches)):
        login.files[f"{folder}/node{rank}.log"] = f"node {rank}: {text}".encode()
    login.files[f"{folder}/batch.log"] = b"dlperf: job 42 on c1 c2\n"


def test_a_job_that_completes(tmp_path):
    runtime, login, job = make_job(tmp_path)
    login.states = [recorded("scontrol-pending-resources.txt"), recorded("scontrol-running.txt")] + [
        recorded("scontrol-completed.txt")
    ]
    running = runtime.submit(job)
    assert running.poll_s == 2  # the inventory's poll_s
    running.submit()
    folder = f"/shared/dlperf/{job.run_label}"
    assert login.files[f"{folder}/batch.sh"].startswith(b"#!/bin/bash\n#SBATCH --job-name=" + job.run_label.encode())
    assert f"sbatch --parsable {folder}/batch.sh" in login.commands
    assert running.submitted.job_id == "42" and running.submitted.slurm_version == "22.05.8"
    assert [running.poll(), running.poll(), running.poll()] == [False, False, True]
    node_logs(login, job)
    outcome = running.collect()
    assert outcome.failure is None
    assert [(n.node, n.rank, n.exit_code) for n in outcome.nodes] == [("slot0", 0, 0), ("slot1", 1, 0)]
    assert Path(outcome.log_path) == job.log_dir / "node0.log"
    assert Path(outcome.log_path).read_text() == "node 0: DLL train throughput\n"
    assert (job.log_dir / "slurm-batch.log").read_text().startswith("dlperf: job 42")
    assert (outcome.finished_at - outcome.started_at).total_seconds() == pytest.approx(72, abs=1)  # End - Start


def test_the_environment_is_what_the_jobs_nodes_probed_with_the_jobs_facts(tmp_path):
    from dlperf_core.cluster.environment import PROBE_SCRIPT, parse_probe, run_probe_locally

    runtime, login, job = make_job(tmp_path)
    running = runtime.submit(job)
    running.submit()
    folder = f"/shared/dlperf/{job.run_label}"
    assert login.files[f"{folder}/probe.sh"] == PROBE_SCRIPT.encode()  # what every node runs before its launch
    assert running.poll()
    node_logs(login, job)
    assert running.collect().failure is None
    assert runtime.probed_environment(job, "pytorch_reference") is None  # no node left a probe: none, not a guess
    probe = run_probe_locally()  # this machine plays both nodes: the probe's real output
    for rank in range(2):
        login.files[f"{folder}/probe{rank}.txt"] = probe.encode()
    running = runtime.resume(running.submitted.to_json(), job)
    assert running.poll()
    running.collect()
    assert (job.log_dir / "node1.probe").read_text() == probe  # kept beside the nodes' logs
    environment = runtime.probed_environment(job, "pytorch_reference")
    assert environment.hostnames == (parse_probe(probe).hostname,) * 2
    assert environment.cpu_count == 2 * parse_probe(probe).cpu_count
    assert environment.framework == "pytorch_reference" and environment.image is None  # software none
    # the job's facts, as scontrol and sinfo told them (tests/data/slurm/scontrol-completed.txt, sinfo-version.txt)
    assert environment.scheduler == {
        "scheduler": "slurm",
        "version": "22.05.8",
        "partition": "debug",
        "job_id": "42",
        "node_list": "c[1-2]",
    }
    assert environment.scheduler_text == "slurm 22.05.8, partition debug"  # what a change between nights names
    assert environment.infrastructure()["scheduler_text"] == "slurm 22.05.8, partition debug"


def test_an_environment_without_a_scheduler_keeps_its_json_form_and_row():
    from dataclasses import replace

    from dlperf_core.cluster.environment import combine, environment_changes, parse_probe, run_probe_locally

    found = combine([parse_probe(run_probe_locally())], framework="pytorch_reference")
    assert "scheduler" not in found.to_json() and found.scheduler_text is None
    under_slurm = replace(found, scheduler={"scheduler": "slurm", "version": "22.05.8", "partition": "gpu"})
    upgraded = replace(under_slurm, scheduler={**under_slurm.scheduler, "version": "23.02.7", "job_id": "9"})
    assert under_slurm.content_hash != found.content_hash
    assert environment_changes(under_slurm.infrastructure(), upgraded.infrastructure()) == [
        "scheduler_text: slurm 22.05.8, partition gpu -> slurm 23.02.7, partition gpu"
    ]
    next_job = replace(under_slurm, scheduler={**under_slurm.scheduler, "job_id": "10"})
    assert environment_changes(under_slurm.infrastructure(), next_job.infrastructure()) == []  # a job id is no change


@pytest.mark.parametrize(
    ("state", "reason", "code"),
    [
        ("timeout", "reached its time limit (00:30:00) and was killed (TIMEOUT)", 128 + 0),
        ("node-fail", "a node failed (NODE_FAIL) on c[1-2]", None),
        ("oom", "out of memory", 128 + 125),
        ("cancelled", "was cancelled", 128 + 15),
        ("failed", "failed: exit code 1", 1),
    ],
)
def test_a_job_that_ends_badly_fails_the_case_with_slurms_reason(tmp_path, state, reason, code):
    runtime, login, job = make_job(tmp_path)
    login.states = [recorded(f"scontrol-{state}.txt")]
    node_logs(login, job)
    outcome = run_to_end(runtime.submit(job))
    assert reason in outcome.failure and outcome.failure.startswith("slurm job 42")
    assert all(n.exit_code != 0 for n in outcome.nodes)  # never a zero
    assert outcome.nodes[0].exit_code == (None if code == 128 else code)


def test_the_node_that_failed_first_is_named(tmp_path):
    runtime, login, job = make_job(tmp_path)
    login.states = [recorded("real-scontrol-failed.txt")]
    node_logs(login, job)
    folder = f"/shared/dlperf/{job.run_label}"
    login.files[f"{folder}/batch.log"] = (
        b"dlperf: job 4 on torch0 torch1\nsrun: error: torch1: task 1: Exited with exit code 2\n"
        b"srun: error: torch0: task 0: Terminated\n"
    )
    outcome = run_to_end(runtime.submit(job))
    assert outcome.failure == (
        "slurm job 4 failed: exit code 143 (FAILED, Reason=NonZeroExitCode); the first node to fail: slot1 on torch1 "
        "exited with code 2"
    )
    assert [n.exit_code for n in outcome.nodes] == [143, 2]


def test_the_ssh_keys_travel_beside_the_script_and_are_removed(tmp_path):
    runtime, login, job = make_job(tmp_path, "ngc_mxnet", "2n1g")
    running = runtime.submit(job)
    running.submit()
    folder = f"/shared/dlperf/{job.run_label}"
    keys = sorted(p for p in login.files if p.startswith(f"{folder}/files/"))
    assert [Path(p).name for p in keys] == ["0-id_ed25519", "1-authorized_keys", "2-host_ed25519", "3-known_hosts"]
    assert b"OPENSSH PRIVATE KEY" in login.files[f"{folder}/files/0-id_ed25519"]
    assert f"chmod 600 {folder}/files/0-id_ed25519" in login.commands
    assert b"PRIVATE KEY" not in login.files[f"{folder}/batch.sh"]
    running.poll()
    running.collect()
    assert not [p for p in login.files if p.startswith(f"{folder}/files/")]


def test_a_forgotten_job_is_read_from_sacct_or_fails_saying_so(tmp_path):
    runtime, login, job = make_job(tmp_path)
    login.states = [recorded("scontrol-forgotten.txt")]
    login.sacct = recorded("sacct-completed.txt")
    assert run_to_end(runtime.submit(job)).failure is None
    runtime, login, job = make_job(tmp_path)
    login.states = [recorded("scontrol-forgotten.txt")]
    outcome = run_to_end(runtime.submit(job))
    assert outcome.failure == (
        "slurm job 42: its end is not known: scontrol forgot it (MinJobAge) and sacct has no record of it (no slurmdbd?)"
    )
    assert outcome.nodes[0].exit_code is None


def test_on_drained_fail_cancels_a_job_waiting_on_drained_nodes(tmp_path):
    runtime, login, job = make_job(tmp_path)
    runtime.settings = runtime.settings.model_copy(update={"on_drained": "fail"})
    login.states = [recorded("scontrol-pending-drained.txt")]
    running = runtime.submit(job)
    running.submit()
    assert [running.poll() for _ in range(DRAINED_LOOKS)] == [False] * (DRAINED_LOOKS - 1) + [True]
    outcome = running.collect()
    assert "scancel 42" in login.commands
    assert outcome.failure.startswith("slurm job 42 waits on nodes that are drained or down (Reason=Nodes_required")
    assert outcome.failure.endswith(": cancelled (on_drained: fail)")


def test_on_drained_wait_keeps_waiting(tmp_path):
    runtime, login, job = make_job(tmp_path)
    login.states = [recorded("scontrol-pending-reqnodenotavail.txt")]
    running = runtime.submit(job)
    running.submit()
    assert not any(running.poll() for _ in range(5))
    assert "scancel 42" not in login.commands


def test_a_submission_that_fails_is_a_failed_case(tmp_path):
    runtime, login, job = make_job(tmp_path)
    login.sbatch = RemoteResult(1, "", "sbatch: error: Batch job submission failed: Invalid partition name specified")
    outcome = run_to_end(runtime.submit(job))
    assert outcome.failure == (
        "slurm: could not submit the job: SlurmError: sbatch exited with 1: sbatch: error: Batch job submission "
        "failed: Invalid partition name specified"
    )
    assert [n.exit_code for n in outcome.nodes] == [None, None]


def test_the_login_node_may_be_away_for_a_while(tmp_path):
    runtime, login, job = make_job(tmp_path)
    running = runtime.submit(job)
    running.submit()
    login.unreachable = POLL_ERRORS_TOLERATED - 1
    assert not any(running.poll() for _ in range(POLL_ERRORS_TOLERATED - 1))
    assert running.poll()  # then it answers: COMPLETED
    runtime, login, job = make_job(tmp_path)
    running = runtime.submit(job)
    running.submit()
    login.unreachable = POLL_ERRORS_TOLERATED + 10
    assert [running.poll() for _ in range(POLL_ERRORS_TOLERATED)][-1]
    assert "its state could not be read" in running.failure


def test_collect_before_the_end_cancels_the_job(tmp_path):
    runtime, login, job = make_job(tmp_path)
    login.states = [recorded("scontrol-running.txt")]
    running = runtime.submit(job)
    running.submit()
    assert not running.poll()
    outcome = running.collect()
    assert "scancel 42" in login.commands and outcome.failure == "slurm job 42 was cancelled before it ended"


def test_resumed_from_the_submitted_jobs_json_form(tmp_path):
    """A deferred task: submitted by one runtime, its SubmittedJob as JSON, polled and collected by another."""
    runtime, login, job = make_job(tmp_path)
    login.states = [recorded("scontrol-running.txt")]
    first = runtime.submit(job)
    first.submit()
    assert not first.poll()
    form = first.submitted.to_json()
    again = SubmittedJob.from_json(form)
    assert again == first.submitted
    login.states = [recorded("scontrol-completed.txt")]
    node_logs(login, job)
    other = SlurmRuntime(runtime.settings, login)
    resumed = other.resume(again, job)
    assert resumed.poll()
    assert resumed.collect().failure is None
    spec = launch_spec_of(other, job, CaseRun(job_case(job), 0), suite="s.yaml", inventory="inventory.yaml")
    assert (spec.slurm.job_id, spec.slurm.node_list, spec.slurm.slurm_version) == ("42", "c[1-2]", "22.05.8")
    # the collect side needs nothing but the submitted job and its final state
    outcome = collect_job(login, again, None, failure="the trigger gave up")
    assert outcome.failure == "the trigger gave up"


def job_case(job) -> Case:
    return Case("pytorch_reference", "resnet50_v1.5", "fp32", 8, len(job.launches), 1, 2, 5)


def test_the_launch_spec_keeps_the_job_and_reproduce_prints_its_script(tmp_path):
    runtime, login, job = make_job(tmp_path)
    node_logs(login, job)
    run_to_end(runtime.submit(job))
    spec = launch_spec_of(runtime, job, CaseRun(job_case(job), 0), suite="s.yaml", inventory="inventory.yaml")
    assert spec.runtime == "slurm" and [n.address for n in spec.nodes] == ["c1", "c2"]  # NodeList=c[1-2]
    record = spec.slurm
    assert (record.job_id, record.node_list, record.partition, record.software) == ("42", "c[1-2]", "debug", "none")
    assert "hf_secret" not in record.batch_script and "#SBATCH --nodes=2" in record.batch_script
    assert "hf_secret" not in str(spec.to_json())
    assert LaunchSpec.from_json(spec.to_json()) == spec
    text = shell_script(spec, run_id="r", dag_id="d")
    assert "# slurm: job 42, nodes c[1-2], partition debug, Slurm 22.05.8, software none" in text
    assert record.batch_script.rstrip() in text and "docker run" not in text


def test_a_spec_without_slurm_is_written_as_before(tmp_path):
    runtime, _, job = make_job(tmp_path)
    spec = launch_spec_of(runtime, job, CaseRun(job_case(job), 0), suite=None, inventory=None)
    assert "slurm" in spec.to_json()
    assert "slurm" not in LaunchSpec(case_key="k", repeat=0, nodes=()).to_json()
    assert spec.nodes[0].address == "$DLPERF_NODE0_ADDR"  # not submitted: the host is not known


def test_cleanup_cancels_the_dag_runs_jobs_only(tmp_path):
    runtime, login, _ = make_job(tmp_path)
    prefix = job_name_prefix(IDS.labels)
    login.queue = f"42 {prefix}0000-r0\n43 {prefix}0001-r1\n44 someone-else\n45 dlperf-ffffffffff-0000-r0\n"
    assert runtime.cleanup(IDS.labels) == ["42", "43"]
    assert [c for c in login.commands if c.startswith("scancel")] == ["scancel 42", "scancel 43"]
    assert runtime.cleanup({"dlperf.case": "x"}) == []


def test_a_node_alone_cannot_be_started(tmp_path):
    runtime, _, job = make_job(tmp_path)
    with pytest.raises(RuntimeError, match="starts every node of a case in one Slurm job"):
        runtime.start_node(job, 0)
    assert runtime.host_cores(job.launches[0].node) is None
    assert (runtime.name, runtime.python, runtime.workload_dir) == ("slurm", "python3", "/opt/dlperf/workload")


# ------------------------------------------------------------------------ the batch script, run by bash

FAKE_SRUN = r"""#!/bin/bash
# srun as the batch script uses it: --nodes=N, --output=...%n..., then the command; one task per node
n=1; out=/dev/null
while [[ "$1" == --* ]]; do
  case "$1" in --nodes=*) n="${1#--nodes=}" ;; --output=*) out="${1#--output=}" ;; esac
  shift
done
pids=()
for ((i = 0; i < n; i++)); do
  SLURM_NODEID=$i "$@" > "${out//%n/$i}" 2>&1 &
  pids+=($!)
done
rc=0
for ((i = 0; i < n; i++)); do  # --kill-on-bad-exit: the first task that fails ends the others
  s=0; wait -n || s=$?
  if [ $s != 0 ] && [ $rc = 0 ]; then rc=$s; kill "${pids[@]}" 2>/dev/null; fi
done
exit $rc
"""
FAKE_SCONTROL = '#!/bin/bash\n[ "$1 $2" = "show hostnames" ] && printf "host-a\\nhost-b\\n"\n'


def run_script(tmp_path: Path, launches, files=(), probe: str | None = None):
    """The batch script of ``launches`` run by bash as sbatch would (with srun and scontrol stand-ins on PATH); ``files``
    for node 0 only (every "node" here is this machine: two copies to one path would race)."""
    import os
    import subprocess
    from dataclasses import replace

    from dlperf_core.cluster.inventory import Node, SlurmSettings
    from dlperf_core.model import CaseJob, ContainerSpec, NodeLaunch
    from dlperf_core.run.runtime.slurm_jobs import FILES_DIR, batch_script, file_name

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    settings = SlurmSettings(connection="c", work_dir=str(tmp_path / "work"))
    nodes = [Node(name=f"slot{i}", address=f"$DLPERF_NODE{i}_ADDR") for i in range(len(launches))]
    node_launches = tuple(
        NodeLaunch(node=nodes[i], node_rank=i, argv=argv, env={"WHO": f"node {i}"}, role=role)
        for i, (argv, role) in enumerate(launches)
    )
    spec = ContainerSpec("c", "i", (), {}, {}, "host", None, ())
    job = CaseJob(
        "dlperf-test-0000-r0",
        node_launches,
        (replace(spec, files=files), *(spec for _ in launches[1:])),
        tmp_path,
        60,
        None,
    )
    folder = tmp_path / "work" / job.run_label
    (folder / FILES_DIR).mkdir(parents=True)
    for k, f in enumerate(files):
        (folder / FILES_DIR / file_name(k, f.path)).write_bytes(f.content)
    (folder / "batch.sh").write_text(batch_script(job, settings))
    if probe is not None:  # the environment probe the runtime writes beside the script (none: the nodes go on)
        (folder / "probe.sh").write_text(probe)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "x"}
    done = subprocess.run(["bash", str(folder / "batch.sh")], env=env, capture_output=True, text=True, timeout=60)
    logs = [  # a node killed before it started (another failed first) wrote none
        p.read_text() if (p := folder / f"node{i}.log").exists() else "" for i in range(len(launches))
    ]
    return done, logs


def test_every_node_runs_its_launch_with_the_host_slurm_chose(tmp_path):
    echo = 'echo "$WHO master=$1 rank=$SLURM_NODEID"'
    done, logs = run_script(
        tmp_path,
        [
            (("bash", "-c", echo, "x", "$DLPERF_NODE0_ADDR"), "launcher"),
            (("bash", "-c", echo, "x", "$DLPERF_NODE0_ADDR"), "launcher"),
        ],
    )
    assert done.returncode == 0, done.stderr
    assert logs == ["node 0 master=host-a rank=0\n", "node 1 master=host-a rank=1\n"]
    assert "dlperf: job 42 on host-a host-b" in done.stdout


def test_every_node_probes_its_environment_before_its_launch(tmp_path):
    from dlperf_core.cluster.environment import PROBE_SCRIPT, parse_probe

    launch = (("bash", "-c", 'echo "rank $SLURM_NODEID"'), "launcher")
    done, logs = run_script(tmp_path, [launch, launch], probe=PROBE_SCRIPT)
    assert done.returncode == 0, done.stderr
    assert logs == ["rank 0\n", "rank 1\n"]  # the probe's output is its own file, not the node's log
    folder = tmp_path / "work" / "dlperf-test-0000-r0"
    probes = [parse_probe((folder / f"probe{rank}.txt").read_text()) for rank in range(2)]
    assert all(p.hostname and p.cpu_count for p in probes)
    # without the probe (this test's other scripts) every launch runs all the same: see the test above


def test_a_node_that_fails_fails_the_job(tmp_path):
    done, logs = run_script(tmp_path, [(("sleep", "30"), "launcher"), (("bash", "-c", "exit 3"), "launcher")])
    assert done.returncode != 0


def test_sshd_nodes_end_when_the_launcher_ends_and_get_the_case_files(tmp_path):
    from dlperf_core.cluster.sshkeys import ContainerFile

    key = tmp_path / "ssh" / "id_test"
    launcher = (
        "bash",
        "-c",
        f'test "$(stat -c %a {key})" = 600 && cat {key} && echo "hosts $1"',
        "x",
        "$DLPERF_NODE1_ADDR:1",
    )
    done, logs = run_script(
        tmp_path,
        [(launcher, "launcher"), (("sleep", "300"), "sshd")],
        files=(ContainerFile(str(key), b"secret key\n"),),
    )
    assert done.returncode == 0, (done.stderr, logs)
    assert logs[0] == "secret key\nhosts host-b:1\n"
    done, logs = run_script(tmp_path / "2", [(("sleep", "30"), "launcher"), (("true",), "sshd")])
    assert done.returncode != 0 and "its sshd ended before the launcher finished" in logs[1]
