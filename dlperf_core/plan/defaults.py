"""The deployment's defaults: what a run uses for the suite, runtime and inventory when its trigger leaves them
open (the nightly scheduled run always does; a manual trigger does with the form's defaults).

They are read from the environment **when a run starts** (:meth:`DeploymentDefaults.from_env`, called by
planning), never when the DAG file is parsed, so changing ``.env`` and restarting the workers changes the next
night without touching the DAG:

* ``DLPERF_DEFAULT_SUITE``: the suite file (default ``suites/smoke.yaml``);
* ``DLPERF_DEFAULT_RUNTIME``: ``local``, ``docker``, or ``suite`` for the suite's own (default ``suite``);
* ``DLPERF_DEFAULT_INVENTORY``: the inventory file used with the default runtime (default: none, i.e. the suite's
  own, else the runtime's default inventory).

The compose deployment sets them to the smoke suite on the ``docker`` runtime with the single-host inventory
``inventories/docker-local.yaml`` (docker-compose.yaml): its Airflow image has no torch, so the ``local``
runtime, which trains inside the worker, cannot run there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from dlperf_core.errors import ConfigError

SUITE_ENV = "DLPERF_DEFAULT_SUITE"
RUNTIME_ENV = "DLPERF_DEFAULT_RUNTIME"
INVENTORY_ENV = "DLPERF_DEFAULT_INVENTORY"

DEFAULT_SUITE = "suites/smoke.yaml"
"""The suite of a run that names none, where the deployment does not say otherwise."""

FORM_DEFAULT = "default"
"""The trigger form's runtime value meaning "the deployment's default runtime"."""

SUITE_RUNTIME = "suite"
"""The runtime value meaning "the suite's own runtime (and inventory)"."""

RUNTIMES = ("local", "docker")
"""The runtimes a trigger's form offers (and a deployment's default may be)."""

SLURM_RUNTIME = "slurm"
"""The runtime of an inventory with a ``slurm:`` block, which that inventory chooses itself: a trigger may name it (a
stored case run again by ``dlperf reproduce --run`` does) only with such an inventory."""

TASK_SUPERVISOR_WAKE_S = 1
"""The ``[workers] min_heartbeat_interval`` dlperf's Celery deployments give Airflow (docker-compose.yaml, the tests'
stacks): besides the heartbeat's pace, it is the longest the task supervisor sleeps between looks at its task
process. With Airflow's default, 5 s, a task whose process closed its pipes before the supervisor saw it exit kept
its worker slot up to 5 s longer (Airflow 3.3's ``ActivitySubprocess._monitor_subprocess`` then waits on no file at
all until the timeout): a node's next case task waited behind it, and a case over 8 stand-in nodes joined ~5 s
later than over 2 (docs/benchmarks.md (h), ``bench/growth_nodes.py``). 1 s costs one heartbeat a second per
running task."""

EXECUTION_API_RETRIES = 10
"""The ``[workers] execution_api_retries`` dlperf's Celery deployments give Airflow: how often a task's supervisor
tries a call to the api-server again (waits growing at random up to ``execution_api_retry_wait_max``, 90 s) before
the task fails. With Airflow's default, 5, the tries of one call spanned about 11 s here, and a task that pushed
its result while the api-server restarted (down 20 s) failed, its case run lost (tests/chaos/); 10 tries ride
out a restart of a minute or more."""

CELERY_CONFIG_OPTIONS = "dlperf_airflow.celery_config.CELERY_CONFIG"
"""The ``[celery] celery_config_options`` dlperf's Celery deployments give Airflow (docker-compose.yaml, the tests'
stacks): Airflow's Celery settings plus ``imports``, so that a worker imports dlperf's modules once, when it starts,
and every task process it forks finds them imported. Without it every task of the DAG imported them again (about 2 s
of CPU here): the node tasks of a case over 8 stand-in nodes, started together on 2 cores, spent 2.8 s in Airflow's
"Pre Execute" against 0.5 s over 2 nodes (docs/benchmarks.md (h), ``bench/growth_nodes.py``)."""

CLUSTER_POOL = "dlperf_cluster"
"""The Airflow pool of the DAG's tasks that hold the cluster (case runs, max batch trials, probes): one at a time,
across DAG runs, counting deferred tasks (a case waiting for its Slurm job holds it). dags/dlperf_benchmark.py uses
it; the embedded ``dlperf run``, ``dlperf airflow-setup`` and docker-compose.yaml's airflow-init create it."""
CLUSTER_POOL_SLOTS = 1
CLUSTER_POOL_DESCRIPTION = "one benchmark case at a time on the cluster"

MAX_CASE_RUNS = 4096
"""The most case runs one DAG run maps: the ``[core] max_map_length`` dlperf's deployments give Airflow
(``AIRFLOW__CORE__MAX_MAP_LENGTH``: the embedded ``dlperf run``, docker-compose.yaml, the tests' stacks). Airflow's
default, 1,024, is below a real night (5 frameworks x 3 precisions x 3 batch sizes x 6 topologies x 5 repeats is
1,350): its api-server would refuse the mapped list and fail the run after planning. A plan over the deployment's
limit is refused when it is planned, before any case runs (:func:`dlperf_core.plan.trigger.plan_trigger`)."""


@dataclass(frozen=True)
class DeploymentDefaults:
    """The suite, runtime and inventory a run uses when its trigger leaves them open."""

    suite: str = DEFAULT_SUITE
    runtime: str = SUITE_RUNTIME  # "local" | "docker" | "suite"
    inventory: str | None = None  # with ``runtime``; None: the suite's, else the runtime's default

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DeploymentDefaults:
        """The defaults in ``environ`` (default ``os.environ``), checked: a runtime other than local, docker
        or suite is refused, naming the variable."""
        env = os.environ if environ is None else environ
        runtime = (env.get(RUNTIME_ENV) or SUITE_RUNTIME).strip()
        if runtime not in (*RUNTIMES, SUITE_RUNTIME):
            raise ConfigError("deployment", [f"{RUNTIME_ENV}={runtime!r}: use local, docker or suite"])
        return cls(
            suite=(env.get(SUITE_ENV) or DEFAULT_SUITE).strip(),
            runtime=runtime,
            inventory=(env.get(INVENTORY_ENV) or "").strip() or None,
        )

    def describe(self) -> str:
        """One line for logs: ``suites/smoke.yaml on docker (inventories/docker-local.yaml)``."""
        where = "the suite's runtime" if self.runtime == SUITE_RUNTIME else self.runtime
        return f"{self.suite} on {where}" + (f" ({self.inventory})" if self.inventory else "")


@dataclass(frozen=True)
class ChosenSource:
    """A trigger's suite, runtime and inventory after the deployment's defaults filled what it left open.

    ``runtime`` is ``local``, ``docker`` or ``suite`` (resolved against the suite by the caller, who has loaded
    it); ``inventory`` is None when neither the trigger nor the defaults name one."""

    suite: str
    runtime: str
    inventory: str | None
    from_defaults: tuple[str, ...]  # which of suite/runtime/inventory came from the deployment's defaults


def fill_from_defaults(
    suite: str | None, runtime: str | None, inventory: str | None, defaults: DeploymentDefaults
) -> ChosenSource:
    """The trigger's ``suite``/``runtime``/``inventory`` with what it left open (empty, None, or the form's
    runtime ``default``) taken from ``defaults``. The default inventory goes with the default runtime only: a
    trigger that picks a runtime and leaves the inventory empty gets that runtime's usual inventory."""
    taken: list[str] = []
    if not suite:
        suite = defaults.suite
        taken.append("suite")
    if not runtime or runtime == FORM_DEFAULT:
        runtime = defaults.runtime
        taken.append("runtime")
        if not inventory and defaults.inventory:
            inventory = defaults.inventory
            taken.append("inventory")
    if runtime not in (*RUNTIMES, SUITE_RUNTIME, SLURM_RUNTIME):
        raise ConfigError("trigger form", [f"runtime: unknown runtime {runtime!r}; use local or docker"])
    return ChosenSource(suite, runtime, inventory or None, tuple(taken))
