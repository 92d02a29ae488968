"""PostgreSQL goes down while a DAG run stores its results: the DAG's own store/finish steps retry with
backoff, spool what they cannot write, and write it once the database is back. A private PostgreSQL
server is stopped and started (never the shared one)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dlperf_airflow import steps
from dlperf_core.model import RunIds
from dlperf_core.run.handoff import ExecutedRun
from dlperf_core.run.run_status import RunCounts
from dlperf_core.storage import ResultStore
from dlperf_core.storage.spool import ResultSpool
from faults.private_pg import running_private_pg

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.postgres


@pytest.fixture
def private_pg():
    yield from running_private_pg()


def test_results_survive_postgres_going_down_mid_run(private_pg, tmp_path, monkeypatch, fault):
    rec = fault(
        "fault",
        "PostgreSQL down while results are written",
        "private PostgreSQL stopped (pg_ctl stop -m fast) after 2 of 4 store_result steps, started again later",
        "writes retried with backoff, then spooled (JSON, fsync+rename); finish_run drains the spool once the "
        "database is back; every result appears exactly once",
    )
    monkeypatch.setenv("DLPERF_DB_URL", private_pg.url)
    monkeypatch.setenv("DLPERF_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setenv("DLPERF_LOG_DIR", str(tmp_path / "logs"))
    ids = RunIds(dag_id="dlperf_benchmark", run_id="manual__pg_down")
    items = steps.plan_step(
        {"suite": str(HERE / "data/tiny-local.yaml"), "runtime": "local", "repeats": 4}, ids, "manual"
    ).cases
    assert len(items) == 4
    # one real training; its outcome (log, exit codes) stands for each of the 4 repeats' results
    outcome = steps.execute_step(items[0], ids).outcome
    assert outcome.failure is None, outcome
    executed = [ExecutedRun(item, outcome) for item in items]

    for e in executed[:2]:
        assert steps.store_step(e, ids).status == "ok"
    store = ResultStore(private_pg.url)
    assert len(store.results(run_id=ids.run_id)) == 2
    store.dispose()

    private_pg.stop()  # the database goes away in the middle of the run
    spool = ResultSpool(private_pg.url)
    t0 = time.monotonic()
    for e in executed[2:]:
        assert steps.store_step(e, ids).status == "ok"  # the task does not fail: the result is kept
    down_s = time.monotonic() - t0
    assert len(spool.pending()) == 2
    with pytest.raises(RuntimeError, match="results database unavailable: 2 results stay spooled"):
        steps.finish_step(ids)  # cannot close the run while the database is down; loses nothing either
    assert len(spool.pending()) == 2

    private_pg.start()
    summary = steps.finish_step(ids)  # drains the spool first
    assert summary == RunCounts(results=4, failed=0, max_batch_searches=0, fabric_benchmarks=0)
    assert spool.pending() == []
    steps.store_step(executed[3], ids)  # a task retry after the fact adds nothing
    store = ResultStore(private_pg.url)
    rows = store.results(run_id=ids.run_id)
    store.dispose()
    assert sorted(rows["repeat"]) == [0, 1, 2, 3]
    assert rows.duplicated(["case_key", "repeat"]).sum() == 0
    assert set(rows["status"]) == {"ok"}
    rec.results_lost = 4 - len(rows)
    rec.containers_leaked = 0  # local runtime: no containers
    rec.observed = (
        f"2 results spooled while down ({down_s:.1f} s for both store_result steps: 3 tries each, "
        f"backoff 0.25 s then 0.5 s); finish_run refused while down; after restart 4 rows, 0 duplicates, "
        f"spool empty"
    )
