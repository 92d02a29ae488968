"""The hook of dlperf's ``dlperf_docker_engine`` connection type (one node's Docker Engine)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from dlperf_airflow.docker_runtime import DockerEndpoint
from dlperf_airflow.provider import ENGINE_HOOK_NAME
from dlperf_core.cluster.engine_connection import ENGINE_CONN_TYPE, EngineConnection


class DockerEngineHook(BaseHook):
    """The hook of the ``dlperf_docker_engine`` connection type: one node's Docker Engine (URL, TLS client,
    registry login connection; :mod:`dlperf_core.cluster.engine_connection`). Its form is declared in the
    provider's info (``conn-fields``). ``test_connection`` pings the engine with the Docker provider's hook, as a
    case would reach it (the Connections UI's Test button, where ``[core] test_connection`` enables it)."""

    conn_name_attr = "dlperf_engine_conn_id"
    default_conn_name = "dlperf_engine_default"
    conn_type = ENGINE_CONN_TYPE
    hook_name = ENGINE_HOOK_NAME

    def __init__(self, dlperf_engine_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dlperf_engine_conn_id = dlperf_engine_conn_id

    def engine(self) -> EngineConnection:
        """The connection's fields, checked (ConfigError names the one at fault)."""
        conn = self.get_connection(self.dlperf_engine_conn_id)
        return EngineConnection.from_fields(self.dlperf_engine_conn_id, conn.conn_type, conn.host, conn.extra_dejson)

    def get_conn(self) -> Any:
        """A docker APIClient on the engine (pinged), without a registry login."""
        return DockerEndpoint.for_engine(self.engine()).client(login=False)

    def test_connection(self) -> tuple[bool, str]:
        try:
            version = self.get_conn().version()
        except Exception as exc:  # noqa: BLE001 - the Test button shows whatever went wrong
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"Docker Engine {version.get('Version', '?')} answered"
