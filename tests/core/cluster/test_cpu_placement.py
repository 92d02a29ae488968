"""Stand-in devices that measure something (issue 39): one thread per rank, each rank its own cores, the same in
every topology; more ranks than a host's cores is flagged ``oversubscribed``. The rule (pure), what a job built
for the local runtime carries, and the reference workload pinning itself (a real process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf_core.cluster.cpu_placement import CPUS_ENV, THREADS_PER_RANK, HostCores, place_ranks
from dlperf_core.workload import train

TWO = HostCores(host="host0", cores=(0, 1))
FOUR = HostCores(host="host1", cores=(0, 1, 2, 3))


def test_one_thread_per_rank_by_default():
    assert THREADS_PER_RANK == 1


def test_nodes_of_one_host_take_consecutive_cores():
    one = place_ranks([("node0", 1)], {"node0": TWO})
    assert one.cores == {"node0": (0,)} and one.oversubscription is None and one.threads_per_rank == 1
    two_local = place_ranks([("node0", 2)], {"node0": TWO})
    assert two_local.cores == {"node0": (0, 1)} and two_local.cpuset("node0") == "0,1"
    two_nodes = place_ranks([("node0", 1), ("node1", 1)], {"node0": TWO, "node1": TWO})
    assert two_nodes.cores == {"node0": (0,), "node1": (1,)}
    assert two_nodes.cpus_env("node1") == {CPUS_ENV: "1"}


def test_nodes_on_their_own_hosts_each_start_at_their_first_core():
    placed = place_ranks([("node0", 2), ("node1", 2)], {"node0": TWO, "node1": HostCores("host9", (4, 5))})
    assert placed.cores == {"node0": (0, 1), "node1": (4, 5)} and placed.oversubscription is None


def test_more_ranks_than_cores_is_oversubscribed_and_unpinned():
    crowded = place_ranks([("node0", 2), ("node1", 2)], {"node0": TWO, "node1": TWO})
    assert crowded.oversubscription == "oversubscribed: 4 ranks on 2 cores of host0"
    assert crowded.cores == {} and crowded.cpus_env("node0") == {} and crowded.cpuset("node0") is None
    assert place_ranks([("n", 3)], {"n": TWO}, threads_per_rank=1).oversubscription is not None
    assert place_ranks([("n", 2)], {"n": FOUR}, threads_per_rank=2).oversubscription is None
    assert (
        place_ranks([("n", 3)], {"n": FOUR}, threads_per_rank=2).oversubscription
        == "oversubscribed: 3 ranks x 2 threads on 4 cores of host1"
    )


def test_a_host_the_runtime_does_not_own_is_counted_but_not_pinned():
    shared = HostCores(host="this machine", cores=(0, 1), pin=False)
    placed = place_ranks([("node0", 1), ("node1", 1)], {"node0": shared, "node1": shared})
    assert placed.cores == {} and placed.oversubscription is None
    assert place_ranks([("node0", 2), ("node1", 1)], {"node0": shared, "node1": shared}).oversubscription == (
        "oversubscribed: 3 ranks on 2 cores of this machine"
    )


def test_the_workload_knows_the_same_variable():
    assert train.CPUS_ENV == CPUS_ENV


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no sched_setaffinity on this system")
def test_the_workload_pins_each_local_rank_to_its_own_slice():
    """A real process: rank 1 of a node given cores "<a>,<b>" pins itself to <b>; without enough cores, not at all."""
    cores = sorted(os.sched_getaffinity(0))
    listed = ",".join(map(str, (cores * 2)[:2]))
    code = (
        "import os, sys; sys.path.insert(0, sys.argv[1]); import train; "
        "info = train.DistInfo(rank=1, world_size=2, local_rank=1, local_world_size=2, launched=False); "
        "print(train.pin_rank(info, 1), sorted(os.sched_getaffinity(0)))"
    )
    workload = str(Path(train.__file__).parent)
    out = subprocess.run(
        [sys.executable, "-c", code, workload],
        env={**os.environ, CPUS_ENV: listed},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("]")
    expected = (cores * 2)[1]
    assert out[0].strip() == f"[{expected}" and out[1].strip() == f"[{expected}"
    unpinned = subprocess.run(
        [sys.executable, "-c", code, workload],
        env={**os.environ, CPUS_ENV: str(cores[0])},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert unpinned.startswith("[] ") and unpinned.strip().endswith(str(cores).replace(" ", " "))


def _smoke_jobs(runtime):
    from dlperf_core.cluster.inventory import load_inventory
    from dlperf_core.model import RunIds
    from dlperf_core.plan.cases import plan_suite
    from dlperf_core.plan.suite import load_suite
    from dlperf_core.run.jobs import build_job
    from helpers import REPO

    inventory = load_inventory(REPO / "inventories" / "docker-local.yaml")
    runs = [r for r in plan_suite(load_suite(REPO / "suites" / "smoke.yaml"), inventory) if r.repeat == 0]
    ids = RunIds("d", "r")
    return {
        r.case.topology: build_job(r, inventory, runtime, ids, timeout_s=60, watchdog_s=None, log_root=Path("/tmp"))
        for r in runs
        if r.case.framework == "pytorch_reference"
    }


class _OwnedTwoCores:
    """The one fact a runtime gives placement (which host a node is on, its cores): here a 2-core engine that
    dlperf owns, as the docker runtime reports one from ``docker info``."""

    name, python, workload_dir = "docker", "python3", "/opt/dlperf/workload"

    def host_cores(self, node):  # noqa: ARG002 - every node on one engine
        return TWO


def test_smoke_jobs_on_a_two_core_engine_pin_one_core_per_rank():
    jobs = _smoke_jobs(_OwnedTwoCores())
    cpusets = {t: [c.cpuset_cpus for c in job.containers] for t, job in jobs.items()}
    assert cpusets == {"1n1g": ["0"], "1n2g": ["0,1"], "2n1g": ["0", "1"]}
    for job in jobs.values():
        assert job.oversubscription is None
        for launch, spec in zip(job.launches, job.containers):
            assert "--threads" in launch.argv and launch.argv[launch.argv.index("--threads") + 1] == "1"
            assert spec.environment[CPUS_ENV] == spec.cpuset_cpus


def test_local_runtime_jobs_have_one_thread_per_rank_and_no_pinning():
    from dlperf_core.run.runtime.local import LocalRuntime

    for job in _smoke_jobs(LocalRuntime()).values():
        assert all(c.cpuset_cpus is None and CPUS_ENV not in l.env for c, l in zip(job.containers, job.launches))
        assert all(l.argv[l.argv.index("--threads") + 1] == "1" for l in job.launches)
