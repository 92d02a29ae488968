"""A nightly run and a manual trigger on the same cluster and results database, a re-run of the nightly,
and task retries: GPU exclusivity holds (one-slot pool, max_active_runs=1, run_case in the pool), the runs'
results stay apart, and nothing is duplicated. The runs are real dag.test() runs; the nightly one is a
real SCHEDULED-type DagRun made with Airflow's own create_dagrun (dag.test() itself only makes manual
runs, so its run-creation helper is swapped for one that asks for run_type=SCHEDULED)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import make_url, text

from dlperf_airflow import steps
from dlperf_core.model import CaseOutcome, RunIds
from dlperf_core.run.handoff import ExecutedRun
from dlperf_core.storage import ResultStore
from faults.common import DATA
from helpers import REPO, cli_env

pytestmark = pytest.mark.postgres
SECRET = "dlperf-fault-Secret-4711"  # a password the PostgreSQL server (trust auth) accepts and ignores

DRIVER = r"""
import json, sys
from datetime import datetime, timezone
from unittest import mock
from dlperf_cli.embedded import prepare_environment, migrate_metadata_db, load_dag
prepare_environment()
migrate_metadata_db()
from sqlalchemy import select
from airflow.models import dagrun as dagrun_mod
from airflow.models.pool import Pool
from airflow.utils.state import DagRunState
from airflow.utils.types import DagRunTriggeredByType, DagRunType

def scheduled_dagrun(*, dag, run_id, logical_date, data_interval, run_after, conf, triggered_by,
                     triggering_user_name, start_date, session):
    DagRun = dagrun_mod.DagRun
    old = session.scalar(select(DagRun).where(DagRun.dag_id == dag.dag_id, DagRun.logical_date == logical_date))
    if old:
        session.delete(old)
        session.commit()
    return dag.create_dagrun(
        run_id=DagRun.generate_run_id(run_type=DagRunType.SCHEDULED, logical_date=logical_date, run_after=run_after),
        logical_date=logical_date, data_interval=data_interval, run_after=run_after, conf=conf,
        run_type=DagRunType.SCHEDULED, state=DagRunState.RUNNING, triggered_by=DagRunTriggeredByType.TIMETABLE,
        start_date=start_date, session=session)

dag = load_dag()
conf = json.loads(sys.argv[1])
nightly = datetime(2026, 1, 2, 2, 0, tzinfo=timezone.utc)
out = {}
def record(name, dr):
    out[name] = {"run_id": dr.run_id, "state": str(dr.state), "run_type": str(dr.run_type)}
with mock.patch.object(dagrun_mod, "get_or_create_dagrun", scheduled_dagrun):
    record("nightly", dag.test(run_conf=conf, logical_date=nightly, run_after=nightly))
record("manual", dag.test(run_conf=conf))
with mock.patch.object(dagrun_mod, "get_or_create_dagrun", scheduled_dagrun):
    record("rerun", dag.test(run_conf=conf, logical_date=nightly, run_after=nightly))
task = dag.get_task("case_run.run_case")
out["exclusivity"] = {"max_active_runs": dag.max_active_runs, "pool": task.pool, "pool_slots": task.pool_slots,
                      "pool_size": Pool.get_pool(task.pool).slots, "max_active_tis_per_dagrun": task.max_active_tis_per_dagrun}
print("RESULT " + json.dumps(out))
"""


def test_nightly_and_manual_runs_keep_apart_and_rerun_adds_nothing(tmp_path, pg_url, fault):
    rec = fault(
        "fault",
        "manual trigger while the nightly runs; re-run of the nightly",
        "a SCHEDULED DagRun (nightly), a MANUAL DagRun, then the nightly DagRun again (same run id), all into one "
        "results DB; the DB URL carries a password",
        "one-slot pool + max_active_runs=1 + run_case in the pool; rows kept apart by run id; re-run adds no row; "
        "the password appears in no output or log",
    )
    secret_url = make_url(pg_url).set(password=SECRET).render_as_string(hide_password=False)
    conf = {"suite": str(DATA / "tiny-local.yaml"), "runtime": "local"}
    env = cli_env(tmp_path, secret_url)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(conf)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    info = json.loads(done.stdout.split("RESULT ", 1)[1].splitlines()[0])
    assert info["exclusivity"] == {
        "max_active_runs": 1,
        "pool": "dlperf_cluster",
        "pool_slots": 1,
        "pool_size": 1,
        "max_active_tis_per_dagrun": 1,
    }
    nightly, manual, rerun = info["nightly"], info["manual"], info["rerun"]
    assert nightly["run_type"].endswith("scheduled") and manual["run_type"].endswith("manual"), info
    assert nightly["run_id"] != manual["run_id"] and rerun["run_id"] == nightly["run_id"]
    assert all(r["state"].endswith("success") for r in (nightly, manual, rerun)), info

    store = ResultStore(pg_url)
    rows = store.results()
    with store.engine.connect() as conn:
        triggers = dict(conn.execute(text("SELECT run_id, trigger FROM benchmark_runs")).all())
    assert triggers == {nightly["run_id"]: "scheduled", manual["run_id"]: "manual"}
    per_run = rows.groupby("run_id").size().to_dict()
    assert per_run == {nightly["run_id"]: 1, manual["run_id"]: 1}  # 1 case x 1 repeat each, none duplicated
    windows = sorted(zip(rows["started_at"], rows["finished_at"]))
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(windows, windows[1:]))  # never at once
    rec.results_lost = 2 - len(rows)
    rec.containers_leaked = 0  # local runtime

    texts = [done.stdout, done.stderr]
    texts += [
        p.read_text(errors="replace")
        for p in Path(tmp_path).rglob("*")
        if p.is_file() and p.suffix != ".db" and p.stat().st_size < 50_000_000
    ]
    leaked = sum(t.count(SECRET) for t in texts)
    assert leaked == 0, "the database password appears in output or logs"
    rec.observed = (
        f"pool dlperf_cluster 1 slot, max_active_runs=1, run_case pool_slots 1; nightly ({nightly['run_id']}) and "
        f"manual ({manual['run_id']}) 1 row each, case windows disjoint; re-run of the nightly: still 1 row; "
        f"password found 0 times in {len(texts)} outputs/log files"
    )


def test_store_result_retried_twice_adds_one_row(sqlite_url, monkeypatch, tmp_path, fault):
    rec = fault(
        "fault",
        "task retry of store_result",
        "store_step run three times on the same executed case run (as Airflow retries do)",
        "one row, same id each time",
    )
    monkeypatch.setenv("DLPERF_DB_URL", sqlite_url)
    monkeypatch.setenv("DLPERF_SPOOL_DIR", str(tmp_path / "spool"))
    ids = RunIds(dag_id="dlperf_benchmark", run_id="manual__retry")
    (item,) = steps.plan_step({"suite": str(DATA / "tiny-local.yaml"), "runtime": "local"}, ids, "manual").cases
    now = datetime.now(UTC)
    executed = ExecutedRun(item, CaseOutcome(now, now, [], "node0 was killed (exit code 137)"))
    store = ResultStore(sqlite_url)
    ids_seen = set()
    for _ in range(3):
        assert steps.store_step(executed, ids).status == "failed"
        ids_seen |= set(store.results(run_id=ids.run_id)["id"])
    rows = store.results(run_id=ids.run_id)
    assert len(rows) == 1 and len(ids_seen) == 1
    assert rows.iloc[0]["reason"] == "node0 was killed (exit code 137)"
    rec.results_lost, rec.containers_leaked = 1 - len(rows), 0
    rec.observed = "3 executions of store_result: 1 row, 1 id"
