"""dlperf's Airflow connections, read where a task or the api-server runs.

- a node's engine connection ``dlperf_engine_<name>`` (type ``dlperf_docker_engine``;
  :class:`dlperf_airflow.engine_hook.DockerEngineHook` is its hook, the provider declares its form): read by the
  docker runtime (``dlperf_airflow.docker_runtime.reached_node``);
- the results database, ``dlperf_results`` (a ``postgres`` connection, the Postgres provider's own type, or
  ``sqlite`` with the file as host): :func:`results_db_url`.

A connection is looked up as Airflow looks one up (``BaseHook.get_connection``): its ``AIRFLOW_CONN_*`` variable,
a secrets backend, the metadata database (through the Task SDK in a task, directly in the api-server).
"""

from __future__ import annotations

import os
from typing import Any

from dlperf_core.storage import default_db_url
from dlperf_core.storage.engine import url_of_connection

RESULTS_CONN_ID = "dlperf_results"
"""The Airflow connection of the results database (when ``$DLPERF_DB_URL`` is not set)."""


def connection_or_none(conn_id: str) -> Any | None:
    """The Airflow connection ``conn_id``, or None when it is not defined. (Airflow is imported here, not with
    this module: the results page's module imports this one, and ``dlperf run`` configures Airflow after that.)"""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def results_db_url() -> str:
    """Where the tasks write results and the results page reads them: ``$DLPERF_DB_URL`` when set (the
    environment wins, as an ``AIRFLOW_CONN_*`` variable wins over the metadata database), else the Airflow
    connection ``dlperf_results`` when it exists, else the SQLite file of the dlperf home
    (:func:`dlperf_core.storage.default_db_url`). Raises ConfigError when the connection is no database dlperf
    stores in."""
    conn = None if os.environ.get("DLPERF_DB_URL") else connection_or_none(RESULTS_CONN_ID)
    if conn is None:
        return default_db_url()  # $DLPERF_DB_URL, else the home's SQLite file
    return url_of_connection(
        RESULTS_CONN_ID,
        conn.conn_type,
        host=conn.host,
        port=conn.port,
        login=conn.login,
        password=conn.password,
        schema=conn.schema,
        extra=conn.extra_dejson,
    )
