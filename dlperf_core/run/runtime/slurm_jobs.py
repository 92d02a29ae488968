"""Slurm's side of the ``slurm`` runtime as pure functions over text: the batch script of a case run, the commands
dlperf runs on the login node (sbatch, scontrol, sacct, squeue, scancel, sinfo) and parsers of what they print, and
the reason a job's end state (or a pending job's wait) gives a case.

Nothing here runs a command: :mod:`dlperf_core.run.runtime.slurm` runs them through a ``RemoteShell``. The recorded
outputs the parsers are tested on are in ``tests/data/slurm/`` (Slurm 22.05's formats, as its man pages and source
print them).

One batch script per case run (:func:`batch_script`): ``#SBATCH`` lines (the case run's label as the job's name,
nodes, one task per node, GPUs per node on nvidia slots, exclusive, partition, account, QoS, time, constraint, the
batch step's output in the job's folder), then the job's node addresses from ``scontrol show hostnames``, then one
``srun`` over every node that runs this same script again with ``--node``: each node then runs its own launch (node i
is ``$SLURM_NODEID`` i, the i-th host of the job's node list), with that launch's environment, its output in
``node<i>.log`` of the job's folder (``srun --output=...node%n.log``), where :func:`node_log_path` finds it. The
software kinds change only what srun starts: the script itself (``none``), the script inside a pyxis/enroot
container (``--container-image``), or the script under ``apptainer exec --nv``.

mpirun frameworks run their own launches under Slurm as on Docker: node 0 runs mpirun over ssh to the sshd the
other nodes run (:mod:`dlperf_core.frameworks.mpi`), as the job's user (sshd on the case's port, not the node's). The
case's ssh files (fresh keys per case run) are written by the runtime in the job's folder (mode 0600); each node
copies them to its own ``/tmp/dlperf-ssh-<run label>`` (the launches' ssh folder under Slurm) before its launch starts
and removes them when it ends; an sshd node ends when node 0's launcher has ended (a marker file in the job's folder),
so the step ends with it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from math import ceil
from pathlib import PurePosixPath
from typing import Literal

from dlperf_core.cluster.inventory import SLOT_ADDRESS_PATTERN, ApptainerImage, ContainerImage, SlurmSettings
from dlperf_core.model import CaseJob, NodeLaunch
from dlperf_core.run.launch_spec import scrub_argv, scrub_env

BATCH_SCRIPT = "batch.sh"
"""The batch script's name in the job's folder."""
BATCH_LOG = "batch.log"
"""The batch step's own output (``#SBATCH --output`` and ``--error``) in the job's folder."""
FILES_DIR = "files"
"""Where the runtime writes the files a launch needs before it starts (mpirun's per-case ssh keys)."""
LAUNCHER_DONE = "launcher.done"
"""Written by node 0 when its launcher ended (mpirun frameworks): the sshd nodes then end too."""
PROBE_FILE = "probe.sh"
"""The environment probe (:data:`dlperf_core.cluster.environment.PROBE_SCRIPT`) in the job's folder: every node runs
it before its launch, its output in ``probe<rank>.txt`` (:func:`probe_output_path`)."""
PROBE_TIMEOUT_S = 120
"""How long a node's probe may take before its launch starts without it."""
NODE_SSH_DIR_PREFIX = "/tmp/dlperf-ssh-"
"""A case's ssh folder on each node is this and its run label (``SlurmRuntime.case_ssh_dir``): the node's own, the
job's user's, removed when the node's launch ends."""
NODE_FLAG = "--node"
MPIRUN_OVER_SSH = {"OMPI_MCA_plm": "rsh", "OMPI_MCA_ras": "^slurm"}
"""What an mpirun launch gets under Slurm (:func:`runs_mpirun`), so that it runs as on Docker: Open MPI in a Slurm job
would take the allocation's slots (one task per node: ``-np 2 -H host:2`` on one node is "not enough slots") and
start its daemons on other nodes with srun (``plm slurm``), which waits behind the job's own step (every CPU is the
launches') and hangs; without them, ``-H`` names the hosts and slots and ``rsh`` uses the case's ssh."""
"""The batch script's argument that makes it run one node's launch (what srun starts on every node)."""

# --------------------------------------------------------------------------- the batch script


def job_dir(settings: SlurmSettings, run_label: str) -> str:
    """The job's folder on the cluster's shared filesystem: ``<work_dir>/<run label>``."""
    return str(PurePosixPath(settings.work_dir) / run_label)


def probe_output_path(directory: str, rank: int) -> str:
    """Node ``rank``'s environment probe output in the job's folder (the batch script writes it)."""
    return f"{directory}/probe{rank}.txt"


def node_log_path(directory: str, rank: int) -> str:
    """Node ``rank``'s log in the job's folder: ``node<rank>.log`` (what ``srun --output=node%n.log`` writes, and
    the name the other runtimes give a node's log)."""
    return f"{directory}/node{rank}.log"


def shell_word(value: str) -> str:
    """``value`` as one shell word: quoted as ``shlex.quote`` quotes it, except that the slots' address variables in it
    (``$DLPERF_NODE0_ADDR``: :data:`~dlperf_core.cluster.inventory.SLOT_ADDRESS`) are expanded by the shell that reads
    it (the batch script), so that a launch names the host Slurm chose."""
    if not SLOT_ADDRESS_PATTERN.search(value):
        return shlex.quote(value)
    out, last = [], 0
    for match in SLOT_ADDRESS_PATTERN.finditer(value):
        out.append(_double_quoted(value[last : match.start()]))
        out.append(f"${{DLPERF_NODE{match[1]}_ADDR}}")
        last = match.end()
    out.append(_double_quoted(value[last:]))
    return '"' + "".join(out) + '"'


def _double_quoted(text: str) -> str:
    """``text`` escaped for the inside of a double-quoted shell word (``\\``, ``"``, ``$``, backquote)."""
    return re.sub(r'([\\"$`])', r"\\\1", text)


def time_option(settings: SlurmSettings, job: CaseJob) -> str:
    """sbatch's ``--time``: the inventory's ``time_limit``, else the case's timeout in whole minutes (at least 1)."""
    if settings.time_limit is not None:
        return settings.time_limit
    return str(max(1, ceil(job.timeout_s / 60)))


def sbatch_lines(job: CaseJob, settings: SlurmSettings, directory: str) -> list[str]:
    """The ``#SBATCH`` lines of ``job``."""
    nvidia = bool(job.launches) and all(launch.node.accelerator == "nvidia" for launch in job.launches)
    options = [
        f"--job-name={job.run_label}",
        f"--nodes={len(job.launches)}",
        "--ntasks-per-node=1",
    ]
    if nvidia:
        options.append(f"--gpus-per-node={job.devices_per_node or job.launches[0].node.gpu_count}")
    if settings.exclusive:
        options.append("--exclusive")
    for name, value in (
        ("partition", settings.partition),
        ("account", settings.account),
        ("qos", settings.qos),
        ("constraint", settings.constraint),
    ):
        if value is not None:
            options.append(f"--{name}={value}")
    options += [
        f"--time={time_option(settings, job)}",
        f"--output={directory}/{BATCH_LOG}",
        f"--error={directory}/{BATCH_LOG}",
    ]
    return [f"#SBATCH {option}" for option in options]


def _launch_env(launch: NodeLaunch, redact: bool) -> dict[str, str]:
    return scrub_env(launch.env)[0] if redact else dict(launch.env)


def _launch_argv(launch: NodeLaunch, redact: bool) -> tuple[str, ...]:
    return scrub_argv(launch.argv)[0] if redact else launch.argv


def file_name(index: int, path: str) -> str:
    """The name the ``index``-th file of a launch has in the job's :data:`FILES_DIR` (``0-id_ed25519``)."""
    return f"{index}-{PurePosixPath(path).name}"


def runs_mpirun(launch: NodeLaunch) -> bool:
    """Whether ``launch`` starts mpirun (:mod:`dlperf_core.frameworks.mpi`'s node 0: ``bash -c "... exec mpirun ..."``)."""
    return any(re.search(r"(^|\s)(exec\s+)?mpirun\s", arg) for arg in launch.argv)


def _node_branch(job: CaseJob, i: int, redact: bool, with_services: bool) -> list[str]:
    """The lines of node ``i``'s branch in the script's ``--node`` part: its files, its environment, its launch."""
    launch = job.launches[i]
    lines = [f"  {launch.node_rank})  # {launch.node.name}: {launch.role}"]
    files = job.containers[i].files if i < len(job.containers) else ()
    for k, f in enumerate(files):
        target = shlex.quote(f.path)
        source = shlex.quote(f"{FILES_DIR}/{file_name(k, f.path)}")
        lines.append(
            f'    mkdir -p "$(dirname {target})" && cp "$JOB_DIR"/{source} {target} && chmod {f.mode:o} {target}'
        )
    for name, value in sorted(_launch_env(launch, redact).items()):
        lines.append(f"    export {name}={shell_word(value)}")
    if runs_mpirun(launch):
        lines += [f"    export {name}={shlex.quote(value)}" for name, value in MPIRUN_OVER_SSH.items()]
    command = " ".join(shell_word(a) for a in _launch_argv(launch, redact))
    own = sorted({str(PurePosixPath(f.path).parent) for f in files} - {"/"})
    own = [d for d in own if d.startswith(NODE_SSH_DIR_PREFIX)]  # the job's own folders on the node (keys)
    clean = f"rm -rf {' '.join(shlex.quote(d) for d in own)}; " if own else ""
    if launch.role == "sshd":  # serves node 0's mpirun; ends when node 0's launcher has ended
        lines += [
            f"    {command} &",
            "    pid=$!",
            '    while kill -0 "$pid" 2>/dev/null; do',
            f'      if [ -e "$JOB_DIR/{LAUNCHER_DONE}" ]; then kill "$pid"; wait "$pid" || true; {clean}exit 0; fi',
            "      sleep 1",
            "    done",
            f'    echo "dlperf: node {launch.node_rank}: its sshd ended before the launcher finished" >&2',
            f"    {clean}exit 1",
        ]
    elif with_services:  # mpirun over ssh; the sshd nodes wait for this node's launcher to end
        lines += [
            "    rc=0",
            f"    {command} || rc=$?",
            f'    touch "$JOB_DIR/{LAUNCHER_DONE}"',
            f'    {clean}exit "$rc"',
        ]
    elif own:
        lines += ["    rc=0", f"    {command} || rc=$?", f'    {clean}exit "$rc"']
    else:
        lines.append(f"    exec {command}")
    lines.append("    ;;")
    return lines


def srun_prefix(settings: SlurmSettings, job: CaseJob, directory: str) -> list[str]:
    """What starts the script on every node: ``srun`` with one task per node, every CPU of the node for it
    (``--whole``), the first task that fails ending the others (``--kill-on-bad-exit``), node ``i``'s output in
    ``node<i>.log``; in a pyxis/enroot container or under Apptainer as the inventory's ``software`` says (the job's
    folder, and the slots' mounts, inside)."""
    n = len(job.launches)
    srun = [
        "srun",
        f"--nodes={n}",
        f"--ntasks={n}",
        "--ntasks-per-node=1",
        "--whole",
        "--kill-on-bad-exit=1",
        f"--output={directory}/node%n.log",
    ]
    mounts = job.launches[0].node.mounts if job.launches else ()
    software = settings.software
    if isinstance(software, ContainerImage):
        binds = [f"{directory}:{directory}"] + [
            f"{m.source}:{m.target}" + (":ro" if m.read_only else "") for m in mounts
        ]
        srun += [f"--container-image={software.container_image}", f"--container-mounts={','.join(binds)}"]
        return srun
    if isinstance(software, ApptainerImage):
        nvidia = bool(job.launches) and all(launch.node.accelerator == "nvidia" for launch in job.launches)
        binds = [f"{directory}:{directory}"] + [
            f"{m.source}:{m.target}" + (":ro" if m.read_only else "") for m in mounts
        ]
        srun += ["apptainer", "exec", *(["--nv"] if nvidia else []), "--bind", ",".join(binds), software.apptainer]
    return srun


def batch_script(job: CaseJob, settings: SlurmSettings, *, title: str | None = None, redact: bool = False) -> str:
    """The batch script of ``job``: submitted with :func:`sbatch_command`, it runs every node's launch with srun
    (module docstring). ``title``: a comment line saying what it runs (the case and repeat). ``redact``: secrets left
    out (:func:`~dlperf_core.run.launch_spec.scrub_env`, ``scrub_argv``), as the launch spec stores it."""
    directory = job_dir(settings, job.run_label)
    script = f"{directory}/{BATCH_SCRIPT}"
    with_services = any(launch.role == "sshd" for launch in job.launches)
    lines = ["#!/bin/bash", *sbatch_lines(job, settings, directory)]
    lines.append(f"# dlperf {job.run_label}" + (f": {title}" if title else ""))
    lines.append(
        f"# {len(job.launches)} node(s), software {settings.software_kind}; node i runs launch i ($SLURM_NODEID)"
    )
    lines += ["set -euo pipefail", f"JOB_DIR={shlex.quote(directory)}", ""]
    lines.append(f'if [ "${{1:-}}" = {NODE_FLAG} ]; then  # one node\'s launch, as srun starts it on every node')
    lines.append("  # the node's environment, as dlperf probes it (where the case's software is), before its launch")
    lines.append(
        f'  timeout {PROBE_TIMEOUT_S} sh "$JOB_DIR/{PROBE_FILE}" > "$JOB_DIR/probe$SLURM_NODEID.txt" 2>&1 || true'
    )
    lines.append('  case "$SLURM_NODEID" in')
    for i in range(len(job.launches)):
        lines += _node_branch(job, i, redact, with_services)
    lines += [
        "  esac",
        '  echo "dlperf: no launch for node $SLURM_NODEID" >&2',
        "  exit 1",
        "fi",
        "",
    ]
    if settings.setup:
        lines += ["# the inventory's setup (the nodes inherit its environment)", *settings.setup]
    lines.append('mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")')
    for launch in job.launches:
        lines.append(f'export DLPERF_NODE{launch.node_rank}_ADDR="${{hosts[{launch.node_rank}]}}"')
    lines.append('echo "dlperf: job $SLURM_JOB_ID on ${hosts[*]}"')
    if with_services:
        lines.append(f'rm -f "$JOB_DIR/{LAUNCHER_DONE}"')
    srun = " ".join(shlex.quote(word) for word in srun_prefix(settings, job, directory))
    lines.append(f"{srun} bash {shlex.quote(script)} {NODE_FLAG}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- commands


def sbatch_command(script_path: str) -> str:
    """Submit the batch script; ``--parsable`` prints the job id alone (``123``, or ``123;cluster``)."""
    return f"sbatch --parsable {shlex.quote(script_path)}"


def job_state_command(job_id: str) -> str:
    """The job's state, one line of ``Name=value`` fields."""
    return f"scontrol show job -o {shlex.quote(job_id)}"


SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "NodeList", "Partition", "Start", "End", "Timelimit")


def sacct_command(job_id: str) -> str:
    """The job's record in Slurm's accounting (the allocation only, no steps), ``|``-separated, no header."""
    fields = ",".join(SACCT_FIELDS)
    return f"sacct --jobs={shlex.quote(job_id)} --allocations --noheader --parsable2 --format={fields}"


def cancel_command(job_id: str) -> str:
    return f"scancel {shlex.quote(job_id)}"


def version_command() -> str:
    return "sinfo --version"


def queue_command() -> str:
    """This user's jobs still in Slurm's queue: ``<id> <name>`` per line."""
    return "squeue --me --noheader --format='%i %j'"


# --------------------------------------------------------------------------- parsers


class SlurmError(RuntimeError):
    """A Slurm command printed what dlperf cannot read (the text is in the message)."""


def parse_sbatch(stdout: str) -> str:
    """The job id ``sbatch --parsable`` printed: ``123``, or ``123;cluster`` on a multi-cluster site."""
    line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    job_id = line.split(";", 1)[0].strip()
    if not job_id.isdigit():
        raise SlurmError(f"sbatch printed no job id: {stdout.strip()[:200]!r}")
    return job_id


def parse_version(stdout: str) -> str | None:
    """Slurm's version from ``sinfo --version`` (``slurm 22.05.8`` -> ``22.05.8``), None if it says none."""
    match = re.search(r"slurm(?:-wlm)?\s+(\d+\.\d+(?:\.\d+)?\S*)", stdout)
    return match[1] if match else None


def parse_queue(stdout: str) -> list[tuple[str, str]]:
    """(job id, job name) per line of :func:`queue_command`'s output."""
    out = []
    for line in stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].split("_", 1)[0].isdigit():
            out.append((parts[0], parts[1].strip()))
    return out


END_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
    }
)
"""Slurm's end states of a job (``squeue(1)``'s JOB STATE CODES): it is over, and stays so."""


@dataclass(frozen=True)
class SlurmJob:
    """A job as ``scontrol show job -o`` (or, once scontrol forgot it, ``sacct``) says it is."""

    job_id: str
    state: str  # JobState: PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, TIMEOUT, ...
    reason: str | None = None  # why it waits or why it ended (None: Slurm says "None")
    exit_code: int | None = None  # ExitCode=a:b, a (the batch script's exit code)
    signal: int | None = None  # ExitCode=a:b, b (the signal that ended it, 0: none)
    node_list: str | None = None  # NodeList, e.g. c[1-2]
    partition: str | None = None
    start_time: str | None = None  # as Slurm prints it (the controller's local time)
    end_time: str | None = None
    batch_host: str | None = None
    time_limit: str | None = None  # TimeLimit, e.g. 00:30:00
    cancelled_by: str | None = None  # sacct's "CANCELLED by <uid>"
    source: Literal["scontrol", "sacct"] = "scontrol"


FORGOTTEN = "slurm_load_jobs error: Invalid job id specified"
"""What scontrol says of a job it no longer knows (ended longer than ``MinJobAge`` ago, 300 s by default)."""

_FIELD_START = re.compile(r"^[A-Za-z][A-Za-z0-9_/:]*=")
_NULL = ("", "(null)", "None", "N/A", "Unknown")


def scontrol_fields(text: str) -> dict[str, str]:
    """``Name=value`` fields of one ``scontrol show ... -o`` line (a value with blanks, a Command or a Comment,
    continues until the next ``Name=``)."""
    fields: dict[str, str] = {}
    key: str | None = None
    for token in text.split():
        if _FIELD_START.match(token):
            key, value = token.split("=", 1)
            fields[key] = value
        elif key is not None:
            fields[key] += " " + token
    return fields


def _exit(value: str | None) -> tuple[int | None, int | None]:
    """``ExitCode=a:b`` -> (a, b)."""
    if not value:
        return None, None
    code, _, signal = value.partition(":")
    return (int(code) if code.isdigit() else None), (int(signal) if signal.isdigit() else None)


def _value(fields: dict[str, str], name: str) -> str | None:
    value = fields.get(name)
    return None if value is None or value in _NULL else value


def parse_job_state(text: str) -> SlurmJob | None:
    """The job in ``scontrol show job -o <id>``'s output (stdout and stderr together), None when scontrol no longer
    knows it (:data:`FORGOTTEN`): then :func:`sacct_command` may. The line reads like::

        JobId=42 JobName=dlperf-0a1b2c3d4e-0000-r0 UserId=dlperf(1000) ... JobState=COMPLETED Reason=None
        Dependency=(null) ... ExitCode=0:0 ... NodeList=c[1-2] BatchHost=c1 ... Partition=debug ...
    """
    if "Invalid job id specified" in text:
        return None
    line = next((ln for ln in text.splitlines() if ln.lstrip().startswith("JobId=")), None)
    if line is None:
        raise SlurmError(f"scontrol printed no job: {text.strip()[:200]!r}")
    fields = scontrol_fields(line)
    code, signal = _exit(fields.get("ExitCode"))
    return SlurmJob(
        job_id=fields["JobId"],
        state=fields.get("JobState", "UNKNOWN"),
        reason=_value(fields, "Reason"),
        exit_code=code,
        signal=signal,
        node_list=_value(fields, "NodeList"),
        partition=_value(fields, "Partition"),
        start_time=_value(fields, "StartTime"),
        end_time=_value(fields, "EndTime"),
        batch_host=_value(fields, "BatchHost"),
        time_limit=_value(fields, "TimeLimit"),
    )


def parse_sacct(text: str, job_id: str) -> SlurmJob | None:
    """The job in :func:`sacct_command`'s output (``|``-separated :data:`SACCT_FIELDS`), None when sacct has no
    record of it. sacct reads Slurm's accounting database: a cluster without slurmdbd (dlperf's test cluster has
    none) answers with an error or nothing, and a job scontrol forgot is then not known at all. A line reads like::

        42|dlperf-0a1b2c3d4e-0000-r0|CANCELLED by 1000|0:15|c[1-2]|debug|2026-11-29T14:01:02|2026-11-29T14:03:04|00:30:00
    """
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != len(SACCT_FIELDS) or parts[0] != job_id:
            continue
        row = dict(zip(SACCT_FIELDS, parts))
        state, _, by = row["State"].partition(" by ")
        code, signal = _exit(row["ExitCode"])
        return SlurmJob(
            job_id=job_id,
            state=state.strip(),
            exit_code=code,
            signal=signal,
            node_list=row["NodeList"] if row["NodeList"] not in _NULL + ("None assigned",) else None,
            partition=row["Partition"] or None,
            start_time=row["Start"] if row["Start"] not in _NULL else None,
            end_time=row["End"] if row["End"] not in _NULL else None,
            time_limit=row["Timelimit"] or None,
            cancelled_by=by.strip() or None,
            source="sacct",
        )
    return None


def expand_hostlist(hostlist: str) -> list[str]:
    """The hosts of a Slurm host list, in Slurm's order (what ``scontrol show hostnames`` prints): ``c[1-2],gpu[08-09,11]``
    -> ``c1 c2 gpu08 gpu09 gpu11`` (zero padding kept; a name with two ranges, ``r[1-2]n[1-2]``, expands both)."""
    names, depth, start = [], 0, 0
    for i, ch in enumerate(hostlist + ","):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            if part := hostlist[start:i].strip():
                names += _expand_one(part)
            start = i + 1
    return names


def _expand_one(name: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", name)
    if match is None:
        return [name]
    head, tail = name[: match.start()], name[match.end() :]
    out = []
    for piece in match[1].split(","):
        low, _, high = piece.partition("-")
        if not high:
            values = [low]
        else:
            width = len(low)
            values = [str(n).zfill(width) for n in range(int(low), int(high) + 1)]
        out += (
            [f"{head}{v}{rest}" for v in values for rest in _expand_one(tail)] if tail else [head + v for v in values]
        )
    return out


_SRUN_TASKS = re.compile(r"^srun: error: (?P<host>\S+): tasks? (?P<tasks>[\d,-]+): (?P<what>.+?)\s*$")
_SIGNAL_WORDS = {"Terminated": 15, "Killed": 9, "Aborted": 6, "Segmentation fault": 11, "Bus error": 7}


def srun_task_ends(batch_log: str) -> list[tuple[str, int, int | None]]:
    """(host, task, exit code) for every task srun reported ending badly in the batch step's log, in the order it
    reported them (the first is the one that ended the others, ``--kill-on-bad-exit``); a task a signal ended gets
    128 + the signal, as a shell reports it (None: srun's words are not known here). srun writes, e.g.::

        srun: error: torch1: task 1: Exited with exit code 2
        srun: error: torch0: task 0: Terminated
    """
    out: list[tuple[str, int, int | None]] = []
    for line in batch_log.splitlines():
        match = _SRUN_TASKS.match(line.strip())
        if match is None:
            continue
        what = match["what"]
        if exited := re.fullmatch(r"Exited with exit code (\d+)", what):
            code: int | None = int(exited[1])
        else:
            signal = next((n for word, n in _SIGNAL_WORDS.items() if what.startswith(word)), None)
            code = 128 + signal if signal is not None else None
        for piece in match["tasks"].split(","):
            low, _, high = piece.partition("-")
            if low.isdigit():
                out += [(match["host"], task, code) for task in range(int(low), int(high or low) + 1)]
    return out


# --------------------------------------------------------------------------- what a state means


def is_finished(job: SlurmJob) -> bool:
    """Whether the job is over (:data:`END_STATES`; COMPLETING is not: its nodes still clean up)."""
    return job.state in END_STATES


DRAINED_REASONS = re.compile(r"^(ReqNodeNotAvail|Nodes_required_for_job_are_DOWN|NodeDown)")
"""The reasons a pending job waits on nodes that are drained or down, as ``scontrol show job`` prints them (Slurm
22.05's ``job_reason_string``): ``ReqNodeNotAvail`` (in 22.05 with ``,_UnavailableNodes:c2``),
``Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved_for_jobs_in_higher_priority_partitions``, ``NodeDown``."""


def pending_reason(job: SlurmJob) -> str | None:
    """Why a PENDING job waits, when it waits on drained or down nodes (:data:`DRAINED_REASONS`), else None (it
    waits its turn, or runs)."""
    if job.state != "PENDING" or not job.reason or not DRAINED_REASONS.match(job.reason):
        return None
    return f"slurm job {job.job_id} waits on nodes that are drained or down (Reason={job.reason})"


def _exit_words(job: SlurmJob) -> str:
    parts = []
    if job.exit_code:
        parts.append(f"exit code {job.exit_code}")
    if job.signal:
        parts.append(f"signal {job.signal}")
    return ", ".join(parts) or "no exit code"


def end_reason(job: SlurmJob) -> str | None:
    """The case's failure for a finished job: None for COMPLETED with ExitCode 0:0, else a reason naming Slurm's end
    state (never a success: every other state, and a COMPLETED with another exit code, is a failure)."""
    head = f"slurm job {job.job_id}"
    why = f", Reason={job.reason}" if job.reason else ""
    state = job.state
    if state == "COMPLETED":
        if not job.exit_code and not job.signal:
            return None
        return f"{head} completed with {_exit_words(job)}"
    if state == "TIMEOUT":
        limit = f" ({job.time_limit})" if job.time_limit else ""
        return f"{head} reached its time limit{limit} and was killed (TIMEOUT)"
    if state == "NODE_FAIL":
        return f"{head} ended because a node failed (NODE_FAIL) on {job.node_list or 'its nodes'}{why}"
    if state == "OUT_OF_MEMORY":
        return f"{head}: out of memory: a step used more memory than Slurm allowed it (OUT_OF_MEMORY)"
    if state == "PREEMPTED":
        return f"{head} was preempted by another job (PREEMPTED){why}"
    if state == "CANCELLED":
        by = f" by uid {job.cancelled_by}" if job.cancelled_by else " (scancel, or an administrator)"
        return f"{head} was cancelled{by} (CANCELLED{why})"
    if state == "FAILED":
        return f"{head} failed: {_exit_words(job)} (FAILED{why})"
    if state == "BOOT_FAIL":
        return f"{head}: its nodes failed to boot (BOOT_FAIL){why}"
    if state == "DEADLINE":
        return f"{head} reached its deadline before it could end (DEADLINE){why}"
    return f"{head} ended {state} ({_exit_words(job)}{why})"
