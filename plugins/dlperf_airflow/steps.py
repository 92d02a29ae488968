"""The steps of the dlperf_benchmark DAG as plain functions over JSON-ready data.

Each DAG task is a one-line call into here; everything substantive is in ``dlperf_core``. Kept free of
task-context plumbing so the same steps can be read (and tested) without a scheduler.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from dlperf_airflow.node_step import check_routed, routing_inventory
from dlperf_airflow.runtimes import make_runtime
from dlperf_core.defaults import SUITE_RUNTIME, DeploymentDefaults, fill_from_defaults
from dlperf_core.efficiency import throughput_unit
from dlperf_core.errors import ConfigError
from dlperf_core.form import apply_form
from dlperf_core.frameworks import get_adapter
from dlperf_core.handoff import ExecutedRun, Plan, PlannedRun, RunSettings
from dlperf_core.home import dlperf_home
from dlperf_core.home import resolve as _resolve  # relative suite and inventory paths: against DLPERF_HOME
from dlperf_core.inventory import Inventory, check_docker_access, load_inventory
from dlperf_core.jobs import build_job
from dlperf_core.launch_spec import LaunchSpec, launch_spec_of
from dlperf_core.measure import Measurement, figure_origin, judge, judge_probe
from dlperf_core.model import CaseJob, CaseOutcome, CaseRun, RunIds, Runtime
from dlperf_core.plan import PlanFilters, plan_searches, plan_suite
from dlperf_core.storage import (
    BenchmarkRunRecord,
    ProbeRecord,
    ProbeSizeRecord,
    ResultRecord,
    ResultStore,
    default_db_url,
)
from dlperf_core.storage.spool import ResultSpool, store_or_spool
from dlperf_core.suite import Suite, load_suite

log = logging.getLogger("dlperf")

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCAL_INVENTORY = "inventories/local.yaml"
DOCKER_INVENTORY = "inventories/docker-local.yaml"


@dataclass(frozen=True)
class Settings:
    """A trigger's resolved choices: suite file, runtime, inventory, filters."""

    suite_path: Path
    runtime: str
    inventory_path: Path
    filters: PlanFilters


def resolve_settings(params: dict) -> tuple[Settings, Suite, Inventory]:
    """Validate the trigger form against the suite; refuse anything wrong before work starts. What the trigger
    leaves open (suite, runtime ``default``, inventory) comes from the deployment's defaults, read now
    (:mod:`dlperf_core.defaults`: ``DLPERF_DEFAULT_SUITE``/``_RUNTIME``/``_INVENTORY``)."""
    defaults = DeploymentDefaults.from_env()
    chosen = fill_from_defaults(params.get("suite"), params.get("runtime"), params.get("inventory"), defaults)
    if chosen.from_defaults:
        log.info(
            "the deployment's defaults (%s) give this run its %s", defaults.describe(), ", ".join(chosen.from_defaults)
        )
    suite = load_suite(_resolve(chosen.suite))
    runtime = suite.runtime if chosen.runtime == SUITE_RUNTIME else chosen.runtime  # fill_from_defaults checked it
    inv_path = suite.inventory_path() if runtime == suite.runtime else None  # the suite's own, if it names one
    if chosen.inventory:
        inv_path = _resolve(chosen.inventory)
    elif inv_path is None:
        inv_path = _resolve(DOCKER_INVENTORY if runtime == "docker" else LOCAL_INVENTORY)
    inventory = load_inventory(inv_path)
    if runtime == "docker":  # a Docker socket on TCP without TLS is root on the node: refused unless insecure
        check_docker_access(inventory, str(inv_path))
    repeats = params.get("repeats") or None
    filters = PlanFilters(
        frameworks=tuple(params.get("frameworks") or ()),
        models=tuple(params.get("models") or ()),
        precisions=tuple(params.get("precisions") or ()),
        topologies=tuple(params.get("topologies") or ()),
        repeats=int(repeats) if repeats else None,
        case_keys=tuple(params.get("case_keys") or ()),
    )
    # a filter value the chosen suite lacks is refused, not silently dropped; then batch and compile overrides
    suite = apply_form(suite, filters, params)
    return Settings(Path(suite.source), runtime, Path(inv_path), filters), suite, inventory


SEARCH_INDEX_BASE = 9000
"""Case-run index of the probes of search i is SEARCH_INDEX_BASE + i (their container names and rendezvous
ports then differ from the cases'); the probe number is their repeat."""


def plan_step(params: dict, ids: RunIds, trigger: str, triggered_by: str | None = None) -> dict:
    """Validate and plan, once for the whole DAG run; record the benchmark run. Returns the
    :class:`~dlperf_core.handoff.Plan` as JSON: ``settings``, one ``cases`` item per case run and one
    ``searches`` item per max batch size search (its case at the first batch, so preflight treats it like a
    case)."""
    settings, suite, inventory = resolve_settings(params)
    searches = plan_searches(suite, inventory, settings.filters)  # refused here too if one does not fit
    runs = plan_suite(suite, inventory, settings.filters, allow_empty=bool(searches))
    if (routing := routing_inventory(dlperf_home())) is not None:
        check_routed(inventory, routing, str(settings.inventory_path))
        local = sorted(
            {n.name for s in searches for n in inventory.first(s.case.nodes) if n.docker_url.startswith("unix:")}
        )
        if searches and settings.runtime == "docker" and local:
            raise ConfigError(
                "max_batch_search",
                [
                    f"nodes {', '.join(local)} are reached through their own Docker socket (per-node workers), but a "
                    "max batch search runs from the central worker: give those nodes a tcp:// docker_url (with TLS), "
                    "or leave the search out of this trigger"
                ],
            )
    store = ResultStore(default_db_url())
    store.ensure_schema()  # Alembic upgrade to head: a new database is created, an old one migrated
    store.upsert_run(
        BenchmarkRunRecord(
            dag_id=ids.dag_id,
            run_id=ids.run_id,
            suite=suite.name,
            trigger=trigger,
            runtime=settings.runtime,
            started_at=datetime.now(UTC),
            finished_at=None,
            status="running",
            triggered_by=triggered_by,
        )
    )
    log.info(
        "planned %d case runs and %d max batch searches from %s on the %s runtime",
        len(runs),
        len(searches),
        suite.source,
        settings.runtime,
    )
    chosen = RunSettings(
        str(settings.suite_path), settings.runtime, str(settings.inventory_path), suite.timeout_s, suite.watchdog_s
    )
    return Plan(
        chosen,
        cases=[PlannedRun.of(r, chosen) for r in runs],
        searches=[PlannedRun.of(CaseRun(s.case, 0, SEARCH_INDEX_BASE + s.index), chosen, s) for s in searches],
    ).to_dict()


def item_label(item: dict) -> str:
    """The label of a planned or executed run (task instance name in the UI, progress lines)."""
    return PlannedRun.from_dict(item).label


PREFLIGHT_NO_SSH = "skipped: no ssh access declared"


def preflight_step(plan: list[dict]) -> dict:
    """Check, over SSH, every node the planned cases use before any case runs (``dlperf_core.preflight``).

    Returns ``{"status": ..., "nodes": {name: NodeHealth dict}}`` for ``run_case``; a sick node is
    reported here, never raised: its cases fail with the reason, the others run. Inventories without
    ``ssh`` on their nodes (local runtime, docker-local) are skipped with :data:`PREFLIGHT_NO_SSH`."""
    if not plan:
        return {"status": "skipped: nothing planned", "nodes": {}}
    planned = [PlannedRun.from_dict(item) for item in plan]
    inventory = load_inventory(planned[0].inventory)
    runs = [p.run for p in planned]
    used = inventory.first(max(r.case.nodes for r in runs))
    if not any(n.ssh is not None for n in used):
        log.info("preflight %s", PREFLIGHT_NO_SSH)
        return {"status": PREFLIGHT_NO_SSH, "nodes": {}}
    from dlperf_airflow.preflight import check_nodes

    docker = any(p.runtime == "docker" for p in planned)
    images = (
        sorted({get_adapter(r.case.framework).image(r.case, inventory.first(r.case.nodes)) for r in runs})
        if docker
        else []
    )
    health = check_nodes(Inventory(name=inventory.name, nodes=used), images)
    sick = [h.reason for h in health.values() if not h.ok]
    return {
        "status": f"checked: {len(health) - len(sick)} ok, {len(sick)} failed",
        "nodes": {name: h.to_dict() for name, h in health.items()},
    }


def execute_step(item: dict, ids: RunIds, preflight: dict | None = None) -> dict:
    """Start all nodes of one case run at once, wait, collect logs, clean up. Never raises for a failed
    training: the outcome (with its reason) goes on to be stored. A case on a node that failed
    ``preflight`` is not started: it is a failed outcome "preflight: <node>: <problem>"."""
    planned = PlannedRun.from_dict(item)
    run = planned.run
    started = datetime.now(UTC)
    if preflight and preflight.get("nodes"):
        from dlperf_core.preflight import NodeHealth, case_blocker

        health = {name: NodeHealth.from_dict(h) for name, h in preflight["nodes"].items()}
        names = [n.name for n in load_inventory(planned.inventory).first(run.case.nodes)]
        if blocker := case_blocker(names, health):
            log.warning("%s not started: %s", planned.label, blocker)
            return ExecutedRun(planned, CaseOutcome(started, datetime.now(UTC), [], blocker)).to_dict()
    runtime: Runtime | None = None
    job: CaseJob | None = None
    try:
        inventory = load_inventory(planned.inventory)
        runtime = make_runtime(planned.runtime, inventory)
        job = build_job(run, inventory, runtime, ids, timeout_s=planned.timeout_s, watchdog_s=planned.watchdog_s)
        outcome = runtime.execute(job)
    except Exception as exc:  # the runtime itself failed (engine unreachable, ...): a failed run, not a crash
        now = datetime.now(UTC)
        outcome = CaseOutcome(started, now, [], f"runtime error: {type(exc).__name__}: {exc}")
    spec = launch_spec(runtime, job, planned) if runtime is not None and job is not None else None
    return ExecutedRun(planned, outcome, spec).to_dict()


def launch_spec(runtime: Runtime, job: CaseJob, planned: PlannedRun) -> LaunchSpec | None:
    """What ``runtime`` launched for ``job`` (:mod:`dlperf_core.launch_spec`), kept on the result row; None,
    with a warning, when it cannot be told (never fails the case)."""
    try:
        return launch_spec_of(runtime, job, planned.run, suite=planned.suite, inventory=planned.inventory)
    except Exception as exc:  # noqa: BLE001 - the result is stored without it
        log.warning("no launch spec for %s: %s: %s", planned.label, type(exc).__name__, exc)
        return None


def _gpu_model(store: ResultStore, environment_id: int | None) -> str | None:
    """The GPU model environment capture read for this case (None: no GPU, or no environment)."""
    if environment_id is None:
        return None
    try:
        frame = store.environments([int(environment_id)])
    except Exception as exc:  # noqa: BLE001 - the database is down: the row is spooled, without an MFU
        log.warning("could not read environment %s: %s: %s", environment_id, type(exc).__name__, exc)
        return None
    return None if frame.empty or pd.isna(frame.iloc[0]["gpu_model"]) else str(frame.iloc[0]["gpu_model"])


def store_probe_step(executed: dict, ids: RunIds) -> Measurement:
    """A probe case run (the all-reduce probe): parse its table, store it in ``fabric_probes`` (idempotently),
    return the verdict."""
    done = ExecutedRun.from_dict(executed)
    run, outcome = done.run, done.outcome
    case = run.case
    verdict, result = judge_probe(case, outcome)
    good = result if verdict.status == "ok" else None  # the table of an ok probe
    ok = good is not None
    sizes = (
        tuple(ProbeSizeRecord(s.size_bytes, s.time_us, s.algbw_gbs, s.busbw_gbs) for s in good.sizes) if good else ()
    )
    store = ResultStore(default_db_url())
    store.upsert_probe(
        ProbeRecord(
            dag_id=ids.dag_id,
            run_id=ids.run_id,
            probe_key=case.key,
            nodes=case.nodes,
            gpus_per_node=case.gpus_per_node,
            repeat=run.repeat,
            status=verdict.status,
            reason=verdict.reason,
            ranks=result.ranks if result else None,
            backend=result.backend if result else None,
            dtype=result.dtype if result else None,
            avg_busbw_gbs=good.avg_busbw_gbs if good else None,
            log_path=outcome.log_path,
            environment_id=done.planned.environment_id,
            started_at=outcome.started_at,
            finished_at=outcome.finished_at,
            sizes=sizes,
        )
    )
    store.dispose()
    largest = good.largest if good else None
    figure = (
        f"bus bandwidth {largest.busbw_gbs:.3f} GB/s at {largest.size_bytes} bytes"
        if largest
        else ("one rank: no fabric to measure" if ok else verdict.reason)
    )
    progress(f"[{run.index + 1}/{run.total}] {case.key} repeat {run.repeat}: {verdict.status}, {figure}")
    return verdict


def store_step(executed: dict, ids: RunIds) -> Measurement:
    """Parse the log, store the row (idempotently), and return the verdict."""
    done = ExecutedRun.from_dict(executed)
    run, outcome = done.run, done.outcome
    if get_adapter(run.case.framework).kind == "probe":
        return store_probe_step(executed, ids)
    case = run.case
    store = ResultStore(default_db_url())
    environment_id = done.planned.environment_id  # set by capture_environment (node routing: collect_case)
    verdict = judge(case, outcome, gpu_model=_gpu_model(store, environment_id))
    spool = ResultSpool(store.url)
    spool.drain(store)  # results an earlier task spooled while the database was down go first
    origin = figure_origin(case, done.planned.inventory)  # who printed the lines read: framework or dlperf
    record = ResultRecord.from_run(
        ids.dag_id,
        ids.run_id,
        case,
        run.repeat,
        verdict,
        outcome,
        environment_id=environment_id,
        figure_origin=origin,
        launch_spec=done.launch_spec.to_dict() if done.launch_spec is not None else None,
    )
    spooled = store_or_spool(store, record, spool)
    if spooled is not None:
        log.warning("results database unavailable: this result is kept in %s until it can be written", spooled)
    figure = f"{verdict.throughput:.2f} {throughput_unit(case.model)}" if verdict.throughput else verdict.reason
    progress(f"[{run.index + 1}/{run.total}] {case.key} repeat {run.repeat}: {verdict.status}, {figure}")
    return verdict


def finish_step(ids: RunIds) -> dict:
    """Close the benchmark run; fail (and so fail the DAG run) when any case run failed."""
    store = ResultStore(default_db_url())
    spool = ResultSpool(store.url)
    drained = spool.drain(store)
    if drained.left:
        raise RuntimeError(
            f"results database unavailable: {drained.left} results stay spooled in {spool.folder} "
            "and are written by the next store_result or finish_run that reaches the database"
        )
    from dlperf_core.verdict import verdict_of_run  # the rule: dlperf_core.verdict.judge_run

    verdict = verdict_of_run(store, ids.dag_id, ids.run_id)
    store.finish_run(ids.dag_id, ids.run_id, verdict.status, datetime.now(UTC))
    if verdict.message is not None:
        raise RuntimeError(verdict.message)
    return verdict.summary()


def cleanup_step(settings: dict, ids: RunIds) -> list[str]:
    """Remove every container this DAG run started, on every node, whatever happened (``settings``: the
    plan's :class:`~dlperf_core.handoff.RunSettings`)."""
    chosen = RunSettings.from_dict(settings)
    removed = make_runtime(chosen.runtime, load_inventory(chosen.inventory)).cleanup(ids.labels)
    if removed:
        log.warning("removed leftover containers: %s", ", ".join(removed))
    return removed


def cleanup_node_step(settings: dict, ids: RunIds, node_name: str) -> list[str]:
    """Node routing: remove this DAG run's containers on one node, through that node's own Docker socket."""
    chosen = RunSettings.from_dict(settings)
    if chosen.runtime != "docker":
        return []
    inventory = load_inventory(chosen.inventory)
    here = [n for n in inventory.nodes if n.name == node_name]
    if not here:
        return []
    removed = make_runtime("docker", Inventory(name=inventory.name, nodes=tuple(here))).cleanup(ids.labels)
    if removed:
        log.warning("removed leftover containers on %s: %s", node_name, ", ".join(removed))
    return removed


def progress(line: str) -> None:
    """One line per finished case run, for people watching `dlperf run` (and in the task log)."""
    log.info(line)
    if os.environ.get("DLPERF_PROGRESS"):
        print(line, file=sys.__stderr__, flush=True)
