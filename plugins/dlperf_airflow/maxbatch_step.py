"""The ``search_max_batch`` step: run one max batch size search (``dlperf_core.maxbatch``) and store it.

Each probe is an ordinary case run at one batch size (same runtime, supervisor, watchdog, cleanup and log
parser as ``run_case``), judged like one; the pure search decides what to try next. The task holds the
cluster pool for the whole search, so probes never share a device with a case or another run.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime

from dlperf_airflow.steps import SEARCH_INDEX_BASE, execute_step, item_label, progress
from dlperf_core.handoff import ExecutedRun, PlannedRun
from dlperf_core.maxbatch import Probe, SearchVerdict, run_search
from dlperf_core.measure import judge
from dlperf_core.model import CaseRun, RunIds
from dlperf_core.storage import MaxBatchSearchRecord, ResultStore, default_db_url

log = logging.getLogger("dlperf")


def search_step(item: dict, ids: RunIds, preflight: dict | None = None) -> SearchVerdict:
    """Probe batch after batch until one runs out of memory (or the limit); store and return the verdict."""
    planned = PlannedRun.from_dict(item)
    search_run = planned.search
    assert search_run is not None, "a max batch search item without its search"
    search = search_run.search
    candidates = search.candidates()
    started = datetime.now(UTC)

    def probe(batch: int) -> Probe:
        run = CaseRun(search_run.probe_case(batch), candidates.index(batch), SEARCH_INDEX_BASE + search_run.index)
        executed = ExecutedRun.from_dict(execute_step(replace(planned, run=run).to_dict(), ids, preflight))
        measurement = judge(run.case, executed.outcome)
        result = Probe(batch, measurement.status, measurement.reason, measurement.throughput)
        shown = "out of memory" if result.out_of_memory else (result.reason or f"{result.throughput:.2f} samples/s")
        progress(f"{item_label(item)}: batch {batch}: {result.status}, {shown}")
        return result

    verdict = run_search(search, probe)
    case = search_run.case
    store = ResultStore(default_db_url())
    store.upsert_max_batch_search(
        MaxBatchSearchRecord(
            dag_id=ids.dag_id,
            run_id=ids.run_id,
            search_key=search_run.key,
            framework=case.framework,
            model=case.model,
            precision=case.precision,
            nodes=case.nodes,
            gpus_per_node=case.gpus_per_node,
            start=search.start,
            step=search.step,
            limit=search.limit,
            status=verdict.status,
            max_batch=verdict.max_batch,
            first_oom_batch=verdict.first_oom_batch,
            reason=verdict.reason,
            probes=[p.to_dict() for p in verdict.probes],
            started_at=started,
            finished_at=datetime.now(UTC),
            environment_id=planned.environment_id,
        )
    )
    progress(f"{item_label(item)}: {verdict.summary}")
    return verdict
