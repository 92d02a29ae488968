"""What every runtime does with one case run: start all nodes at once, supervise, collect logs, clean up.

A runtime starts one *node process* per node (a local process group or a container); the supervisor below
is shared: it waits for all of them, stops the rest as soon as one fails, enforces the case's timeout and
the no-progress watchdog, and always cleans up. Runtimes differ only in how a node process is started,
polled, killed and removed.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from dlperf_core.cluster.clock_events import ClockSample
from dlperf_core.cluster.gpu_health import GpuHealth
from dlperf_core.model import (
    PEER_LOST_EXIT,
    SSH_SETUP_EXIT,
    CaseInPhases,
    CaseJob,
    CaseOutcome,
    NodeOutcome,
    NodeProcess,
)


class GpuReadings(Protocol):
    """What a node's GPU samples said (:class:`~dlperf_core.cluster.gpu_sampling.GpuSamples`, or a node task's report of
    them)."""

    @property
    def peak_mb(self) -> float | None: ...

    @property
    def power(self) -> list[tuple[float, float]]: ...

    @property
    def clocks(self) -> list[ClockSample]: ...


def with_gpu_samples(outcome: CaseOutcome, samples: Mapping[str, GpuReadings]) -> CaseOutcome:
    """``outcome`` with what its nodes' GPU samplers saw (``{node: GpuSamples}``): the highest memory used on
    one GPU, each node's power series and each node's GPU clocks (None where nothing was sampled: CPU nodes, no
    nvidia-smi)."""
    peaks = [s.peak_mb for s in samples.values() if s.peak_mb is not None]
    power = {node: s.power for node, s in samples.items() if s.power}
    clocks = {node: s.clocks for node, s in samples.items() if s.clocks}
    outcome.gpu_memory_peak_mb = max(peaks) if peaks else None
    outcome.gpu_power = power or None
    outcome.gpu_clocks = clocks or None
    return outcome


def describe_exit(node: str, code: int, oom_killed: bool = False) -> str:
    """A human reason for a non-zero exit (``oom_killed``: the runtime saw the kernel's OOM killer end it)."""
    if oom_killed:
        return f"{node}: out of memory: killed by the kernel's OOM killer (exit code {code})"
    if code == PEER_LOST_EXIT:
        return f"{node}: its task stopped reporting (worker lost?)"
    if code == SSH_SETUP_EXIT:
        return f"{node}: ssh setup failed: another node's sshd did not answer (exit code {code})"
    if code in (137, -9):
        return f"{node} was killed (exit code {code})"
    if code < 0:
        return f"{node} ended by signal {-code}"
    if code > 128:
        return f"{node} ended by signal {code - 128} (exit code {code})"
    return f"{node} exited with code {code}"


class Supervisor:
    """What :func:`supervise` checks, one look at a time (:meth:`check`), for a caller that polls."""

    def __init__(
        self,
        procs: list[NodeProcess],
        *,
        timeout_s: float,
        watchdog_s: float | None,
        clock: Callable[[], float] = time.monotonic,
        services: frozenset[int] = frozenset(),
    ) -> None:
        self.procs, self.timeout_s, self.watchdog_s = procs, timeout_s, watchdog_s
        self.clock, self.services = clock, services
        self.start = self.last_progress = clock()
        self.sizes = {id(p): -1 for p in procs}

    def check(self) -> tuple[bool, str | None]:
        """(ended, failure): (False, None) while every node runs well."""
        procs, services = self.procs, self.services
        codes = [p.poll() for p in procs]
        failed = [(p, c) for p, c in zip(procs, codes) if c not in (None, 0)]
        if failed:
            p, code = failed[0]
            return True, describe_exit(p.node_name, code, p.oom_killed)
        if all(c == 0 for i, c in enumerate(codes) if i not in services):
            return True, None
        ended = [procs[i] for i in services if codes[i] is not None]
        if ended:
            return True, f"{ended[0].node_name}: its sshd ended before the launcher finished"
        now = self.clock()
        for p in procs:
            size = p.log_path.stat().st_size if p.log_path.exists() else 0
            if size != self.sizes[id(p)]:
                self.sizes[id(p)] = size
                self.last_progress = now
        if now - self.start > self.timeout_s:
            return True, f"timeout: the case ran longer than {self.timeout_s:g} s"
        if self.watchdog_s is not None and now - self.last_progress > self.watchdog_s:
            return True, f"watchdog: no log progress for {self.watchdog_s:g} s"
        return False, None


def supervise(
    procs: list[NodeProcess],
    *,
    timeout_s: float,
    watchdog_s: float | None,
    poll_s: float = 0.2,
    clock: Callable[[], float] = time.monotonic,
    services: frozenset[int] = frozenset(),
) -> str | None:
    """Wait for every node process; return None on success or the reason it failed.

    The first non-zero exit stops the others (a torchrun whose peer died would wait for its rendezvous
    timeout). The watchdog fails the run when no node's log has grown for ``watchdog_s`` seconds.
    ``services`` are the indices of processes that serve the others (mpirun's sshd): the case is done when
    every other process exited 0, and a service that ends before that fails the case.
    """
    supervisor = Supervisor(procs, timeout_s=timeout_s, watchdog_s=watchdog_s, clock=clock, services=services)
    while True:
        done, failure = supervisor.check()
        if done:
            return failure
        time.sleep(poll_s)


_PROBE_BYTES = 4096


def log_disk_full(log_dir: Path) -> str | None:
    """A reason naming the full disk if ``log_dir`` cannot take one more block (ENOSPC), else None.

    Whatever writes the logs (the processes, or the docker runtime's log stream) only dies of a full disk (or silently lose lines), so
    after a case run the folder is probed with a real write instead of guessing from free-space figures.
    """
    probe = log_dir / ".dlperf-space-probe"
    try:
        with probe.open("wb") as out:
            out.write(b"\0" * _PROBE_BYTES)
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"log disk full: {os.strerror(exc.errno)} (ENOSPC) writing in {log_dir}"
        return None
    finally:
        probe.unlink(missing_ok=True)
    return None


@dataclass(frozen=True)
class NodeEnd:
    """How one node of a case run ended, as the worker that ran it saw it (every node from one worker, or each
    node's own worker under node routing)."""

    node: str
    rank: int
    exit_code: int | None
    log_path: str


def case_outcome(
    ends: Iterable[NodeEnd],
    failure: str | None,
    started: datetime,
    finished: datetime,
    *,
    oversubscription: str | None = None,
    disk_full: str | None = None,
    samples: Mapping[str, GpuReadings] | None = None,
    gpu_health: GpuHealth | None = None,
) -> CaseOutcome:
    """The one outcome builder of a case run, whichever way its nodes ran: each node's end in rank order, the
    failure (a full log disk named first: it is the real cause of whatever the processes or the parser report),
    the GPU samples (:func:`with_gpu_samples`), the job's oversubscription and the health of its GPUs before it
    started (:mod:`dlperf_core.cluster.gpu_health`)."""
    nodes = [NodeOutcome(e.node, e.rank, e.exit_code, e.log_path) for e in sorted(ends, key=lambda e: e.rank)]
    if disk_full:
        failure = disk_full if not failure else f"{disk_full}; {failure}"
    outcome = CaseOutcome(started, finished, nodes, failure, oversubscription=oversubscription, gpu_health=gpu_health)
    return with_gpu_samples(outcome, samples) if samples is not None else outcome


class CaseRunning:
    """One case run on one worker, in three phases: :meth:`submit` starts every node (sshd nodes, mpirun's remote
    side, first), :meth:`poll` looks once (True: it ended, however), :meth:`collect` stops and removes every node and
    builds the outcome (:func:`case_outcome`). :func:`run_to_end` runs the phases back to back; a runtime whose jobs
    wait in a scheduler's queue can hand the time between polls to something else (a deferred task)."""

    def __init__(
        self,
        job: CaseJob,
        start: Callable[[int], NodeProcess],
        *,
        poll_s: float = 0.2,
        samples: Mapping[str, GpuReadings] | None = None,
        on_collect: Callable[[], None] | None = None,
    ) -> None:
        self.job = job
        self.poll_s = poll_s
        self._start = start
        self._samples = samples
        self._on_collect = on_collect
        self._order = sorted(range(len(job.launches)), key=lambda i: job.launches[i].role != "sshd")
        self._procs: list[NodeProcess] = []
        self._supervisor: Supervisor | None = None
        self.failure: str | None = None
        self.ended = False
        self.started = datetime.now(UTC)

    def submit(self) -> None:
        """Start every node; a node that cannot start ends the case with the reason (never raises)."""
        self.job.log_dir.mkdir(parents=True, exist_ok=True)
        self.started = datetime.now(UTC)
        try:
            for i in self._order:
                self._procs.append(self._start(i))
        except Exception as exc:  # noqa: BLE001 - a node that cannot even start fails this case, not the service
            which = self.job.launches[self._order[len(self._procs)]].node.name
            self.failure, self.ended = f"could not start node {which}: {type(exc).__name__}: {exc}", True
            return
        services = frozenset(k for k, i in enumerate(self._order) if self.job.launches[i].role == "sshd")
        self._supervisor = Supervisor(
            self._procs, timeout_s=self.job.timeout_s, watchdog_s=self.job.watchdog_s, services=services
        )

    def poll(self) -> bool:
        """One look at every node; True once the case ended (its failure, if any, in :attr:`failure`)."""
        if self.ended or self._supervisor is None:
            self.ended = True
            return True
        try:
            done, self.failure = self._supervisor.check()
        except Exception as exc:  # noqa: BLE001 - the runtime failed mid-run: this case fails with it
            done, self.failure = True, f"supervising failed: {type(exc).__name__}: {exc}"
        self.ended = done
        return done

    def collect(self) -> CaseOutcome:
        """Stop and remove every node (always), then the case's outcome."""
        codes = []
        try:
            for p in self._procs:
                p.kill()
            for p in self._procs:
                codes.append(p.poll())
                p.close()
        finally:
            if self._on_collect is not None:
                self._on_collect()
        job = self.job
        ends = [
            NodeEnd(p.node_name, job.launches[i].node_rank, code, str(p.log_path))
            for i, p, code in zip(self._order, self._procs, codes)
        ] or [  # nothing started: each node's log, where it would have been
            NodeEnd(l.node.name, l.node_rank, None, str(job.log_dir / f"node{l.node_rank}.log")) for l in job.launches
        ]
        return case_outcome(
            ends,
            self.failure,
            self.started,
            datetime.now(UTC),
            oversubscription=job.oversubscription,
            disk_full=log_disk_full(job.log_dir) if job.log_dir.is_dir() else None,
            samples=self._samples,
        )


def run_to_end(running: CaseInPhases) -> CaseOutcome:
    """Submit, poll until the case ends, collect: a case run that holds its worker throughout."""
    try:
        running.submit()
        while not running.poll():
            time.sleep(running.poll_s)
    finally:
        outcome = running.collect()
    return outcome


def run_supervised(job: CaseJob, start: Callable[[int], NodeProcess], *, poll_s: float = 0.2) -> CaseOutcome:
    """Start every node of ``job`` (``start(i)`` starts node i), supervise, and always clean up."""
    return run_to_end(CaseRunning(job, start, poll_s=poll_s))
