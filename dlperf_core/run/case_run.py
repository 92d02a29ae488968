"""One case run: start its nodes, supervise, one :class:`~dlperf_core.model.CaseOutcome`, whichever way its
nodes are run.

Two strategies, the same use case:

* **central** (:func:`execute_case`): one worker starts every node of the case through the runtime
  (``Runtime.submit``: the case's phases submit, poll, collect; :class:`~dlperf_core.run.runtime.base.CaseRunning`);
* **routed** (node routing: a worker per node): :func:`node_share` runs on each node's own worker and starts that
  node's part (the nodes meet on a board, :mod:`dlperf_core.run.runtime.gang`), then :func:`collect_case` puts the
  nodes' reports together.

Both check the case's GPUs before anything starts (:mod:`dlperf_core.cluster.gpu_health`: the central strategy every
node's, each node's task its own; a refused case fails with the finding, before any training) and end in the same
outcome builder (:func:`dlperf_core.run.runtime.base.case_outcome`) with the same checks (the preflight blocker, the
GPUs' health, the full log disk, the GPU samples, the oversubscription) and the same environment capture
(:mod:`dlperf_core.cluster.environment_capture`). Every fact about the case (its nodes, image, runtime, limits) comes
from its :class:`~dlperf_core.run.handoff.PlannedRun`, resolved once by planning: nothing here reads the inventory.
The runtime itself is made by the caller (``make_runtime``: the docker runtime lives with Airflow's Docker
provider), which also says what a runtime error means (``describe_error``) and how the GPUs' health is read where
the case runs (``read_gpus``: :mod:`dlperf_core.cluster.gpu_health_probe`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dlperf_core.cluster.clock_events import ClockSample
from dlperf_core.cluster.environment import Environment
from dlperf_core.cluster.environment_capture import (
    ProbeCache,
    case_gpu_ids,
    environment_key,
    environment_of,
    with_settings,
)
from dlperf_core.cluster.gpu_health import GpuHealth, ReadGpus, gate, merged, read_here
from dlperf_core.cluster.gpu_sampling import GpuSamples
from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.cluster.nvml_readings import NodeReadings
from dlperf_core.cluster.preflight import PreflightReport
from dlperf_core.json_form import JsonForm
from dlperf_core.model import CaseInPhases, CaseJob, CaseOutcome, RunIds, Runtime
from dlperf_core.run.handoff import ExecutedRun, NodeReport, PlannedRun
from dlperf_core.run.jobs import build_job, case_log_dir
from dlperf_core.run.launch_spec import LaunchSpec, launch_spec_of
from dlperf_core.run.runtime.base import NodeEnd, case_outcome, log_disk_full, run_to_end
from dlperf_core.run.runtime.gang import (
    GAVE_UP,
    Board,
    GangSettings,
    NodeShare,
    NodeState,
    case_failure,
    run_node_share,
)

log = logging.getLogger("dlperf")

MakeRuntime = Callable[[str, Inventory], Runtime]
"""Makes the runtime a planned run names (``local`` | ``docker``) over the case's nodes."""
DescribeError = Callable[[Runtime | None, Sequence[Node], Exception], str]
"""A case's failure reason when its runtime raised (which engines do not answer, and the exception)."""
GpuReader = Callable[[PlannedRun, RunIds], ReadGpus]
"""How the GPUs of a planned run's nodes are read where it runs (:mod:`dlperf_core.cluster.gpu_health_probe`)."""

NODE_ENV = "DLPERF_NODE"  # set on a node worker: the node it sits on (a task for another node refuses to run)
MAX_LOG_BYTES = 32 * 1024 * 1024  # node 0's log travels to collect_case through XCom


def read_in_process(planned: PlannedRun, ids: RunIds) -> ReadGpus:  # noqa: ARG001 - a GpuReader's signature
    """The GPU reader of a runtime whose nodes are this machine (the local runtime): NVML in this process. A docker
    case needs the deployment's reader (its probe container); without one its nodes say so, which flags the case."""
    if planned.runtime != "docker":
        return read_here

    def no_probe(node: Node, gpus: tuple[str, ...]) -> NodeReadings:  # noqa: ARG001 - a ReadGpus' signature
        return NodeReadings(node.name, error="no GPU health probe for the docker runtime in this deployment")

    return no_probe


@dataclass(frozen=True)
class CaseRunner:
    """How this deployment makes runtimes, names their errors and reads the GPUs' health (the edges of a case run)."""

    make_runtime: MakeRuntime
    describe_error: DescribeError
    read_gpus: GpuReader = read_in_process


def check_gpus(planned: PlannedRun, ids: RunIds, runner: CaseRunner, nodes: Sequence[Node] | None = None) -> GpuHealth:
    """The health of the case's GPUs on ``nodes`` (default: all of its nodes), read where it runs (never raises)."""
    case = planned.run.case
    return gate(
        planned.nodes if nodes is None else nodes, case.gpus_per_node, runner.read_gpus(planned, ids), planned.health
    )


def launch_spec(runtime: Runtime, job: CaseJob, planned: PlannedRun) -> LaunchSpec | None:
    """What ``runtime`` launched for ``job`` (:mod:`dlperf_core.run.launch_spec`), kept on the result row; None,
    with a warning, when it cannot be told (never fails the case)."""
    try:
        return launch_spec_of(runtime, job, planned.run, suite=planned.suite, inventory=planned.inventory)
    except Exception as exc:  # noqa: BLE001 - the result is stored without it
        log.warning("no launch spec for %s: %s: %s", planned.label, type(exc).__name__, exc)
        return None


def _job(planned: PlannedRun, runtime: Runtime, ids: RunIds) -> CaseJob:
    return build_job(
        planned.run, planned.cluster, runtime, ids, timeout_s=planned.timeout_s, watchdog_s=planned.watchdog_s
    )


def _not_started(
    planned: PlannedRun, ids: RunIds, runner: CaseRunner, preflight: PreflightReport | None, started: datetime
) -> ExecutedRun | GpuHealth:
    """The gates before a case starts: its outcome when it must not start (a node that failed ``preflight``, GPUs
    the health gate refused), else the health of its GPUs (flagged ones logged)."""
    if preflight is not None and (blocker := preflight.blocker(planned.node_names)):
        log.warning("%s not started: %s", planned.label, blocker)
        return ExecutedRun(planned, CaseOutcome(started, datetime.now(UTC), [], blocker))
    health = check_gpus(planned, ids, runner)
    if health.refusal is not None:
        log.warning("%s not started: %s", planned.label, health.refusal)
        return ExecutedRun(planned, CaseOutcome(started, datetime.now(UTC), [], health.refusal, gpu_health=health))
    if health.failed:
        log.warning("%s runs flagged: %s", planned.label, "; ".join(f.line() for f in health.failed))
    return health


def execute_case(
    planned: PlannedRun, ids: RunIds, runner: CaseRunner, preflight: PreflightReport | None = None
) -> ExecutedRun:
    """The central strategy: start every node of the case from this worker, wait, collect logs, clean up. Never
    raises for a failed training: the outcome (with its reason) goes on to be stored. A case on a node that failed
    ``preflight`` is not started: it is a failed outcome "preflight: <node>: <problem>"; nor is one whose GPUs the
    health gate refused (``gpu health: <node> GPU <id>: <check> <value>, wanted <limit>``)."""
    started = datetime.now(UTC)
    health = _not_started(planned, ids, runner, preflight, started)
    if isinstance(health, ExecutedRun):
        return health
    runtime: Runtime | None = None
    job: CaseJob | None = None
    try:
        runtime = runner.make_runtime(planned.runtime, planned.cluster)
        job = _job(planned, runtime, ids)
        outcome = run_to_end(runtime.submit(job))
    except Exception as exc:  # noqa: BLE001 - the runtime itself failed (engine unreachable, ...): a failed run
        outcome = CaseOutcome(started, datetime.now(UTC), [], runner.describe_error(runtime, planned.nodes, exc))
    outcome.gpu_health = health
    spec = launch_spec(runtime, job, planned) if runtime is not None and job is not None else None
    return ExecutedRun(planned, outcome, spec)


# --------------------------------------------------------------------------- a case run that waits in a queue

WAITS_IN_QUEUE = frozenset({"slurm"})
"""Runtimes whose case runs queue in a scheduler: their task submits (:func:`start_case`), hands the wait to
something that holds no worker (an Airflow trigger) and collects when the job ended (:func:`finish_case`). Every
other runtime runs its case to the end on one worker (:func:`execute_case`)."""


@dataclass(frozen=True)
class StartedCase(JsonForm):
    """A case run submitted to its scheduler and not yet collected: what crosses the wait (a deferral) as JSON.
    ``submitted`` is the runtime's own form of its job (the Slurm runtime's ``SubmittedJob.to_json()``), handed back
    to it by :func:`finish_case`; ``gpu_health`` and ``launch_spec`` were read before it was submitted."""

    job_id: str
    started_at: datetime
    submitted: dict[str, Any]
    gpu_health: GpuHealth | None = None
    launch_spec: LaunchSpec | None = None


def _submitted_form(running: CaseInPhases) -> tuple[str, dict[str, Any]]:
    """The job id and JSON form of what a queueing runtime's phases submitted (the Slurm runtime's
    ``SubmittedJob``, its ``submitted`` after :meth:`~dlperf_core.model.CaseInPhases.submit`)."""
    submitted = getattr(running, "submitted", None)
    if submitted is None:
        raise TypeError(f"{type(running).__name__} submitted nothing that can wait without this worker")
    return str(submitted.job_id), dict(submitted.to_json())


def _resumed(runtime: Runtime, submitted: Mapping[str, Any], job: CaseJob) -> CaseInPhases:
    """The phases of a submitted job again, in another process, from its JSON form: the runtime's
    ``resume(submitted, job)`` (the Slurm runtime's reads its ``SubmittedJob`` from it)."""
    resume = getattr(runtime, "resume", None)
    if resume is None:
        raise TypeError(f"the {runtime.name} runtime cannot resume a submitted job")
    running: CaseInPhases = resume(dict(submitted), job)
    return running


def start_case(
    planned: PlannedRun, ids: RunIds, runner: CaseRunner, preflight: PreflightReport | None = None
) -> ExecutedRun | StartedCase:
    """The first half of a case run that waits in a scheduler's queue (:data:`WAITS_IN_QUEUE`): the same gates as
    :func:`execute_case` (preflight, GPU health), then the job submitted. Returns the :class:`StartedCase` to wait
    on, or the case's :class:`ExecutedRun` when it ended already (not started, refused, the submission failed),
    built as :func:`execute_case` builds it. Never raises for a failed case."""
    started = datetime.now(UTC)
    health = _not_started(planned, ids, runner, preflight, started)
    if isinstance(health, ExecutedRun):
        return health
    runtime: Runtime | None = None
    job: CaseJob | None = None
    try:
        runtime = runner.make_runtime(planned.runtime, planned.cluster)
        job = _job(planned, runtime, ids)
        running = runtime.submit(job)
        running.submit()
        waiting = not running.poll()
        spec = launch_spec(runtime, job, planned)  # after submit: the job's id is known
        if waiting:  # submitted, and waiting in the queue (or running): what the wait needs, as JSON
            job_id, submitted = _submitted_form(running)
            log.info("%s submitted as job %s", planned.label, job_id)
            return StartedCase(job_id, started, submitted, gpu_health=health, launch_spec=spec)
        outcome = running.collect()  # the submission failed, or the job ended at once
    except Exception as exc:  # noqa: BLE001 - the runtime itself failed (login node unreachable, ...): a failed run
        outcome = CaseOutcome(started, datetime.now(UTC), [], runner.describe_error(runtime, planned.nodes, exc))
        spec = launch_spec(runtime, job, planned) if runtime is not None and job is not None else None
    outcome.gpu_health = health
    return ExecutedRun(planned, outcome, spec, probed_environment(runtime, job, planned))


def probed_environment(runtime: Runtime | None, job: CaseJob | None, planned: PlannedRun) -> Environment | None:
    """The environment a queueing runtime's job probed on its nodes (the Slurm runtime's ``probed_environment``),
    with the case's cluster settings, as capture_environment records them; None where the runtime probes nothing
    inside its jobs or the job left no probe. Never raises: the environment never fails a case."""
    probed = getattr(runtime, "probed_environment", None)
    if probed is None or job is None:
        return None
    try:
        found: Environment | None = probed(job, planned.run.case.framework)
    except Exception as exc:  # noqa: BLE001
        log.warning("%s: no environment from its job: %s: %s", planned.label, type(exc).__name__, exc)
        return None
    return with_settings(found, planned) if found is not None else None


def finish_case(
    planned: PlannedRun,
    ids: RunIds,
    started: StartedCase,
    runner: CaseRunner,
    *,
    wait_failure: str | None = None,
    end_reason: str | None = None,
) -> ExecutedRun:
    """The second half (:func:`start_case`): the job's phases again from its JSON form (with its job built again as
    :func:`start_case` built it), one look at its state, then collected (its logs read back, its outcome built by the
    runtime as every runtime builds it: :func:`~dlperf_core.run.runtime.base.case_outcome`) and its launch spec read
    again (the nodes Slurm chose are known now). ``wait_failure``: why the wait ended before the job did (its state
    could not be read, its nodes are drained): the case fails with it first. ``end_reason``: what the job's end state
    said was wrong (TIMEOUT, NODE_FAIL, ...): the case's failure when the runtime's outcome has none, so that a job
    that did not end well never reads as a success. Never raises for a failed case."""
    runtime: Runtime | None = None
    job: CaseJob | None = None
    spec = started.launch_spec
    try:
        runtime = runner.make_runtime(planned.runtime, planned.cluster)
        job = _job(planned, runtime, ids)
        running = _resumed(runtime, started.submitted, job)
        running.poll()  # the job's end state, as the runtime reads it
        outcome = running.collect()
        spec = launch_spec(runtime, job, planned) or spec
    except Exception as exc:  # noqa: BLE001 - the login node is unreachable, ...: a failed run, with the reason
        outcome = CaseOutcome(
            started.started_at, datetime.now(UTC), [], runner.describe_error(runtime, planned.nodes, exc)
        )
    if outcome.failure is None:
        outcome.failure = wait_failure or end_reason
    elif wait_failure and wait_failure not in outcome.failure:
        outcome.failure = f"{wait_failure}; {outcome.failure}"
    outcome.gpu_health = started.gpu_health
    return ExecutedRun(planned, outcome, spec, probed_environment(runtime, job, planned))


def node_share(
    planned: PlannedRun,
    ids: RunIds,
    node_name: str,
    preflight: PreflightReport | None,
    board: Board,
    runner: CaseRunner,
    probes: ProbeCache | None = None,
    settings: GangSettings | None = None,
) -> NodeReport:
    """The routed strategy, on node ``node_name``'s own worker: this node's share of the case run (``skipped``
    set when the case does not use the node). ``probes``: the environment probe of the case's image here."""
    run = planned.run
    names = planned.node_names
    if node_name not in names:
        return NodeReport(node_name, skipped=f"{run.case.key} runs on {', '.join(names)}")
    rank = names.index(node_name)
    now = datetime.now(UTC).isoformat()

    def refused(reason: str) -> NodeReport:
        board.post(NodeState(GAVE_UP, reason=reason))
        return NodeReport(node_name, NodeShare(node_name, rank, None, "", reason, True, now, now))

    here = os.environ.get(NODE_ENV)
    if here and here != node_name:
        return refused(
            f"{node_name}: its task ran on the worker of node {here}; give each node's worker only that node's "
            f"queue ({planned.nodes[rank].queue})"
        )
    if preflight is not None and (blocker := preflight.blocker(names)):
        return refused(blocker)
    health = check_gpus(planned, ids, runner, [planned.nodes[rank]])  # this node's own GPUs, read here
    if health.refusal is not None:
        refusal = refused(health.refusal)
        return replace(refusal, gpu_health=health)
    runtime = None
    try:
        runtime = runner.make_runtime(planned.runtime, planned.cluster)
        job = _job(planned, runtime, ids)
    except Exception as exc:  # noqa: BLE001 - the engine is unreachable, ...: this node gives up, with the reason
        return refused(runner.describe_error(runtime, [planned.nodes[rank]], exc))
    samples = GpuSamples() if planned.runtime == "docker" else None
    share = run_node_share(
        job,
        node_name,
        board,
        lambda i, files: runtime.start_node(job, i, files, samples=samples),
        settings or GangSettings(),
    )
    full = log_disk_full(job.log_dir) if job.log_dir.is_dir() else None
    node_log, log_error = _node0_log(share) if rank == 0 else (None, None)
    probe = None
    if probes is not None and planned.image is not None:
        try:
            probe = probes.get(
                planned.nodes[rank], planned.image, case_gpu_ids(environment_key(planned), planned.nodes)[rank]
            )
        except Exception as exc:  # noqa: BLE001 - the environment never fails the case
            log.warning("environment probe on %s failed: %s: %s", node_name, type(exc).__name__, exc)
    return NodeReport(
        node_name,
        share,
        ran_on=here,
        gpu_memory_peak_mb=samples.peak_mb if samples else None,
        gpu_power=tuple(samples.power) if samples else (),
        launch_spec=launch_spec(runtime, job, planned),  # this node's own container's image, as its engine says
        log=node_log,
        log_error=log_error,
        probe=probe,
        oversubscription=job.oversubscription,
        disk_full=full,
        gpu_health=health,
        gpu_clocks=tuple(samples.clocks) if samples else (),
    )


def _node0_log(share: NodeShare) -> tuple[str | None, str | None]:
    """Node 0's log, to travel to ``collect_case`` (its text, or why it cannot)."""
    path = Path(share.log_path)
    if not path.is_file():
        return None, None
    data = path.read_bytes()
    if len(data) > MAX_LOG_BYTES:
        return None, f"node 0's log is {len(data)} bytes, more than {MAX_LOG_BYTES} can travel"
    return data.decode(errors="replace"), None


@dataclass(frozen=True)
class _Reported:
    """A node's GPU readings as its report carried them (what :func:`case_outcome` reads of a sampler)."""

    peak_mb: float | None
    power: list[tuple[float, float]]
    clocks: list[ClockSample]


def collect_case(
    planned: PlannedRun, reports: Mapping[str, NodeReport | None], ids: RunIds
) -> tuple[CaseOutcome, LaunchSpec | None]:
    """The routed strategy's end: the case's outcome from its nodes' reports (a node task that failed or never
    ran reads as None), built as the central strategy builds it; node 0's log is written where the parser reads
    it (this run's log folder)."""
    run = planned.run
    names = planned.node_names
    got = {n: r for n in names if (r := reports.get(n)) is not None and r.share is not None}
    shares: dict[str, NodeShare | None] = {n: (got[n].share if n in got else None) for n in names}
    failure = case_failure(shares)
    now = datetime.now(UTC)
    done = [s for s in shares.values() if s is not None]
    started = min((datetime.fromisoformat(s.started_at) for s in done), default=now)
    finished = max((datetime.fromisoformat(s.finished_at) for s in done), default=now)
    ends = []
    for rank, name in enumerate(names):
        share, report = shares[name], got.get(name)
        path = share.log_path if share else ""
        if rank == 0 and report is not None and report.log is not None:  # node 0's log, where the parser reads it
            central = case_log_dir(ids, run) / "node0.log"
            central.parent.mkdir(parents=True, exist_ok=True)
            central.write_text(report.log)
            path = str(central)
        elif rank == 0 and report is not None and report.log_error and not failure:
            failure = report.log_error
        ends.append(NodeEnd(name, rank, share.exit_code if share else None, path))
    outcome = case_outcome(
        ends,
        failure,
        started,
        finished,
        oversubscription=next((r.oversubscription for r in got.values() if r.oversubscription), None),
        disk_full=next((r.disk_full for r in got.values() if r.disk_full), None),
        samples={n: _Reported(r.gpu_memory_peak_mb, list(r.gpu_power), list(r.gpu_clocks)) for n, r in got.items()},
        gpu_health=_case_health(planned, reports),
    )
    return outcome, merged_launch_spec(got)


def _case_health(planned: PlannedRun, reports: Mapping[str, NodeReport | None]) -> GpuHealth | None:
    """The case's GPU health from its nodes' reports (each node's task read its own), in rank order; None when no
    node reported one."""
    parts = [h for n in planned.node_names if (r := reports.get(n)) is not None and (h := r.gpu_health) is not None]
    return merged(parts, planned.health) if parts else None


def merged_launch_spec(reports: Mapping[str, NodeReport]) -> LaunchSpec | None:
    """The case's launch spec from its nodes' reports: each node as its own task saw it (the image its engine
    ran), the nodes whose task said nothing as another node's task planned them; None if none reported one."""
    views = {name: r.launch_spec for name, r in reports.items() if r.launch_spec is not None}
    if not views:
        return None
    return next(iter(views.values())).merged(views)


def reported_environment(planned: PlannedRun, reports: Mapping[str, NodeReport | None]) -> Environment | None:
    """The case's environment from the probes its node tasks ran (as the central capture combines them); None
    when a node did not report one (or the case has no image: the local runtime)."""
    key = environment_key(planned)
    probes = [r.probe for n in planned.node_names if (r := reports.get(n)) is not None and r.probe is not None]
    if key.image is None or len(probes) < len(planned.nodes):
        return None
    return with_settings(environment_of(key, probes, case_gpu_ids(key, planned.nodes)), planned)
