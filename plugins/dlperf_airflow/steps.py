"""The steps of the dlperf_benchmark DAG as plain functions over JSON-ready data.

Each DAG task is a one-line call into here; everything substantive is in ``dlperf_core``. Kept free of
task-context plumbing so the same steps can be read (and tested) without a scheduler.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from dlperf_core.efficiency import throughput_unit
from dlperf_core.errors import ConfigError
from dlperf_core.form import check_trigger, with_batch_override, with_compile_override
from dlperf_core.inventory import Inventory, load_inventory
from dlperf_core.jobs import RunIds, Runtime, build_job
from dlperf_core.frameworks import get_adapter
from dlperf_core.measure import Measurement, judge, judge_probe
from dlperf_core.plan import CaseRun, PlanFilters, plan_searches, plan_suite
from dlperf_core.runtime.base import CaseOutcome
from dlperf_core.runtime.local import LocalRuntime
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

from dlperf_airflow.node_step import check_routed, routing_inventory

log = logging.getLogger("dlperf")

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCAL_INVENTORY = "inventories/local.yaml"
DOCKER_INVENTORY = "inventories/docker-local.yaml"


def dlperf_home() -> Path:
    """Where relative suite and inventory paths are resolved: $DLPERF_HOME or the repository."""
    return Path(os.environ.get("DLPERF_HOME", REPO_ROOT)).resolve()


def _resolve(path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else dlperf_home() / p


@dataclass(frozen=True)
class Settings:
    """A trigger's resolved choices: suite file, runtime, inventory, filters."""

    suite_path: Path
    runtime: str
    inventory_path: Path
    filters: PlanFilters


def resolve_settings(params: dict) -> tuple[Settings, object, Inventory]:
    """Validate the trigger form against the suite; refuse anything wrong before work starts."""
    suite = load_suite(_resolve(params.get("suite") or "suites/smoke.yaml"))
    runtime = params.get("runtime") or "suite"
    runtime = suite.runtime if runtime == "suite" else runtime
    if runtime not in ("local", "docker"):
        raise ConfigError("trigger form", [f"runtime: unknown runtime {runtime!r}; use local or docker"])
    if params.get("inventory"):
        inv_path = _resolve(params["inventory"])
    elif suite.inventory and runtime == suite.runtime:
        inv_path = suite.inventory_path()
    else:
        inv_path = _resolve(DOCKER_INVENTORY if runtime == "docker" else LOCAL_INVENTORY)
    inventory = load_inventory(inv_path)
    repeats = params.get("repeats") or None
    filters = PlanFilters(
        frameworks=tuple(params.get("frameworks") or ()),
        models=tuple(params.get("models") or ()),
        precisions=tuple(params.get("precisions") or ()),
        topologies=tuple(params.get("topologies") or ()),
        repeats=int(repeats) if repeats else None,
    )
    check_trigger(suite, filters)  # a filter value the chosen suite lacks is refused, not silently dropped
    suite = with_batch_override(suite, params.get("batch_size") or None)
    suite = with_compile_override(suite, params.get("compile"))
    return Settings(Path(suite.source), runtime, Path(inv_path), filters), suite, inventory


def make_runtime(name: str, inventory: Inventory) -> Runtime:
    if name == "docker":
        from dlperf_airflow.docker_runtime import DockerRuntime

        return DockerRuntime(inventory)
    return LocalRuntime()


def plan_step(params: dict, ids: RunIds, trigger: str, triggered_by: str | None = None) -> list[dict]:
    """Validate and plan; record the benchmark run. Returns one JSON item per case run."""
    settings, suite, inventory = resolve_settings(params)
    searches = plan_searches(suite, inventory, settings.filters)  # refused here too if one does not fit
    runs = plan_suite(suite, inventory, settings.filters, allow_empty=bool(searches))
    if (routing := routing_inventory(dlperf_home())) is not None:
        check_routed(inventory, routing, str(settings.inventory_path))
        local = sorted({n.name for s in searches for n in inventory.first(s.case.nodes) if n.docker_url.startswith("unix:")})
        if searches and settings.runtime == "docker" and local:
            raise ConfigError("max_batch_search", [
                f"nodes {', '.join(local)} are reached through their own Docker socket (per-node workers), but a "
                "max batch search runs from the central worker: give those nodes a tcp:// docker_url, or leave "
                "the search out of this trigger"])
    store = ResultStore(default_db_url())
    store.ensure_schema()  # Alembic upgrade to head: a new database is created, an old one migrated
    store.upsert_run(
        BenchmarkRunRecord(
            dag_id=ids.dag_id,
            run_id=ids.run_id,
            suite=suite.name,
            trigger=trigger,
            runtime=settings.runtime,
            started_at=datetime.now(timezone.utc),
            finished_at=None,
            status="running",
            triggered_by=triggered_by,
        )
    )
    log.info(
        "planned %d case runs and %d max batch searches from %s on the %s runtime",
        len(runs), len(searches), suite.source, settings.runtime,
    )
    common = _common_item(settings, suite)
    return [{**common, "run": r.to_dict()} for r in runs]


def _common_item(settings: Settings, suite: Suite) -> dict:
    """What every planned item carries besides its case: where and how long it may run."""
    return {
        "runtime": settings.runtime,
        "inventory": str(settings.inventory_path),
        "timeout_s": suite.timeout_s,
        "watchdog_s": suite.watchdog_s,
    }


SEARCH_INDEX_BASE = 9000
"""Case-run index of the probes of search i is SEARCH_INDEX_BASE + i (their container names and rendezvous
ports then differ from the cases'); the probe number is their repeat."""


def search_plan_step(params: dict) -> list[dict]:
    """The max batch size searches of the trigger (``max_batch_search`` in the suite), one JSON item each.

    Each item also has ``run``: the search's case at its first batch, so preflight treats it like a case."""
    settings, suite, inventory = resolve_settings(params)
    common = _common_item(settings, suite)
    items = []
    for search in plan_searches(suite, inventory, settings.filters):
        first = CaseRun(search.case, 0, SEARCH_INDEX_BASE + search.index)
        items.append({**common, "run": first.to_dict(), "search": search.to_dict()})
    return items


def item_label(item: dict) -> str:
    run = CaseRun.from_dict(item["run"])
    return f"{run.case.key} r{run.repeat}"


PREFLIGHT_NO_SSH = "skipped: no ssh access declared"


def preflight_step(plan: list[dict]) -> dict:
    """Check, over SSH, every node the planned cases use before any case runs (``dlperf_core.preflight``).

    Returns ``{"status": ..., "nodes": {name: NodeHealth dict}}`` for ``run_case``; a sick node is
    reported here, never raised: its cases fail with the reason, the others run. Inventories without
    ``ssh`` on their nodes (local runtime, docker-local) are skipped with :data:`PREFLIGHT_NO_SSH`."""
    if not plan:
        return {"status": "skipped: nothing planned", "nodes": {}}
    inventory = load_inventory(plan[0]["inventory"])
    runs = [CaseRun.from_dict(item["run"]) for item in plan]
    used = inventory.first(max(r.case.nodes for r in runs))
    if not any(n.ssh is not None for n in used):
        log.info("preflight %s", PREFLIGHT_NO_SSH)
        return {"status": PREFLIGHT_NO_SSH, "nodes": {}}
    from dlperf_airflow.preflight import check_nodes
    from dlperf_core.frameworks import get_adapter

    docker = any(item["runtime"] == "docker" for item in plan)
    images = sorted({get_adapter(r.case.framework).image(r.case, inventory.first(r.case.nodes)) for r in runs}) if docker else []
    health = check_nodes(Inventory(name=inventory.name, nodes=used), images)
    sick = [h.reason for h in health.values() if not h.ok]
    return {"status": f"checked: {len(health) - len(sick)} ok, {len(sick)} failed", "nodes": {
        name: h.to_dict() for name, h in health.items()}}


def execute_step(item: dict, ids: RunIds, preflight: dict | None = None) -> dict:
    """Start all nodes of one case run at once, wait, collect logs, clean up. Never raises for a failed
    training: the outcome (with its reason) goes on to be stored. A case on a node that failed
    ``preflight`` is not started: it is a failed outcome "preflight: <node>: <problem>"."""
    run = CaseRun.from_dict(item["run"])
    started = datetime.now(timezone.utc)
    if preflight and preflight.get("nodes"):
        from dlperf_core.preflight import NodeHealth, case_blocker

        health = {name: NodeHealth.from_dict(h) for name, h in preflight["nodes"].items()}
        names = [n.name for n in load_inventory(item["inventory"]).first(run.case.nodes)]
        if blocker := case_blocker(names, health):
            log.warning("%s not started: %s", item_label(item), blocker)
            return {**item, "outcome": CaseOutcome(started, datetime.now(timezone.utc), [], blocker).to_dict()}
    try:
        inventory = load_inventory(item["inventory"])
        runtime = make_runtime(item["runtime"], inventory)
        job = build_job(run, inventory, runtime, ids, timeout_s=item["timeout_s"], watchdog_s=item["watchdog_s"])
        outcome = runtime.execute(job)
    except Exception as exc:  # the runtime itself failed (engine unreachable, ...): a failed run, not a crash
        now = datetime.now(timezone.utc)
        outcome = CaseOutcome(started, now, [], f"runtime error: {type(exc).__name__}: {exc}")
    return {**item, "outcome": outcome.to_dict()}


def outcome_from_dict(data: dict) -> CaseOutcome:
    return CaseOutcome.from_dict(data)


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
    run = CaseRun.from_dict(executed["run"])
    outcome = outcome_from_dict(executed["outcome"])
    case = run.case
    verdict, result = judge_probe(case, outcome)
    ok = verdict.status == "ok" and result is not None
    sizes = tuple(ProbeSizeRecord(s.size_bytes, s.time_us, s.algbw_gbs, s.busbw_gbs) for s in result.sizes) if ok else ()
    store = ResultStore(default_db_url())
    store.upsert_probe(ProbeRecord(
        dag_id=ids.dag_id, run_id=ids.run_id, probe_key=case.key, nodes=case.nodes, gpus_per_node=case.gpus_per_node,
        repeat=run.repeat, status=verdict.status, reason=verdict.reason,
        ranks=result.ranks if result else None, backend=result.backend if result else None,
        dtype=result.dtype if result else None, avg_busbw_gbs=result.avg_busbw_gbs if ok else None,
        log_path=outcome.log_path, environment_id=executed.get("environment_id"),
        started_at=outcome.started_at, finished_at=outcome.finished_at, sizes=sizes,
    ))
    store.dispose()
    largest = result.largest if ok else None
    figure = (f"bus bandwidth {largest.busbw_gbs:.3f} GB/s at {largest.size_bytes} bytes" if largest
              else ("one rank: no fabric to measure" if ok else verdict.reason))
    progress(f"[{run.index + 1}/{run.total}] {case.key} repeat {run.repeat}: {verdict.status}, {figure}")
    return verdict


def store_step(executed: dict, ids: RunIds) -> Measurement:
    """Parse the log, store the row (idempotently), and return the verdict."""
    run = CaseRun.from_dict(executed["run"])
    if get_adapter(run.case.framework).kind == "probe":
        return store_probe_step(executed, ids)
    outcome = outcome_from_dict(executed["outcome"])
    case = run.case
    store = ResultStore(default_db_url())
    verdict = judge(case, outcome, gpu_model=_gpu_model(store, executed.get("environment_id")))
    spool = ResultSpool(store.url)
    spool.drain(store)  # results an earlier task spooled while the database was down go first
    spooled = store_or_spool(
        store,
        ResultRecord(
            dag_id=ids.dag_id,
            run_id=ids.run_id,
            case_key=case.key,
            framework=case.framework,
            model=case.model,
            precision=case.precision,
            batch_size_per_device=case.batch_size_per_device,
            nodes=case.nodes,
            gpus_per_node=case.gpus_per_node,
            repeat=run.repeat,
            status=verdict.status,
            reason=verdict.reason,
            throughput=verdict.throughput,
            reported_throughput=verdict.reported_throughput,
            iterations=verdict.iterations,
            window_first=verdict.window_first,
            window_last=verdict.window_last,
            compiled=case.compile,
            mfu=verdict.mfu,
            energy_per_sample_j=verdict.energy_per_sample_j,
            gpu_power_mean_w=verdict.gpu_power_mean_w,
            log_path=outcome.log_path,
            started_at=outcome.started_at,
            finished_at=outcome.finished_at,
            environment_id=executed.get("environment_id"),  # set by capture_environment
            gpu_memory_peak_mb=executed["outcome"].get("gpu_memory_peak_mb"),  # sampled by the runtime
        ),
        spool,
    )
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
    rows = store.results(run_id=ids.run_id)
    rows = rows[rows["dag_id"] == ids.dag_id] if len(rows) else rows
    failed = rows[rows["status"] != "ok"] if len(rows) else rows
    searches = store.max_batch_searches(run_id=ids.run_id, dag_id=ids.dag_id)
    failed_searches = searches[searches["status"] == "failed"] if len(searches) else searches
    probes = store.probes(run_id=ids.run_id, dag_id=ids.dag_id)
    failed_probes = probes[probes["status"] == "failed"] if len(probes) else probes
    stored = len(rows) + len(searches) + len(probes)
    status = "failed" if len(failed) or len(failed_searches) or len(failed_probes) or not stored else "success"
    store.finish_run(ids.dag_id, ids.run_id, status, datetime.now(timezone.utc))
    summary = {"results": int(len(rows)), "failed": int(len(failed)), "max_batch_searches": int(len(searches)),
               "fabric_probes": int(len(probes))}
    if not stored:
        raise RuntimeError("no case run was stored: planning failed or every case run crashed (see the task logs)")
    if status == "failed":
        reasons = [f"{r.case_key} r{r.repeat}: {r.reason}" for r in failed.itertuples()]
        reasons += [f"max batch search {r.search_key}: {r.reason}" for r in failed_searches.itertuples()]
        reasons += [f"probe {r.probe_key} r{r.repeat}: {r.reason}" for r in failed_probes.itertuples()]
        raise RuntimeError(
            f"{len(failed)} of {len(rows)} case runs, {len(failed_searches)} of {len(searches)} max batch "
            f"searches and {len(failed_probes)} of {len(probes)} fabric probes failed: {'; '.join(reasons)}"
        )
    return summary


def cleanup_step(params: dict, ids: RunIds) -> list[str]:
    """Remove every container this DAG run started, on every node, whatever happened."""
    settings, _, inventory = resolve_settings(params)
    removed = make_runtime(settings.runtime, inventory).cleanup(ids.labels)
    if removed:
        log.warning("removed leftover containers: %s", ", ".join(removed))
    return removed


def cleanup_node_step(params: dict, ids: RunIds, node_name: str) -> list[str]:
    """Node routing: remove this DAG run's containers on one node, through that node's own Docker socket."""
    settings, _, inventory = resolve_settings(params)
    if settings.runtime != "docker":
        return []
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
