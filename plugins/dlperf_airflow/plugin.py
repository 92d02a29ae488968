"""Airflow plugin: the dlperf results page in Airflow's UI.

Found through the package's ``airflow.plugins`` entry point (pyproject.toml; also named in the provider info's
``plugins``, :mod:`dlperf_airflow.provider`), not through a plugins folder: plugins/.airflowignore keeps
Airflow's folder scan out of dlperf_airflow/, so the plugin is registered once.

* ``fastapi_apps``: :mod:`dlperf_airflow.results_api` on the api-server at ``/dlperf`` (JSON under
  ``/dlperf/api/``, the page at ``/dlperf/``), authenticated and authorized like Airflow's own API;
* ``external_views``: a "dlperf results" entry in the UI's Browse menu that shows that page inside the UI
  (at ``/plugin/dlperf-results``), and a "dlperf results" tab on every DAG run (destination ``dag_run``) that
  shows that run's tables, plots and report files; ``href`` is relative, so it follows the api-server's
  base_url, and the UI fills in ``{DAG_ID}`` and ``{RUN_ID}``.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from dlperf_airflow.results_api import URL_PREFIX, app


class DlperfResultsPlugin(AirflowPlugin):
    name = "dlperf_results"
    fastapi_apps = [
        {"app": app, "url_prefix": URL_PREFIX, "name": "dlperf results"},
    ]
    external_views = [
        {
            "name": "dlperf results",
            "href": URL_PREFIX.lstrip("/") + "/",
            "destination": "nav",
            "category": "browse",
            "url_route": "dlperf-results",
        },
        {
            "name": "dlperf results",
            "href": URL_PREFIX.lstrip("/") + "/runs/{DAG_ID}/{RUN_ID}",
            "destination": "dag_run",
            "url_route": "dlperf-run-results",
        },
    ]
