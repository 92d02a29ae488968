"""What a dlperf Celery worker imports once at its start (Celery's ``imports``, set by
:mod:`dlperf_airflow.celery_config`): every module a task process of the DAG would otherwise import before any of
its own code runs (Airflow's task runner, the DAG file's imports: pandas, SQLAlchemy and Alembic through the results
store) and those a case's tasks import when they start containers (the docker SDK). A task process is forked from the
worker's pool and inherits them; it still parses the DAG file itself (the DAG's own lines, milliseconds).

tests/airflow_plugin/test_celery_config.py checks that the DAG file imports nothing heavy once this has run."""

from __future__ import annotations

import airflow.sdk.execution_time.task_runner  # noqa: F401 - what the task process runs first

import dlperf_airflow.case_operator  # noqa: F401 - run_case's operator (the DAG file imports it)
import dlperf_airflow.case_tasks  # noqa: F401
import dlperf_airflow.docker_runtime  # noqa: F401 - the docker SDK
import dlperf_airflow.environment_step  # noqa: F401
import dlperf_airflow.handout  # noqa: F401
import dlperf_airflow.node_step  # noqa: F401
import dlperf_airflow.schedule  # noqa: F401 - the DAG's schedule ([dlperf] schedule)
import dlperf_airflow.steps  # noqa: F401 - the DAG's steps: dlperf_core, its results store (pandas, SQLAlchemy)
import dlperf_airflow.trigger_params  # noqa: F401 - the DAG's Params, from the trigger form
import dlperf_core.measure.regression  # noqa: F401
import dlperf_core.plan.form_choices  # noqa: F401
import dlperf_core.plan.form_overrides  # noqa: F401
import dlperf_core.plan.trigger_form  # noqa: F401
