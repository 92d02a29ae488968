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
  provider's ``DockerHook(docker_conn_id=...)``, which logs in with it
  (``dlperf_airflow.docker_runtime.DockerEndpoint``);
- the engine connection ``dlperf_engine_<name>`` (every node): conn type ``dlperf_docker_engine`` (dlperf's
  provider declares it and its form), host = ``docker_url``, extras = the TLS client's files (``docker.tls``),
  ``insecure`` and ``registry_conn_id`` (the Docker connection above, when the node logs in). The docker runtime
  reaches the node's engine as this connection says (edit it in the Connections UI and the next case uses it):
  :mod:`dlperf_core.cluster.engine_connection`;
- the one-slot pool ``dlperf_node_<name>``: one task at a time on that node.

Idempotent: what already matches is left alone, what differs is updated, nothing is duplicated.
``--prune`` also removes ``dlperf_node_*`` connections and pools and ``dlperf_docker_*`` and ``dlperf_engine_*``
connections of nodes no longer in the inventory.
Where it writes: with ``--api-url`` (or ``DLPERF_AIRFLOW_API_URL``), through Airflow's REST API (``/api/v2/connections``,
``/api/v2/pools``), as a user whose token ``--api-token``/``DLPERF_AIRFLOW_API_TOKEN`` gives, or who logs in with
``DLPERF_AIRFLOW_API_USER``/``DLPERF_AIRFLOW_API_PASSWORD`` (``POST /auth/token``): an Airflow whose metadata DB
dlperf cannot reach (Cloud Composer, MWAA, Astronomer). Otherwise straight into the metadata DB of Airflow's own
configuration (``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``; without one, the embedded one of ``dlperf run``,
``.dlperf/airflow``), in one transaction. The same changes either way (:func:`sync_cluster`); through the API a
connection whose password the inventory manages is written again each time (the API never shows a password back, so
it cannot be compared: ``updated``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from dlperf_core.cluster.engine_connection import ENGINE_CONN_PREFIX, ENGINE_CONN_TYPE, EngineConnection, engine_conn_id
from dlperf_core.cluster.inventory import DOCKER_CONN_PREFIX, Inventory, Node
from dlperf_core.errors import ConfigError

PREFIX = "dlperf_node_"
POOL_DESCRIPTION = "one task at a time on node {name} (dlperf cluster sync)"
DESCRIPTIONS = {
    "ssh": "dlperf node (dlperf cluster sync)",
    "docker": "dlperf node's registry login (dlperf cluster sync)",
    ENGINE_CONN_TYPE: "dlperf node's Docker engine (dlperf cluster sync)",
}
MANAGED_CONN_PREFIXES = (PREFIX, DOCKER_CONN_PREFIX, ENGINE_CONN_PREFIX)
"""The connections sync writes (and ``--prune`` removes when their node is gone)."""


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
    def engine_for_node(cls, node: Node) -> ConnectionSpec:
        """The node's engine connection: its ``docker_url`` and ``docker:`` block as fields."""
        engine = EngineConnection.of_node(node)
        return cls(engine_conn_id(node), engine.docker_url, None, None, engine.extra(), conn_type=ENGINE_CONN_TYPE)

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


class AirflowObjects(Protocol):
    """Where sync writes Airflow's connections and pools: the metadata DB (:class:`MetadataDb`) or the REST API
    (:class:`RestApi`). Each ``apply_*`` creates or updates one object and says which (or that it was unchanged)."""

    def apply_connection(self, spec: ConnectionSpec) -> str: ...

    def apply_pool(self, name: str, description: str) -> str: ...

    def managed(self) -> tuple[list[str], list[str]]:
        """The connection ids (``dlperf_node_*``, ``dlperf_docker_*``) and pool names (``dlperf_node_*``) there."""
        ...

    def remove_connection(self, conn_id: str) -> None: ...

    def remove_pool(self, name: str) -> None: ...


def _connection_fields(spec: ConnectionSpec) -> tuple[object, ...]:
    return (spec.conn_type, spec.host, spec.login, spec.port, spec.extra)


class MetadataDb:
    """Airflow's metadata DB through its ORM, in the caller's session (one transaction)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def apply_connection(self, spec: ConnectionSpec) -> str:
        from airflow.models.connection import Connection

        existing = self.session.query(Connection).filter(Connection.conn_id == spec.conn_id).one_or_none()
        extra = json.dumps(spec.extra, sort_keys=True)
        if existing is None:
            self.session.add(
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
        if current == _connection_fields(spec) and (spec.password is None or existing.password == spec.password):
            return "unchanged"
        existing.conn_type, existing.host, existing.login = spec.conn_type, spec.host, spec.login
        existing.port, existing.extra = spec.port, extra
        if spec.password is not None:
            existing.password = spec.password
        return "updated"

    def apply_pool(self, name: str, description: str) -> str:
        """A node's one-slot pool; it counts deferred tasks (``include_deferred``), as ``dlperf_cluster`` does: a
        task that waits deferred still holds its node."""
        from airflow.models.pool import Pool

        existing = self.session.query(Pool).filter(Pool.pool == name).one_or_none()
        if existing is None:
            self.session.add(Pool(pool=name, slots=1, description=description, include_deferred=True))
            return "created"
        if (existing.slots, existing.description, existing.include_deferred) == (1, description, True):
            return "unchanged"
        existing.slots, existing.description, existing.include_deferred = 1, description, True
        return "updated"

    def managed(self) -> tuple[list[str], list[str]]:
        from airflow.models.connection import Connection
        from airflow.models.pool import Pool
        from sqlalchemy import or_

        ours = or_(*(Connection.conn_id.startswith(prefix) for prefix in MANAGED_CONN_PREFIXES))
        conns = [str(c.conn_id) for c in self.session.query(Connection).filter(ours).all()]
        pools = [str(p.pool) for p in self.session.query(Pool).filter(Pool.pool.startswith(PREFIX)).all()]
        return conns, pools

    def remove_connection(self, conn_id: str) -> None:
        from airflow.models.connection import Connection

        self.session.query(Connection).filter(Connection.conn_id == conn_id).delete()

    def remove_pool(self, name: str) -> None:
        from airflow.models.pool import Pool

        self.session.query(Pool).filter(Pool.pool == name).delete()


class ApiError(RuntimeError):
    """Airflow's REST API refused a request or could not be reached (the message says which, and what it said)."""


class RestApi:
    """Airflow's public REST API (``/api/v2``) at ``url``, with a bearer ``token``: what an admin of a managed Airflow
    may use. Plain HTTP requests (the standard library's), so the CLI needs no Airflow installed to use it."""

    PAGE = 100

    def __init__(self, url: str, token: str, timeout_s: float = 30) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    @classmethod
    def login(cls, url: str, username: str, password: str, timeout_s: float = 30) -> RestApi:
        """A token from ``POST /auth/token`` (Airflow's simple and FAB auth managers), for ``username``."""
        status, body = _http(
            "POST", url.rstrip("/") + "/auth/token", {"username": username, "password": password}, None, timeout_s
        )
        if status not in (200, 201) or not isinstance(body, dict) or "access_token" not in body:
            raise ApiError(f"{url}: could not log in as {username}: HTTP {status}: {str(body)[:300]}")
        return cls(url, str(body["access_token"]), timeout_s)

    def _call(self, method: str, path: str, body: dict | None = None, ok: tuple[int, ...] = (200,)) -> Any:
        status, answer = _http(method, self.url + path, body, self.token, self.timeout_s)
        if status not in ok:
            raise ApiError(f"{method} {self.url}{path}: HTTP {status}: {str(answer)[:500]}")
        return answer

    def _get(self, path: str) -> Any | None:
        """The object at ``path``, None when there is none (404)."""
        status, answer = _http("GET", self.url + path, None, self.token, self.timeout_s)
        if status == 404:
            return None
        if status != 200:
            raise ApiError(f"GET {self.url}{path}: HTTP {status}: {str(answer)[:500]}")
        return answer

    def apply_connection(self, spec: ConnectionSpec) -> str:
        path = f"/api/v2/connections/{urllib.parse.quote(spec.conn_id, safe='')}"
        body: dict[str, Any] = {
            "connection_id": spec.conn_id,
            "conn_type": spec.conn_type,
            "host": spec.host,
            "login": spec.login,
            "port": spec.port,
            "extra": json.dumps(spec.extra, sort_keys=True),
            "description": DESCRIPTIONS[spec.conn_type],
        }
        if spec.password is not None:
            body["password"] = spec.password
        existing = self._get(path)
        if existing is None:
            self._call("POST", "/api/v2/connections", body, ok=(201,))
            return "created"
        extra = json.loads(existing.get("extra") or "{}")
        current = (existing.get("conn_type"), existing.get("host"), existing.get("login"), existing.get("port"), extra)
        if current == _connection_fields(spec) and spec.password is None:
            return "unchanged"
        self._call("PATCH", path, body)  # every field of the body (no update_mask); a password only when managed
        return "updated"

    def apply_pool(self, name: str, description: str) -> str:
        path = f"/api/v2/pools/{urllib.parse.quote(name, safe='')}"
        wanted = {"slots": 1, "description": description, "include_deferred": True}
        existing = self._get(path)
        if existing is None:
            self._call("POST", "/api/v2/pools", {"name": name, **wanted}, ok=(201,))
            return "created"
        if all(existing.get(key) == value for key, value in wanted.items()):
            return "unchanged"
        self._call("PATCH", path, {"name": name, **wanted})
        return "updated"

    def _names(self, collection: str, key: str, pattern: str, prefix: str) -> list[str]:
        names: list[str] = []
        offset = 0
        while True:
            query = urllib.parse.urlencode({pattern: prefix, "limit": self.PAGE, "offset": offset})
            page = self._call("GET", f"/api/v2/{collection}?{query}")
            items = page.get(collection, []) if isinstance(page, dict) else []
            names += [str(item[key]) for item in items if str(item[key]).startswith(prefix)]
            offset += self.PAGE
            if len(items) < self.PAGE:
                return names

    def managed(self) -> tuple[list[str], list[str]]:
        conns = [
            name
            for prefix in MANAGED_CONN_PREFIXES
            for name in self._names("connections", "connection_id", "connection_id_prefix_pattern", prefix)
        ]
        return conns, self._names("pools", "name", "pool_name_prefix_pattern", PREFIX)

    def remove_connection(self, conn_id: str) -> None:
        self._call("DELETE", f"/api/v2/connections/{urllib.parse.quote(conn_id, safe='')}", ok=(204,))

    def remove_pool(self, name: str) -> None:
        self._call("DELETE", f"/api/v2/pools/{urllib.parse.quote(name, safe='')}", ok=(204,))


def _http(method: str, url: str, body: dict | None, token: str | None, timeout_s: float) -> tuple[int, Any]:
    """(status, JSON answer, or its text) of one request; ApiError when the server cannot be reached."""
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None, method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("Accept", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - the admin's own URL
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        raise ApiError(f"{method} {url}: cannot reach Airflow's API: {exc}") from exc
    try:
        answer = json.loads(raw) if raw else None
    except ValueError:
        answer = raw.decode(errors="replace")
    return status, answer


def sync_cluster(inventory: Inventory, objects: AirflowObjects, *, prune: bool = False) -> list[SyncChange]:
    """Create or update every node's connections and pool in ``objects``; with ``prune``, remove the managed ones
    of nodes no longer in ``inventory``. A bad inventory (a registry password variable unset) is refused before
    anything is written."""
    changes: list[SyncChange] = []
    dockers = {spec.conn_id: spec for spec in docker_specs(inventory)}  # refused here, before anything is written
    wanted_conns = {n.airflow_id for n in inventory.nodes if n.ssh is not None} | set(dockers)
    wanted_conns |= {engine_conn_id(n) for n in inventory.nodes}
    for node in inventory.nodes:
        if node.ssh is not None:
            spec = ConnectionSpec.for_node(node)
            changes.append(SyncChange("connection", spec.conn_id, objects.apply_connection(spec)))
        if (docker := dockers.pop(node.docker_conn_id, None)) is not None:
            changes.append(SyncChange("connection", docker.conn_id, objects.apply_connection(docker)))
        engine = ConnectionSpec.engine_for_node(node)
        changes.append(SyncChange("connection", engine.conn_id, objects.apply_connection(engine)))
        name = node.airflow_id
        changes.append(SyncChange("pool", name, objects.apply_pool(name, POOL_DESCRIPTION.format(name=node.name))))
    if prune:
        wanted_pools = {n.airflow_id for n in inventory.nodes}
        conns, pools = objects.managed()
        for conn_id in conns:
            if conn_id not in wanted_conns:
                objects.remove_connection(conn_id)
                changes.append(SyncChange("connection", conn_id, "removed"))
        for pool in pools:
            if pool not in wanted_pools:
                objects.remove_pool(pool)
                changes.append(SyncChange("pool", pool, "removed"))
    return changes


def sync_metadata_db(inventory: Inventory, *, prune: bool = False) -> list[SyncChange]:
    """:func:`sync_cluster` into Airflow's metadata DB, in one transaction."""
    from airflow.utils.session import create_session

    docker_specs(inventory)  # a bad inventory is refused before a session opens
    with create_session() as session:
        return sync_cluster(inventory, MetadataDb(session), prune=prune)


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


def rest_api_of(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> RestApi | None:
    """The REST API the command line or the environment names (None: write the metadata DB). Raises ApiError when a
    URL is given without a token or a user and password, or the login fails."""
    url = args.api_url or environ.get("DLPERF_AIRFLOW_API_URL")
    if not url:
        return None
    token = args.api_token or environ.get("DLPERF_AIRFLOW_API_TOKEN")
    if token:
        return RestApi(url, token)
    user, password = environ.get("DLPERF_AIRFLOW_API_USER"), environ.get("DLPERF_AIRFLOW_API_PASSWORD")
    if not user or password is None:
        raise ApiError(
            f"{url}: give a token (--api-token or DLPERF_AIRFLOW_API_TOKEN) or DLPERF_AIRFLOW_API_USER and "
            "DLPERF_AIRFLOW_API_PASSWORD to log in with"
        )
    return RestApi.login(url, user, password)


def _report(args: argparse.Namespace, inventory: Inventory, changes: list[SyncChange]) -> None:
    if args.json:
        print(json.dumps([asdict(c) for c in changes], indent=2))
        return
    for c in changes:
        print(f"{c.kind} {c.name}: {c.action}")
    counts = {a: sum(c.action == a for c in changes) for a in ("created", "updated", "unchanged", "removed")}
    print(f"{inventory.name}: " + ", ".join(f"{n} {a}" for a, n in counts.items()), file=sys.stderr)


def cmd_cluster_sync(args: argparse.Namespace) -> int:
    from dlperf_core.cluster.inventory import load_inventory

    try:
        inventory = load_inventory(args.inventory)
        api = rest_api_of(args)
        if api is not None:  # through the REST API: no metadata DB, no Airflow import
            _report(args, inventory, sync_cluster(inventory, api, prune=args.prune))
            return 0
    except (ConfigError, ApiError) as exc:
        print(f"dlperf cluster sync: {exc}" if isinstance(exc, ApiError) else exc, file=sys.stderr)
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
            changes = sync_metadata_db(inventory, prune=args.prune)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
    _report(args, inventory, changes)
    return 0


def add_cluster_parser(sub) -> None:
    """``dlperf cluster sync`` on the CLI's subcommand parser."""
    cluster = sub.add_parser("cluster", help="manage the cluster's nodes in Airflow")
    csub = cluster.add_subparsers(dest="cluster_command", required=True)
    sync = csub.add_parser(
        "sync",
        help="create/update one SSH connection and one one-slot pool dlperf_node_<name> per inventory node, "
        "its engine connection dlperf_engine_<name> (Docker engine URL, TLS client) and, with a registry, its Docker "
        "connection dlperf_docker_<name> (the registry login)",
    )
    sync.add_argument("--inventory", required=True, help="node inventory YAML, e.g. inventories/example-cluster.yaml")
    sync.add_argument(
        "--prune",
        action="store_true",
        help="remove dlperf_node_*/dlperf_docker_*/dlperf_engine_* connections and pools not in it",
    )
    sync.add_argument("--json", action="store_true", help="print the changes as JSON")
    sync.add_argument(
        "--api-url",
        help="write through Airflow's REST API at this URL (e.g. https://airflow.example.com) instead of the "
        "metadata DB; default $DLPERF_AIRFLOW_API_URL",
    )
    sync.add_argument(
        "--api-token",
        help="the API's bearer token; default $DLPERF_AIRFLOW_API_TOKEN, else a login with "
        "$DLPERF_AIRFLOW_API_USER and $DLPERF_AIRFLOW_API_PASSWORD",
    )
    sync.set_defaults(func=cmd_cluster_sync)
