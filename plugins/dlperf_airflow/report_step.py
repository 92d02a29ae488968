"""The make_report step of the dlperf_benchmark DAG: write the run's report (HTML page with its PNG plots,
markdown, DLPerf JSON) under the reports folder and record where it is."""

from __future__ import annotations

import logging

from dlperf_airflow.connections import results_db_url
from dlperf_core.model import RunIds
from dlperf_core.reporting import build_report, report_dir
from dlperf_core.storage import ResultStore

log = logging.getLogger("dlperf")

FORMATS = ("html", "md", "json")
"""Documents the DAG writes for every run; the first (HTML) is the one recorded."""


def report_step(ids: RunIds) -> str:
    """Write the report of this DAG run into ``$DLPERF_REPORT_DIR/<dag_id>/<run_id-safe>/``, record its
    path on the run (``benchmark_runs.report_path``) and return the path."""
    store = ResultStore(results_db_url())
    try:
        files = build_report(
            store, ids.run_id, dag_id=ids.dag_id, fmt=FORMATS, out_dir=report_dir(ids.dag_id, ids.run_id)
        )
        store.set_report_path(ids.dag_id, ids.run_id, str(files.main))
    finally:
        store.dispose()
    log.info("report of %s: %s (%d plots)", ids.run_id, files.main, len(files.plots))
    return str(files.main)
