"""The ``search_max_batch`` step: run one max batch size search (``dlperf_core.measure.maxbatch``) and store it.

Each trial is an ordinary case run at one batch size (same runtime, supervisor, watchdog, cleanup and log
parser as ``run_case``), judged like one; the pure search decides what to try next. The task holds the
cluster pool for the whole search, so trials never share a device with a case or another run.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime

from dlperf_airflow.connections import results_db_url
from dlperf_airflow.steps import execute_step, progress
from dlperf_core.cluster.preflight import PreflightReport
from dlperf_core.measure.efficiency import throughput_unit
from dlperf_core.measure.maxbatch import SearchResult, Trial, run_search
from dlperf_core.measure.measurement import measure_case_run
from dlperf_core.model import CaseRun, RunIds
from dlperf_core.plan.trigger import SEARCH_INDEX_BASE
from dlperf_core.run.handoff import PlannedRun
from dlperf_core.storage import MaxBatchSearchRecord, ResultStore

log = logging.getLogger("dlperf")


def search_step(planned: PlannedRun, ids: RunIds, preflight: PreflightReport | None = None) -> SearchResult:
    """Try batch after batch until one runs out of memory (or the limit); store and return what it found."""
    search_run = planned.search
    assert search_run is not None, "a max batch search item without its search"
    search = search_run.search
    candidates = search.candidates()
    unit = throughput_unit(search_run.case.model)
    started = datetime.now(UTC)

    def trial(batch: int) -> Trial:
        run = CaseRun(search_run.trial_case(batch), candidates.index(batch), SEARCH_INDEX_BASE + search_run.index)
        executed = execute_step(replace(planned, run=run), ids, preflight)
        measurement = measure_case_run(run.case, executed.outcome)
        result = Trial(batch, measurement.status, measurement.reason, measurement.throughput)
        shown = "out of memory" if result.out_of_memory else (result.reason or f"{result.throughput:.2f} {unit}")
        progress(f"{planned.label}: batch {batch}: {result.status}, {shown}")
        return result

    found = run_search(search, trial)
    record = MaxBatchSearchRecord.from_search(
        ids.dag_id, ids.run_id, search_run, found, started, datetime.now(UTC), environment_id=planned.environment_id
    )
    store = ResultStore(results_db_url())
    try:
        store.upsert_max_batch_search(record)
    finally:
        store.dispose()
    progress(f"{planned.label}: {found.summary}")
    return found
