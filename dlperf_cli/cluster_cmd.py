"""``dlperf cluster sync --inventory FILE``: the inventory's nodes as Airflow connections and pools.

Per node ``<name>`` of the inventory:

- the SSH connection ``dlperf_node_<name>`` (when the node declares ``ssh``): host = address, login, port,
  and extras ``key_file``, ``host_key`` (pins the node's key; without it the workers' known_hosts decide),
  ``conn_timeout`` and ``cmd_timeout: null`` (the provider's default of 10 s of silence would kill a
  quiet benchmark; tasks are bounded by their ``execution_timeout`` instead);
- the Docker connection ``dlperf_docker_<name>`` (or the node's ``docker.conn_id``; when the node declares
  ``docker.registry``): the Docker provider's registry login, conn type ``docker``, host/login = the
  registry's server and username, password = ``$<docker.registry.password_env>`` (left as it is when the
  inventory names no variable, so one set by hand stays), extra ``email``. The docker runtime gives it to the
  provider's ``DockerHook(docker_conn_id=...)``, which logs in with it; the engine's address and TLS client
  stay the inventory's ``docker_url`` and ``docker.tls`` (``dlperf_airflow.docker_runtime.DockerEndpoint``);
- the one-slot pool ``dlperf_node_<name>``: one task at a time on that node.

Idempotent: what already matches is left alone, what differs is updated, nothing is duplicated.
``--prune`` also removes ``dlperf_node_*`` connections and pools and ``dlperf_docker_*`` connections of
nodes no longer in the inventory.
The metadata DB is Airflow's own configuration (``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``); without one,
the embedded one of ``dlperf run`` (``.dlperf/airflow``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from dlperf_core.cluster.inventory import DOCKER_CONN_PREFIX, Inventory, Node
from dlperf_core.errors import ConfigError

PREFIX = "dlperf_node_"
POOL_DESCRIPTION = "one task at a time on node {name} (dlperf cluster sync)"
DESCRIPTIONS = {
    "ssh": "dlperf node (dlperf cluster sync)",
    "docker": "dlperf node's registry login (dlperf cluster sync)",
}


@dataclass(frozen=True)
class ConnectionSpec:
    """The Airflow SSH (or Docker) connection of one node, as plain fields.

    ``password`` None: the connection's password is not managed (left as it is)."""

    conn_id: str
    host: str | None
    login: str | None
    port: int | None
    extra: dict
    conn_type: str = "ssh"
    password: str | None = None

    @classmethod
    def for_node(cls, node: Node) -> ConnectionSpec:
        assert node.ssh is not None
        extra: dict = {"conn_timeout": node.ssh.connect_timeout_s, "cmd_timeout": None}
        if node.ssh.key_file:
            extra["key_file"] = node.ssh.key_file
        if node.ssh.host_key:
            extra["host_key"] = node.ssh.host_key
        return cls(node.airflow_id, node.address, node.ssh.user, node.ssh.port, extra)

    @classmethod
    def docker_for_node(cls, node: Node, environ: Mapping[str, str] = os.environ) -> ConnectionSpec | None:
        """The node's Docker connection: the registry login of ``docker.registry`` as the Docker provider
        reads it (host, login, password, extra ``email``), or None when the node declares no registry.
        Raises ConfigError when the registry's password variable is not set."""
        registry = node.docker.registry
        if registry is None:
            return None
        extra: dict = {"email": registry.email} if registry.email else {}
        password = None
        if registry.password_env:
            password = environ.get(registry.password_env)
            if password is None:
                raise ConfigError(
                    f"node {node.name}",
                    [
                        (
                            f"docker.registry.password_env: ${registry.password_env} is not set (the registry "
                            f"password of connection {node.docker_conn_id})"
                        )
                    ],
                )
        return cls(
            node.docker_conn_id, registry.server, registry.username, None, extra, conn_type="docker", password=password
        )


def docker_specs(inventory: Inventory, environ: Mapping[str, str] = os.environ) -> list[ConnectionSpec]:
    """The inventory's Docker connections, one per connection id (nodes may share one if they agree)."""
    specs: dict[str, ConnectionSpec] = {}
    for node in inventory.nodes:
        spec = ConnectionSpec.docker_for_node(node, environ)
        if spec is None:
            continue
        if spec.conn_id in specs and specs[spec.conn_id] != spec:
            raise ConfigError(
                inventory.name,
                [
                    (
                        f"node {node.name}: docker connection {spec.conn_id} is shared with another node that gives it "
                        "a different registry login; give each its own docker.conn_id"
                    )
                ],
            )
        specs[spec.conn_id] = spec
    return list(specs.values())


@dataclass(frozen=True)
class SyncChange:
    """What sync did to one Airflow object: created, updated, unchanged or removed."""

    kind: str  # connection | pool
    name: str
    action: str


def _apply_connection(session, spec: ConnectionSpec) -> str:
    from airflow.models.connection import Connection

    existing = session.query(Connection).filter(Connection.conn_id == spec.conn_id).one_or_none()
    extra = json.dumps(spec.extra, sort_keys=True)
    if existing is None:
        session.add(
            Connection(
                conn_id=spec.conn_id,
                conn_type=spec.conn_type,
                host=spec.host,
                login=spec.login,
                port=spec.port,
                password=spec.password,
                extra=extra,
                description=DESCRIPTIONS[spec.conn_type],
            )
        )
        return "created"
    current = (existing.conn_type, existing.host, existing.login, existing.port, existing.extra_dejson)
    same = current == (spec.conn_type, spec.host, spec.login, spec.port, spec.extra)
    if same and (spec.password is None or existing.password == spec.password):
        return "unchanged"
    existing.conn_type, existing.host, existing.login, existing.port = spec.conn_type, spec.host, spec.login, spec.port
    existing.extra = extra
    if spec.password is not None:
        existing.password = spec.password
    return "updated"


def _apply_pool(session, name: str, description: str) -> str:
    """A node's one-slot pool; it counts deferred tasks (``include_deferred``), as ``dlperf_cluster`` does: a task
    that waits deferred still holds its node."""
    from airflow.models.pool import Pool

    existing = session.query(Pool).filter(Pool.pool == name).one_or_none()
    if existing is None:
        session.add(Pool(pool=name, slots=1, description=description, include_deferred=True))
        return "created"
    if (existing.slots, existing.description, existing.include_deferred) == (1, description, True):
        return "unchanged"
    existing.slots, existing.description, existing.include_deferred = 1, description, True
    return "updated"


def sync_cluster(inventory: Inventory, *, prune: bool = False) -> list[SyncChange]:
    """Create or update every node's connection and pool in Airflow's metadata DB (one transaction)."""
    from airflow.models.connection import Connection
    from airflow.models.pool import Pool
    from airflow.utils.session import create_session

    changes: list[SyncChange] = []
    dockers = {spec.conn_id: spec for spec in docker_specs(inventory)}  # refused here, before anything is written
    with create_session() as session:
        for node in inventory.nodes:
            if node.ssh is not None:
                spec = ConnectionSpec.for_node(node)
                changes.append(SyncChange("connection", spec.conn_id, _apply_connection(session, spec)))
            if (docker := dockers.pop(node.docker_conn_id, None)) is not None:
                changes.append(SyncChange("connection", docker.conn_id, _apply_connection(session, docker)))
            name = node.airflow_id
            changes.append(
                SyncChange("pool", name, _apply_pool(session, name, POOL_DESCRIPTION.format(name=node.name)))
            )
        if prune:
            wanted_conns = {n.airflow_id for n in inventory.nodes if n.ssh is not None}
            wanted_conns |= {s.conn_id for s in docker_specs(inventory)}
            wanted_pools = {n.airflow_id for n in inventory.nodes}
            managed = Connection.conn_id.startswith(PREFIX) | Connection.conn_id.startswith(DOCKER_CONN_PREFIX)
            for conn in session.query(Connection).filter(managed).all():
                if conn.conn_id not in wanted_conns:
                    session.delete(conn)
                    changes.append(SyncChange("connection", str(conn.conn_id), "removed"))
            for pool in session.query(Pool).filter(Pool.pool.startswith(PREFIX)).all():
                if pool.pool not in wanted_pools:
                    session.delete(pool)
                    changes.append(SyncChange("pool", str(pool.pool), "removed"))
    return changes


def _metadata_db_ready() -> str | None:
    """None when Airflow's metadata DB has its tables, else why not."""
    from airflow import settings
    from sqlalchemy import inspect

    try:
        tables = set(inspect(settings.engine).get_table_names())
    except Exception as exc:  # noqa: BLE001 - whatever stops the check (no engine, no server, no rights) is the answer
        return f"cannot reach Airflow's metadata DB: {type(exc).__name__}: {exc}"
    missing = {"connection", "slot_pool"} - tables
    return (
        f"Airflow's metadata DB has no {', '.join(sorted(missing))} table (run `airflow db migrate`)"
        if missing
        else None
    )


def cmd_cluster_sync(args: argparse.Namespace) -> int:
    from dlperf_core.cluster.inventory import load_inventory

    try:
        inventory = load_inventory(args.inventory)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    embedded = "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" not in os.environ and "AIRFLOW_HOME" not in os.environ
    from dlperf_cli.embedded import migrate_metadata_db, prepare_environment

    prepare_environment()
    # Airflow logs (structlog) to stdout; stdout is for the report (and --json), so Airflow gets stderr.
    with contextlib.redirect_stdout(sys.stderr):
        if embedded:
            migrate_metadata_db()
        problem = _metadata_db_ready()
        if problem:
            print(f"dlperf cluster sync: {problem}", file=sys.stderr)
            return 2
        try:
            changes = sync_cluster(inventory, prune=args.prune)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps([asdict(c) for c in changes], indent=2))
    else:
        for c in changes:
            print(f"{c.kind} {c.name}: {c.action}")
        counts = {a: sum(c.action == a for c in changes) for a in ("created", "updated", "unchanged", "removed")}
        print(f"{inventory.name}: " + ", ".join(f"{n} {a}" for a, n in counts.items()), file=sys.stderr)
    return 0


def add_cluster_parser(sub) -> None:
    """``dlperf cluster sync`` on the CLI's subcommand parser."""
    cluster = sub.add_parser("cluster", help="manage the cluster's nodes in Airflow")
    csub = cluster.add_subparsers(dest="cluster_command", required=True)
    sync = csub.add_parser(
        "sync",
        help="create/update one SSH connection and one one-slot pool dlperf_node_<name> per inventory node, "
        "and its Docker connection dlperf_docker_<name> (TLS client, registry login)",
    )
    sync.add_argument("--inventory", required=True, help="node inventory YAML, e.g. inventories/example-cluster.yaml")
    sync.add_argument(
        "--prune", action="store_true", help="remove dlperf_node_*/dlperf_docker_* connections and pools not in it"
    )
    sync.add_argument("--json", action="store_true", help="print the changes as JSON")
    sync.set_defaults(func=cmd_cluster_sync)
