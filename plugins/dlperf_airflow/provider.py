"""dlperf as an Airflow provider: the package's ``apache_airflow_provider`` entry point (pyproject.toml).

:func:`get_provider_info` returns what Airflow 3.3's providers manager reads (its ``provider_info.schema.json``):
the package name (``airflow providers list`` shows it with the installed distribution's version), the results
page plugin, the ``[dlperf]`` section of Airflow's configuration (``airflow config list`` shows it), and the
connection type ``dlperf_docker_engine`` (a node's Docker Engine: :mod:`dlperf_core.cluster.engine_connection`),
whose form in the Connections UI is declared here (``conn-fields``, ``ui-field-behaviour``: Airflow 3.2+ reads
them without importing the hook). The schema has no ``versions`` key: the version is the installed package's.

Importing this module imports no Airflow module and no dlperf_core one: the providers manager calls it in every
Airflow process that lists providers.
"""

from __future__ import annotations

from typing import Any

from dlperf_airflow.schedule import DEFAULT_SCHEDULE, NO_SCHEDULE, SCHEDULE_OPTION, SCHEDULE_SECTION
from dlperf_airflow.task_ids import ROUTING_OPTION

PACKAGE_NAME = "dlperf"
"""The distribution's name (pyproject.toml): Airflow refuses a provider whose ``package-name`` differs."""
PLUGIN_NAME = "dlperf_results"
PLUGIN_CLASS = "dlperf_airflow.plugin.DlperfResultsPlugin"
VERSION_ADDED = "0.1.0"
ENGINE_CONN_TYPE = "dlperf_docker_engine"
"""dlperf_core.cluster.engine_connection.ENGINE_CONN_TYPE (this module imports no dlperf_core module; a test holds
them equal)."""
ENGINE_HOOK_CLASS = "dlperf_airflow.engine_hook.DockerEngineHook"
ENGINE_HOOK_NAME = "dlperf Docker engine"


def _text(label: str, description: str) -> dict[str, Any]:
    return {"label": label, "schema": {"type": ["string", "null"]}, "description": description}


ENGINE_CONNECTION: dict[str, Any] = {
    "hook-class-name": ENGINE_HOOK_CLASS,
    "hook-name": ENGINE_HOOK_NAME,
    "connection-type": ENGINE_CONN_TYPE,
    "conn-fields": {
        "ca_cert": _text("CA certificate", "PEM file on the workers: the CA that signed the engine's certificate"),
        "client_cert": _text("Client certificate", "PEM file on the workers (dockerd --tlsverify)"),
        "client_key": _text("Client key", "PEM file on the workers"),
        "tls_verify": {
            "label": "Verify the engine's certificate",
            "schema": {"type": ["boolean", "null"], "default": True},
            "description": "Against the CA certificate (TLS only)",
        },
        "insecure": {
            "label": "TCP without TLS",
            "schema": {"type": ["boolean", "null"], "default": False},
            "description": "A tcp:// engine without TLS is root on the node for anyone who reaches the port: "
            "trusted test networks only",
        },
        "registry_conn_id": _text(
            "Registry login connection",
            "A Docker connection (the Docker provider's registry login) the engine logs in with before it pulls; "
            "empty: no login",
        ),
    },
    "ui-field-behaviour": {
        "hidden-fields": ["schema", "port", "login", "password"],
        "relabeling": {"host": "Docker engine URL"},
        "placeholders": {"host": "tcp://node0:2376"},
    },
}
"""A node's Docker Engine (``dlperf_engine_<node>``, written by ``dlperf cluster sync``): host = its URL, the TLS
client's files and the registry login's connection as extras."""


CONFIG: dict[str, Any] = {
    SCHEDULE_SECTION: {  # task_ids.ROUTING_SECTION too: one [dlperf] section
        "description": "dlperf's options (the dlperf_benchmark DAG reads them when it is parsed: set them on "
        "every component that parses DAGs and on the workers).",
        "options": {
            SCHEDULE_OPTION: {
                "description": "When dlperf_benchmark runs by itself: a cron expression of five fields or a cron "
                "preset (@daily), in [core] default_timezone; "
                f"{NO_SCHEDULE!r} turns the nightly run off (the DAG then runs only when triggered). Empty: "
                f"{DEFAULT_SCHEDULE!r}. Any other value fails the DAG's parse with an import error that names "
                "the option.",
                "version_added": VERSION_ADDED,
                "type": "string",
                "example": "30 1 * * 1-5",
                "default": "",
            },
            ROUTING_OPTION: {
                "description": "The cluster's inventory YAML (the one given to dlperf cluster sync; relative to "
                "DLPERF_HOME, or absolute). Set (non-empty), a case run holds one task per node, routed to the "
                "node's Celery queue and pool; empty, one run_case task drives every node.",
                "version_added": VERSION_ADDED,
                "type": "string",
                "example": "inventories/cluster.yaml",
                "default": "",
            },
        },
    },
}
"""The ``[dlperf]`` section: every option dlperf reads from Airflow's configuration
(:mod:`dlperf_airflow.schedule`, :mod:`dlperf_airflow.task_ids`)."""


def get_provider_info() -> dict[str, Any]:
    """dlperf's provider info, in Airflow 3.3's ``provider_info.schema.json``."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "dlperf",
        "description": "Deep-learning training benchmarks on GPU clusters: the dlperf_benchmark DAG (as a DAG "
        "bundle), the results page in Airflow's UI, results in PostgreSQL.",
        "plugins": [{"name": PLUGIN_NAME, "plugin-class": PLUGIN_CLASS}],
        "connection-types": [ENGINE_CONNECTION],
        "config": CONFIG,
    }
