"""The shared supervisor on real local processes: first failure stops the rest, timeout, no-progress
watchdog, and nothing left running afterwards."""

import os
import sys
import time

from dlperf_core.cluster.inventory import Node
from dlperf_core.model import CaseJob, NodeLaunch
from dlperf_core.run.runtime.base import describe_exit
from dlperf_core.run.runtime.local import LocalRuntime


def job(tmp_path, *scripts, timeout_s=60.0, watchdog_s=None) -> CaseJob:
    launches = tuple(
        NodeLaunch(node=Node(name=f"node{i}"), node_rank=i, argv=(sys.executable, "-c", s))
        for i, s in enumerate(scripts)
    )
    return CaseJob("t", launches, (), tmp_path / "logs", timeout_s, watchdog_s)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


PRINT_PID_AND_SLEEP = "import os, time; print(os.getpid(), flush=True); time.sleep(300)"


def test_all_nodes_succeed(tmp_path):
    out = LocalRuntime().execute(job(tmp_path, "print('a')", "print('b')"))
    assert out.failure is None and [n.exit_code for n in out.nodes] == [0, 0]
    assert (tmp_path / "logs" / "node1.log").read_text() == "b\n"


def test_first_failure_stops_the_others(tmp_path):
    t0 = time.monotonic()
    out = LocalRuntime().execute(
        job(tmp_path, PRINT_PID_AND_SLEEP, "import time; time.sleep(0.5); raise SystemExit(3)")
    )
    assert out.failure == "node1 exited with code 3"
    assert time.monotonic() - t0 < 30
    pid = int((tmp_path / "logs" / "node0.log").read_text().split()[0])
    assert not alive(pid)


def test_timeout(tmp_path):
    out = LocalRuntime().execute(job(tmp_path, PRINT_PID_AND_SLEEP, timeout_s=1.5))
    assert out.failure.startswith("timeout")
    assert not alive(int((tmp_path / "logs" / "node0.log").read_text().split()[0]))


def test_watchdog_stops_a_silent_training(tmp_path):
    chatty_then_silent = "import time\nfor i in range(3):\n    print(i, flush=True); time.sleep(0.3)\ntime.sleep(300)"
    t0 = time.monotonic()
    out = LocalRuntime().execute(job(tmp_path, chatty_then_silent, watchdog_s=2.0))
    assert out.failure == "watchdog: no log progress for 2 s"
    assert 2.0 < time.monotonic() - t0 < 30


def test_a_node_that_cannot_start_fails_the_case(tmp_path):
    bad = CaseJob(
        "t", (NodeLaunch(node=Node(name="node0"), node_rank=0, argv=("/nonexistent/python",)),), (), tmp_path, 10, None
    )
    out = LocalRuntime().execute(bad)
    assert out.failure.startswith("could not start node node0: FileNotFoundError")


def test_exit_descriptions():
    assert describe_exit("node0", 137) == "node0 was killed (exit code 137)"
    assert describe_exit("node1", -15) == "node1 ended by signal 15"
    assert describe_exit("node1", 139) == "node1 ended by signal 11 (exit code 139)"


def test_sshd_nodes_start_first_and_the_case_ends_with_its_launcher(tmp_path):
    """mpirun cases: 'sshd' processes serve the launcher; the case is done when the launcher exits 0."""
    py = sys.executable
    started = tmp_path / "order.txt"
    service = NodeLaunch(
        node=Node(name="node1"),
        node_rank=1,
        role="sshd",
        argv=(py, "-c", f"open({str(started)!r}, 'a').write('sshd\\n'); import time; time.sleep(300)"),
    )
    launcher = NodeLaunch(
        node=Node(name="node0"),
        node_rank=0,
        argv=(py, "-c", f"import time; time.sleep(0.5); open({str(started)!r}, 'a').write('launcher\\n')"),
    )
    out = LocalRuntime().execute(CaseJob("t", (launcher, service), (), tmp_path / "logs", 60, None))
    assert out.failure is None
    assert started.read_text().splitlines() == ["sshd", "launcher"]
    assert [n.rank for n in out.nodes] == [0, 1]  # reported in rank order whatever the start order

    dying = NodeLaunch(node=Node(name="node1"), node_rank=1, role="sshd", argv=(py, "-c", "pass"))
    slow = NodeLaunch(node=Node(name="node0"), node_rank=0, argv=(py, "-c", "import time; time.sleep(30)"))
    out = LocalRuntime().execute(CaseJob("t", (slow, dying), (), tmp_path / "logs2", 60, None))
    assert out.failure == "node1: its sshd ended before the launcher finished"
