"""An embedded Airflow for ``dlperf run``: no servers, a SQLite metadata DB, the repository's DAG run by
``dag.test()`` in this process. Environment must be prepared before Airflow is first imported.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from dlperf_cli.airflow_setup_cmd import bundle_path
from dlperf_core.json_form import ALLOWED_DESERIALIZATION_CLASSES
from dlperf_core.plan.defaults import CLUSTER_POOL, CLUSTER_POOL_DESCRIPTION, CLUSTER_POOL_SLOTS, MAX_CASE_RUNS

REPO_ROOT = Path(__file__).resolve().parents[1]
DAG_ID = "dlperf_benchmark"


def airflow_settings(airflow_home: Path) -> dict[str, str]:
    """The embedded Airflow's configuration (environment variables): dlperf's DAGs as installed, no
    examples, an SQLite metadata database in ``airflow_home``, quiet logs, dlperf's hand-offs allowed back, up to
    :data:`~dlperf_core.plan.defaults.MAX_CASE_RUNS` mapped case runs."""
    return {
        # dlperf's own DAGs, as installed (the package's bundle; a checkout's dags/ in an editable install)
        "AIRFLOW__CORE__DAGS_FOLDER": str(bundle_path()),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        # the DAG's tasks hand each other dlperf's types (dlperf_core.json_form): Airflow must read them back
        "AIRFLOW__CORE__ALLOWED_DESERIALIZATION_CLASSES": ALLOWED_DESERIALIZATION_CLASSES,
        # a real night maps more case runs than Airflow's default 1,024 (dlperf_core.plan.defaults.MAX_CASE_RUNS)
        "AIRFLOW__CORE__MAX_MAP_LENGTH": str(MAX_CASE_RUNS),
    }


def prepare_environment(home: Path | None = None) -> Path:
    """Point Airflow at dlperf's installed DAGs (always) and a private AIRFLOW_HOME (unless set):
    ``home``, else ``$DLPERF_HOME/.dlperf/airflow`` (:mod:`dlperf_core.home`), whatever the current directory.
    ``DLPERF_HOME`` is exported as resolved, so every task sees the same home."""
    from dlperf_core.home import dlperf_home, state_dir

    airflow_home = Path(os.environ.get("AIRFLOW_HOME") or (home or state_dir("airflow"))).resolve()
    airflow_home.mkdir(parents=True, exist_ok=True)
    os.environ["AIRFLOW_HOME"] = str(airflow_home)
    settings = airflow_settings(airflow_home)
    for key, value in settings.items():
        os.environ.setdefault(key, value)
    # this embedded Airflow runs dlperf's DAG, wherever the environment's dags folder is (the compose image's
    # /opt/airflow/dags holds none: the DAGs come with the installed package)
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = settings["AIRFLOW__CORE__DAGS_FOLDER"]
    os.environ["DLPERF_HOME"] = str(dlperf_home())  # absolute: a task in another folder resolves the same
    plugins = str(REPO_ROOT / "plugins")
    if plugins not in sys.path:
        sys.path.insert(0, plugins)
    return airflow_home


def routing_off() -> None:
    """Turn node routing off for this process (and the tasks it runs), saying so when it was asked for: Airflow's
    ``[dlperf] cluster_inventory`` (the environment or ``airflow.cfg``; the caller has prepared the environment)
    or the variable that named it before."""
    from dlperf_airflow.task_ids import OLD_ROUTING_ENV, ROUTING_ENV, cluster_inventory

    asked = [name for name in (ROUTING_ENV, OLD_ROUTING_ENV) if os.environ.get(name, "").strip()]
    os.environ.pop(OLD_ROUTING_ENV, None)
    if not asked:  # airflow.cfg's [dlperf] cluster_inventory
        asked = ["[dlperf] cluster_inventory in airflow.cfg"] if cluster_inventory() else []
    os.environ[ROUTING_ENV] = ""  # set, even empty, the variable wins over airflow.cfg
    if asked:
        print(
            f"dlperf: node routing ignored ({' and '.join(asked)} set): an in-process run drives every node from "
            "one task",
            file=sys.stderr,
            flush=True,
        )


def migrate_metadata_db() -> None:
    """Create or upgrade Airflow's metadata DB and the dlperf pool (idempotent). The pool counts deferred tasks
    (``include_deferred``): a case run waiting for its Slurm job holds the cluster as a running one does."""
    from airflow.models.pool import Pool
    from airflow.utils.db import upgradedb

    upgradedb()
    Pool.create_or_update_pool(
        CLUSTER_POOL, slots=CLUSTER_POOL_SLOTS, description=CLUSTER_POOL_DESCRIPTION, include_deferred=True
    )


def load_dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(bundle_path()))
    if bag.import_errors:
        raise RuntimeError(f"DAG import errors: {bag.import_errors}")
    return bag.dags[DAG_ID]


def run_dag(conf: dict, logical_date=None):
    """Run dlperf_benchmark once with ``conf`` as its params; return the DagRun.

    ``dag.test()`` runs one task at a time in this process, so the per-node tasks of node routing could never
    meet: the in-process run always drives every node from one task (Airflow's ``[dlperf] cluster_inventory``
    ignored: its environment variable is set empty here, which wins over an ``airflow.cfg`` value)."""
    prepare_environment()
    routing_off()
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)  # Airflow's own, not the user's business
    quiet = logging.WARNING
    for name in ("airflow", "sqlalchemy", "alembic"):
        logging.getLogger(name).setLevel(quiet)
    migrate_metadata_db()
    dag = load_dag()
    kwargs = {"run_conf": conf}
    if logical_date is not None:  # run_after too: Airflow 3 derives a manual run's id from run_after
        kwargs["logical_date"] = logical_date
        kwargs["run_after"] = logical_date
    return dag.test(**kwargs)
