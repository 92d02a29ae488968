"""Node routing: a case run as one task per node, each on that node's own Celery worker.

Set Airflow's configuration option ``[dlperf] cluster_inventory`` (the deployment's inventory, the one given to
``dlperf cluster sync``; environment variable ``AIRFLOW__DLPERF__CLUSTER_INVENTORY`` or ``airflow.cfg``) on
every Airflow component, and the DAG renders, for every case run, one task per node of that inventory:
``case_run.on_<node>`` runs on the node's ``queue``, holds the node's one-slot pool ``dlperf_node_<name>`` and
starts that node's container through the node's own Docker socket (``docker_url``, read on the node). The nodes
of a case meet on XCom (:class:`XComBoard`, protocol in :mod:`dlperf_core.run.runtime.gang`): they start together,
and the first failure anywhere stops them all. ``case_run.collect_case`` then puts their shares together into
the case's outcome (node 0's log, the first failure, the environment probed on each node) for ``store_result``.

Without ``[dlperf] cluster_inventory`` the DAG keeps one ``run_case`` task per case run that starts every node's
container from one worker through each node's ``docker_url``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from dlperf_airflow.environment_step import probe_cache
from dlperf_airflow.runtimes import RUNNER
from dlperf_airflow.task_ids import OLD_ROUTING_ENV, ROUTING_ENV, cluster_inventory, in_case_run, node_task_id
from dlperf_core.cluster.inventory import Inventory, load_inventory
from dlperf_core.cluster.preflight import PreflightReport
from dlperf_core.model import RunIds
from dlperf_core.run.case_run import NODE_ENV, collect_case, merged_launch_spec, node_share, reported_environment
from dlperf_core.run.handoff import ExecutedRun, NodeReport, Plan, PlannedRun
from dlperf_core.run.runtime.gang import Board, GangSettings, NodeState

log = logging.getLogger("dlperf")

__all__ = ["NODE_ENV", "XComBoard", "collect_step", "merged_launch_spec", "node_step", "route_step"]

JOIN_ENV = "DLPERF_JOIN_TIMEOUT_S"
STATE_KEY = "dlperf_node_state"


def routing_inventory(home: Path) -> Inventory | None:
    """The deployment's inventory when node routing is on (Airflow's ``[dlperf] cluster_inventory``, read
    through Airflow's configuration: :func:`dlperf_airflow.task_ids.cluster_inventory`; a relative path is
    under ``home``), else None. The variable dlperf read before (``DLPERF_CLUSTER_INVENTORY``) is not read
    any more: set alone, it is only warned about."""
    path = cluster_inventory()
    if not path:
        if os.environ.get(OLD_ROUTING_ENV):
            log.warning(
                "%s is no longer read: node routing is off. Set Airflow's [dlperf] cluster_inventory (%s) instead",
                OLD_ROUTING_ENV,
                ROUTING_ENV,
            )
        return None
    p = Path(path)
    return load_inventory(p if p.is_absolute() else home / p)


class XComBoard:
    """The gang's board on XCom: a node posts under its own task (same map index), reads its peers'. XCom holds
    a post's JSON form (:class:`~dlperf_core.run.runtime.gang.NodeState`'s ``to_json``), read back as the type.

    A read that fails (the api-server busy for a moment, a post that is not a state) answers the peer's last
    known state; only when reads keep failing for ``patience_s`` does the error reach the supervisor (and fail
    the case with it)."""

    def __init__(self, ti, patience_s: float = 120.0):
        self._ti = ti
        self._patience_s = patience_s
        self._known: dict[str, NodeState | None] = {}
        self._failing_since: float | None = None

    def post(self, state: NodeState) -> None:
        self._ti.xcom_push(key=STATE_KEY, value=state.to_json())

    def read(self, node: str) -> NodeState | None:
        try:
            posted = self._ti.xcom_pull(
                task_ids=in_case_run(node_task_id(node)), key=STATE_KEY, map_indexes=self._ti.map_index
            )
            state = None if posted is None else NodeState.from_json(posted)
        except Exception as exc:  # noqa: BLE001 - retried on the next poll
            now = time.monotonic()
            self._failing_since = self._failing_since or now
            if now - self._failing_since > self._patience_s:
                raise
            log.warning("reading %s's state from XCom failed (%s: %s); retrying", node, type(exc).__name__, exc)
            return self._known.get(node)
        self._failing_since = None
        self._known[node] = state
        return state


def route_step(plan: Plan) -> list[PlannedRun]:
    """The plan's case runs, the nodes each runs on (resolved by planning) logged once."""
    for planned in plan.cases:
        log.info("%s -> %s", planned.label, ", ".join(f"{n.name} (queue {n.queue})" for n in planned.nodes))
    return list(plan.cases)


def node_step(
    planned: PlannedRun, ids: RunIds, node_name: str, preflight: PreflightReport | None, board: Board
) -> NodeReport:
    """This node's share of one case run (``skipped`` set when the case does not use it):
    :func:`dlperf_core.run.case_run.node_share`, with this deployment's runtimes and this DAG run's probe cache."""
    settings = GangSettings(join_s=float(os.environ.get(JOIN_ENV, GangSettings.join_s)))
    probes = probe_cache(ids) if planned.runtime == "docker" else None
    return node_share(planned, ids, node_name, preflight, board, RUNNER, probes, settings)


def collect_step(planned: PlannedRun, reports: Mapping[str, NodeReport | None], ids: RunIds) -> ExecutedRun:
    """The case's outcome from its nodes' reports (:func:`dlperf_core.run.case_run.collect_case`, the outcome builder
    ``run_case`` uses too), with the environment the nodes probed stored as ``capture_environment`` stores it."""
    outcome, spec = collect_case(planned, reports, ids)
    environment_id = planned.environment_id
    environment = reported_environment(planned, reports)
    if environment is not None:
        from dlperf_airflow.connections import results_db_url
        from dlperf_core.storage import ResultStore

        try:
            store = ResultStore(results_db_url())
            try:
                environment_id = store.upsert_environment(environment, datetime.now(UTC))
            finally:
                store.dispose()
        except Exception as exc:  # noqa: BLE001 - the environment never fails the case
            log.warning("could not store the environment of %s: %s: %s", planned.label, type(exc).__name__, exc)
            environment_id = None
    return ExecutedRun(planned.with_environment(environment_id), outcome, spec)
