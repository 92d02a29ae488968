"""The slurm runtime's pure side (dlperf_core/run/runtime/slurm_jobs.py): the batch scripts as golden files, every
parser on recorded text (tests/data/slurm/, README.md there says where each came from) and the reason of every one of
Slurm's end states.

Golden files (tests/golden/slurm/*.sh): the batch scripts of pytorch_reference and ngc_mxnet at 1n1g, 1n2g and 2n1g on
CPU slots with software none (as the test cluster runs them), and one each for pyxis and Apptainer on GPU slots (the
only check of those two: no pyxis, enroot or Apptainer in Debian). After an intended change, regenerate them with
``DLPERF_UPDATE_GOLDEN=1 pytest tests/core/run/runtime/test_slurm_jobs.py`` and review the diff.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.frameworks import ADAPTERS
from dlperf_core.model import Case, CaseRun, RunIds
from dlperf_core.run.jobs import build_job
from dlperf_core.run.runtime.slurm import SlurmRuntime
from dlperf_core.run.runtime.slurm_jobs import (
    END_STATES,
    SlurmError,
    SlurmJob,
    batch_script,
    end_reason,
    expand_hostlist,
    is_finished,
    parse_job_state,
    parse_queue,
    parse_sacct,
    parse_sbatch,
    parse_version,
    pending_reason,
    sacct_command,
    shell_word,
    srun_task_ends,
)
from helpers import REPO
from parsing_checks import SETTINGS

DATA = REPO / "tests" / "data" / "slurm"
GOLDEN = REPO / "tests" / "golden" / "slurm"
IDS = RunIds(dag_id="dlperf_benchmark", run_id="slurm-golden")


def recorded(name: str) -> str:
    return (DATA / name).read_text()


class NoShell:
    """A login node that is never reached (the golden scripts are made without one)."""

    def run(self, command: str, timeout_s: float):
        raise AssertionError(f"no command expected: {command} ({timeout_s} s)")

    def write_file(self, path: str, text: str) -> None:
        raise AssertionError(f"{path}: {len(text)} characters")

    def read_file(self, path: str) -> bytes:
        raise AssertionError(path)


def slurm_case(framework: str, topology: str, precision: str = "fp32") -> Case:
    assert framework in ADAPTERS
    nodes, gpus = (int(x) for x in re.fullmatch(r"(\d+)n(\d+)g", topology).groups())
    return Case(
        framework=framework,
        model="resnet50_v1.5",
        precision=precision,
        batch_size_per_device=8,
        nodes=nodes,
        gpus_per_node=gpus,
        warmup_iterations=2,
        measured_iterations=5,
        extra_args=("--image-size", "32") if framework == "pytorch_reference" else (),
        env=(("DLPERF_SUITE_SETTING", "on"),),
    )


def script_of(inventory: str, case: Case, tmp_path: Path) -> str:
    inv = load_inventory(DATA / inventory)
    runtime = SlurmRuntime(inv.slurm, NoShell())
    job = build_job(CaseRun(case, 0), inv, runtime, IDS, timeout_s=900, watchdog_s=None, log_root=tmp_path)
    return batch_script(job, inv.slurm, title=f"{case.key} repeat 0")


GOLDEN_CASES = [
    ("pytorch_reference", "1n1g", "inventory.yaml", "pytorch_reference-1n1g.sh"),
    ("pytorch_reference", "1n2g", "inventory.yaml", "pytorch_reference-1n2g.sh"),
    ("pytorch_reference", "2n1g", "inventory.yaml", "pytorch_reference-2n1g.sh"),
    ("ngc_mxnet", "1n1g", "inventory.yaml", "ngc_mxnet-1n1g.sh"),
    ("ngc_mxnet", "1n2g", "inventory.yaml", "ngc_mxnet-1n2g.sh"),
    ("ngc_mxnet", "2n1g", "inventory.yaml", "ngc_mxnet-2n1g.sh"),
    ("pytorch_reference", "2n8g", "inventory-pyxis.yaml", "pyxis-pytorch_reference-2n8g.sh"),
    ("ngc_mxnet", "2n8g", "inventory-apptainer.yaml", "apptainer-ngc_mxnet-2n8g.sh"),
]


@pytest.mark.parametrize(("framework", "topology", "inventory", "golden"), GOLDEN_CASES)
def test_golden_batch_scripts(framework, topology, inventory, golden, tmp_path):
    text = script_of(inventory, slurm_case(framework, topology), tmp_path)
    path = GOLDEN / golden
    if os.environ.get("DLPERF_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with DLPERF_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"the batch script changed; review and regenerate {path.name}"


def test_batch_script_says_what_slurm_needs(tmp_path):
    text = script_of("inventory.yaml", slurm_case("pytorch_reference", "2n1g"), tmp_path)
    assert "#SBATCH --nodes=2\n" in text and "#SBATCH --ntasks-per-node=1\n" in text
    assert "#SBATCH --exclusive\n" in text and "#SBATCH --partition=debug\n" in text
    assert "#SBATCH --time=00:30:00\n" in text and "--gpus-per-node" not in text  # CPU slots
    # the rendezvous names the host Slurm chose, expanded by the script; every node's settings are exported
    assert '--master_addr "${DLPERF_NODE0_ADDR}"' in text
    assert 'export DLPERF_NODE1_ADDR="${hosts[1]}"' in text
    assert text.count("export GLOO_SOCKET_IFNAME=eth0") == 2 and "export DLPERF_SUITE_SETTING=on" in text
    assert "--output=/shared/dlperf/dlperf-" in text and "/node%n.log" in text


def test_gpu_slots_ask_for_their_gpus_and_a_timeout_without_time_limit(tmp_path):
    text = script_of("inventory-pyxis.yaml", slurm_case("pytorch_reference", "1n2g"), tmp_path)
    assert "#SBATCH --gpus-per-node=2\n" in text  # the case's GPUs, not the slot's 8
    assert "--container-image=nvcr.io#nvidia/pytorch:24.01-py3" in text
    assert "/lustre/imagenet:/data/imagenet:ro" in text
    inv = load_inventory(DATA / "inventory.yaml")
    settings = inv.slurm.model_copy(update={"time_limit": None})
    runtime = SlurmRuntime(settings, NoShell())
    case = slurm_case("pytorch_reference", "1n1g")
    job = build_job(CaseRun(case, 0), inv, runtime, IDS, timeout_s=601, watchdog_s=None, log_root=tmp_path)
    assert "#SBATCH --time=11\n" in batch_script(job, settings)  # the case's timeout, whole minutes up


def test_mpirun_across_nodes_runs_sshd_on_the_others_with_the_case_keys(tmp_path):
    text = script_of("inventory.yaml", slurm_case("ngc_mxnet", "2n1g"), tmp_path)
    assert "  1)  # slot1: sshd" in text and "/usr/sbin/sshd" in text
    # the keys go to a folder of the job's user on each node (not the images' /etc/dlperf-ssh), gone at the end
    folder = "/tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0"
    assert f'cp "$JOB_DIR"/files/0-id_ed25519 {folder}/id_ed25519 && chmod 600' in text
    assert f"-i {folder}/id_ed25519" in text and "/etc/dlperf-ssh" not in text
    assert text.count(f"rm -rf {folder}; ") == 3  # node 0 at its end, node 1 at either of its ends
    assert "BEGIN OPENSSH" not in text  # the keys themselves are never in the script
    # mpirun starts its daemons over that ssh, not with srun (which would wait behind the job's own step)
    assert "export OMPI_MCA_plm=rsh\n    export OMPI_MCA_ras='^slurm'\n" in text
    assert 'touch "$JOB_DIR/launcher.done"' in text and "-H '\"${DLPERF_NODE0_ADDR}\"':1" not in text
    assert "${DLPERF_NODE0_ADDR}:1,${DLPERF_NODE1_ADDR}:1" in text  # mpirun's hosts, expanded by the batch script


def test_mpirun_on_one_node_takes_its_slots_from_its_hosts_not_the_allocation(tmp_path):
    text = script_of("inventory.yaml", slurm_case("ngc_mxnet", "1n2g"), tmp_path)
    assert "-np 2 -H '\"${DLPERF_NODE0_ADDR}\"':2" not in text and "-H '${DLPERF_NODE0_ADDR}:2'" in text
    assert "export OMPI_MCA_ras='^slurm'" in text  # the allocation's one task per node is not mpirun's slots
    assert "OMPI_MCA" not in script_of("inventory.yaml", slurm_case("pytorch_reference", "1n2g"), tmp_path / "p")


def test_redacted_script_keeps_no_secret():
    case = slurm_case("pytorch_reference", "1n1g")
    case = Case(**{**case.__dict__, "env": (("HF_TOKEN", "hf_secret"),)})
    inv = load_inventory(DATA / "inventory.yaml")
    job = build_job(CaseRun(case, 0), inv, SlurmRuntime(inv.slurm, NoShell()), IDS, timeout_s=60, watchdog_s=None)
    assert "hf_secret" in batch_script(job, inv.slurm)
    assert "hf_secret" not in batch_script(job, inv.slurm, redact=True)


@pytest.mark.parametrize(
    ("value", "word"),
    [
        ("plain", "plain"),
        ("two words", "'two words'"),
        ("$DLPERF_NODE0_ADDR", '"${DLPERF_NODE0_ADDR}"'),
        ("$DLPERF_NODE0_ADDR:2,$DLPERF_NODE1_ADDR:2", '"${DLPERF_NODE0_ADDR}:2,${DLPERF_NODE1_ADDR}:2"'),
        ('a "$HOME" `x` \\ $DLPERF_NODE3_ADDR', '"a \\"\\$HOME\\" \\`x\\` \\\\ ${DLPERF_NODE3_ADDR}"'),
    ],
)
def test_shell_word_expands_only_the_slot_addresses(value, word):
    assert shell_word(value) == word


# ------------------------------------------------------------------------ parsers


def test_parse_sbatch():
    assert parse_sbatch(recorded("sbatch-parsable.txt")) == "42"
    assert parse_sbatch(recorded("sbatch-parsable-cluster.txt")) == "42"
    with pytest.raises(SlurmError, match="no job id"):
        parse_sbatch("sbatch: error: Batch job submission failed: Invalid partition name specified\n")


def test_parse_version():
    assert parse_version(recorded("sinfo-version.txt")) == "22.05.8"
    assert parse_version("slurm 23.11.4\n") == "23.11.4"
    assert parse_version("command not found") is None


def test_parse_queue():
    assert parse_queue(recorded("squeue.txt")) == [
        ("42", "dlperf-0a1b2c3d4e-0000-r0"),
        ("43", "dlperf-0a1b2c3d4e-0001-r0"),
        ("44", "someone-else"),
        ("45_1", "dlperf-ffffffffff-0000-r0"),
    ]


def test_parse_job_state_completed():
    job = parse_job_state(recorded("scontrol-completed.txt"))
    assert job == SlurmJob(
        job_id="42",
        state="COMPLETED",
        reason=None,
        exit_code=0,
        signal=0,
        node_list="c[1-2]",
        partition="debug",
        start_time="2026-11-29T14:01:01",
        end_time="2026-11-29T14:02:13",
        batch_host="c1",
        time_limit="00:30:00",
    )
    assert is_finished(job) and end_reason(job) is None


def test_parse_job_state_keeps_a_value_with_blanks():
    line = recorded("scontrol-completed.txt").replace("WorkDir=/home/dlperf", "WorkDir=/home/my dlperf")
    assert parse_job_state(line).partition == "debug"


def test_forgotten_job_and_sacct():
    assert parse_job_state(recorded("scontrol-forgotten.txt")) is None
    job = parse_sacct(recorded("sacct-cancelled.txt"), "42")
    assert (job.state, job.cancelled_by, job.signal, job.source) == ("CANCELLED", "1000", 15, "sacct")
    assert end_reason(job) == "slurm job 42 was cancelled by uid 1000 (CANCELLED)"
    assert end_reason(parse_sacct(recorded("sacct-completed.txt"), "42")) is None
    assert parse_sacct(recorded("sacct-no-slurmdbd.txt"), "42") is None
    assert parse_sacct(recorded("sacct-completed.txt"), "41") is None
    assert "--parsable2" in sacct_command("42")


def test_unreadable_scontrol_output_is_an_error():
    with pytest.raises(SlurmError, match="no job"):
        parse_job_state("scontrol: error: Unable to contact slurm controller (connect failure)")


@pytest.mark.parametrize("name", ["running", "completing", "pending-resources", "pending-drained"])
def test_not_finished(name):
    job = parse_job_state(recorded(f"scontrol-{name}.txt"))
    assert not is_finished(job)


END_REASONS = {
    "timeout": "slurm job 42 reached its time limit (00:30:00) and was killed (TIMEOUT)",
    "node-fail": "slurm job 42 ended because a node failed (NODE_FAIL) on c[1-2], Reason=NodeDown",
    "oom": "slurm job 42: out of memory: a step used more memory than Slurm allowed it (OUT_OF_MEMORY)",
    "preempted": "slurm job 42 was preempted by another job (PREEMPTED)",
    "cancelled": "slurm job 42 was cancelled (scancel, or an administrator) (CANCELLED)",
    "failed": "slurm job 42 failed: exit code 1 (FAILED, Reason=NonZeroExitCode)",
    "failed-signal": "slurm job 42 failed: signal 9 (FAILED, Reason=NonZeroExitCode)",
    "boot-fail": "slurm job 42: its nodes failed to boot (BOOT_FAIL)",
    "deadline": "slurm job 42 reached its deadline before it could end (DEADLINE)",
}


@pytest.mark.parametrize("name", sorted(END_REASONS))
def test_every_end_state_is_a_failure_with_its_reason(name):
    job = parse_job_state(recorded(f"scontrol-{name}.txt"))
    assert is_finished(job)
    assert end_reason(job) == END_REASONS[name]


def test_completed_with_an_exit_code_is_no_success():
    job = SlurmJob(job_id="7", state="COMPLETED", exit_code=3, signal=0)
    assert end_reason(job) == "slurm job 7 completed with exit code 3"
    assert end_reason(SlurmJob(job_id="7", state="SPECIAL_EXIT")) == "slurm job 7 ended SPECIAL_EXIT (no exit code)"


def test_pending_reason_names_drained_nodes_only():
    drained = parse_job_state(recorded("scontrol-pending-drained.txt"))
    assert pending_reason(drained) == (
        "slurm job 42 waits on nodes that are drained or down (Reason=Nodes_required_for_job_are_DOWN,_DRAINED_or_"
        "reserved_for_jobs_in_higher_priority_partitions)"
    )
    unavailable = parse_job_state(recorded("scontrol-pending-reqnodenotavail.txt"))
    assert "ReqNodeNotAvail,_UnavailableNodes:c2" in pending_reason(unavailable)
    assert pending_reason(parse_job_state(recorded("scontrol-pending-resources.txt"))) is None
    assert pending_reason(parse_job_state(recorded("scontrol-running.txt"))) is None


# ------------------------------------------------------------------------ properties

RECORDED_LINES = sorted(p.read_text() for p in DATA.glob("scontrol-*.txt"))
SLOT_VARIABLES = {f"DLPERF_NODE{i}_ADDR": f"host-{i}" for i in range(3)}


@SETTINGS
@given(
    st.lists(
        st.one_of(st.text(alphabet="ab $\"'`\\\n{}()*;&|<>~!#%=", max_size=8), st.sampled_from(list(SLOT_VARIABLES))),
        max_size=5,
    )
)
def test_shell_word_is_the_value_with_the_hosts_in_it(parts):
    """Whatever an argument holds (quotes, $, backquotes, backslashes, newlines), bash reads the word back as it was,
    with each slot's address variable replaced by its host and nothing else expanded."""
    value = "".join(f"${p}" if p in SLOT_VARIABLES else p for p in parts)
    expected = "".join(SLOT_VARIABLES.get(p, p) for p in parts)
    done = subprocess.run(
        ["bash", "-c", f"printf %s {shell_word(value)}"],
        env={"PATH": os.environ["PATH"], "HOME": "/nonexistent", **SLOT_VARIABLES},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == expected


@SETTINGS
@given(st.lists(st.text(max_size=200) | st.sampled_from(RECORDED_LINES), max_size=3))
def test_scontrol_parser_never_raises_anything_but_slurm_error(chunks):
    text = "\n".join(chunks)
    try:
        job = parse_job_state(text)
    except SlurmError:
        return
    if job is not None:
        assert job.job_id and job.state


@SETTINGS
@given(
    state=st.sampled_from(sorted(END_STATES) + ["SPECIAL_EXIT", "REVOKED"]),
    code=st.integers(0, 255),
    signal=st.integers(0, 64),
    reason=st.none() | st.text(min_size=1, max_size=30),
)
def test_no_end_state_but_completed_0_0_is_a_success(state, code, signal, reason):
    job = SlurmJob(job_id="7", state=state, exit_code=code, signal=signal, reason=reason)
    assert (end_reason(job) is None) == (state == "COMPLETED" and code == 0 and signal == 0)


@pytest.mark.parametrize(
    ("hostlist", "hosts"),
    [
        ("c1", ["c1"]),
        ("c[1-2]", ["c1", "c2"]),
        ("torch[0-1],mxnet0", ["torch0", "torch1", "mxnet0"]),
        ("gpu[08-10,12]", ["gpu08", "gpu09", "gpu10", "gpu12"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ],
)
def test_expand_hostlist_as_scontrol_show_hostnames(hostlist, hosts):
    assert expand_hostlist(hostlist) == hosts


REAL = {  # recorded on the test cluster (tests/slurm_cluster.py, Debian's 22.05.8): state, node list, reason
    "running": ("RUNNING", "torch[0-1]", None),
    "completed": ("COMPLETED", "torch[0-1]", None),
    "cancelled": ("CANCELLED", "torch[0-1]", "slurm job 1 was cancelled (scancel, or an administrator) (CANCELLED)"),
    "failed": ("FAILED", "torch[0-1]", "slurm job 4 failed: exit code 143 (FAILED, Reason=NonZeroExitCode)"),
    "pending-drained": ("PENDING", None, None),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_outputs_recorded_on_the_test_cluster(name):
    job = parse_job_state(recorded(f"real-scontrol-{name}.txt"))
    state, nodes, reason = REAL[name]
    assert (job.state, job.node_list, job.partition) == (state, nodes, "torch")
    assert (end_reason(job) if is_finished(job) else None) == reason
    assert (pending_reason(job) is not None) == (name == "pending-drained")


def test_squeue_recorded_on_the_test_cluster():
    assert parse_queue(recorded("real-squeue.txt")) == [("1", "dlperf-cea5f250fd-0000-r0")]


def test_srun_task_ends_in_the_batch_log():
    log = (
        "dlperf: job 4 on torch0 torch1\n"
        "srun: error: torch1: task 1: Exited with exit code 2\n"
        "srun: launch/slurm: _step_signal: Terminating StepId=4.0\n"
        "srun: error: torch0: task 0: Terminated\n"
        "srun: error: r1n[2-3]: tasks 2-3,5: Killed\n"
        "srun: error: x: task 6: Something new\n"
    )
    assert srun_task_ends(log) == [
        ("torch1", 1, 2),
        ("torch0", 0, 143),
        ("r1n[2-3]", 2, 137),
        ("r1n[2-3]", 3, 137),
        ("r1n[2-3]", 5, 137),
        ("x", 6, None),
    ]
