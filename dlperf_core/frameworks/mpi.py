"""mpirun launches: sshd in the containers of nodes 1..N-1, then mpirun on node 0.

What the seeds did by hand (install sshd in every container, copy keys, ``mpirun -H host:8,...`` from the
first node) as one pure function. The order is part of the commands: node 0 first checks that it can reach
every other node's sshd with the case's key (and fails with :data:`SSH_SETUP_EXIT` naming the node if one does
not answer), then execs mpirun. The keys are made per case run (:mod:`dlperf_core.cluster.sshkeys`) and put into the
containers by the runtime before they start; no image carries one.
"""

from __future__ import annotations

import shlex

from dlperf_core.cluster.inventory import Node
from dlperf_core.frameworks.base import LaunchContext
from dlperf_core.frameworks.rank_env import logs_rank_env, mpi_interface_env, mpi_rank_prefix, sshd_with_environment
from dlperf_core.model import SSH_SETUP_EXIT, Case, NodeLaunch

SSH_WAIT_S = 120


def ssh_options(ctx: LaunchContext) -> list[str]:
    """Client options: the case's own key and known_hosts, strict host key checking, no prompts."""
    return [
        "-p",
        str(ctx.ssh_port),
        "-i",
        f"{ctx.ssh_dir}/id_ed25519",
        "-o",
        f"UserKnownHostsFile={ctx.ssh_dir}/known_hosts",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=5",
    ]


def sshd_argv(ctx: LaunchContext) -> tuple[str, ...]:
    """The sshd that serves mpirun on nodes 1..N-1: foreground, key-only, the case's host key."""
    return (
        "/usr/sbin/sshd",
        "-D",
        "-e",
        "-p",
        str(ctx.ssh_port),
        "-o",
        f"HostKey={ctx.ssh_dir}/host_ed25519",
        "-o",
        f"AuthorizedKeysFile={ctx.ssh_dir}/authorized_keys",
        "-o",
        "PermitRootLogin=prohibit-password",
        "-o",
        "PasswordAuthentication=no",
        "-o",
        "KbdInteractiveAuthentication=no",
        "-o",
        "StrictModes=no",
        "-o",
        "UsePAM=no",
        "-o",
        "PidFile=none",
    )


def mpirun_argv(
    case: Case,
    nodes: tuple[Node, ...],
    ctx: LaunchContext,
    program: list[str],
    export: list[str],
) -> list[str]:
    """``mpirun`` over every GPU of the case, one rank per GPU, ranks placed node by node."""
    hosts = ",".join(f"{node.reach_address}:{case.gpus_per_node}" for node in nodes)
    argv = [
        "mpirun",
        "--allow-run-as-root",
        "--tag-output",
        "-np",
        str(case.total_gpus),
        "-H",
        hosts,
        "--bind-to",
        "none",
        "--map-by",
        "slot",
    ]
    if len(nodes) > 1:
        argv += ["-mca", "plm_rsh_args", shlex.join(ssh_options(ctx))]
    for name in export:
        argv += ["-x", name]
    return argv + program


def wait_for_sshd_script(nodes: tuple[Node, ...], ctx: LaunchContext) -> str:
    """Shell that waits until every other node's sshd accepts the case key, or exits SSH_SETUP_EXIT."""
    opts = shlex.join(ssh_options(ctx))
    hosts = " ".join(shlex.quote(n.reach_address) for n in nodes[1:])
    return (
        f"for h in {hosts}; do "
        f"ok=0; for i in $(seq 1 {SSH_WAIT_S}); do "
        f'if ssh {opts} "$h" true 2>/dev/null; then ok=1; break; fi; sleep 1; done; '
        f'if [ $ok != 1 ]; then echo "dlperf: sshd on $h did not answer within {SSH_WAIT_S} s" >&2; '
        f"exit {SSH_SETUP_EXIT}; fi; done; "
        'echo "dlperf: ssh to every node works"'
    )


def mpi_launches(
    case: Case,
    nodes: tuple[Node, ...],
    ctx: LaunchContext,
    program: list[str],
    *,
    env: dict[str, str],
    cwd: str | None = None,
) -> list[NodeLaunch]:
    """Node 0 runs mpirun (after checking ssh to the others); nodes 1..N-1 run the case's sshd.

    Every node's container gets the adapter's ``env`` over the node's settings (``node.env``, resolved for the case:
    :func:`dlperf_core.model.with_cluster_env`) and the Open MPI interfaces derived from them
    (:func:`~dlperf_core.frameworks.rank_env.mpi_interface_env`). mpirun exports each of those names (``-x``, node 0's
    values) and PATH; across nodes every rank then reads its own node's environment back
    (:mod:`dlperf_core.frameworks.rank_env`), so that a rank sshd starts has its image's variables and its node's
    settings."""
    node_env = [{**mpi_interface_env(node.env), **node.env, **env} for node in nodes]
    names = sorted({name for one in node_env for name in one} - {"PATH"}) + ["PATH"]
    if len(nodes) > 1 or any(logs_rank_env(one) for one in node_env):
        program = [*mpi_rank_prefix(ctx.ssh_dir, log=any(logs_rank_env(one) for one in node_env)), *program]
    mpirun = mpirun_argv(case, nodes, ctx, program, names)
    steps = []
    if cwd:
        steps.append(f"cd {shlex.quote(cwd)}")
    if len(nodes) > 1:
        steps.append(wait_for_sshd_script(nodes, ctx))
    steps.append("exec " + shlex.join(mpirun))
    script = "\n".join(["set -e", *steps])
    out = [NodeLaunch(node=nodes[0], node_rank=0, argv=("bash", "-c", script), env=node_env[0])]
    for rank, node in enumerate(nodes[1:], start=1):
        argv = sshd_with_environment(ctx.ssh_dir, sshd_argv(ctx))
        out.append(NodeLaunch(node=node, node_rank=rank, argv=argv, env=node_env[rank], role="sshd"))
    return out
