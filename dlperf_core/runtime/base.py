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
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from dlperf_core.gpu_sampling import GpuSamples
from dlperf_core.model import (
    PEER_LOST_EXIT,
    SSH_SETUP_EXIT,
    CaseJob,
    CaseOutcome,
    NodeOutcome,
    NodeProcess,
)


def with_gpu_samples(outcome: CaseOutcome, samples: Mapping[str, GpuSamples]) -> CaseOutcome:
    """``outcome`` with what its nodes' GPU samplers saw (``{node: GpuSamples}``): the highest memory used on
    one GPU, and each node's power series (None where nothing was sampled: CPU nodes, no nvidia-smi)."""
    peaks = [s.peak_mb for s in samples.values() if s.peak_mb is not None]
    power = {node: s.power for node, s in samples.items() if s.power}
    outcome.gpu_memory_peak_mb = max(peaks) if peaks else None
    outcome.gpu_power = power or None
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
    start = clock()
    last_progress = start
    sizes = {id(p): -1 for p in procs}
    while True:
        codes = [p.poll() for p in procs]
        failed = [(p, c) for p, c in zip(procs, codes) if c not in (None, 0)]
        if failed:
            p, code = failed[0]
            return describe_exit(p.node_name, code, p.oom_killed)
        if all(c == 0 for i, c in enumerate(codes) if i not in services):
            return None
        ended = [procs[i] for i in services if codes[i] is not None]
        if ended:
            return f"{ended[0].node_name}: its sshd ended before the launcher finished"
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


def run_supervised(job: CaseJob, start: Callable[[int], NodeProcess], *, poll_s: float = 0.2) -> CaseOutcome:
    """Start every node of ``job`` (``start(i)`` starts node i), supervise, and always clean up."""
    job.log_dir.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    procs: list[NodeProcess] = []
    failure: str | None = None
    # sshd (mpirun's remote side) first, then the launchers; node 0 also waits for the sshds to answer.
    order = sorted(range(len(job.launches)), key=lambda i: job.launches[i].role != "sshd")
    try:
        for i in order:
            procs.append(start(i))
        services = frozenset(k for k, i in enumerate(order) if job.launches[i].role == "sshd")
        failure = supervise(procs, timeout_s=job.timeout_s, watchdog_s=job.watchdog_s, poll_s=poll_s, services=services)
    except Exception as exc:  # noqa: BLE001 - a node that cannot even start fails this case, not the service
        which = job.launches[order[len(procs)]].node.name if len(procs) < len(order) else "?"
        failure = f"could not start node {which}: {type(exc).__name__}: {exc}"
    finally:
        for p in procs:
            p.kill()
        codes = []
        for p in procs:
            codes.append(p.poll())
            p.close()
    outcomes = sorted(
        (
            NodeOutcome(node=p.node_name, rank=job.launches[i].node_rank, exit_code=code, log_path=str(p.log_path))
            for i, p, code in zip(order, procs, codes)
        ),
        key=lambda o: o.rank,
    )
    if not outcomes:
        outcomes = [
            NodeOutcome(
                node=l.node.name, rank=l.node_rank, exit_code=None, log_path=str(job.log_dir / f"node{l.node_rank}.log")
            )
            for l in job.launches
        ]
    full = log_disk_full(job.log_dir) if job.log_dir.is_dir() else None
    if full:  # the real cause of whatever the processes or the parser would report
        failure = full if not failure else f"{full}; {failure}"
    return CaseOutcome(started, datetime.now(UTC), outcomes, failure, oversubscription=job.oversubscription)
