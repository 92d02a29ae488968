"""The cluster's settings on every rank: what the launch commands add so that each rank runs with them.

A suite's, a benchmark's and an inventory node's ``env:`` (:func:`dlperf_core.model.cluster_env`, the node's over the
others) are put in each node's container environment. The launchers that start their ranks on their own node
(torchrun, ``paddle.distributed.launch``, ``oneflow.distributed.launch``) hand it on by inheritance. mpirun is the one
that needs more, since sshd starts the ranks of nodes 1..N-1 with a bare environment: ``-x NAME`` copies node 0's
values, and every rank first reads its own node's environment back (:func:`mpi_rank_prefix`), which the sshd
container wrote at its start (:func:`sshd_with_environment`): the image's own variables (PATH, LD_LIBRARY_PATH,
NCCL_*) and that node's settings, as a node with other interface names needs.

``DLPERF_LOG_RANK_ENV`` (any value) among the settings makes every rank print its environment into its node's log,
one ``dlperf-rank-env <rank> NAME=value`` line per variable: a check that the settings reached every rank, without
another image (the e2e test of the seeds on CPU uses it).
"""

from __future__ import annotations

import re
import shlex

RANK_ENV_LOG = "DLPERF_LOG_RANK_ENV"
"""The variable that makes every rank print its environment (``dlperf-rank-env <rank> NAME=value`` lines)."""
RANK_ENV_MARK = "dlperf-rank-env"
"""What each line of a rank's environment starts with."""
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PADDLE_TRAINER_ID")
"""Where a rank finds its global rank: torchrun and OneFlow's launcher, Open MPI, PaddlePaddle's launcher."""
ENVIRONMENT_FILE = "environment"
"""The file (in the case's ssh folder) where an sshd container keeps its own environment for mpirun's ranks."""
NOT_KEPT = ("PWD", "OLDPWD", "SHLVL", "_")
"""Variables of the shell itself, left out of the environment file (a rank has its own)."""

SITECUSTOMIZE = f"""\
import importlib.machinery, importlib.util, os, sys
_rank = next((os.environ[k] for k in {RANK_VARIABLES!r} if k in os.environ), None)
if _rank is not None:  # a rank, not its launcher
    for _k, _v in sorted(os.environ.items()):
        if "\\n" not in _v:
            os.write(1, f"{RANK_ENV_MARK} {{_rank}} {{_k}}={{_v}}\\n".encode())
_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here]
)
if _spec is not None and _spec.loader is not None:  # the image's own sitecustomize still runs
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
"""
"""Put first on PYTHONPATH when a node's settings have :data:`RANK_ENV_LOG`: every Python rank prints its
environment as it starts, then the image's own ``sitecustomize`` (if any) runs as before."""


def logs_rank_env(env: dict[str, str]) -> bool:
    """Whether a node with these settings has its ranks print their environment."""
    return RANK_ENV_LOG in env


def per_node_logging(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` of a launcher that starts its ranks on its own node (torchrun, PaddlePaddle's, OneFlow's), started
    so that every Python process with a rank prints its environment (:data:`SITECUSTOMIZE` in a fresh folder put
    first on PYTHONPATH, the image's PYTHONPATH after it)."""
    script = (
        'd="$(mktemp -d)" && '
        f'printf %s {shlex.quote(SITECUSTOMIZE)} > "$d/sitecustomize.py" && '
        'export PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}" && '
        'exec "$@"'
    )
    return ("bash", "-c", script, "dlperf-launch", *argv)


def mpi_rank_prefix(ssh_dir: str, *, log: bool) -> list[str]:
    """What mpirun starts in front of each rank's program: read the node's own environment back (written by its
    sshd container; node 0 has none, its ranks inherit mpirun's), print it if ``log``, then exec the program."""
    path = shlex.quote(f"{ssh_dir}/{ENVIRONMENT_FILE}")
    steps = [f"if [ -r {path} ]; then . {path}; fi"]
    if log:
        # sed -u: a write per line (mpirun tags what each write brings; a 4 KB buffer would cut a line in two)
        steps.append(f'env | sed -u "s/^/{RANK_ENV_MARK} ${{OMPI_COMM_WORLD_RANK:-?}} /"')
    steps.append('exec "$@"')
    return ["bash", "-c", "; ".join(steps), "dlperf-rank"]


def sshd_with_environment(ssh_dir: str, sshd: tuple[str, ...]) -> tuple[str, ...]:
    """The sshd of nodes 1..N-1, started after writing the container's environment (the image's and the node's
    settings) to the file its ranks read back (:func:`mpi_rank_prefix`), as ``export -p`` prints it."""
    path = shlex.quote(f"{ssh_dir}/{ENVIRONMENT_FILE}")
    script = f"(unset {' '.join(NOT_KEPT)}; export -p) > {path} && exec {shlex.join(sshd)}"
    return ("bash", "-c", script)


def mpi_interface_env(env: dict[str, str]) -> dict[str, str]:
    """Open MPI's TCP interfaces from the same setting as NCCL's: ``NCCL_SOCKET_IFNAME`` (without NCCL's ``=``
    exact-match mark) as ``OMPI_MCA_btl_tcp_if_include`` and ``OMPI_MCA_oob_tcp_if_include``, unless the settings
    name them (theirs win) or it excludes (``^...``: Open MPI's ``*_if_exclude`` would then also need docker0 and
    lo, so nothing is derived). Open MPI wants whole interface names or subnets where NCCL takes prefixes."""
    value = env.get("NCCL_SOCKET_IFNAME", "").removeprefix("=")
    if not value or value.startswith("^"):
        return {}
    derived = {"OMPI_MCA_btl_tcp_if_include": value, "OMPI_MCA_oob_tcp_if_include": value}
    return {name: v for name, v in derived.items() if name not in env}


MPI_OUTPUT_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
"""The tag ``mpirun --tag-output`` puts before what each read of a rank's output brings (``[1,0]<stdout>:``): at a
line's start, and inside a line that reached mpirun in two pieces."""
RANK_ENV_LINE = re.compile(rf"{RANK_ENV_MARK} (\S+) ([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def rank_environments(log_text: str) -> dict[str, dict[str, str]]:
    """``{rank: {name: value}}`` from the :data:`RANK_ENV_MARK` lines of a node's log (pure), mpirun's output tags
    taken out wherever they stand (a line that came through in two pieces is one again)."""
    ranks: dict[str, dict[str, str]] = {}
    for line in log_text.splitlines():
        if match := RANK_ENV_LINE.search(MPI_OUTPUT_TAG.sub("", line)):
            ranks.setdefault(match[1], {})[match[2]] = match[3]
    return ranks
