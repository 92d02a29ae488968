"""Turning a planned case run into a runtime job: node commands, container specs, log folder, labels."""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import Path

from dlperf_core.cluster.cpu_placement import CpuPlacement, place_ranks
from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.cluster.sshkeys import case_ssh_files
from dlperf_core.frameworks import LaunchContext, get_adapter
from dlperf_core.frameworks.rank_env import logs_rank_env, per_node_logging
from dlperf_core.home import env_path
from dlperf_core.model import (
    CaseJob,
    CaseRun,
    NodeLaunch,
    RunIds,
    Runtime,
    with_cluster_env,
)


def default_log_root() -> Path:
    """``$DLPERF_LOG_DIR``, else ``$DLPERF_HOME/.dlperf/logs`` (:mod:`dlperf_core.home`; absolute)."""
    return env_path("DLPERF_LOG_DIR", "logs")


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def case_log_dir(ids: RunIds, case_run: CaseRun, log_root: Path | None = None) -> Path:
    """The folder of one case run's node logs."""
    case = case_run.case
    return (
        (log_root or default_log_root())
        / _safe(ids.dag_id)
        / _safe(ids.run_id)
        / _safe(case.key)
        / f"r{case_run.repeat}"
    )


def master_port_for(ids: RunIds, case_run: CaseRun) -> int:
    """A rendezvous port that differs between case runs (no clash with a lingering socket)."""
    digest = int(hashlib.sha1(f"{ids.dag_id}/{ids.run_id}/{case_run.index}".encode()).hexdigest(), 16)
    return 29500 + digest % 2000


def cpu_placement(nodes: tuple[Node, ...], ranks_per_node: int, runtime: Runtime) -> CpuPlacement | None:
    """Where the ranks of a case on CPU stand-in ``nodes`` run (:mod:`dlperf_core.cluster.cpu_placement`), from the
    cores the runtime says each node's host has; None when the nodes are not all CPU stand-ins or the runtime
    cannot tell (a dry run)."""
    if not nodes or any(n.accelerator != "cpu" for n in nodes):
        return None
    hosts = {n.name: runtime.host_cores(n) for n in nodes}
    known = {name: host for name, host in hosts.items() if host is not None}
    if len(known) != len(hosts):
        return None
    return place_ranks([(n.name, ranks_per_node) for n in nodes], known)


def _pinned(launch: NodeLaunch, placement: CpuPlacement | None) -> NodeLaunch:
    """``launch`` with the environment that pins its node's ranks to their cores."""
    if placement is None or not (env := placement.cpus_env(launch.node.name)):
        return launch
    return replace(launch, env={**launch.env, **env})


def _with_settings(launch: NodeLaunch, launcher: str) -> NodeLaunch:
    """``launch`` with its node's settings (``node.env``, the cluster's) under the adapter's own variables, which
    make the case (TF32 off for fp32, the rendezvous); a launcher that starts its ranks on its own node prints each
    rank's environment when the settings ask (:mod:`dlperf_core.frameworks.rank_env`)."""
    env = {**launch.node.env, **launch.env}
    argv = launch.argv
    if launcher == "per_node" and launch.role == "launcher" and logs_rank_env(env):
        argv = per_node_logging(argv)
    return replace(launch, env=env, argv=argv)


def build_job(
    case_run: CaseRun,
    inventory: Inventory,
    runtime: Runtime,
    ids: RunIds,
    *,
    timeout_s: float,
    watchdog_s: float | None,
    log_root: Path | None = None,
) -> CaseJob:
    """Everything needed to execute ``case_run`` on ``runtime``: commands per node and container specs."""
    case = case_run.case
    adapter = get_adapter(case.framework)
    nodes = with_cluster_env(case, inventory.case_nodes(case.nodes, case.node))  # env: the cluster's settings
    placement = cpu_placement(nodes, case.gpus_per_node, runtime)
    run_label = f"dlperf-{ids.short}-{case_run.index:04d}-r{case_run.repeat}"
    ctx = LaunchContext(
        python=runtime.python,
        workload_dir=runtime.workload_dir,
        master_port=master_port_for(ids, case_run),
        cpu_threads_per_process=placement.threads_per_rank if placement else None,
    )
    case_ssh_dir = getattr(runtime, "case_ssh_dir", None)  # slurm: a folder of the job's user, not the image's
    if case_ssh_dir is not None:
        ctx = replace(ctx, ssh_dir=str(case_ssh_dir(run_label)))
    launches = [
        _pinned(_with_settings(launch, adapter.launcher), placement) for launch in adapter.launches(case, nodes, ctx)
    ]
    mpi_multi_node = adapter.launcher == "mpirun" and len(nodes) > 1
    if mpi_multi_node and runtime.name not in ("docker", "slurm"):  # slurm: srun starts the sshd nodes' launches
        raise ValueError(
            f"{case.key}: {adapter.name} runs across nodes with mpirun over ssh, which needs the docker or slurm "
            f"runtime (sshd on each node); the {runtime.name} runtime runs it on one node only"
        )
    labels = {**ids.labels, "dlperf.case": case.key, "dlperf.repeat": str(case_run.repeat)}
    log_dir = case_log_dir(ids, case_run, log_root)
    containers = adapter.container_specs(case, launches, run_label=run_label, labels=labels)
    if placement is not None:  # the container of a node holds its ranks' cores only
        containers = [
            replace(spec, cpuset_cpus=placement.cpuset(launch.node.name)) for spec, launch in zip(containers, launches)
        ]
    if mpi_multi_node:  # fresh keys for this case run only, put into its containers before they start
        files = case_ssh_files(ctx.ssh_dir, comment=run_label)
        containers = [replace(spec, files=files) for spec in containers]
    return CaseJob(
        run_label=run_label,
        launches=tuple(launches),
        containers=tuple(containers),
        log_dir=log_dir,
        timeout_s=timeout_s,
        watchdog_s=watchdog_s,
        devices_per_node=case.gpus_per_node,
        oversubscription=placement.oversubscription if placement else None,
    )
