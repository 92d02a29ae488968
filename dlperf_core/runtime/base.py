"""What every runtime does with one case run: start all nodes at once, supervise, collect logs, clean up.

A runtime starts one *node process* per node (a local process group or a container); the supervisor below
is shared: it waits for all of them, stops the rest as soon as one fails, enforces the case's timeout and
the no-progress watchdog, and always cleans up. Runtimes differ only in how a node process is started,
polled, killed and removed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Protocol

from dlperf_core.frameworks.base import NodeLaunch
from dlperf_core.container import ContainerSpec


class NodeProcess(Protocol):
    """A running node of a case: a process group or a container."""

    node_name: str
    log_path: Path

    def poll(self) -> int | None:
        """Exit code, or None while running."""

    def kill(self) -> None:
        """Stop it now (idempotent)."""

    def close(self) -> None:
        """Release everything: remove the container, close files (idempotent)."""


@dataclass(frozen=True)
class CaseJob:
    """Everything a runtime needs to execute one case run."""

    run_label: str  # unique, docker-name-safe id of this case run
    launches: tuple[NodeLaunch, ...]
    containers: tuple[ContainerSpec, ...]  # one per launch (used by container runtimes)
    log_dir: Path
    timeout_s: float
    watchdog_s: float | None


@dataclass
class NodeOutcome:
    node: str
    rank: int
    exit_code: int | None
    log_path: str


@dataclass
class CaseOutcome:
    """How a case run ended, before its log is parsed."""

    started_at: datetime
    finished_at: datetime
    nodes: list[NodeOutcome]
    failure: str | None  # runtime-level reason (exit code, timeout, watchdog, start error)

    @property
    def log_path(self) -> str | None:
        """The log the parser reads: node 0's (rank 0 prints the figures)."""
        return self.nodes[0].log_path if self.nodes else None

    def to_dict(self) -> dict:
        return {
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat(),
            "nodes": [vars(n) for n in self.nodes],
            "failure": self.failure,
            "log_path": self.log_path,
        }


def describe_exit(node: str, code: int) -> str:
    """A human reason for a non-zero exit."""
    if code in (137, -9):
        return f"{node} was killed (exit code {code})"
    if code < 0:
        return f"{node} ended by signal {-code}"
    if code > 128:
        return f"{node} ended by signal {code - 128} (exit code {code})"
    return f"{node} exited with code {code}"


def supervise(
    procs: list[NodeProcess],
    *,
    timeout_s: float,
    watchdog_s: float | None,
    poll_s: float = 0.2,
    clock: Callable[[], float] = time.monotonic,
) -> str | None:
    """Wait for every node process; return None on success or the reason it failed.

    The first non-zero exit stops the others (a torchrun whose peer died would wait for its rendezvous
    timeout). The watchdog fails the run when no node's log has grown for ``watchdog_s`` seconds.
    """
    start = clock()
    last_progress = start
    sizes = {id(p): -1 for p in procs}
    while True:
        codes = [p.poll() for p in procs]
        failed = [(p, c) for p, c in zip(procs, codes) if c not in (None, 0)]
        if failed:
            p, code = failed[0]
            return describe_exit(p.node_name, code)  # type: ignore[arg-type]
        if all(c == 0 for c in codes):
            return None
        now = clock()
        for p in procs:
            size = p.log_path.stat().st_size if p.log_path.exists() else 0
            if size != sizes[id(p)]:
                sizes[id(p)] = size
                last_progress = now
        if now - start > timeout_s:
            return f"timeout: the case ran longer than {timeout_s:g} s"
        if watchdog_s is not None and now - last_progress > watchdog_s:
            return f"watchdog: no log progress for {watchdog_s:g} s"
        time.sleep(poll_s)


def run_supervised(
    job: CaseJob, start: Callable[[int], NodeProcess], *, poll_s: float = 0.2
) -> CaseOutcome:
    """Start every node of ``job`` (``start(i)`` starts node i), supervise, and always clean up."""
    job.log_dir.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc)
    procs: list[NodeProcess] = []
    failure: str | None = None
    try:
        for i in range(len(job.launches)):
            procs.append(start(i))
        failure = supervise(procs, timeout_s=job.timeout_s, watchdog_s=job.watchdog_s, poll_s=poll_s)
    except Exception as exc:  # a node that cannot even start fails this case, not the service
        failure = f"could not start node {len(procs)}: {type(exc).__name__}: {exc}"
    finally:
        for p in procs:
            p.kill()
        codes = []
        for p in procs:
            codes.append(p.poll())
            p.close()
    outcomes = [
        NodeOutcome(node=p.node_name, rank=i, exit_code=code, log_path=str(p.log_path))
        for i, (p, code) in enumerate(zip(procs, codes))
    ]
    if not outcomes:
        outcomes = [
            NodeOutcome(node=l.node.name, rank=l.node_rank, exit_code=None, log_path=str(job.log_dir / f"node{l.node_rank}.log"))
            for l in job.launches
        ]
    return CaseOutcome(started, datetime.now(timezone.utc), outcomes, failure)
