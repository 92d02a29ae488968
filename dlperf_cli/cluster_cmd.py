"""``dlperf cluster sync --inventory FILE``: the inventory's nodes as Airflow connections and pools.

Per node ``<name>`` of the inventory:

- the SSH connection ``dlperf_node_<name>`` (when the node declares ``ssh``): host = address, login, port,
  and extras ``key_file``, ``host_key`` (pins the node's key; without it the workers' known_hosts decide),
  ``conn_timeout`` and ``cmd_timeout: null`` (the provider's default of 10 s of silence would kill a
  quiet benchmark; tasks are bounded by their ``execution_timeout`` instead);
- the one-slot pool ``dlperf_node_<name>``: one task at a time on that node.

No Docker connection is made: the Docker provider's connection holds *registry* credentials, not the
engine address; each node's engine is its inventory ``docker_url``.

Idempotent: what already matches is left alone, what differs is updated, nothing is duplicated.
``--prune`` also removes ``dlperf_node_*`` connections and pools of nodes no longer in the inventory.
The metadata DB is Airflow's own configuration (``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``); without one,
the embedded one of ``dlperf run`` (``.dlperf/airflow``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from dataclasses import asdict, dataclass

from dlperf_core.inventory import Inventory, Node

PREFIX = "dlperf_node_"
POOL_DESCRIPTION = "one task at a time on node {name} (dlperf cluster sync)"


@dataclass(frozen=True)
class ConnectionSpec:
    """The Airflow SSH connection of one node, as plain fields."""

    conn_id: str
    host: str
    login: str
    port: int
    extra: dict

    @classmethod
    def for_node(cls, node: Node) -> "ConnectionSpec":
        assert node.ssh is not None
        extra: dict = {"conn_timeout": node.ssh.connect_timeout_s, "cmd_timeout": None}
        if node.ssh.key_file:
            extra["key_file"] = node.ssh.key_file
        if node.ssh.host_key:
            extra["host_key"] = node.ssh.host_key
        return cls(node.airflow_id, node.address, node.ssh.user, node.ssh.port, extra)


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
            Connection(conn_id=spec.conn_id, conn_type="ssh", host=spec.host, login=spec.login, port=spec.port,
                       extra=extra, description="dlperf node (dlperf cluster sync)")
        )
        return "created"
    current = (existing.conn_type, existing.host, existing.login, existing.port, existing.extra_dejson)
    if current == ("ssh", spec.host, spec.login, spec.port, spec.extra):
        return "unchanged"
    existing.conn_type, existing.host, existing.login, existing.port = "ssh", spec.host, spec.login, spec.port
    existing.extra = extra
    return "updated"


def _apply_pool(session, name: str, description: str) -> str:
    from airflow.models.pool import Pool

    existing = session.query(Pool).filter(Pool.pool == name).one_or_none()
    if existing is None:
        session.add(Pool(pool=name, slots=1, description=description, include_deferred=False))
        return "created"
    if (existing.slots, existing.description, existing.include_deferred) == (1, description, False):
        return "unchanged"
    existing.slots, existing.description, existing.include_deferred = 1, description, False
    return "updated"


def sync_cluster(inventory: Inventory, *, prune: bool = False) -> list[SyncChange]:
    """Create or update every node's connection and pool in Airflow's metadata DB (one transaction)."""
    from airflow.models.connection import Connection
    from airflow.models.pool import Pool
    from airflow.utils.session import create_session

    changes: list[SyncChange] = []
    with create_session() as session:
        for node in inventory.nodes:
            if node.ssh is not None:
                spec = ConnectionSpec.for_node(node)
                changes.append(SyncChange("connection", spec.conn_id, _apply_connection(session, spec)))
            name = node.airflow_id
            changes.append(SyncChange("pool", name, _apply_pool(session, name, POOL_DESCRIPTION.format(name=node.name))))
        if prune:
            wanted_conns = {n.airflow_id for n in inventory.nodes if n.ssh is not None}
            wanted_pools = {n.airflow_id for n in inventory.nodes}
            for conn in session.query(Connection).filter(Connection.conn_id.startswith(PREFIX)).all():
                if conn.conn_id not in wanted_conns:
                    session.delete(conn)
                    changes.append(SyncChange("connection", conn.conn_id, "removed"))
            for pool in session.query(Pool).filter(Pool.pool.startswith(PREFIX)).all():
                if pool.pool not in wanted_pools:
                    session.delete(pool)
                    changes.append(SyncChange("pool", pool.pool, "removed"))
    return changes


def _metadata_db_ready() -> str | None:
    """None when Airflow's metadata DB has its tables, else why not."""
    from sqlalchemy import inspect

    from airflow import settings

    try:
        tables = set(inspect(settings.engine).get_table_names())
    except Exception as exc:
        return f"cannot reach Airflow's metadata DB: {type(exc).__name__}: {exc}"
    missing = {"connection", "slot_pool"} - tables
    return f"Airflow's metadata DB has no {', '.join(sorted(missing))} table (run `airflow db migrate`)" if missing else None


def cmd_cluster_sync(args: argparse.Namespace) -> int:
    from dlperf_core.errors import ConfigError
    from dlperf_core.inventory import load_inventory

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
        changes = sync_cluster(inventory, prune=args.prune)
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
        help="create/update one SSH connection and one one-slot pool dlperf_node_<name> per inventory node",
    )
    sync.add_argument("--inventory", required=True, help="node inventory YAML, e.g. inventories/example-cluster.yaml")
    sync.add_argument("--prune", action="store_true", help="remove dlperf_node_* connections/pools not in it")
    sync.add_argument("--json", action="store_true", help="print the changes as JSON")
    sync.set_defaults(func=cmd_cluster_sync)
