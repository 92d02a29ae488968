"""The log disk fills up: the case run fails with a reason naming the full disk (ENOSPC), the results
database and the results already in it are untouched. A real 256 KiB tmpfs is the log folder."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dlperf_core.storage import ResultRecord, ResultStore
from faults.common import DATA, run_cli
from helpers import full_tmpfs, result_record, run_id_of, run_record

pytestmark = pytest.mark.postgres


@pytest.fixture
def full_log_disk(tmp_path):
    """tmp_path/logs as a 256 KiB tmpfs, filled up to the last byte."""
    with full_tmpfs(tmp_path / "logs", "256k") as mount:
        yield mount


def earlier_result() -> ResultRecord:
    """An ok result of an earlier, finished run."""
    t = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
    run = run_record(
        dag_id="dlperf_benchmark", run_id="scheduled__earlier", started_at=t, finished_at=t, status="success"
    )
    key = "pytorch_reference/resnet50_v1.5/fp32/b4/1n1g"
    return result_record(case_key=key, throughput=12.5, iterations=5, started_at=t, finished_at=t, benchmark_run=run)


@pytest.mark.usefixtures("full_log_disk")
def test_full_log_disk_fails_the_repeat_and_keeps_the_database(tmp_path, pg_url, fault):
    rec = fault(
        "fault",
        "log disk fills",
        "DLPERF_LOG_DIR on a 256 KiB tmpfs filled to the last byte; one local-runtime case through dag.test",
        "the repeat is failed with a reason naming the full disk (ENOSPC); earlier results unchanged",
    )
    store = ResultStore(pg_url)
    store.ensure_schema()
    store.upsert_result(earlier_result())
    before = store.results(run_id="scheduled__earlier")
    out = run_cli(tmp_path, pg_url, str(DATA / "tiny-local.yaml"))
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-3000:]
    run_id = run_id_of(out.stdout)
    rows = store.results(run_id=run_id)
    rec.results_lost = 1 - len(rows)
    rec.containers_leaked = 0  # local runtime
    assert len(rows) == 1
    (row,) = rows.itertuples()
    assert row.status == "failed" and "ENOSPC" in row.reason and "log disk full" in row.reason, row.reason
    after = store.results(run_id="scheduled__earlier")
    assert after.equals(before)  # the results already stored are untouched
    assert len(store.results()) == 2
    rec.observed = f"repeat failed: {row.reason!r}; the earlier run's row is unchanged in every column"
