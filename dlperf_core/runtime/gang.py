"""One node's share of a case run, when every node's work runs in a task on that node's own worker.

With one Celery worker per GPU node (the node workers of docker-compose.yaml), a case's containers are not all
started by one task: the task for node X runs on node X's queue and starts node X's container through the
node's own Docker socket. The nodes of a case meet on a *board* where each posts its state and reads its peers'
(the DAG's board is XCom, :mod:`dlperf_airflow.node_step`):

    joined ──(every node joined)──▶ sshd nodes start, post ``started`` ──▶ launchers start, post ``started``
           ──▶ supervise ──▶ ``exited`` (exit code, OOM) or ``gave_up`` (a reason, nothing started)

Every node then runs the shared supervisor (:func:`~dlperf_core.runtime.base.supervise`) over its own
container and a view of each peer read off the board (:class:`PeerProcess`): the first non-zero exit anywhere
stops every node, the case's timeout holds on every node, node 0 (whose log the parser reads) keeps the
no-progress watchdog, and an sshd node is done when the launchers exited 0. A peer that does not join within
``join_s`` fails the case with its name instead of hanging it; every node re-posts its state every ``beat_s``,
and a peer whose posts stop for ``stale_s`` (its worker died) fails the case as lost.

mpirun's per-case ssh keys are made where they are used: each node makes its own client and host key and
posts only the public halves; no private key leaves its node (:func:`dlperf_core.sshkeys.mesh_files`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from dlperf_core.model import PEER_LOST_EXIT, CaseJob, NodeProcess
from dlperf_core.runtime.base import supervise
from dlperf_core.sshkeys import ContainerFile, NodeKeys, mesh_files, node_keys

JOINED, STARTED, EXITED, GAVE_UP = "joined", "started", "exited", "gave_up"
GAVE_UP_EXIT = 1
"""What a peer that gave up (could not start, a peer never joined) reads as to the supervisor."""

State = dict[str, Any]
"""A node's state on the board, JSON: phase, beat, its public keys, how it exited or why it gave up."""


class Board(Protocol):
    """Where the nodes of one case run post their state and read each other's."""

    def post(self, state: State) -> None:
        """Replace this node's state."""

    def read(self, node: str) -> State | None:
        """A peer's latest state; None before it posted anything."""


@dataclass(frozen=True)
class GangSettings:
    join_s: float = 600.0  # how long a node waits for its peers to join (their tasks to start)
    poll_s: float = 1.0
    beat_s: float = 10.0  # a node re-posts its state this often while it waits or runs
    stale_s: float = 120.0  # a peer that posted nothing new for this long is lost


@dataclass
class NodeShare:
    """How one node's share of a case run ended."""

    node: str
    rank: int
    exit_code: int | None
    log_path: str
    failure: str | None  # how this node saw the case end; None: success
    own: bool  # the failure is this node's own (its container, its start, its timeout), not a peer's
    started_at: str
    finished_at: str


class PeerProcess:
    """A peer node as the supervisor sees it: its exit as posted on the board (it stops itself), or lost when
    its posts stop for ``stale_s``."""

    def __init__(self, board: Board, node_name: str, stale_s: float = GangSettings.stale_s):
        self.node_name = node_name
        self.log_path = Path(os.devnull)  # its log grows on its own node; node 0 keeps the watchdog
        self.oom_killed = False
        self._board = board
        self._stale_s = stale_s
        self._beat: object = None
        self._beat_seen = time.monotonic()

    def poll(self) -> int | None:
        state = self._board.read(self.node_name) or {}
        self.oom_killed = bool(state.get("oom_killed"))
        if state.get("phase") == EXITED:
            return 0 if state.get("done") else int(state["exit_code"])
        if state.get("phase") == GAVE_UP:
            return GAVE_UP_EXIT
        now = time.monotonic()
        if state.get("beat") != self._beat:
            self._beat, self._beat_seen = state.get("beat"), now
        elif now - self._beat_seen > self._stale_s:
            return PEER_LOST_EXIT
        return None

    def kill(self) -> None:
        """Each node stops its own container when it sees the failure."""

    def close(self) -> None:
        """Nothing of the peer's is held here."""


class _Poster:
    """Posts this node's state (with its public keys) and re-posts it every ``beat_s`` (``tick``)."""

    def __init__(self, board: Board, keys: dict[str, str], beat_s: float):
        self._board, self._keys, self._beat_s = board, keys, beat_s
        self._state: State = {}
        self._beat = 0
        self._sent = time.monotonic()

    def __call__(self, **state: object) -> None:  # every state keeps the public keys: a late peer still finds them
        self._state = {**self._keys, **state}
        self._send()

    def _send(self) -> None:
        self._beat += 1
        self._board.post({**self._state, "beat": self._beat})
        self._sent = time.monotonic()

    def tick(self) -> None:
        if time.monotonic() - self._sent >= self._beat_s:
            self._send()


class _Published:
    """This node's own process, its exit posted on the board the moment the supervisor sees it (the peers wait
    for it: a launcher that is done must say so before its supervisor waits for theirs)."""

    def __init__(self, proc: NodeProcess, post: _Poster):
        self.proc, self._post, self._posted = proc, post, False
        self.node_name, self.log_path = proc.node_name, proc.log_path

    @property
    def oom_killed(self) -> bool:
        return self.proc.oom_killed

    def poll(self) -> int | None:
        code = self.proc.poll()
        if code is not None and not self._posted:
            self._posted = True
            self._post(phase=EXITED, exit_code=code, oom_killed=self.proc.oom_killed)
        self._post.tick()  # the supervisor polls every node each round: this node's heartbeat rides on it
        return code

    def kill(self) -> None:
        self.proc.kill()

    def close(self) -> None:
        self.proc.close()


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _wait_for(
    board: Board, peers: list[str], phases: set[str], settings: GangSettings, what: str, post: _Poster
) -> tuple[dict[str, State], str | None]:
    """Wait until every peer reached one of ``phases``; (their states, None) or ({}, the reason it cannot)."""
    deadline = time.monotonic() + settings.join_s
    while True:
        post.tick()
        states = {p: board.read(p) or {} for p in peers}
        quit_ = [
            (p, s) for p, s in states.items() if s.get("phase") in (GAVE_UP, EXITED) and s.get("phase") not in phases
        ]
        if quit_:
            p, s = quit_[0]
            return {}, f"{p} gave up before this node started: {s.get('reason') or 'it ended'}"
        late = [p for p, s in states.items() if s.get("phase") not in phases]
        if not late:
            return states, None
        if time.monotonic() > deadline:
            return {}, (
                f"{', '.join(late)} did not {what} within {settings.join_s:g} s "
                "(is a worker listening on that node's queue?)"
            )
        time.sleep(settings.poll_s)


def _ssh_files(
    job: CaseJob, me: int, mine: NodeKeys, own: dict[str, str], states: dict[str, State]
) -> tuple[ContainerFile, ...]:
    """This node's ssh files (mpirun cases) from its own keys and its peers' public halves, in place of the
    files the job was built with."""
    ssh_dir = str(Path(job.containers[me].files[0].path).parent)
    ranked = [own if i == me else states[l.node.name] for i, l in enumerate(job.launches)]  # same on every node
    clients = [s["client_pub"].encode() for s in ranked]
    hosts = [s["host_pub"].encode() for s in ranked]
    return mesh_files(ssh_dir, mine, clients, hosts)


def run_node_share(
    job: CaseJob,
    node_name: str,
    board: Board,
    start: Callable[[int, tuple[ContainerFile, ...] | None], NodeProcess],
    settings: GangSettings = GangSettings(),
) -> NodeShare:
    """Run ``node_name``'s part of ``job`` (``start(i, ssh_files)`` starts launch i here; ssh_files None: the
    job's own); always posts how it ended, and always stops and removes what it started."""
    me = next((i for i, l in enumerate(job.launches) if l.node.name == node_name), None)
    if me is None:
        raise ValueError(f"{job.run_label}: node {node_name} is not one of this case's nodes")
    launch = job.launches[me]
    peers = [l for l in job.launches if l.node.name != node_name]
    names = [l.node.name for l in peers]
    started_at = _now()
    log_path = job.log_dir / f"node{launch.node_rank}.log"
    mpi = bool(job.containers and job.containers[me].files)
    mine = node_keys(job.run_label) if mpi else None
    keys = {} if mine is None else {"client_pub": mine.client_public.decode(), "host_pub": mine.host_public.decode()}
    post = _Poster(board, keys, settings.beat_s)
    post(phase=JOINED)

    def give_up(reason: str) -> NodeShare:
        post(phase=GAVE_UP, reason=reason)
        return NodeShare(node_name, launch.node_rank, None, str(log_path), reason, True, started_at, _now())

    states, why = _wait_for(board, names, {JOINED, STARTED, EXITED}, settings, "join", post)
    if why:
        return give_up(why)
    files = _ssh_files(job, me, mine, keys, states) if mine is not None else None
    if launch.role != "sshd":  # mpirun reaches the sshds as soon as it starts: they go first
        sshds = [l.node.name for l in peers if l.role == "sshd"]
        _, why = _wait_for(board, sshds, {STARTED, EXITED}, settings, "start its sshd", post)
        if why:
            return give_up(why)
    job.log_dir.mkdir(parents=True, exist_ok=True)
    try:
        proc = start(me, files)
    except Exception as exc:  # noqa: BLE001 - a node that cannot start fails the case, with the reason
        return give_up(f"could not start node {node_name}: {type(exc).__name__}: {exc}")
    post(phase=STARTED)
    procs: list[NodeProcess] = [_Published(proc, post), *(PeerProcess(board, n, settings.stale_s) for n in names)]
    services = frozenset(k for k, l in enumerate([launch, *peers]) if l.role == "sshd")
    own_code = None
    try:
        failure = supervise(
            procs,
            timeout_s=job.timeout_s,
            watchdog_s=job.watchdog_s if launch.node_rank == 0 else None,
            poll_s=settings.poll_s,
            services=services,
        )
        own_code = proc.poll()
    except Exception as exc:  # noqa: BLE001 - the board or the engine failed mid-run
        failure = f"{node_name}: supervising failed: {type(exc).__name__}: {exc}"
    finally:
        proc.kill()
        code = proc.poll()
        oom = proc.oom_killed
        proc.close()
    own = failure is not None and (
        own_code not in (None, 0) or failure.startswith(("timeout:", "watchdog:", f"{node_name}:"))
    )
    done = failure is None and launch.role == "sshd"  # stopped because the launchers finished
    post(phase=EXITED, exit_code=code, oom_killed=oom, done=done, reason=failure if own else None)
    return NodeShare(node_name, launch.node_rank, code, str(log_path), failure, own, started_at, _now())


def case_failure(shares: dict[str, NodeShare | None]) -> str | None:
    """The case's failure from its nodes' shares: the first node's own failure (by when it ended), else node 0's
    view; a node whose share never came back (its task crashed or never ran) fails the case by name."""
    missing = [n for n, s in shares.items() if s is None]
    done = [s for s in shares.values() if s is not None]
    own = sorted((s for s in done if s.failure and s.own), key=lambda s: s.finished_at)
    if own:
        return own[0].failure
    rank0 = [s for s in done if s.rank == 0]
    if rank0 and rank0[0].failure:
        return rank0[0].failure
    if missing:
        return f"{', '.join(missing)}: the node's task did not report (worker lost, or the task never ran)"
    return None
