"""dlperf's Celery settings, on top of Airflow's: Airflow's configuration option ``[celery] celery_config_options``
(environment variable ``AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS``) set to ``dlperf_airflow.celery_config.CELERY_CONFIG``
on every Airflow component of a CeleryExecutor deployment (docker-compose.yaml, the tests' deployments). It is
Airflow's own settings (``DEFAULT_CELERY_CONFIG``, made from the ``[celery]`` options: broker, result backend, ...)
with what dlperf changes, as Airflow's documentation of the option says: the provider's module-level Celery app takes
the dict as it is, in place of its defaults.

``imports``: a worker imports :mod:`dlperf_airflow.worker_preload` once, when it starts, before it forks its pool.
Airflow forks every task's process from a pool process, so a task finds dlperf's modules (and pandas, SQLAlchemy,
the docker SDK, Airflow's task runner) already imported instead of importing them again: about 2 s of CPU per task on
this project's 2-core machines, paid by every node task of a case at the same moment (docs/benchmarks.md (h)).
Airflow's Celery provider preloads its own expensive modules the same way (``on_celery_import_modules``).

This module itself stays light: the scheduler and the api-server import it too, to make their Celery app.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG

CELERY_CONFIG: dict[str, Any] = {**DEFAULT_CELERY_CONFIG, "imports": ("dlperf_airflow.worker_preload",)}
