"""dlperf as an Airflow provider: the package's ``apache_airflow_provider`` entry point (pyproject.toml).

:func:`get_provider_info` returns what Airflow 3.3's providers manager reads (its ``provider_info.schema.json``):
the package name (``airflow providers list`` shows it with the installed distribution's version), the results
page plugin, and the ``[dlperf]`` section of Airflow's configuration (``airflow config list`` shows it). The
schema has no ``versions`` key: the version is the installed package's. No connection types yet: the node
engines' URL and TLS files are still read from the inventory (docs/airflow-provider.md, "What is not done yet").

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
        "config": CONFIG,
    }
