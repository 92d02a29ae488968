"""The steps of the dlperf_benchmark DAG as plain functions over the core's types.

Each DAG task is a one-line call into here with the types it was handed (:mod:`dlperf_core.run.handoff`; XCom
carries their JSON form); everything substantive is in ``dlperf_core``. Kept free of task-context plumbing so
the same steps can be read (and tested) without a scheduler.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from dlperf_airflow.connections import results_db_url
from dlperf_airflow.node_step import routing_inventory
from dlperf_airflow.runtimes import RUNNER, make_runtime
from dlperf_core.cluster.environment_capture import describe as describe_environment
from dlperf_core.cluster.inventory import Inventory
from dlperf_core.cluster.preflight import PreflightReport
from dlperf_core.errors import ConfigError
from dlperf_core.frameworks import get_adapter
from dlperf_core.home import dlperf_home
from dlperf_core.measure.efficiency import throughput_unit
from dlperf_core.measure.measurement import Measurement, measure_case_run, measure_fabric_run
from dlperf_core.model import CaseOutcome, RunIds
from dlperf_core.plan.cases import nodes_used
from dlperf_core.plan.defaults import DeploymentDefaults
from dlperf_core.plan.trigger import plan_trigger, resolve_trigger
from dlperf_core.run.case_run import StartedCase, execute_case, finish_case, start_case
from dlperf_core.run.handoff import ExecutedRun, Plan, PlannedRun, RunSettings
from dlperf_core.run.run_status import RunCounts, lost_reason, outcomes_of_run, status_of_run, unstored
from dlperf_core.storage import (
    BenchmarkRunRecord,
    FabricRecord,
    ResultRecord,
    ResultStore,
)
from dlperf_core.storage.spool import ResultSpool, store_or_spool

log = logging.getLogger("dlperf")


def plan_step(params: Mapping[str, Any], ids: RunIds, trigger: str, triggered_by: str | None = None) -> Plan:
    """Validate the trigger form (``params``, the JSON edge) and plan, once for the whole DAG run
    (:mod:`dlperf_core.plan.trigger`); record the benchmark run. A refused trigger (ConfigError) fails the task with the
    refusal's text, which is also kept in the run's report folder for its "dlperf results" tab: such a run has no
    row and no report."""
    from dlperf_core.reporting.paths import clear_refusal, write_refusal  # not at DAG parse time

    try:
        defaults = DeploymentDefaults.from_env()  # read now, not at parse time: .env changes reach the next run
        resolved = resolve_trigger(params, defaults)
        if resolved.from_defaults:
            log.info(
                "the deployment's defaults (%s) give this run its %s",
                defaults.describe(),
                ", ".join(resolved.from_defaults),
            )
        plan = plan_trigger(resolved, routing_inventory(dlperf_home()), max_map_length())
    except ConfigError as exc:
        write_refusal(ids.dag_id, ids.run_id, str(exc))
        raise
    clear_refusal(ids.dag_id, ids.run_id)  # a later try planned it: an earlier refusal no longer holds
    record = BenchmarkRunRecord(
        dag_id=ids.dag_id,
        run_id=ids.run_id,
        suite=resolved.suite.name,
        trigger=trigger,
        runtime=plan.settings.runtime,
        started_at=datetime.now(UTC),
        triggered_by=triggered_by,
    )
    store = ResultStore(results_db_url())
    try:
        store.ensure_schema()  # Alembic upgrade to head: a new database is created, an old one migrated
        store.upsert_run(record)
    finally:
        store.dispose()
    log.info(
        "planned %d case runs and %d max batch searches from %s on the %s runtime",
        len(plan.cases),
        len(plan.searches),
        resolved.suite.source,
        plan.settings.runtime,
    )
    return plan


def max_map_length() -> int:
    """The most items Airflow maps a task over (``[core] max_map_length``; dlperf's deployments set
    :data:`dlperf_core.plan.defaults.MAX_CASE_RUNS`, Airflow's own default is 1,024)."""
    from airflow.sdk import conf

    return conf.getint("core", "max_map_length", fallback=1024)


PREFLIGHT_NO_SSH = "skipped: no ssh access declared"


def preflight_step(plan: Plan) -> PreflightReport:
    """Check, over SSH, every node the planned cases and searches use before any case runs
    (``dlperf_core.cluster.preflight``). A sick node is reported here, never raised: its cases fail with the reason,
    the others run. Inventories without ``ssh`` on their nodes (local runtime, docker-local) are skipped with
    :data:`PREFLIGHT_NO_SSH`."""
    planned = [*plan.cases, *plan.searches]
    if not planned:
        return PreflightReport("skipped: nothing planned")
    used = nodes_used([p.run.case for p in planned], plan.settings.cluster)  # a per-node sweep's: every node
    if not any(n.ssh is not None for n in used):
        log.info("preflight %s", PREFLIGHT_NO_SSH)
        return PreflightReport(PREFLIGHT_NO_SSH)
    from dlperf_airflow.ssh_preflight import check_nodes

    images = sorted({p.image for p in planned if p.image is not None})  # planning chose them (docker runtime)
    health = check_nodes(Inventory(name=plan.settings.cluster.name, nodes=used), images)
    sick = [h.reason for h in health.values() if not h.ok]
    return PreflightReport(f"checked: {len(health) - len(sick)} ok, {len(sick)} failed", tuple(health.values()))


def execute_step(planned: PlannedRun, ids: RunIds, preflight: PreflightReport | None = None) -> ExecutedRun:
    """One case run from this worker: :func:`dlperf_core.run.case_run.execute_case` with this deployment's runtimes."""
    return execute_case(planned, ids, RUNNER, preflight)


def start_case_step(
    planned: PlannedRun, ids: RunIds, preflight: PreflightReport | None = None
) -> ExecutedRun | StartedCase:
    """A case run whose runtime queues its jobs (slurm): submitted from this worker
    (:func:`dlperf_core.run.case_run.start_case`): what to wait on, or its outcome when it ended already."""
    return start_case(planned, ids, RUNNER, preflight)


def finish_case_step(
    planned: PlannedRun,
    ids: RunIds,
    started: StartedCase,
    *,
    wait_failure: str | None = None,
    end_reason: str | None = None,
) -> ExecutedRun:
    """The same case run after its wait (:func:`dlperf_core.run.case_run.finish_case`): collected, its outcome."""
    return finish_case(planned, ids, started, RUNNER, wait_failure=wait_failure, end_reason=end_reason)


def _gpu_model(store: ResultStore, environment_id: int | None) -> str | None:
    """The GPU model environment capture read for this case (None: no GPU, or no environment)."""
    if environment_id is None:
        return None
    try:
        return store.gpu_model(environment_id)
    except Exception as exc:  # noqa: BLE001 - the database is down: the row is spooled, without an MFU
        log.warning("could not read environment %s: %s: %s", environment_id, type(exc).__name__, exc)
        return None


def store_fabric_step(done: ExecutedRun, ids: RunIds) -> Measurement:
    """A fabric benchmark's case run (the all-reduce bus bandwidth): parse its table, store it in ``fabric_probes``
    (idempotently), return the measurement."""
    run = done.run
    measurement, result = measure_fabric_run(run.case, done.outcome)
    record = FabricRecord.from_fabric(
        ids.dag_id, ids.run_id, run, measurement, result, done.outcome, environment_id=done.planned.environment_id
    )
    store = ResultStore(results_db_url())
    try:
        store.upsert_fabric(record)
    finally:
        store.dispose()
    largest = result.largest if result is not None and measurement.status == "ok" else None
    figure = (
        f"bus bandwidth {largest.busbw_gbs:.3f} GB/s at {largest.size_bytes} bytes"
        if largest
        else ("one rank: no fabric to measure" if measurement.status == "ok" else measurement.reason)
    )
    progress(f"[{run.index + 1}/{run.total}] {run.case.key} repeat {run.repeat}: {measurement.status}, {figure}")
    return measurement


def _stored_environment(store: ResultStore, done: ExecutedRun) -> int | None:
    """The id of the environment ``done``'s job probed, stored once (as capture_environment stores one); None when
    the database cannot take it now (the row is spooled without it)."""
    assert done.environment is not None
    try:
        environment_id = store.upsert_environment(done.environment, datetime.now(UTC))
    except Exception as exc:  # noqa: BLE001 - the environment never fails the case
        log.warning("could not store the environment of %s: %s: %s", done.label, type(exc).__name__, exc)
        return None
    log.info("environment %s for %s: %s", environment_id, done.label, describe_environment(done.environment))
    return environment_id


def store_step(done: ExecutedRun, ids: RunIds) -> Measurement:
    """Parse the log, store the row (idempotently), and return the measurement."""
    run, outcome = done.run, done.outcome
    if get_adapter(run.case.framework).kind == "fabric":
        return store_fabric_step(done, ids)
    case = run.case
    environment_id = done.planned.environment_id  # set by capture_environment (node routing: collect_case)
    store = ResultStore(results_db_url())
    try:
        if done.environment is not None:  # the case's own job probed it (slurm): that one, stored as capture does
            environment_id = _stored_environment(store, done)
        measurement = measure_case_run(case, outcome, gpu_model=_gpu_model(store, environment_id))
        spool = ResultSpool(store.url)
        spool.drain(store)  # results an earlier task spooled while the database was down go first
        record = ResultRecord.from_run(
            ids.dag_id,
            ids.run_id,
            case,
            run.repeat,
            measurement,
            outcome,
            environment_id=environment_id,
            figure_origin=done.planned.figure_origin,  # who printed the lines read (planning asked its adapter)
            launch_spec=done.launch_spec.to_json() if done.launch_spec is not None else None,
        )
        spooled = store_or_spool(store, record, spool)
    finally:
        store.dispose()
    if spooled is not None:
        log.warning("results database unavailable: this result is kept in %s until it can be written", spooled)
    figure = (
        f"{measurement.throughput:.2f} {throughput_unit(case.model)}" if measurement.throughput else measurement.reason
    )
    progress(f"[{run.index + 1}/{run.total}] {case.key} repeat {run.repeat}: {measurement.status}, {figure}")
    return measurement


class CaseTaskView(Protocol):
    """What ``finish_run`` can learn of a case run's tasks by map index (:class:`dlperf_airflow.case_tasks.CaseTasks`)."""

    def outcome(self, index: int) -> ExecutedRun | None: ...

    def states(self, index: int) -> dict[str, str | None]: ...


def finish_step(ids: RunIds, plan: Plan | None = None, tasks: CaseTaskView | None = None) -> RunCounts:
    """Close the benchmark run; fail (and so fail the DAG run) when any case run failed.

    No case run of ``plan`` goes missing: one that stored nothing is stored here, from the outcome its case-running
    task handed over when there is one (its ``store_result`` never ran: Airflow marks a mapped downstream
    upstream_failed as a whole when one upstream instance failed), else as failed with a reason from its tasks'
    states (its task was killed with its worker, or never ran). Clearing the DAG run's failed tasks runs those again;
    a new result replaces the row (one row per case run and repeat)."""
    store = ResultStore(results_db_url())
    try:
        spool = ResultSpool(store.url)
        drained = spool.drain(store)
        if drained.left:
            raise RuntimeError(
                f"results database unavailable: {drained.left} results stay spooled in {spool.folder} "
                "and are written by the next store_result or finish_run that reaches the database"
            )
        planned = [(p.run.case.key, p.run.repeat) for p in plan.cases] if plan is not None else []
        missing = unstored(planned, outcomes_of_run(store, ids.dag_id, ids.run_id))
    finally:
        store.dispose()
    for index in missing:
        assert plan is not None  # (nothing is missing without a plan)
        executed = tasks.outcome(index) if tasks is not None else None
        if executed is None:
            reason = lost_reason(tasks.states(index) if tasks is not None else {})
            log.error("%s: %s", plan.cases[index].label, reason)
            now = datetime.now(UTC)
            executed = ExecutedRun(plan.cases[index], CaseOutcome(now, now, [], reason), None)
        else:
            log.warning("%s ran but its store_result did not: storing it now", plan.cases[index].label)
        store_step(executed, ids)
    store = ResultStore(results_db_url())
    try:
        run_status = status_of_run(
            store, ids.dag_id, ids.run_id
        )  # the rule: dlperf_core.run.run_status.status_of_outcomes
        store.finish_run(ids.dag_id, ids.run_id, run_status.status, datetime.now(UTC))
    finally:
        store.dispose()
    if run_status.message is not None:
        raise RuntimeError(run_status.message)
    return run_status.summary()


def cleanup_step(settings: RunSettings, ids: RunIds) -> list[str]:
    """Remove every container this DAG run started, on every node, whatever happened."""
    removed = make_runtime(settings.runtime, settings.cluster).cleanup(ids.labels)
    if removed:
        log.warning("removed leftover containers: %s", ", ".join(removed))
    return removed


def cleanup_node_step(settings: RunSettings, ids: RunIds, node_name: str) -> list[str]:
    """Node routing: remove this DAG run's containers on one node, through that node's own Docker socket."""
    if settings.runtime != "docker":
        return []
    here = tuple(n for n in settings.nodes if n.name == node_name)
    if not here:
        return []
    removed = make_runtime("docker", Inventory(name=settings.cluster.name, nodes=here)).cleanup(ids.labels)
    if removed:
        log.warning("removed leftover containers on %s: %s", node_name, ", ".join(removed))
    return removed


def progress(line: str) -> None:
    """One line per finished case run, for people watching `dlperf run` (and in the task log)."""
    log.info(line)
    if os.environ.get("DLPERF_PROGRESS"):
        print(line, file=sys.__stderr__, flush=True)
