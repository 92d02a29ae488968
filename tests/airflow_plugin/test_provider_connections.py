"""dlperf's connections as Airflow sees them: the ``dlperf_docker_engine`` type in the providers manager (its hook
and its form, from the provider's info) and the results database as the connection ``dlperf_results``."""

from __future__ import annotations

import json

from dlperf_core.cluster.engine_connection import ENGINE_CONN_TYPE, EXTRA_KEYS


def test_airflow_knows_the_engine_connection_type_its_hook_and_its_form():
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    from dlperf_airflow.engine_hook import DockerEngineHook
    from dlperf_airflow.provider import ENGINE_CONN_TYPE as DECLARED
    from dlperf_airflow.provider import get_provider_info

    assert DECLARED == ENGINE_CONN_TYPE == DockerEngineHook.conn_type
    (declared,) = get_provider_info()["connection-types"]
    assert set(declared["conn-fields"]) == set(EXTRA_KEYS)  # the form has every field the runtime reads, no other

    hook = ProvidersManagerTaskRuntime().hooks[ENGINE_CONN_TYPE]  # the hook class imported, as a task's runtime does
    manager = ProvidersManager()  # the form, as the api-server serves it to the Connections UI
    assert hook is not None and hook.hook_class_name == "dlperf_airflow.engine_hook.DockerEngineHook"
    assert hook.package_name == "dlperf" and hook.hook_name == "dlperf Docker engine"
    widgets = {k for k in manager.connection_form_widgets if k.startswith(f"extra__{ENGINE_CONN_TYPE}__")}
    assert widgets == {f"extra__{ENGINE_CONN_TYPE}__{k}" for k in EXTRA_KEYS}
    behaviour = manager.field_behaviours[ENGINE_CONN_TYPE]
    assert behaviour["relabeling"] == {"host": "Docker engine URL"}
    assert {"login", "password"} <= set(behaviour["hidden_fields"])


def test_the_results_database_is_the_environments_then_the_connections_then_the_homes(tmp_path, monkeypatch):
    from dlperf_airflow.connections import results_db_url

    monkeypatch.setenv("DLPERF_HOME", str(tmp_path))
    monkeypatch.delenv("DLPERF_DB_URL", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_DLPERF_RESULTS", raising=False)
    assert results_db_url() == f"sqlite:///{tmp_path / '.dlperf' / 'dlperf.db'}"
    conn = {"conn_type": "postgres", "host": "db", "port": 5432, "login": "dlperf", "password": "pw", "schema": "r"}
    monkeypatch.setenv("AIRFLOW_CONN_DLPERF_RESULTS", json.dumps(conn))
    assert results_db_url() == "postgresql+psycopg2://dlperf:pw@db:5432/r"
    monkeypatch.setenv("DLPERF_DB_URL", "postgresql+psycopg2://other@elsewhere/x")
    assert results_db_url() == "postgresql+psycopg2://other@elsewhere/x"
