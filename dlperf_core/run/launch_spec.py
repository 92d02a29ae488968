"""What was launched on each node of one case run, as stored data: the launch spec (``results.launch_spec``).

A runtime that ran a case describes what it started on every node (:class:`DescribesLaunches`): the node,
the runtime, the image that ran (tag, image ID and registry digest, read from the node's Docker engine), argv,
environment, the container's settings, the working directory and the dlperf version; the slurm runtime also its
job (:class:`SlurmRecord`: job id, node list, partition, Slurm's version and the batch script). ``store_result`` keeps
it on the result row, and ``dlperf reproduce`` prints it back as shell commands (:func:`shell_script`; a Slurm job's
batch script) or re-runs the point.

Secrets are never stored: an environment variable or a ``--flag`` whose name looks like a password, token,
secret or key loses its value (:func:`is_secret_name`), a URL loses the password in it, the files a runtime
puts into a container before start (per-case ssh keys) are kept by path only, and registry credentials are
never part of a spec. What was left out is named in :attr:`NodeSpec.removed`.

Plain data with its JSON form generated from the types (:class:`~dlperf_core.json_form.JsonForm`:
``LaunchSpec.from_json(spec.to_json()) == spec``): the fields are declared in the order of the column's keys, so
a spec stored by any dlperf since the column exists reads back and is written again unchanged
(``tests/data/json_forms/launch_specs.json``); no Airflow import.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field

from dlperf_core.frameworks import get_adapter
from dlperf_core.json_form import JsonForm
from dlperf_core.model import CaseJob, CaseRun, ContainerSpec, NodeLaunch

SPEC_FORMAT = 1
"""Version of the spec's JSON shape (``format``)."""

REMOVED = "<removed>"
"""What stands in the place of a value that was not stored (an argument, or a password in a URL)."""

REPRODUCED_LABEL = "dlperf.reproduced"
"""Label of a container started by hand from :func:`shell_script` (besides the original run's labels)."""

# --------------------------------------------------------------------------- secrets

_SECRET_WORDS = frozenset(
    {"pass", "passwd", "password", "passphrase", "pwd", "pw", "secret", "secrets", "token", "tokens", "key", "keys"}
    | {"credential", "credentials", "creds", "auth", "authorization", "cookie", "apikey", "privatekey", "signature"}
)
_SECRET_ENDINGS = ("password", "passwd", "secret", "token", "key", "credential", "credentials")
_REFERENCE_WORDS = frozenset({"file", "path", "dir", "env", "var"})
"""A name ending in one of these points at a secret rather than holding it (``DLPERF_REGISTRY_PASSWORD_ENV``,
``SSH_KEY_FILE``): kept."""

_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:)(?P<password>[^@/\s]+)(?P<tail>@)")


def is_secret_name(name: str) -> bool:
    """Whether an environment variable or a command-line flag named ``name`` looks like it holds a password,
    token, secret or key (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``--api-key``, ``DOCKER_AUTH_CONFIG``), by
    its words (split at ``_``, ``-`` and ``.``): one of them such a word, or ending in one (``apikey``). A name
    whose last word is file, path, dir, env or var names where a secret is, and is kept. Errs on the side of
    leaving a value out."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    if not words or words[-1] in _REFERENCE_WORDS:
        return False
    return any(w in _SECRET_WORDS or w.endswith(_SECRET_ENDINGS) for w in words)


def _scrub_value(value: str) -> tuple[str, bool]:
    """``value`` with the password of any URL in it replaced by :data:`REMOVED`; whether one was."""
    scrubbed, n = _URL_PASSWORD.subn(lambda m: f"{m['head']}{REMOVED}{m['tail']}", value)
    return scrubbed, n > 0


def scrub_env(env: Mapping[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """(the environment without secrets, what was removed: ``env NAME`` per variable left out, ``env NAME (URL
    password)`` per value whose URL lost its password)."""
    kept: dict[str, str] = {}
    removed: list[str] = []
    for name in sorted(env):
        if is_secret_name(name):
            removed.append(f"env {name}")
            continue
        value, changed = _scrub_value(env[name])
        if changed:
            removed.append(f"env {name} (URL password)")
        kept[name] = value
    return kept, tuple(removed)


def scrub_argv(argv: tuple[str, ...] | list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(argv without secrets, what was removed): the value of a ``--flag=value`` or ``--flag value`` whose
    flag looks secret (:func:`is_secret_name`) becomes :data:`REMOVED`, and so does a URL's password. A
    ``bash -c`` script is an argument like any other (its URLs are scrubbed; its own variables are not read)."""
    out: list[str] = []
    removed: list[str] = []
    take_next: str | None = None
    for arg in argv:
        if take_next is not None:
            out.append(REMOVED)
            removed.append(f"argv {take_next}")
            take_next = None
            continue
        if arg.startswith("-") and len(arg) > 1:
            flag, eq, _value = arg.partition("=")
            if is_secret_name(flag.lstrip("-")):
                if eq:
                    out.append(f"{flag}={REMOVED}")
                    removed.append(f"argv {flag}")
                else:
                    out.append(arg)
                    take_next = flag
                continue
        value, changed = _scrub_value(arg)
        if changed:
            removed.append("argv URL password")
        out.append(value)
    return tuple(out), tuple(removed)


def without_userinfo(url: str) -> str:
    """``url`` without a ``user:password@`` part (a Docker engine's address as it may be stored)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _scrub_value(url)[0]
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


# --------------------------------------------------------------------------- the spec


def dlperf_version() -> str:
    """dlperf's package version (its installed distribution's), else the source's ``dlperf_core.__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dlperf")
    except PackageNotFoundError:
        from dlperf_core import __version__

        return __version__


@dataclass(frozen=True)
class ImageRef(JsonForm):
    """The image a node's container ran: the tag it was asked for, the image ID the engine ran and, for an
    image that came from a registry, its digest (``repo@sha256:...``, from ``RepoDigests``; None: built or
    loaded locally)."""

    tag: str
    id: str | None = None
    digest: str | None = None

    @property
    def exact(self) -> str:
        """What names exactly this image on an engine: its ID, else its digest, else (not known) its tag."""
        return self.id or self.digest or self.tag


def pick_digest(repo_digests: list[str] | None, tag: str) -> str | None:
    """The registry digest of ``tag`` among an image's ``RepoDigests``: the one of the tag's repository, else the
    first; None when it has none (a local build)."""
    if not repo_digests:
        return None
    repo = tag.split("@", 1)[0]
    if ":" in repo.rsplit("/", 1)[-1]:
        repo = repo.rsplit(":", 1)[0]
    return next((d for d in repo_digests if d.split("@", 1)[0] == repo), repo_digests[0])


@dataclass(frozen=True)
class BindMount(JsonForm):
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class ContainerSettings(JsonForm):
    """A node's container as the Docker engine got it (``docker_runtime.create_container``), in the terms of
    ``docker run``: devices as ``HOST:CONTAINER:PERMS``, ulimits as ``NAME=SOFT:HARD``."""

    name: str
    network: str
    hostname: str | None = None  # and its alias on a user-defined network
    # the GPUs of the NVIDIA runtime's device request, as `docker run --gpus` takes them: "device=0,1" (by index or
    # UUID); "all" (every GPU of the node) in launch specs dlperf stored before it gave a case only its own GPUs
    gpus: str | None = None
    devices: tuple[str, ...] = ()
    ipc: str | None = None  # "host"; None: docker's default
    shm_size: str | None = None
    cap_add: tuple[str, ...] = ()
    ulimits: tuple[str, ...] = ()
    mounts: tuple[BindMount, ...] = ()
    memory_limit_mb: int | None = None  # and no swap beyond it
    # the CPU time it may use, in CPUs (``docker run --cpus``; the node's cpu_quota); left out of the JSON when unset,
    # so a spec stored before it existed is written again unchanged
    cpus: Annotated[float | None, Field(exclude_if=lambda v: v is None)] = None
    labels: dict[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()  # files put in before start (per-case ssh keys): paths only, never their content

    @classmethod
    def of(cls, spec: ContainerSpec) -> ContainerSettings:
        """The settings of ``spec`` as ``docker_runtime.host_config_for`` hands them to the engine."""
        return cls(
            name=spec.name,
            network=spec.network,
            hostname=spec.hostname,
            gpus=f"device={','.join(spec.gpu_ids)}" if spec.gpu_ids else None,
            devices=tuple(f"{d}:{d}:rwm" for d in spec.devices),
            ipc="host" if spec.ipc_host else None,
            shm_size=spec.shm_size,
            cap_add=tuple(spec.cap_add),
            ulimits=("memlock=-1:-1",) if spec.memlock_unlimited else (),
            mounts=tuple(BindMount(m.source, m.target, m.read_only) for m in spec.mounts),
            memory_limit_mb=spec.memory_limit_mb,
            cpus=spec.cpu_quota,
            labels=dict(spec.labels),
            files=tuple(f.path for f in spec.files),
        )

    def run_flags(self, *, name: str, labels: Mapping[str, str]) -> list[str]:
        """The ``docker run`` flags of these settings, the container named ``name`` and labelled ``labels``."""
        flags = ["--name", name]
        for key, value in sorted(labels.items()):
            flags += ["--label", f"{key}={value}"]
        flags += ["--network", self.network]
        if self.hostname:
            flags += ["--hostname", self.hostname]
            if self.network not in ("host", "bridge", "none"):
                flags += ["--network-alias", self.hostname]
        if self.gpus:  # quoted: docker's --gpus is CSV, and "device=0,1" unquoted would give device 0 only
            flags += ["--gpus", f'"{self.gpus}"' if "," in self.gpus else self.gpus]
        for device in self.devices:
            flags += ["--device", device]
        if self.ipc:
            flags += ["--ipc", self.ipc]
        if self.shm_size:
            flags += ["--shm-size", self.shm_size]
        for cap in self.cap_add:
            flags += ["--cap-add", cap]
        for ulimit in self.ulimits:
            flags += ["--ulimit", ulimit]
        for m in self.mounts:
            flags += [
                "--mount",
                f"type=bind,source={m.source},target={m.target}" + (",readonly" if m.read_only else ""),
            ]
        if self.memory_limit_mb:
            flags += ["--memory", f"{self.memory_limit_mb}m", "--memory-swap", f"{self.memory_limit_mb}m"]
        if self.cpus:
            flags += ["--cpus", f"{self.cpus:g}"]
        return flags


@dataclass(frozen=True, kw_only=True)
class NodeSpec(JsonForm):
    """What was started on one node (fields in the stored key order: keyword-only, so the order is free)."""

    node: str
    address: str
    rank: int
    role: Literal["launcher", "sshd"] = "launcher"  # "sshd": mpirun's remote side
    runtime: str  # "docker" | "local" | "slurm"
    image: ImageRef | None = None  # None: the local runtime
    argv: tuple[str, ...]
    env: dict[str, str]  # what the launch set (a local process inherits the rest of the worker's environment)
    removed: tuple[str, ...] = ()  # what was not stored: "env HF_TOKEN", "argv --api-key", ...
    container: ContainerSettings | None = None  # None: the local runtime
    working_dir: str | None = None  # None: the image's (not known)
    engine: str | None = None  # the node's Docker engine (docker_url without credentials)
    dlperf_version: str


@dataclass(frozen=True, kw_only=True)
class SlurmRecord(JsonForm):
    """How a case run on the ``slurm`` runtime was submitted: its job, where it ran and the batch script (secrets
    left out: :func:`scrub_env`, :func:`scrub_argv`), which ``dlperf reproduce`` prints."""

    job_id: str | None = None  # None: sbatch never answered
    node_list: str | None = None  # Slurm's, e.g. c[1-2]
    partition: str | None = None
    slurm_version: str | None = None  # sinfo --version, e.g. 22.05.8
    software: str = "none"  # none | pyxis | apptainer (the inventory's software)
    batch_script: str = ""

    def scheduler(self) -> dict[str, str]:
        """The job's facts as the stored environment keeps them (:attr:`Environment.scheduler
        <dlperf_core.cluster.environment.Environment.scheduler>`): the scheduler, its version, the partition, the
        job id and its node list, those known."""
        facts = {
            "scheduler": "slurm",
            "version": self.slurm_version,
            "partition": self.partition,
            "job_id": self.job_id,
            "node_list": self.node_list,
        }
        return {name: value for name, value in facts.items() if value}


@dataclass(frozen=True, kw_only=True)
class LaunchSpec(JsonForm):
    """One case run as it was launched: its nodes in rank order, where its plan came from (suite and inventory
    files) and how its figure is read from node 0's log (format, warm-up, measured iterations). Fields in the
    stored key order (keyword-only, so the order is free); :meth:`to_json` is what ``results.launch_spec``
    holds, :meth:`from_json` reads any stored spec back."""

    format: int = SPEC_FORMAT
    case_key: str
    repeat: int
    suite: str | None = None
    inventory: str | None = None
    log_format: str | None = None
    warmup: int | None = None
    measured: int | None = None
    nodes: tuple[NodeSpec, ...]
    # the slurm runtime's job (left out of the JSON when unset, so a spec stored before it existed is written again
    # unchanged)
    slurm: Annotated[SlurmRecord | None, Field(exclude_if=lambda v: v is None)] = None

    @property
    def runtime(self) -> str:
        return self.nodes[0].runtime if self.nodes else "unknown"

    def merged(self, views: Mapping[str, LaunchSpec]) -> LaunchSpec:
        """This spec with each node as that node saw it itself (``views``: node name -> the spec its own task
        built, which knows the image its container ran); node routing, where every node starts only its own."""
        nodes = []
        for n in self.nodes:
            own = views.get(n.node)
            mine = [m for m in own.nodes if m.rank == n.rank] if own else []
            nodes.append(mine[0] if mine else n)
        return replace(self, nodes=tuple(nodes))


def _node(
    launch: NodeLaunch,
    runtime: str,
    argv: tuple[str, ...],
    env: Mapping[str, str],
    *,
    working_dir: str | None,
    image: ImageRef | None = None,
    container: ContainerSettings | None = None,
    engine: str | None = None,
) -> NodeSpec:
    """The spec of one node of ``runtime``: who it is, and its command and environment with secrets removed."""
    clean_argv, argv_removed = scrub_argv(argv)
    clean_env, env_removed = scrub_env(env)
    return NodeSpec(
        node=launch.node.name,
        address=launch.node.address,
        rank=launch.node_rank,
        role=launch.role,
        runtime=runtime,
        argv=clean_argv,
        env=clean_env,
        removed=env_removed + argv_removed,
        dlperf_version=dlperf_version(),
        image=image,
        container=container,
        working_dir=working_dir,
        engine=engine,
    )


def local_node(launch: NodeLaunch, argv: tuple[str, ...], env: Mapping[str, str], working_dir: str) -> NodeSpec:
    """A node of the local runtime: the command and environment its process group got, secrets removed."""
    return _node(launch, "local", argv, env, working_dir=working_dir)


def docker_node(
    launch: NodeLaunch, container: ContainerSpec, image: ImageRef, working_dir: str | None = None
) -> NodeSpec:
    """A node of the docker runtime: its container spec as the engine got it, the image that ran, secrets
    removed."""
    return _node(
        launch,
        "docker",
        container.command,
        container.environment,
        image=image,
        container=ContainerSettings.of(container),
        working_dir=working_dir or container.working_dir,
        engine=without_userinfo(launch.node.docker_url),
    )


def slurm_node(launch: NodeLaunch, image: ImageRef | None = None, host: str | None = None) -> NodeSpec:
    """A node of the slurm runtime: its launch as the batch script runs it, secrets removed; ``image``: the
    pyxis/Apptainer image; ``host``: the host Slurm gave it, its address (None: not known, the slot's variable)."""
    spec = _node(launch, "slurm", launch.argv, launch.env, working_dir=None, image=image)
    return replace(spec, address=host) if host else spec


@runtime_checkable
class DescribesBatch(Protocol):
    """A runtime that submits a case as a batch job (slurm) and can say how (:class:`SlurmRecord`)."""

    def slurm_record(self, job: CaseJob) -> SlurmRecord | None: ...


@runtime_checkable
class DescribesLaunches(Protocol):
    """A runtime that can say what it launched for a job's nodes (both of dlperf's runtimes can)."""

    def node_specs(self, job: CaseJob) -> tuple[NodeSpec, ...]: ...


def launch_spec_of(
    runtime: object, job: CaseJob, case_run: CaseRun, *, suite: str | None, inventory: str | None
) -> LaunchSpec | None:
    """The launch spec of ``case_run`` as ``runtime`` ran ``job`` (None: the runtime cannot describe it)."""
    if not isinstance(runtime, DescribesLaunches):
        return None
    case = case_run.case
    adapter = get_adapter(case.framework)
    warmup, measured = adapter.parse_window(case)
    return LaunchSpec(
        case_key=case.key,
        repeat=case_run.repeat,
        nodes=runtime.node_specs(job),
        suite=suite,
        inventory=inventory,
        log_format=adapter.log_format,
        warmup=warmup,
        measured=measured,
        slurm=runtime.slurm_record(job) if isinstance(runtime, DescribesBatch) else None,
    )


# --------------------------------------------------------------------------- as shell commands

_DOCKER_OWN_NETWORKS = ("host", "bridge", "none")


def node_log_name(node: NodeSpec) -> str:
    """The file the printed commands write a node's output to (as the runtime names node logs)."""
    return f"node{node.rank}.log"


def _docker_lines(node: NodeSpec) -> list[str]:
    assert node.container is not None
    image = node.image or ImageRef("unknown")
    lines = []
    if image.digest:
        lines.append(shlex.join(["docker", "pull", image.digest]))
    if image.id:
        missing = f"dlperf reproduce: image {image.id} ({image.tag}) is not on this engine: pull or build it first"
        lines.append(f"docker image inspect {shlex.quote(image.id)} >/dev/null || echo {shlex.quote(missing)} >&2")
    network = node.container.network
    if network not in _DOCKER_OWN_NETWORKS:
        create = shlex.join(["docker", "network", "create", "--label", "dlperf.network=1", network])
        lines.append(f"docker network inspect {shlex.quote(network)} >/dev/null 2>&1 || {create} >/dev/null")
    run = ["docker", "run", "--rm"]
    labels = {**node.container.labels, REPRODUCED_LABEL: "true"}
    run += node.container.run_flags(name=f"{node.container.name}-repro", labels=labels)
    if node.working_dir:
        run += ["--workdir", node.working_dir]
    for name, value in sorted(node.env.items()):
        run += ["--env", f"{name}={value}"]
    for removed in node.removed:  # a secret's name only: docker passes on the value of your own environment
        if removed.startswith("env ") and " (" not in removed:
            run += ["--env", removed[len("env ") :]]
    run += [image.exact, *node.argv]
    lines.append(f"{shlex.join(run)} 2>&1 | tee {shlex.quote(node_log_name(node))}")
    return lines


def _local_lines(node: NodeSpec) -> list[str]:
    command = shlex.join(["env", *(f"{k}={v}" for k, v in sorted(node.env.items())), *node.argv])
    cd = f"cd {shlex.quote(node.working_dir)} && " if node.working_dir else ""
    return [f"({cd}{command}) 2>&1 | tee {shlex.quote(node_log_name(node))}"]


def _image_comment(image: ImageRef | None) -> str:
    if image is None:
        return "image not known"
    digest = f"registry digest {image.digest}" if image.digest else "no registry digest (built or loaded locally)"
    return f"image {image.tag}, id {image.id or 'not known'}, {digest}"


def _slurm_lines(record: SlurmRecord) -> str:
    """A Slurm job as a person submits it again: where it ran, then its batch script (to save and submit)."""
    ran = ", ".join(
        part
        for part in (
            f"job {record.job_id}" if record.job_id else "never submitted",
            f"nodes {record.node_list}" if record.node_list else "",
            f"partition {record.partition}" if record.partition else "",
            f"Slurm {record.slurm_version}" if record.slurm_version else "",
            f"software {record.software}",
        )
        if part
    )
    return (
        f"# slurm: {ran}\n"
        "# the batch script below, as it was submitted: save it as batch.sh in its job folder (the path in its last"
        " line; it starts itself there on every node) and run `sbatch batch.sh` on the login node\n"
        f"{record.batch_script.rstrip()}"
    )


def shell_script(spec: LaunchSpec, *, run_id: str, dag_id: str, figure: str | None = None) -> str:
    """The launch spec as commands a person runs by hand: per node, a comment naming it (rank, role, address,
    image ID and digest, dlperf version), then for the docker runtime a check that the image that ran is there
    (pulled by digest where it came from a registry), the network, and one ``docker run --rm`` with exactly the
    settings, environment and argv that ran (the container's name ends ``-repro``, its labels are the run's
    with ``dlperf.reproduced=true``); for the local runtime the command with its environment. Each writes its
    output, the node's log, to ``node<rank>.log`` too."""
    multi = len(spec.nodes) > 1
    head = [
        f"# dlperf reproduce: {spec.case_key} repeat {spec.repeat} of run {run_id} (DAG {dag_id})"
        + (f": {figure}" if figure else ""),
        f"# {spec.runtime} runtime, {len(spec.nodes)} node(s)"
        + (": run each node's lines on that node, all nodes at once (sshd nodes first)" if multi else ""),
    ]
    if spec.log_format:
        window = ""
        if spec.warmup is not None:
            window += f" --warmup {spec.warmup}"
        if spec.measured is not None:
            window += f" --measured {spec.measured}"
        head.append(
            f"# the figure, from node 0's log: dlperf parse node0.log --format {spec.log_format}{window} --strict"
        )
    removed = sorted({r for n in spec.nodes for r in n.removed})
    if removed:
        head.append(
            "# never stored (secrets): "
            + ", ".join(removed)
            + f"; set them in your environment, and replace {REMOVED} in a command by the value"
        )
    if any(n.container and n.container.files for n in spec.nodes):
        head.append(
            "# files the runtime put into the containers before start (per-case ssh keys) are not stored: "
            "without them those containers cannot reach each other; `dlperf reproduce --run` makes new ones"
        )
    out = ["\n".join(head)]
    if spec.slurm is not None:
        return "\n\n".join([*out, _slurm_lines(spec.slurm)]) + "\n"
    order = sorted(spec.nodes, key=lambda n: (n.role != "sshd", n.rank))
    for node in order:
        where = f"address {node.address}" + (f", engine {node.engine}" if node.engine else "")
        block = [
            f"# node {node.node}: rank {node.rank} ({node.role}), {where}, dlperf {node.dlperf_version or 'unknown'}"
        ]
        if node.runtime == "docker":
            block.append(f"# {_image_comment(node.image)}")
        if node.runtime == "docker" and node.container is not None:
            block += _docker_lines(node)
        else:
            block += _local_lines(node)
        out.append("\n".join(block))
    return "\n\n".join(out) + "\n"
