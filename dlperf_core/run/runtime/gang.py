"""One node's share of a case run, when every node's work runs in a task on that node's own worker.

With one Celery worker per GPU node (the node workers of docker-compose.yaml), a case's containers are not all
started by one task: the task for node X runs on node X's queue and starts node X's container through the
node's own Docker socket. The nodes of a case meet on a *board* where each posts its state and reads its peers'
(the DAG's board is XCom, :mod:`dlperf_airflow.node_step`):

    joined ──(every node joined)──▶ sshd nodes start, post ``started`` ──▶ launchers start, post ``started``
           ──▶ supervise ──▶ ``exited`` (exit code, OOM) or ``gave_up`` (a reason, nothing started)

Node 0 (rank 0) watches every peer; every other node watches node 0 alone (and, an sshd node, the launchers it
serves), so a case of N nodes reads 2 x (N-1) posts a poll, not N x (N-1) (each read is a request to Airflow's
api-server; docs/benchmarks.md (h)). Node 0 waits until every peer joined and posts ``gang_complete``; the others wait
for that. Every node then runs the shared supervisor (:func:`~dlperf_core.run.runtime.base.supervise`) over its own
container and a view of each peer it watches, read off the board (:class:`PeerProcess`): the first non-zero exit
anywhere stops every node (a failure node 0 sees, node 0 posts before it stops its own container, and the others
see node 0 end), the case's timeout holds on every node, node 0 (whose log the parser reads) keeps the
no-progress watchdog, and an sshd node is done when the launchers exited 0. A peer that does not join within
``join_s`` fails the case with its name instead of hanging it; every node re-posts its state every ``beat_s``,
and a peer whose posts stop for ``stale_s`` (its worker died) fails the case as lost.

A post is a :class:`NodeState`; a board that keeps posts outside the process (XCom) stores its JSON form
(:meth:`~dlperf_core.json_form.JsonForm.to_json`) and reads it back with ``NodeState.from_json``.

mpirun's per-case ssh keys are made where they are used: each node makes its own client and host key and
posts only the public halves; no private key leaves its node (:func:`dlperf_core.cluster.sshkeys.mesh_files`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal, Protocol

from dlperf_core.cluster.sshkeys import ContainerFile, NodeKeys, mesh_files, node_keys
from dlperf_core.json_form import JsonForm
from dlperf_core.model import PEER_LOST_EXIT, CaseJob, NodeProcess
from dlperf_core.run.runtime.base import supervise

JOINED: Final = "joined"
STARTED: Final = "started"
EXITED: Final = "exited"
GAVE_UP: Final = "gave_up"
Phase = Literal["joined", "started", "exited", "gave_up"]
GAVE_UP_EXIT = 1
"""What a peer that gave up (could not start, a peer never joined) reads as to the supervisor."""


@dataclass(frozen=True)
class NodeState(JsonForm):
    """A node's post on the board: its phase, its heartbeat, its public ssh keys (mpirun cases), how it exited or
    why it gave up."""

    phase: Phase
    beat: int = 0  # counts up with every post: a peer whose beat stops changing is lost
    client_pub: str | None = None  # mpirun cases: the public halves of this node's client and host keys
    host_pub: str | None = None
    exit_code: int | None = None  # exited
    oom_killed: bool = False  # exited: the kernel's OOM killer ended it
    done: bool = False  # exited: an sshd node stopped because the launchers finished (a success)
    reason: str | None = None  # gave_up: why; exited: the node's own failure
    gang_complete: bool = False  # joined, node 0's: every node joined (the other nodes wait for this post alone)


class Board(Protocol):
    """Where the nodes of one case run post their state and read each other's."""

    def post(self, state: NodeState) -> None:
        """Replace this node's state."""

    def read(self, node: str) -> NodeState | None:
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
    joined_at: str | None = None  # when this node saw every peer joined (None: it gave up before)
    exited_at: str | None = None  # when its supervisor saw the case end here, before its container was removed


class PeerProcess:
    """A peer node as the supervisor sees it: its exit as posted on the board (it stops itself), or lost when
    its posts stop for ``stale_s``."""

    def __init__(self, board: Board, node_name: str, stale_s: float = GangSettings.stale_s):
        self.node_name = node_name
        self.log_path = Path(os.devnull)  # its log grows on its own node; node 0 keeps the watchdog
        self.oom_killed = False
        self._board = board
        self._stale_s = stale_s
        self._beat: int | None = None
        self._beat_seen = time.monotonic()

    def poll(self) -> int | None:
        state = self._board.read(self.node_name)
        if state is not None:
            self.oom_killed = state.oom_killed
            if state.phase == EXITED:
                if state.done:
                    return 0
                return GAVE_UP_EXIT if state.exit_code is None else state.exit_code  # no code: ended all the same
            if state.phase == GAVE_UP:
                return GAVE_UP_EXIT
        beat = state.beat if state is not None else None
        now = time.monotonic()
        if beat != self._beat:
            self._beat, self._beat_seen = beat, now
        elif now - self._beat_seen > self._stale_s:
            return PEER_LOST_EXIT
        return None

    def kill(self) -> None:
        """Each node stops its own container when it sees the failure."""

    def close(self) -> None:
        """Nothing of the peer's is held here."""


class _Poster:
    """Posts this node's state (with its public keys) and re-posts it every ``beat_s`` (``tick``)."""

    def __init__(self, board: Board, keys: NodeKeys | None, beat_s: float):
        self._board, self._beat_s = board, beat_s
        self._keys = NodeState(JOINED)  # what every post carries: the public halves of this node's keys, if any
        if keys is not None:
            self._keys = NodeState(JOINED, client_pub=keys.client_public.decode(), host_pub=keys.host_public.decode())
        self._state = self._keys
        self._beat = 0
        self._sent = time.monotonic()

    def __call__(
        self,
        phase: Phase,
        *,
        exit_code: int | None = None,
        oom_killed: bool = False,
        done: bool = False,
        reason: str | None = None,
        gang_complete: bool = False,
    ) -> None:  # every state keeps the public keys: a late peer still finds them
        self._state = replace(
            self._keys,
            phase=phase,
            exit_code=exit_code,
            oom_killed=oom_killed,
            done=done,
            reason=reason,
            gang_complete=gang_complete,
        )
        self._send()

    def _send(self) -> None:
        self._beat += 1
        self._board.post(replace(self._state, beat=self._beat))
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
            self._post(EXITED, exit_code=code, oom_killed=self.proc.oom_killed)
        self._post.tick()  # the supervisor polls every node each round: this node's heartbeat rides on it
        return code

    def kill(self) -> None:
        self.proc.kill()

    def close(self) -> None:
        self.proc.close()


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _wait_for(
    board: Board, peers: list[str], phases: set[Phase], settings: GangSettings, what: str, post: _Poster
) -> tuple[dict[str, NodeState], str | None]:
    """Wait until every peer reached one of ``phases``; (their states, None) or ({}, the reason it cannot)."""
    deadline = time.monotonic() + settings.join_s
    while True:
        post.tick()
        states = {p: board.read(p) for p in peers}
        quit_ = [
            (p, s)
            for p, s in states.items()
            if s is not None and s.phase in (GAVE_UP, EXITED) and s.phase not in phases
        ]
        if quit_:
            p, s = quit_[0]
            return {}, f"{p} gave up before this node started: {s.reason or 'it ended'}"
        reached = {p: s for p, s in states.items() if s is not None and s.phase in phases}
        late = [p for p in peers if p not in reached]
        if not late:
            return reached, None
        if time.monotonic() > deadline:
            return {}, (
                f"{', '.join(late)} did not {what} within {settings.join_s:g} s "
                "(is a worker listening on that node's queue?)"
            )
        time.sleep(settings.poll_s)


def _wait_for_gang(
    board: Board, leader: str, peers: list[str], settings: GangSettings, post: _Poster, states: bool
) -> tuple[dict[str, NodeState], str | None]:
    """A node other than node 0: wait until node 0 says every node joined (``gang_complete``, or it started); then
    (their states when ``states``: mpirun's public keys, read once, None) or ({}, the reason it cannot)."""
    deadline = time.monotonic() + settings.join_s
    while True:
        post.tick()
        lead = board.read(leader)
        if lead is not None and lead.phase == GAVE_UP:
            return {}, f"{leader} gave up before this node started: {lead.reason or 'it ended'}"
        if lead is not None and (lead.gang_complete or lead.phase in (STARTED, EXITED)):
            if not states:
                return {}, None
            return {p: s for p in peers if (s := board.read(p)) is not None}, None
        if time.monotonic() > deadline:
            seen = {p: board.read(p) for p in peers}
            late = [p for p, s in seen.items() if s is None] or [leader]
            return {}, (
                f"{', '.join(late)} did not join within {settings.join_s:g} s "
                "(is a worker listening on that node's queue?)"
            )
        time.sleep(settings.poll_s)


def _ssh_files(job: CaseJob, me: int, mine: NodeKeys, states: dict[str, NodeState]) -> tuple[ContainerFile, ...]:
    """This node's ssh files (mpirun cases) from its own keys and its peers' public halves, in place of the
    files the job was built with (ValueError: a peer posted none)."""
    ssh_dir = str(Path(job.containers[me].files[0].path).parent)
    clients, hosts = [], []
    for i, launch in enumerate(job.launches):  # in rank order: the same files on every node
        if i == me:
            clients.append(mine.client_public)
            hosts.append(mine.host_public)
            continue
        peer = states[launch.node.name]
        if peer.client_pub is None or peer.host_pub is None:
            raise ValueError(f"{launch.node.name} posted no public ssh keys (is its dlperf older than this one?)")
        clients.append(peer.client_pub.encode())
        hosts.append(peer.host_pub.encode())
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
    post = _Poster(board, mine, settings.beat_s)
    post(JOINED)

    joined_at: str | None = None

    def give_up(reason: str) -> NodeShare:
        post(GAVE_UP, reason=reason)
        return NodeShare(node_name, launch.node_rank, None, str(log_path), reason, True, started_at, _now(), joined_at)

    leader = next(l.node.name for l in job.launches if l.node_rank == 0)
    if node_name == leader:
        states, why = _wait_for(board, names, {JOINED, STARTED, EXITED}, settings, "join", post)
    else:
        states, why = _wait_for_gang(board, leader, names, settings, post, states=mine is not None)
    if why:
        return give_up(why)
    joined_at = _now()
    if node_name == leader:
        post(JOINED, gang_complete=True)
    try:
        files = _ssh_files(job, me, mine, states) if mine is not None else None
    except ValueError as exc:
        return give_up(str(exc))
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
    post(STARTED)
    watched = [  # node 0 watches every peer; another node node 0 and, an sshd node, the launchers it serves
        l for l in peers if node_name == leader or l.node.name == leader or (launch.role == "sshd" and l.role != "sshd")
    ]
    procs: list[NodeProcess] = [
        _Published(proc, post),
        *(PeerProcess(board, l.node.name, settings.stale_s) for l in watched),
    ]
    services = frozenset(k for k, l in enumerate([launch, *watched]) if l.role == "sshd")
    own_code = None
    failure: str | None = None
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
        exited_at = _now()
        if failure is not None and own_code is None:  # a peer's failure: say so before stopping the container
            post(EXITED)
        proc.kill()
        code = proc.poll()
        oom = proc.oom_killed
        proc.close()
    own = failure is not None and (
        own_code not in (None, 0) or failure.startswith(("timeout:", "watchdog:", f"{node_name}:"))
    )
    done = failure is None and launch.role == "sshd"  # stopped because the launchers finished
    post(EXITED, exit_code=code, oom_killed=oom, done=done, reason=failure if own else None)
    return NodeShare(
        node_name, launch.node_rank, code, str(log_path), failure, own, started_at, _now(), joined_at, exited_at
    )


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
