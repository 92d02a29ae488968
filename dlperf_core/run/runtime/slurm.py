"""The ``slurm`` runtime: every case run is one Slurm job, submitted from a login node, its nodes launched by srun.

dlperf reaches the login node through a :class:`RemoteShell` (the Airflow side: the SSH provider's hook on the
inventory's ``slurm.connection``; the tests: a local shell). A case run is the three phases every runtime has
(:class:`~dlperf_core.model.CaseInPhases`): :meth:`SlurmCase.submit` writes the batch script
(:func:`~dlperf_core.run.runtime.slurm_jobs.batch_script`) and the case's files in the job's folder on the shared
filesystem and runs sbatch; :meth:`SlurmCase.poll` reads the job's state (scontrol, then sacct once scontrol forgot
it), and under ``on_drained: fail`` cancels a job that waits on drained or down nodes; :meth:`SlurmCase.collect`
copies the nodes' logs into the case's log folder and builds the outcome (:func:`collect_job`), Slurm's end state
as the failure (:func:`~dlperf_core.run.runtime.slurm_jobs.end_reason`). What a deferred task needs between submit
and collect is a :class:`SubmittedJob` (JSON-able): :meth:`SlurmRuntime.resume` continues from it.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dlperf_core.cluster.environment import PROBE_SCRIPT, Environment, combine, parse_probe
from dlperf_core.cluster.inventory import ApptainerImage, ContainerImage, Node, SlurmSettings
from dlperf_core.json_form import JsonForm
from dlperf_core.model import CaseJob, CaseOutcome, RunIds
from dlperf_core.run.launch_spec import ImageRef, NodeSpec, SlurmRecord, slurm_node
from dlperf_core.run.runtime.base import NodeEnd, case_outcome, log_disk_full, run_to_end
from dlperf_core.run.runtime.slurm_jobs import (
    BATCH_LOG,
    BATCH_SCRIPT,
    FILES_DIR,
    NODE_SSH_DIR_PREFIX,
    PROBE_FILE,
    SlurmError,
    SlurmJob,
    batch_script,
    cancel_command,
    end_reason,
    expand_hostlist,
    file_name,
    is_finished,
    job_dir,
    job_state_command,
    node_log_path,
    parse_job_state,
    parse_queue,
    parse_sacct,
    parse_sbatch,
    parse_version,
    pending_reason,
    probe_output_path,
    queue_command,
    sacct_command,
    sbatch_command,
    srun_task_ends,
    version_command,
)

if TYPE_CHECKING:
    from dlperf_core.cluster.cpu_placement import HostCores
    from dlperf_core.cluster.gpu_sampling import GpuSamples
    from dlperf_core.cluster.sshkeys import ContainerFile
    from dlperf_core.model import NodeProcess

log = logging.getLogger("dlperf")

WORKLOAD_DIR_ON_NODES = "/opt/dlperf/workload"
"""Where dlperf's reference workload is on the nodes: where the framework images have it (software ``none``: the
nodes are set up as the images are)."""
COMMAND_TIMEOUT_S = 60.0
"""How long one command on the login node may take."""
POLL_ERRORS_TOLERATED = 5
"""Looks at the job's state in a row that may fail (the login node unreachable a while) before the case fails."""
DRAINED_LOOKS = 2
"""Looks in a row that must see a job waiting on drained or down nodes before ``on_drained: fail`` cancels it (a
backfill plan shows the same reason for a moment)."""


@dataclass(frozen=True)
class RemoteResult:
    exit_code: int
    stdout: str
    stderr: str


class RemoteShell(Protocol):
    """The login node, as the runtime uses it: commands (a shell's command line) and files on the shared
    filesystem."""

    def run(self, command: str, timeout_s: float) -> RemoteResult: ...

    def write_file(self, path: str, text: str) -> None: ...

    def read_file(self, path: str) -> bytes: ...


@dataclass(frozen=True)
class SubmittedJob(JsonForm):
    """A submitted case run, all that is needed to poll it and collect it later (a deferred task carries it)."""

    job_id: str
    run_label: str
    job_dir: str  # on the cluster's shared filesystem
    script_path: str
    log_dir: str  # the case's log folder where dlperf runs (node logs are copied there)
    nodes: tuple[str, ...]  # the case's nodes (slots), in rank order
    submitted_at: datetime
    slurm_version: str | None = None
    oversubscription: str | None = None


def run_checked(shell: RemoteShell, command: str, timeout_s: float = COMMAND_TIMEOUT_S) -> str:
    """``command`` on the login node; its stdout, or SlurmError naming the command, its exit code and stderr."""
    result = shell.run(command, timeout_s)
    if result.exit_code != 0:
        said = (result.stderr or result.stdout).strip()[:300]
        raise SlurmError(f"{command.split()[0]} exited with {result.exit_code}: {said}")
    return result.stdout


def read_job(shell: RemoteShell, job_id: str) -> SlurmJob | None:
    """The job's state from scontrol; once scontrol forgot it (MinJobAge), from sacct (None: neither knows it: a
    cluster without slurmdbd, such as dlperf's test cluster, has no sacct)."""
    result = shell.run(job_state_command(job_id), COMMAND_TIMEOUT_S)
    job = parse_job_state(result.stdout + "\n" + result.stderr)
    if job is not None:
        return job
    found = shell.run(sacct_command(job_id), COMMAND_TIMEOUT_S)
    return parse_sacct(found.stdout, job_id) if found.exit_code == 0 else None


def _copy_log(shell: RemoteShell, source: str, target: Path) -> bool:
    """Copy one log from the shared filesystem; False when it is not there (the node never started)."""
    try:
        data = shell.read_file(source)
    except (OSError, SlurmError) as exc:
        log.info("no %s: %s: %s", source, type(exc).__name__, exc)
        return False
    target.write_bytes(data)
    return True


def _ran_for(job: SlurmJob | None) -> timedelta | None:
    """How long the job ran, from its StartTime and EndTime (the controller's local time: only the difference)."""
    if job is None or not job.start_time or not job.end_time:
        return None
    try:
        return datetime.fromisoformat(job.end_time) - datetime.fromisoformat(job.start_time)
    except ValueError:
        return None


def probe_copy(log_dir: Path, rank: int) -> Path:
    """Where node ``rank``'s probe output is kept in the case's log folder, once the job ended."""
    return log_dir / f"node{rank}.probe"


def collect_job(
    shell: RemoteShell, submitted: SubmittedJob, final: SlurmJob | None, failure: str | None = None
) -> CaseOutcome:
    """The outcome of a submitted job that ended (``final``: its last state; None: no command knows it any more):
    the nodes' logs copied from the job's folder into the case's log folder (node 0's where the parsers read it), the
    batch step's log beside them as ``slurm-batch.log``, the case's files (ssh keys) removed from the shared
    filesystem, and the failure: ``failure`` (the runtime's own: a cancelled wait, a submit that failed) else Slurm's
    end state (:func:`~dlperf_core.run.runtime.slurm_jobs.end_reason`), with the node that failed first where srun
    said so in the batch step's log (:func:`~dlperf_core.run.runtime.slurm_jobs.srun_task_ends`). A node's exit code
    is 0 only for a job that COMPLETED with 0:0; else srun's word for it, else the job's."""
    log_dir = Path(submitted.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank, _name in enumerate(submitted.nodes):
        target = log_dir / f"node{rank}.log"
        _copy_log(shell, node_log_path(submitted.job_dir, rank), target)
        paths.append(str(target))
    batch_log = log_dir / "slurm-batch.log"
    _copy_log(shell, f"{submitted.job_dir}/{BATCH_LOG}", batch_log)
    for rank in range(len(submitted.nodes)):  # each node's environment, as it probed it before its launch
        _copy_log(shell, probe_output_path(submitted.job_dir, rank), probe_copy(log_dir, rank))
    try:  # the case's keys off the shared filesystem (the job's own copies on the nodes are gone with its launches)
        shell.run(f"rm -rf {shlex.quote(submitted.job_dir + '/' + FILES_DIR)}", COMMAND_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - the outcome is built all the same; the keys of one case run stay
        log.warning("could not remove %s/%s: %s: %s", submitted.job_dir, FILES_DIR, type(exc).__name__, exc)
    if failure is None:
        failure = (
            end_reason(final)
            if final is not None
            else (
                f"slurm job {submitted.job_id}: its end is not known: scontrol forgot it (MinJobAge) and sacct has no "
                "record of it (no slurmdbd?)"
            )
        )
    if final is not None and failure is None:
        code: int | None = 0
    elif final is not None and final.exit_code:
        code = final.exit_code
    elif final is not None and final.signal:
        code = 128 + final.signal
    else:
        code = None
    codes = [code] * len(submitted.nodes)
    if failure is not None and batch_log.is_file():  # each node's own end, as srun reported it
        tasks = srun_task_ends(batch_log.read_text(errors="replace"))
        for _host, task, task_code in tasks:
            if 0 <= task < len(codes):
                codes[task] = task_code
        first = next(((h, t, c) for h, t, c in tasks if c is not None and c < 128 and 0 <= t < len(codes)), None)
        if first is not None:
            failure += (
                f"; the first node to fail: {submitted.nodes[first[1]]} on {first[0]} exited with code {first[2]}"
            )
    finished = datetime.now(UTC)
    ran = _ran_for(final)
    started = finished - ran if ran is not None else submitted.submitted_at
    ends = [NodeEnd(name, rank, codes[rank], paths[rank]) for rank, name in enumerate(submitted.nodes)]
    return case_outcome(
        ends,
        failure,
        started,
        finished,
        oversubscription=submitted.oversubscription,
        disk_full=log_disk_full(log_dir) if log_dir.is_dir() else None,
    )


class SlurmCase:
    """One case run as a Slurm job, in the three phases of :class:`~dlperf_core.model.CaseInPhases`. Made by
    :meth:`SlurmRuntime.submit` (nothing submitted yet) or :meth:`SlurmRuntime.resume` (already submitted)."""

    def __init__(
        self,
        runtime: SlurmRuntime,
        job: CaseJob | None,
        submitted: SubmittedJob | None = None,
    ) -> None:
        self.runtime = runtime
        self.job = job
        self.submitted = submitted
        self.poll_s = runtime.settings.poll_s
        self.failure: str | None = None
        self.ended = False
        self.state: SlurmJob | None = None
        self.over = False  # Slurm says the job is over (an end state, or forgotten by every command)
        self._errors = 0
        self._drained = 0

    @property
    def shell(self) -> RemoteShell:
        return self.runtime.shell

    def submit(self) -> None:
        """Write the job's folder (script, files) and run sbatch; a submit that fails ends the case with the reason
        (never raises)."""
        job = self.job
        assert job is not None, "a resumed case is already submitted"
        job.log_dir.mkdir(parents=True, exist_ok=True)
        settings = self.runtime.settings
        directory = job_dir(settings, job.run_label)
        script = f"{directory}/{BATCH_SCRIPT}"
        try:
            run_checked(self.shell, f"mkdir -p {shlex.quote(directory + '/' + FILES_DIR)}")
            files = {file_name(k, f.path): f for c in job.containers for k, f in enumerate(c.files)}
            for name, f in files.items():
                path = f"{directory}/{FILES_DIR}/{name}"
                self.shell.write_file(path, f.content.decode())
                run_checked(self.shell, f"chmod 600 {shlex.quote(path)}")
            self.shell.write_file(f"{directory}/{PROBE_FILE}", PROBE_SCRIPT)
            self.shell.write_file(script, batch_script(job, settings))
            job_id = parse_sbatch(run_checked(self.shell, sbatch_command(script)))
        except Exception as exc:  # noqa: BLE001 - a job that cannot be submitted fails this case, not the service
            self.failure, self.ended = f"slurm: could not submit the job: {type(exc).__name__}: {exc}", True
            return
        self.submitted = SubmittedJob(
            job_id=job_id,
            run_label=job.run_label,
            job_dir=directory,
            script_path=script,
            log_dir=str(job.log_dir),
            nodes=tuple(launch.node.name for launch in job.launches),
            submitted_at=datetime.now(UTC),
            slurm_version=self.runtime.version(),
            oversubscription=job.oversubscription,
        )
        self.runtime.remember(self.submitted)
        log.info("%s: slurm job %s submitted (%s)", job.run_label, job_id, script)

    def poll(self) -> bool:
        """One look at the job; True once it ended (or cannot be followed any more)."""
        if self.ended or self.submitted is None:
            self.ended = True
            return True
        try:
            state = read_job(self.shell, self.submitted.job_id)
        except Exception as exc:  # noqa: BLE001 - the login node may be away for a moment
            self._errors += 1
            log.warning("slurm job %s: no state (%s: %s)", self.submitted.job_id, type(exc).__name__, exc)
            if self._errors >= POLL_ERRORS_TOLERATED:
                self.failure = f"slurm job {self.submitted.job_id}: its state could not be read: {exc}"
                self.ended = True
            return self.ended
        self._errors = 0
        self.state = state
        self.runtime.observed(self.submitted.job_id, state)
        if state is None or is_finished(state):
            self.over = self.ended = True
            return True
        waiting = pending_reason(state)
        self._drained = self._drained + 1 if waiting else 0
        if waiting and self.runtime.settings.on_drained == "fail" and self._drained >= DRAINED_LOOKS:
            self.failure = f"{waiting}: cancelled (on_drained: fail)"
            self.ended = True  # collect cancels it
        return self.ended

    def collect(self) -> CaseOutcome:
        """The case's outcome (:func:`collect_job`); a job that has not ended (the caller stopped waiting) is
        cancelled first."""
        if self.submitted is None:
            job = self.job
            assert job is not None
            now = datetime.now(UTC)
            ends = [
                NodeEnd(launch.node.name, launch.node_rank, None, str(job.log_dir / f"node{launch.node_rank}.log"))
                for launch in job.launches
            ]
            return case_outcome(ends, self.failure, now, now, oversubscription=job.oversubscription)
        if not self.over:  # the caller stopped waiting, the state could not be read, or on_drained: fail
            self.shell.run(cancel_command(self.submitted.job_id), COMMAND_TIMEOUT_S)
            self.failure = self.failure or f"slurm job {self.submitted.job_id} was cancelled before it ended"
        return collect_job(self.shell, self.submitted, self.state if self.over else None, self.failure)


class SlurmRuntime:
    """Runs case jobs as Slurm jobs submitted from a login node (module docstring)."""

    name = "slurm"
    python = "python3"
    workload_dir = WORKLOAD_DIR_ON_NODES

    def __init__(self, settings: SlurmSettings, shell: RemoteShell) -> None:
        self.settings = settings
        self.shell = shell
        self._version: str | None = None
        self._version_read = False
        self._submitted: dict[str, SubmittedJob] = {}  # run label: its job
        self._states: dict[str, SlurmJob] = {}  # job id: its last state

    def version(self) -> str | None:
        """Slurm's version on the login node (``sinfo --version``), read once; None if it cannot be told."""
        if not self._version_read:
            self._version_read = True
            try:
                self._version = parse_version(run_checked(self.shell, version_command()))
            except Exception as exc:  # noqa: BLE001 - the version is a fact for the record, never a failure
                log.warning("no Slurm version: %s: %s", type(exc).__name__, exc)
        return self._version

    @staticmethod
    def case_ssh_dir(run_label: str) -> str:
        """Where a case's ssh files (mpirun across nodes: fresh keys per case run) are on its nodes: a folder of the
        job's own user on each node (``/etc/dlperf-ssh``, the images' place, is root's), put there by the batch script
        before the node's launch starts and removed when it ends (:mod:`~dlperf_core.run.runtime.slurm_jobs`)."""
        return f"{NODE_SSH_DIR_PREFIX}{run_label}"

    def remember(self, submitted: SubmittedJob) -> None:
        self._submitted[submitted.run_label] = submitted

    def observed(self, job_id: str, state: SlurmJob | None) -> None:
        if state is not None:
            self._states[job_id] = state

    def host_cores(self, node: Node) -> HostCores | None:  # noqa: ARG002 - the Runtime protocol's signature
        """Not known: Slurm chooses the hosts, and its allocation places the ranks."""
        return None

    def submit(self, job: CaseJob) -> SlurmCase:
        return SlurmCase(self, job)

    def resume(self, submitted: SubmittedJob | Mapping[str, Any], job: CaseJob | None = None) -> SlurmCase:
        """A case submitted earlier (by this runtime or another one, before a deferral), to poll and collect;
        ``submitted`` may be its JSON form (what crossed the deferral)."""
        if not isinstance(submitted, SubmittedJob):
            submitted = SubmittedJob.from_json(dict(submitted))
        self.remember(submitted)
        return SlurmCase(self, job, submitted)

    def execute(self, job: CaseJob) -> CaseOutcome:
        return run_to_end(self.submit(job))

    def start_node(
        self,
        job: CaseJob,
        i: int,
        files: tuple[ContainerFile, ...] | None = None,  # noqa: ARG002
        samples: GpuSamples | None = None,  # noqa: ARG002
    ) -> NodeProcess:
        """Refused: Slurm launches every node of a case in one job (node routing does not apply to it)."""
        raise RuntimeError(
            f"{job.run_label}: the slurm runtime starts every node of a case in one Slurm job; it cannot start node "
            f"{i} alone (node routing does not apply to a Slurm inventory)"
        )

    def image(self) -> ImageRef | None:
        """The image the ranks run in (pyxis or Apptainer), None for software ``none``."""
        software = self.settings.software
        if isinstance(software, ContainerImage):
            return ImageRef(software.container_image)
        if isinstance(software, ApptainerImage):
            return ImageRef(software.apptainer)
        return None

    def node_specs(self, job: CaseJob) -> tuple[NodeSpec, ...]:
        """What each node of ``job`` ran (:mod:`dlperf_core.run.launch_spec`): its launch, as the batch script runs it,
        at the host Slurm gave it (the job's node list in rank order, once known; else the slot's variable)."""
        submitted = self._submitted.get(job.run_label)
        state = self._states.get(submitted.job_id) if submitted else None
        hosts = expand_hostlist(state.node_list) if state and state.node_list else []
        return tuple(
            slurm_node(launch, self.image(), hosts[launch.node_rank] if launch.node_rank < len(hosts) else None)
            for launch in job.launches
        )

    def slurm_record(self, job: CaseJob) -> SlurmRecord:
        """How ``job`` was submitted: its job id, nodes, partition, Slurm's version and its batch script (secrets left
        out)."""
        submitted = self._submitted.get(job.run_label)
        state = self._states.get(submitted.job_id) if submitted else None
        return SlurmRecord(
            job_id=submitted.job_id if submitted else None,
            node_list=state.node_list if state else None,
            partition=(state.partition if state else None) or self.settings.partition,
            slurm_version=submitted.slurm_version if submitted else None,
            software=self.settings.software_kind,
            batch_script=batch_script(job, self.settings, redact=True),
        )

    def probed_environment(self, job: CaseJob, framework: str) -> Environment | None:
        """The environment ``job`` ran in, as its nodes probed it inside the job (the batch script runs
        :data:`~dlperf_core.cluster.environment.PROBE_SCRIPT` on each node before its launch, where the case's
        software is), with the job's facts (:meth:`SlurmRecord.scheduler
        <dlperf_core.run.launch_spec.SlurmRecord.scheduler>`: job id, node list, partition, Slurm's version); None
        when a node left no probe (the job never ran, or was cancelled before)."""
        submitted = self._submitted.get(job.run_label)
        if submitted is None:
            return None
        outputs = [probe_copy(Path(submitted.log_dir), rank) for rank in range(len(submitted.nodes))]
        if not all(path.is_file() and path.stat().st_size for path in outputs):
            return None
        image = self.image()
        found = combine(
            [parse_probe(path.read_text(errors="replace")) for path in outputs],
            framework=framework,
            image=image.tag if image else None,
        )
        return replace(found, scheduler=self.slurm_record(job).scheduler())

    def cleanup(self, labels: dict[str, str]) -> list[str]:
        """Cancel this user's jobs still queued or running whose name is a case run of the DAG run ``labels`` name
        (``dlperf.dag_id``, ``dlperf.run_id``: job names start ``dlperf-<RunIds.short>-``); their ids."""
        prefix = job_name_prefix(labels)
        if prefix is None:
            return []
        jobs = [
            job_id for job_id, name in parse_queue(run_checked(self.shell, queue_command())) if name.startswith(prefix)
        ]
        for job_id in jobs:
            run_checked(self.shell, cancel_command(job_id))
        return jobs


def job_name_prefix(labels: dict[str, str]) -> str | None:
    """What the job names of a DAG run's case runs start with (``dlperf-<RunIds.short>-``, as
    :func:`dlperf_core.run.jobs.build_job` names a run label), None when ``labels`` do not name a DAG run."""
    dag_id, run_id = labels.get("dlperf.dag_id"), labels.get("dlperf.run_id")
    if dag_id is None or run_id is None:
        return None
    return f"dlperf-{RunIds(dag_id, run_id).short}-"
