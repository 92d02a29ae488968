"""Node preflight: the shell script that checks a node, and the pure judgement of its output.

Before any case runs, every node is checked over SSH (``plugins/dlperf_airflow/ssh_preflight.py`` runs the
script with the SSH provider): Docker answers, the NVIDIA runtime and the declared number of GPUs are there
(``accelerator: nvidia`` only), InfiniBand ports are ACTIVE (``infiniband: true`` only), data paths exist,
disk is free, the suite's images are present (pulled when missing; dlperf's own ``dlperf/...`` images, which no
registry holds, are named with how to load them instead) and their CUDA runs on the node's driver and
GPUs (:mod:`dlperf_core.cluster.cuda_compat`, for the images dlperf catalogues). Nothing here does I/O: the script
is text, and :func:`health_of_output` turns what it printed into a :class:`NodeHealth`.

The script prints one block per check::

    @@dlperf-check <name>
    <whatever the commands printed, stdout and stderr>
    @@dlperf-end <name> <exit status>
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dlperf_core.cluster.cuda_compat import GPU_FACTS_QUERY, image_problems, parse_driver_cuda, parse_gpu_facts
from dlperf_core.cluster.inventory import Node
from dlperf_core.json_form import JsonForm

BEGIN = "@@dlperf-check"
END = "@@dlperf-end"
NOT_APPLICABLE = "not applicable"
OWN_IMAGES = "dlperf/"
"""The repository of the images dlperf builds itself (``scripts/build-images.sh``, docker/): no public registry
holds them (``dlperf/x`` would be Docker Hub's), so preflight does not try to pull one; it says how to load it."""
NOT_PULLED = "missing (built by dlperf, in no registry)"


@dataclass(frozen=True)
class NodeHealth:
    """The health of one node: ``ok`` when ``problems`` is empty; ``checks`` says what each check saw."""

    name: str
    ok: bool
    problems: tuple[str, ...] = ()
    checks: dict[str, str] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        """One line for a skipped case: the node and its first problem (all of them, joined)."""
        return f"{self.name}: {'; '.join(self.problems)}" if self.problems else f"{self.name}: ok"


@dataclass(frozen=True)
class PreflightReport(JsonForm):
    """What the ``preflight`` task found: a status line, and the health of each node it checked (none when it
    was skipped). A sick node is reported, never raised: its cases fail with :meth:`blocker`, the others run."""

    status: str
    nodes: tuple[NodeHealth, ...] = ()

    def blocker(self, node_names: Iterable[str]) -> str | None:
        """Why a case on ``node_names`` must not start (:func:`case_blocker`), or None."""
        return case_blocker(node_names, {h.name: h for h in self.nodes})


def unreachable(name: str, error: str) -> NodeHealth:
    """A node SSH could not reach (or log in to): nothing else was checked."""
    return NodeHealth(name, False, (f"unreachable over ssh: {error}",), {"ssh": f"failed: {error}"})


def disk_paths(node: Node) -> tuple[str, ...]:
    """Folders whose free space matters: the log folder (Docker's root dir is added by the script)."""
    return (node.log_dir,) if node.log_dir else ()


def required_paths(node: Node) -> tuple[str, ...]:
    """Host paths that must exist: declared data paths and every mount source, in order, once."""
    seen: dict[str, None] = {}
    for p in (*node.data_paths, *(m.source for m in node.mounts), *disk_paths(node)):
        seen.setdefault(p, None)
    return tuple(seen)


def _block(name: str, commands: str) -> str:
    # A subshell keeps one check's failure (or `exit`) from stopping the others.
    return f'echo {shlex.quote(BEGIN + " " + name)}\n( {commands}\n) 2>&1\necho "{END} {name} $?"\n'


def preflight_script(node: Node, images: Iterable[str] = (), *, pull_missing: bool = True) -> str:
    """The POSIX shell script run on ``node`` over SSH. Every check runs; the judgement is local."""
    q = shlex.quote
    images = tuple(images)
    parts = ['export LC_ALL=C PATH="$PATH:/usr/sbin:/sbin:/usr/local/bin"\n']
    parts.append(_block("docker", "docker version --format '{{.Server.Version}}'"))
    if node.accelerator == "nvidia":
        parts.append(
            _block(
                "nvidia_runtime",
                "docker info --format 'runtimes={{json .Runtimes}}'; "
                'echo "nvidia-container-cli=$(command -v nvidia-container-cli || echo missing)"',
            )
        )
        parts.append(_block("gpus", "nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader"))
    if node.accelerator == "nvidia" and images:
        # each GPU's driver and compute capability (an nvidia-smi too old for compute_cap: without it) and the
        # driver's CUDA version, for the images' CUDA (dlperf_core.cluster.cuda_compat)
        parts.append(
            _block(
                "cuda",
                f"nvidia-smi --query-gpu={GPU_FACTS_QUERY} --format=csv,noheader"
                " || nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; "
                "nvidia-smi | grep -m1 'CUDA Version' || true",
            )
        )
    if node.infiniband:
        parts.append(
            _block(
                "infiniband",
                "ls -d /dev/infiniband >/dev/null || exit 3; "
                "for f in /sys/class/infiniband/*/ports/*/state; do "
                '[ -r "$f" ] && echo "$f $(cat "$f")"; done; true',
            )
        )
    paths = required_paths(node)
    if paths:
        parts.append(
            _block(
                "paths",
                "for p in " + " ".join(q(p) for p in paths) + "; do "
                'if [ -e "$p" ]; then echo "present $p"; else echo "missing $p"; fi; done',
            )
        )
    df_targets = " ".join(q(p) for p in disk_paths(node))
    parts.append(
        _block(
            "disk",
            "root=$(docker info --format '{{.DockerRootDir}}' 2>/dev/null || echo /var/lib/docker); "
            f'for p in "$root" {df_targets}; do '
            '[ -e "$p" ] || continue; '
            'echo "free_kb $(df -Pk "$p" | awk \'NR==2 {print $4}\') $p"; done',
        )
    )
    for image in images:
        pull = (
            f"if out=$(docker pull {q(image)} 2>&1); then echo pulled {q(image)}; "
            "else echo 'pull failed'; printf '%s\\n' \"$out\" | tail -n 1; exit 1; fi"
        )
        if not pull_missing:
            pull = "echo 'missing (pulling disabled)'; exit 1"
        elif image.startswith(OWN_IMAGES):
            pull = f"echo {q(NOT_PULLED)}; exit 1"
        parts.append(
            _block(
                f"image {image}",
                f"if id=$(docker image inspect --format '{{{{.Id}}}}' {q(image)} 2>/dev/null); then "
                f'echo "present $id"; else {pull}; fi',
            )
        )
    return "".join(parts)


_BLOCK_RE = re.compile(
    rf"^{re.escape(BEGIN)} (?P<name>[^\n]+)\n(?P<body>.*?)^{re.escape(END)} (?P=name) (?P<rc>-?\d+)$",
    re.M | re.S,
)


def split_blocks(output: str) -> dict[str, tuple[int, str]]:
    """``{check name: (exit status, printed text)}`` from the script's output."""
    return {m["name"]: (int(m["rc"]), m["body"].strip()) for m in _BLOCK_RE.finditer(output)}


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


# The judges take a check's block (exit status, printed text) and give (what was seen, the problems); those whose
# check prints its finding in the text leave the status unread (``_rc``).
def _check_docker(rc: int, body: str) -> tuple[str, list[str]]:
    if rc != 0:
        return f"failed: {_last_line(body)}", [f"docker does not answer: {_last_line(body)}"]
    return f"server {_last_line(body)}", []


def _check_nvidia_runtime(_rc: int, body: str) -> tuple[str, list[str]]:
    runtimes = re.search(r"^runtimes=(.*)$", body, re.M)
    cli = re.search(r"^nvidia-container-cli=(.*)$", body, re.M)
    has_runtime = bool(runtimes and '"nvidia"' in runtimes[1])
    has_cli = bool(cli and cli[1].strip() not in ("", "missing"))
    if has_runtime or has_cli:
        found = [what for what, ok in (("nvidia runtime", has_runtime), ("nvidia-container-cli", has_cli)) if ok]
        return ", ".join(found), []
    return "missing", ["NVIDIA container runtime missing (no 'nvidia' docker runtime, no nvidia-container-cli)"]


def _check_gpus(rc: int, body: str, declared: int | tuple[str, ...]) -> tuple[str, list[str]]:
    """``gpus: N``: the node has exactly N GPUs; a list of GPUs: each is there, by index or by UUID (the node may
    have others, which dlperf leaves alone)."""
    if rc != 0:
        return f"failed: {_last_line(body)}", [f"nvidia-smi failed: {_last_line(body)}"]
    gpus = [[p.strip() for p in line.split(",")] for line in body.splitlines() if re.match(r"^\s*\d+\s*,", line)]
    if isinstance(declared, int):
        if len(gpus) != declared:
            return f"{len(gpus)} GPUs", [f"{len(gpus)} GPUs found, {declared} declared"]
        return f"{len(gpus)} GPUs", []
    found = {p[0] for p in gpus} | {p[1] for p in gpus if len(p) > 2}  # index, uuid, name
    absent = [g for g in declared if g not in found]
    if absent:
        return f"{len(gpus)} GPUs", [f"GPU {', '.join(absent)} declared but not found ({len(gpus)} GPUs found)"]
    return f"{len(gpus)} GPUs, {len(declared)} declared ({', '.join(declared)})", []


_IB_STATE = re.compile(r"^/sys/class/infiniband/(?P<dev>[^/]+)/ports/(?P<port>\d+)/state \d+: (?P<state>\S+)", re.M)


def _check_infiniband(rc: int, body: str, devices: Sequence[str]) -> tuple[str, list[str]]:
    if rc != 0:
        return "no /dev/infiniband", ["InfiniBand declared but /dev/infiniband is missing"]
    active: dict[str, list[str]] = {}
    for m in _IB_STATE.finditer(body):
        active.setdefault(m["dev"], [])
        if m["state"] == "ACTIVE":
            active[m["dev"]].append(m["port"])
    seen = ", ".join(f"{d}:{'+'.join(p) or 'down'}" for d, p in sorted(active.items())) or "no HCA"
    if devices:
        problems = [
            f"InfiniBand device {d} not found" if d not in active else f"InfiniBand device {d} has no ACTIVE port"
            for d in devices
            if not active.get(d)
        ]
    else:
        problems = [] if any(active.values()) else ["InfiniBand declared but no port is ACTIVE"]
    return seen, problems


def _check_paths(_rc: int, body: str) -> tuple[str, list[str]]:
    missing = re.findall(r"^missing (.+)$", body, re.M)
    present = re.findall(r"^present (.+)$", body, re.M)
    return f"{len(present)} present, {len(missing)} missing", [f"path missing: {p}" for p in missing]


def _check_disk(_rc: int, body: str, min_free_gb: float) -> tuple[str, list[str]]:
    seen, problems = [], []
    for kb, path in re.findall(r"^free_kb (\d+) (.+)$", body, re.M):
        gb = int(kb) / 1024 / 1024
        seen.append(f"{path} {gb:.1f} GB free")
        if gb < min_free_gb:
            problems.append(f"disk: {gb:.1f} GB free on {path}, {min_free_gb:g} GB wanted")
    if not seen:
        return f"failed: {_last_line(body)}", [f"disk: could not read free space: {_last_line(body)}"]
    return "; ".join(seen), problems


def _check_image(image: str, rc: int, body: str) -> tuple[str, list[str]]:
    first = body.splitlines()[0] if body else ""
    if rc == 0 and first.startswith("present"):
        return "present", []
    if rc == 0 and first.startswith("pulled"):
        return "pulled", []
    if first.startswith(NOT_PULLED):
        return "missing", [
            f"image {image} missing: dlperf builds it (scripts/build-images.sh) and no registry holds it; load it"
            f" onto the node (docker save {image} | ssh <node> docker load: docs/cluster-guide.md) or push it to"
            " your registry and name that image in the suite (image:)"
        ]
    return "missing", [f"image {image} missing and could not be pulled: {_last_line(body)}"]


def _check_cuda(node: str, images: tuple[str, ...], _rc: int, body: str) -> tuple[str, list[str]]:
    gpus = parse_gpu_facts(body)
    if not gpus:  # nvidia-smi failed: the gpus check says so
        return f"no GPU facts: {_last_line(body)}", []
    driver_cuda = parse_driver_cuda(body)
    caps = sorted({".".join(map(str, g.compute_capability)) for g in gpus if g.compute_capability}) or ["unknown"]
    drivers = sorted({g.driver_version for g in gpus})
    seen = f"driver {', '.join(drivers)}, CUDA {driver_cuda or 'unknown'}, compute capability {', '.join(caps)}"
    return seen, [p for image in images for p in image_problems(node, image, gpus, driver_cuda)]


def health_of_output(node: Node, images: Iterable[str], output: str, exit_status: int = 0) -> NodeHealth:
    """The health of ``node`` from what :func:`preflight_script` printed there (pure)."""
    images = tuple(images)
    blocks = split_blocks(output)
    checks: dict[str, str] = {}
    problems: list[str] = []

    def take(name: str, found: tuple[str, list[str]]) -> None:
        checks[name] = found[0]
        problems.extend(found[1])

    def block(name: str) -> tuple[int, str] | None:
        if name not in blocks:
            problems.append(f"check {name} did not report (script exit status {exit_status}): {_last_line(output)}")
            checks[name] = "no report"
            return None
        return blocks[name]

    if (b := block("docker")) is not None:
        take("docker", _check_docker(*b))
    if node.accelerator == "nvidia":
        if (b := block("nvidia_runtime")) is not None:
            take("nvidia_runtime", _check_nvidia_runtime(*b))
        if (b := block("gpus")) is not None:
            take("gpus", _check_gpus(*b, node.gpus))
    else:
        checks["nvidia_runtime"] = checks["gpus"] = f"{NOT_APPLICABLE} (accelerator: {node.accelerator})"
    if node.infiniband:
        if (b := block("infiniband")) is not None:
            take("infiniband", _check_infiniband(*b, node.infiniband_devices))
    else:
        checks["infiniband"] = f"{NOT_APPLICABLE} (infiniband: false)"
    if required_paths(node) and (b := block("paths")) is not None:
        take("paths", _check_paths(*b))
    if (b := block("disk")) is not None:
        take("disk", _check_disk(*b, node.min_free_disk_gb))
    for image in images:
        if (b := block(f"image {image}")) is not None:
            take(f"image {image}", _check_image(image, *b))
    if node.accelerator == "nvidia" and images and (b := block("cuda")) is not None:
        take("cuda", _check_cuda(node.name, images, *b))
    return NodeHealth(node.name, not problems, tuple(problems), checks)


def case_blocker(node_names: Iterable[str], health: dict[str, NodeHealth]) -> str | None:
    """Why a case on ``node_names`` must not start (``"preflight: <node>: <problem>"``), or None."""
    for name in node_names:
        h = health.get(name)
        if h is not None and not h.ok:
            return f"preflight: {h.reason}"
    return None
