"""The task ids of the ``dlperf_benchmark`` DAG that anything outside the DAG file names: the DAG names its
tasks with these constants, and the results page builds its links into Airflow's UI from them, so a rename
changes both (``tests/airflow_plugin/test_results_api.py`` follows every link of the page into the DAG built in each
shape).

A case run is the mapped task group ``case_run`` in both shapes (``dags/dlperf_benchmark.py``):

* plain: ``case_run.run_case`` and ``case_run.store_result``;
* node routing (Airflow's configuration option ``[dlperf] cluster_inventory`` set on every Airflow component,
  :func:`cluster_inventory`): ``case_run.on_<node>`` per node, ``case_run.collect_case`` and
  ``case_run.store_result``.

No import beyond the standard library when imported (Airflow's configuration is imported by the functions that
read it): the DAG file, the plugin's web app and the node tasks all read it.
"""

from __future__ import annotations

PLAN_CASES = "plan_cases"
CAPTURE_ENVIRONMENT = "capture_environment"
ROUTE_CASES = "route_cases"
RUN_CASE = "run_case"
STORE_RESULT = "store_result"
COLLECT_CASE = "collect_case"
CASE_RUN_GROUP = "case_run"
"""The task group of one case run (mapped: one instance per case run)."""

ROUTING_SECTION = "dlperf"
ROUTING_OPTION = "cluster_inventory"
"""Airflow's configuration option ``[dlperf] cluster_inventory``: the deployment's inventory (the one given to
``dlperf cluster sync``; relative to the dlperf home, or absolute). Set (non-empty) on every Airflow component,
in ``airflow.cfg`` or as the environment variable :data:`ROUTING_ENV`: the ``case_run`` group holds a task per node
instead of ``run_case``."""
ROUTING_ENV = "AIRFLOW__DLPERF__CLUSTER_INVENTORY"
"""The option as an environment variable, as Airflow reads every option (it wins over ``airflow.cfg``)."""
OLD_ROUTING_ENV = "DLPERF_CLUSTER_INVENTORY"
"""What dlperf read before the option; no longer read (docker-compose.yaml passes its .env value on as
:data:`ROUTING_ENV`). Set alone in a task's environment, it is only warned about."""


def cluster_inventory() -> str:
    """``[dlperf] cluster_inventory`` from Airflow's configuration (its SDK's ``conf``, as DAG code reads it:
    the environment variable :data:`ROUTING_ENV`, else ``airflow.cfg``); empty when not set."""
    from airflow.sdk import conf

    return (conf.get(ROUTING_SECTION, ROUTING_OPTION, fallback="") or "").strip()


def node_task_id(node_name: str) -> str:
    """The task, inside :data:`CASE_RUN_GROUP`, that runs ``node_name``'s part of a case run."""
    return f"on_{node_name}"


def in_case_run(task_id: str) -> str:
    """The full id of a task of the ``case_run`` group, e.g. ``case_run.store_result``."""
    return f"{CASE_RUN_GROUP}.{task_id}"


def node_routing() -> bool:
    """Whether the DAG is built with node routing here (the same test the DAG makes at parse time)."""
    return bool(cluster_inventory())


CASE_RUNS_TASK = in_case_run(STORE_RESULT)
"""The mapped task whose instances are a DAG run's case runs, one per map index (labelled with the case), in both
shapes: the group's last task, failed with the reason when the case failed."""
