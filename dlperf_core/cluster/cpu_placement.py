"""Where the ranks of a case on CPU stand-in nodes run: one thread per rank, each rank its own core.

On CPU a "GPU" of a stand-in node is a process (a rank). For 1n2g and 2n1g to compare with 1n1g, every rank
must get the same share of the machine in every topology: :data:`THREADS_PER_RANK` threads, on cores no other
rank of the case uses. Stand-in nodes that share a host (the local runtime's nodes are all this machine;
docker nodes on one engine) take consecutive slices of that host's cores, node by node, in the case's node
order. A host whose cores are fewer than the threads its ranks need is **oversubscribed**: its ranks are not
pinned (there is no core of their own to give them), and the case carries the reason, so its figures are
flagged and its speedup is not reported (``case_summary``, migration 0012).

Pure: the runtime says which host a node is on and which cores that host has (:class:`HostCores`); this module
decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

THREADS_PER_RANK = 1
"""Threads (torch intra-op, OMP) of one rank on a CPU stand-in node: one, so that a rank is one core's work in
every topology (more threads per rank would make 1n1g a multi-core figure that 1nKg cannot match)."""

CPUS_ENV = "DLPERF_CPUS"
"""The environment variable that gives a node's processes their cores (``0,1``): the reference workload pins
its local rank ``i`` to the ``i``-th slice of them (``dlperf_core/workload/train.py``, which has its own copy
of this name: the workload runs without dlperf_core)."""


@dataclass(frozen=True)
class HostCores:
    """The host a node runs on, as the runtime knows it: a name (two nodes with the same name share cores), the
    core ids its processes may use, and whether the runtime may pin them (``pin``: false where other work it
    does not schedule shares those cores, e.g. the local runtime's machine, where pinning two runs to the same
    cores would put them on one core together)."""

    host: str
    cores: tuple[int, ...]
    pin: bool = True


@dataclass(frozen=True)
class CpuPlacement:
    """The cores of each node of a case (``cores[node]``: empty where its ranks are not pinned), the threads of
    one rank, and why the case is oversubscribed (None: every rank has cores of its own)."""

    cores: Mapping[str, tuple[int, ...]]
    threads_per_rank: int
    oversubscription: str | None

    def cpus_env(self, node: str) -> dict[str, str]:
        """The environment that pins ``node``'s ranks (empty when they are not pinned)."""
        cores = self.cores.get(node, ())
        return {CPUS_ENV: ",".join(map(str, cores))} if cores else {}

    def cpuset(self, node: str) -> str | None:
        """The node's cores as Docker's ``cpuset_cpus`` (``0,1``), or None when not pinned."""
        cores = self.cores.get(node, ())
        return ",".join(map(str, cores)) if cores else None


def place_ranks(
    ranks: Sequence[tuple[str, int]],
    hosts: Mapping[str, HostCores],
    threads_per_rank: int = THREADS_PER_RANK,
) -> CpuPlacement:
    """The placement of a case's ranks: ``ranks`` is ``(node name, ranks on it)`` in node order, ``hosts`` the
    host of each node. Nodes of one host take consecutive slices of its cores; a host with fewer cores than
    its nodes need leaves them unpinned and makes the case oversubscribed."""
    by_host: dict[str, list[tuple[str, int]]] = {}
    for node, count in ranks:
        by_host.setdefault(hosts[node].host, []).append((node, count))
    cores: dict[str, tuple[int, ...]] = {}
    crowded: list[str] = []
    for host, nodes in by_host.items():
        available = hosts[nodes[0][0]].cores
        needed = sum(count for _, count in nodes) * threads_per_rank
        if needed > len(available):
            rank_count = sum(count for _, count in nodes)
            threads = f" x {threads_per_rank} threads" if threads_per_rank > 1 else ""
            crowded.append(f"{rank_count} ranks{threads} on {len(available)} cores of {host}")
            continue
        start = 0
        for node, count in nodes if hosts[nodes[0][0]].pin else ():
            cores[node] = tuple(available[start : start + count * threads_per_rank])
            start += count * threads_per_rank
    reason = f"oversubscribed: {'; '.join(crowded)}" if crowded else None
    return CpuPlacement(cores=cores, threads_per_rank=threads_per_rank, oversubscription=reason)
