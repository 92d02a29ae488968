"""A node's Docker Engine as an Airflow connection: the inventory's ``docker_url`` and ``docker:`` block, as fields.

``dlperf cluster sync`` writes one connection per node, ``dlperf_engine_<name>``, of the connection type
``dlperf_docker_engine`` that dlperf's provider declares (its form in Airflow's Connections UI:
``dlperf_airflow.provider``): host = the engine's URL (``unix:///var/run/docker.sock``, ``tcp://node0:2376``);
extras = the TLS client's PEM files on the workers (``ca_cert``, ``client_cert``, ``client_key``, ``tls_verify``),
``insecure`` (TCP without TLS, said explicitly), and ``registry_conn_id``, the Docker provider's own connection
that logs the engine in to its registry (``dlperf_docker_<name>``, also written by sync from ``docker.registry``;
absent: no login). The docker runtime reaches a node through its engine connection when it exists, so an admin
who edits it in the UI changes where and how dlperf reaches that engine; without one (``dlperf run``'s embedded
Airflow, a cluster never synced) it uses the inventory's fields. Either way :meth:`EngineConnection.applied_to`
gives the node as the runtime sees it, validated as the inventory is.

Pure: fields in, fields out; reading the connection is the runtime's (``dlperf_airflow.docker_runtime``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from dlperf_core.cluster.inventory import DockerAccess, DockerTls, Node
from dlperf_core.errors import ConfigError, format_validation_error

ENGINE_CONN_TYPE = "dlperf_docker_engine"
"""The connection type (dlperf's provider declares it, with its form)."""
ENGINE_CONN_PREFIX = "dlperf_engine_"
"""A node's engine connection is ``dlperf_engine_<name>``."""
TLS_EXTRAS = ("ca_cert", "client_cert", "client_key")
EXTRA_KEYS = (*TLS_EXTRAS, "tls_verify", "insecure", "registry_conn_id")
"""Every extra an engine connection holds (the form's fields)."""


def engine_conn_id(node: Node) -> str:
    """The id of ``node``'s engine connection."""
    return f"{ENGINE_CONN_PREFIX}{node.name}"


def _extra(extra: Mapping[str, object], key: str) -> object:
    """An extra as the UI stores it (``key``) or as older forms prefixed it (``extra__<type>__key``)."""
    value = extra.get(key)
    if value is None:
        value = extra.get(f"extra__{ENGINE_CONN_TYPE}__{key}")
    return None if value == "" else value


def _flag(value: object, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


@dataclass(frozen=True)
class EngineConnection:
    """One node's engine connection, as plain fields."""

    docker_url: str
    tls: DockerTls | None = None
    insecure: bool = False
    registry_conn_id: str | None = None

    @classmethod
    def of_node(cls, node: Node) -> EngineConnection:
        """What ``dlperf cluster sync`` writes for ``node``: its inventory fields. The registry login connection is
        named when the node logs in (``docker.registry`` or ``docker.conn_id`` declared)."""
        logs_in = node.docker.registry is not None or node.docker.conn_id is not None
        return cls(node.docker_url, node.docker.tls, node.docker.insecure, node.docker_conn_id if logs_in else None)

    def extra(self) -> dict[str, object]:
        """The connection's extras (only those that say something)."""
        out: dict[str, object] = {}
        if self.tls is not None:
            out.update(
                ca_cert=self.tls.ca_cert,
                client_cert=self.tls.client_cert,
                client_key=self.tls.client_key,
                tls_verify=self.tls.verify,
            )
        if self.insecure:
            out["insecure"] = True
        if self.registry_conn_id:
            out["registry_conn_id"] = self.registry_conn_id
        return out

    @classmethod
    def from_fields(
        cls, conn_id: str, conn_type: str | None, host: str | None, extra: Mapping[str, object]
    ) -> EngineConnection:
        """The engine connection ``conn_id`` as Airflow holds it. Raises ConfigError naming the connection and the
        field at fault: another connection type, no URL, half a TLS client, an extra it does not know."""
        problems = []
        if conn_type != ENGINE_CONN_TYPE:
            problems.append(f"its type is {conn_type!r}, not {ENGINE_CONN_TYPE!r} (a node's Docker engine)")
        if not host or "://" not in host:
            problems.append(
                f"host {host!r} is no Docker engine URL (unix:///var/run/docker.sock, tcp://<node>:2376, ssh://...)"
            )
        unknown = sorted(k for k in extra if k.removeprefix(f"extra__{ENGINE_CONN_TYPE}__") not in EXTRA_KEYS)
        if unknown:
            problems.append(f"extras {', '.join(unknown)} are not fields of it (its fields: {', '.join(EXTRA_KEYS)})")
        files = {k: _extra(extra, k) for k in TLS_EXTRAS}
        given = [k for k, v in files.items() if v is not None]
        if given and len(given) != len(TLS_EXTRAS):
            missing = [k for k in TLS_EXTRAS if k not in given]
            problems.append(f"a TLS client needs ca_cert, client_cert and client_key; {', '.join(missing)} missing")
        if problems:
            raise ConfigError(f"Airflow connection {conn_id}", problems)
        tls = None
        if given:
            tls = DockerTls(
                ca_cert=str(files["ca_cert"]),
                client_cert=str(files["client_cert"]),
                client_key=str(files["client_key"]),
                verify=_flag(_extra(extra, "tls_verify"), True),
            )
        registry = _extra(extra, "registry_conn_id")
        return cls(
            str(host), tls, _flag(_extra(extra, "insecure"), False), str(registry) if registry is not None else None
        )

    def applied_to(self, node: Node, conn_id: str) -> Node:
        """``node`` reached as this connection says: its URL, TLS client, ``insecure`` and registry login connection
        replace the inventory's (a registry the inventory declares is kept only while the connection still logs in).
        Validated as an inventory node is; ConfigError names the connection."""
        registry = node.docker.registry if self.registry_conn_id is not None else None
        # the node's own login connection stays as the inventory names it (its default or docker.conn_id)
        conn = node.docker.conn_id if self.registry_conn_id == node.docker_conn_id else self.registry_conn_id
        data = node.model_dump()
        data["docker_url"] = self.docker_url
        data["docker"] = DockerAccess(
            conn_id=conn, tls=self.tls, registry=registry, insecure=self.insecure
        ).model_dump()
        try:
            return Node.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"Airflow connection {conn_id}", format_validation_error(exc)) from exc
