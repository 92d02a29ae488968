"""A case run as one share per node (node routing): real local processes, one thread per node standing in for
each node's task, meeting on a board. The real board (XCom between tasks on different Celery workers) is
exercised in tests/airflow_plugin/test_node_routing.py (XComBoard alone: test_node_step.py); here the board is a
dict of the posts' JSON forms (as XCom keeps them), the processes and the supervisor are real."""

import sys
import threading
import time

from dlperf_core.cluster.inventory import Node
from dlperf_core.cluster.sshkeys import ContainerFile
from dlperf_core.model import CaseJob, ContainerSpec, NodeLaunch
from dlperf_core.run.runtime.gang import (
    EXITED,
    GAVE_UP,
    STARTED,
    GangSettings,
    NodeShare,
    NodeState,
    PeerProcess,
    case_failure,
    run_node_share,
)
from dlperf_core.run.runtime.local import LocalRuntime
from gang_board import DictBoard, NodeView

FAST = GangSettings(join_s=3.0, poll_s=0.1)


def job(tmp_path, *scripts, roles=None, timeout_s=60.0, watchdog_s=None, containers=()) -> CaseJob:
    launches = tuple(
        NodeLaunch(
            node=Node(name=f"node{i}"),
            node_rank=i,
            argv=(sys.executable, "-c", s),
            role=(roles or {}).get(i, "launcher"),
        )
        for i, s in enumerate(scripts)
    )
    return CaseJob("t", launches, tuple(containers), tmp_path / "logs", timeout_s, watchdog_s)


def run_gang(
    j: CaseJob, nodes: list[str], board: DictBoard | None = None, delays: dict[str, float] | None = None, start=None
) -> dict[str, NodeShare]:
    """Each node's share in its own thread (a node in ``delays`` joins late)."""
    board = board or DictBoard()
    shares: dict[str, NodeShare] = {}
    runtime = LocalRuntime()

    def one(node: str) -> None:
        time.sleep((delays or {}).get(node, 0))
        shares[node] = run_node_share(
            j, node, board.view(node), start or (lambda i, files: runtime.start_node(j, i, files)), FAST
        )

    threads = [threading.Thread(target=one, args=(n,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return shares


def test_every_node_starts_after_all_joined_and_the_case_succeeds(tmp_path):
    stamp = "import time; print(time.time(), flush=True)"
    shares = run_gang(job(tmp_path, stamp, stamp), ["node0", "node1"], delays={"node1": 1.0})
    assert [shares[n].failure for n in ("node0", "node1")] == [None, None]
    assert [shares[n].exit_code for n in ("node0", "node1")] == [0, 0]
    assert case_failure(shares) is None
    # node0 joined a second early and waited: both processes started within a poll or two of each other
    t0, t1 = (float((tmp_path / "logs" / f"node{i}.log").read_text()) for i in (0, 1))
    assert abs(t0 - t1) < 0.8
    # each share says when its node saw the gang complete and when its process ended (bench/growth_nodes.py)
    for share in shares.values():
        assert share.started_at <= share.joined_at <= share.exited_at <= share.finished_at, share
    assert shares["node0"].joined_at >= shares["node1"].started_at  # node0 waited for the late node1


class CountingBoard(DictBoard):
    """A DictBoard that counts who read whose posts."""

    def __init__(self):
        super().__init__()
        self.reads: dict[tuple[str, str], int] = {}

    def view(self, node: str) -> NodeView:
        board = self

        class Counted(NodeView):
            def read(self, peer: str) -> NodeState | None:
                with board.lock:
                    board.reads[(node, peer)] = board.reads.get((node, peer), 0) + 1
                return super().read(peer)

        return Counted(self, node)


def test_node0_watches_every_node_and_the_others_node0_alone(tmp_path):
    """Reads grow as 2 x (N-1) per poll, not N x (N-1): each read is a request to the api-server (XCom)."""
    board = CountingBoard()
    work = "import time; time.sleep(1.0); print('done', flush=True)"
    shares = run_gang(job(tmp_path, work, work, work), ["node0", "node1", "node2"], board, delays={"node2": 0.5})
    assert case_failure(shares) is None
    assert {n: shares[n].exit_code for n in shares} == {"node0": 0, "node1": 0, "node2": 0}
    assert board.reads[("node0", "node1")] >= 5 and board.reads[("node0", "node2")] >= 5
    assert board.reads[("node1", "node0")] >= 5 and board.reads[("node2", "node0")] >= 5
    assert ("node1", "node2") not in board.reads and ("node2", "node1") not in board.reads
    # node1 and node2 saw the gang complete through node0's post, after node2 (late) joined
    assert min(shares[n].joined_at for n in ("node1", "node2")) >= shares["node2"].started_at


def test_a_failure_reaches_the_nodes_that_do_not_watch_it_through_node0(tmp_path):
    sleeper = "import time; time.sleep(300)"
    failing = "import time; time.sleep(0.5); raise SystemExit(4)"
    t0 = time.monotonic()
    shares = run_gang(job(tmp_path, sleeper, sleeper, failing), ["node0", "node1", "node2"])
    assert time.monotonic() - t0 < 30
    assert case_failure(shares) == "node2 exited with code 4"
    assert shares["node2"].own and not shares["node0"].own and not shares["node1"].own
    assert shares["node1"].failure is not None and shares["node1"].exit_code not in (None, 0)  # node1 was stopped


def test_a_node_that_gives_up_before_the_gang_is_complete_has_no_join_time(tmp_path):
    shares = run_gang(job(tmp_path, "print(1)", "print(2)"), ["node0"])
    assert shares["node0"].joined_at is None and shares["node0"].exited_at is None


def test_the_first_failure_on_any_node_stops_every_node(tmp_path):
    sleeper = "import time; time.sleep(300)"
    failing = "import time; time.sleep(0.5); raise SystemExit(3)"
    t0 = time.monotonic()
    shares = run_gang(job(tmp_path, sleeper, failing), ["node0", "node1"])
    assert time.monotonic() - t0 < 30
    assert shares["node1"].own and shares["node1"].failure == "node1 exited with code 3"
    assert not shares["node0"].own and shares["node0"].failure == "node1 exited with code 3"
    assert shares["node0"].exit_code not in (None, 0)  # node0's own process was stopped
    assert case_failure(shares) == "node1 exited with code 3"


def test_a_node_whose_task_never_runs_fails_the_case_by_name(tmp_path):
    shares = run_gang(job(tmp_path, "print(1)", "print(2)"), ["node0"])
    assert shares["node0"].failure == ("node1 did not join within 3 s (is a worker listening on that node's queue?)")
    assert case_failure({**shares, "node1": None}) == shares["node0"].failure
    assert not (tmp_path / "logs" / "node0.log").exists()  # nothing started


def test_a_node_waiting_for_node0_names_the_nodes_that_never_joined(tmp_path):
    shares = run_gang(job(tmp_path, "print(1)", "print(2)", "print(3)"), ["node1"])
    assert (
        shares["node1"].failure == "node0, node2 did not join within 3 s (is a worker listening on that node's queue?)"
    )


def test_a_late_node_sees_that_the_case_was_given_up(tmp_path):
    board = DictBoard()
    shares = run_gang(job(tmp_path, "print(1)", "print(2)"), ["node0", "node1"], board, delays={"node1": 4.5})
    assert shares["node0"].failure.startswith("node1 did not join")
    assert shares["node1"].failure.startswith("node0 gave up before this node started: node1 did not join")
    assert case_failure(shares) == shares["node0"].failure


def test_a_node_that_cannot_start_stops_the_others(tmp_path):
    j = job(tmp_path, "import time; time.sleep(300)", "print(1)")
    runtime = LocalRuntime()

    def start(i, files):
        if i == 1:
            raise OSError("no such engine")
        return runtime.start_node(j, i, files)

    shares = run_gang(j, ["node0", "node1"], start=start)
    assert case_failure(shares) == "could not start node node1: OSError: no such engine"
    assert shares["node0"].failure is not None


def test_timeout_and_watchdog_hold_on_every_node(tmp_path):
    silent = "import time; time.sleep(300)"
    shares = run_gang(job(tmp_path, silent, silent, watchdog_s=1.5), ["node0", "node1"])
    assert case_failure(shares) == "watchdog: no log progress for 1.5 s"  # node 0's log, node 0's watchdog
    shares = run_gang(job(tmp_path, silent, silent, timeout_s=1.5), ["node0", "node1"])
    assert case_failure(shares) == "timeout: the case ran longer than 1.5 s"


def test_sshd_node_serves_until_the_launcher_is_done_and_keys_stay_on_their_node(tmp_path):
    """mpirun: the sshd starts first; each node makes its own keys and only public halves go on the board."""
    order = tmp_path / "order.txt"
    sshd = f"open({str(order)!r}, 'a').write('sshd\\n'); import time; time.sleep(300)"
    launcher = f"import time; time.sleep(0.3); open({str(order)!r}, 'a').write('launcher\\n')"
    placeholder = (ContainerFile("/root/.ssh/id_ed25519", b"x"),)
    specs = [ContainerSpec(f"c{i}", "i", (), {}, {}, "host", None, (), files=placeholder) for i in range(2)]
    j = job(tmp_path, launcher, sshd, roles={1: "sshd"}, containers=specs)
    given: dict[int, tuple] = {}
    runtime = LocalRuntime()

    def start(i, files):
        given[i] = files
        return runtime.start_node(j, i, files)

    board = DictBoard()
    shares = run_gang(j, ["node0", "node1"], board, start=start)
    assert case_failure(shares) is None and shares["node1"].failure is None
    assert order.read_text() == "sshd\nlauncher\n"
    files = {i: {f.path.rsplit("/", 1)[1]: f.content for f in given[i]} for i in (0, 1)}
    assert files[0]["authorized_keys"] == files[1]["authorized_keys"]  # both nodes' client keys, on both
    assert files[0]["authorized_keys"].count(b"ssh-ed25519") == 2
    assert files[0]["known_hosts"].count(b"* ssh-ed25519 ") == 2
    assert files[0]["id_ed25519"] != files[1]["id_ed25519"]  # each node its own private key
    posted = repr(board.history)
    assert "PRIVATE KEY" not in posted and "ssh-ed25519" in posted


def test_three_node_mpirun_every_sshd_gets_every_key_and_serves_until_the_launcher_is_done(tmp_path):
    sshd = "import time; time.sleep(300)"
    launcher = "import time; time.sleep(0.5)"
    placeholder = (ContainerFile("/root/.ssh/id_ed25519", b"x"),)
    specs = [ContainerSpec(f"c{i}", "i", (), {}, {}, "host", None, (), files=placeholder) for i in range(3)]
    j = job(tmp_path, launcher, sshd, sshd, roles={1: "sshd", 2: "sshd"}, containers=specs)
    given: dict[int, tuple] = {}
    runtime = LocalRuntime()

    def start(i, files):
        given[i] = files
        return runtime.start_node(j, i, files)

    shares = run_gang(j, ["node0", "node1", "node2"], start=start)
    assert case_failure(shares) is None and all(s.failure is None for s in shares.values())
    keys = {i: {f.path.rsplit("/", 1)[1]: f.content for f in given[i]}["authorized_keys"] for i in range(3)}
    assert keys[0] == keys[1] == keys[2] and keys[0].count(b"ssh-ed25519") == 3


def test_a_peer_whose_task_stops_reporting_is_lost(tmp_path):
    """node1's task joined and started, then its worker died: its posts stop, node0 gives up on it."""
    board = DictBoard()
    board.view("node1").post(NodeState(STARTED, beat=1))  # and nothing more, ever
    j = job(tmp_path, "import time; time.sleep(300)", "import time; time.sleep(300)")
    runtime = LocalRuntime()
    settings = GangSettings(join_s=3.0, poll_s=0.1, beat_s=0.2, stale_s=1.5)
    t0 = time.monotonic()
    share = run_node_share(j, "node0", board.view("node0"), lambda i, files: runtime.start_node(j, i, files), settings)
    assert 1.5 < time.monotonic() - t0 < 30
    assert share.failure == "node1: its task stopped reporting (worker lost?)" and not share.own
    assert case_failure({"node0": share, "node1": None}) == share.failure
    beats = [s["beat"] for n, s in board.history if n == "node0"]
    assert len(beats) >= 5 and beats == sorted(beats)  # node0 kept posting while it ran


def test_a_post_is_typed_and_its_json_form_is_what_the_board_keeps():
    """The board's edge: a post goes out as JSON (XCom) and comes back as the same state; a post written by a
    dlperf that still posted plain dicts (the same keys) reads as that state."""
    state = NodeState(EXITED, beat=7, client_pub="ssh-ed25519 AAAA c", host_pub="ssh-ed25519 BBBB h", exit_code=3)
    assert NodeState.from_json(state.to_json()) == state
    assert state.to_json() == {
        "phase": "exited",
        "beat": 7,
        "client_pub": "ssh-ed25519 AAAA c",
        "host_pub": "ssh-ed25519 BBBB h",
        "exit_code": 3,
        "oom_killed": False,
        "done": False,
        "reason": None,
        "gang_complete": False,
    }
    old = {"client_pub": "k", "host_pub": "h", "phase": "gave_up", "reason": "node1 did not join", "beat": 2}
    assert NodeState.from_json(old) == NodeState(GAVE_UP, beat=2, client_pub="k", host_pub="h", reason=old["reason"])


def test_a_peer_reads_as_its_posts_say():
    board = DictBoard()
    peer = PeerProcess(board.view("node0"), "node1")
    assert peer.poll() is None  # nothing posted yet
    board.view("node1").post(NodeState(EXITED, beat=3, exit_code=2, oom_killed=True))
    assert peer.poll() == 2 and peer.oom_killed
    board.view("node1").post(NodeState(EXITED, beat=4, exit_code=-15, done=True))  # an sshd the launchers finished
    assert peer.poll() == 0
    board.view("node1").post(NodeState(GAVE_UP, beat=5, reason="no engine"))
    assert peer.poll() == 1
