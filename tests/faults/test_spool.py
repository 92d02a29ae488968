"""The result spool on its own: atomic files, a drain that deletes only after commit, idempotent re-drains,
unreadable files kept, and nothing drained into another database."""

from __future__ import annotations

import json

import pytest

from dlperf_core.storage import ResultRecord, ResultStore
from dlperf_core.storage.spool import (
    ResultSpool,
    SpoolFailed,
    database_key,
    record_from_json,
    record_to_json,
    store_or_spool,
)
from helpers import T0, full_tmpfs, result_record, run_record

RUN = run_record(dag_id="d", run_id="r", trigger="manual", runtime="local")


def result(repeat: int, **kw) -> ResultRecord:
    """Repeat ``repeat`` of case fw/m/fp32/b8/1n1g in run "r" of DAG "d", finished."""
    fields = dict(
        framework="fw", model="m", repeat=repeat, throughput=100.0 + repeat, finished_at=T0, benchmark_run=RUN
    )
    return result_record(**(fields | kw))


def test_record_round_trip():
    r = result(3, reason=None, iterations=7, log_path="/x/node0.log")
    assert record_from_json(record_to_json(r)) == r
    assert record_from_json(record_to_json(result(0, benchmark_run=None))).benchmark_run is None


def test_put_is_atomic_and_drain_is_idempotent(tmp_path, sqlite_url):
    spool = ResultSpool(sqlite_url, root=tmp_path / "spool")
    files = [spool.put(result(i)) for i in range(3)]
    assert [p.name for p in spool.pending()] == sorted(p.name for p in files)
    assert not [p for p in spool.folder.iterdir() if p.suffix != ".json"]  # no temporary file left behind
    copy = spool.folder / "zz-copy.json"  # a crash between commit and delete leaves a file already written
    copy.write_text(files[0].read_text())
    store = ResultStore(sqlite_url)
    store.ensure_schema()
    report = spool.drain(store)
    assert (report.written, report.left, report.bad) == (4, 0, 0)
    rows = store.results(run_id="r")
    assert sorted(rows["repeat"]) == [0, 1, 2]  # the re-drained copy updated its row, added none
    assert spool.pending() == [] and spool.drain(store).written == 0


def test_unreadable_file_is_kept_not_lost(tmp_path, sqlite_url):
    spool = ResultSpool(sqlite_url, root=tmp_path / "spool")
    spool.put(result(0))
    bad = spool.folder / "0-bad.json"
    bad.write_text('{"dag_id": "d", "truncat')
    store = ResultStore(sqlite_url)
    store.ensure_schema()
    report = spool.drain(store)
    assert (report.written, report.bad) == (1, 1)
    assert bad.with_suffix(".bad").exists() and not bad.exists()


def test_database_down_spools_and_other_database_is_not_touched(tmp_path, sqlite_url):
    down = "postgresql+psycopg2://postgres:pw@127.0.0.1:9/nowhere"  # nothing listens on port 9: refused
    spool = ResultSpool(down, root=tmp_path / "spool")
    path = store_or_spool(ResultStore(down), result(0), spool)  # after the store's 3 tries
    assert path is not None and path.exists()
    assert json.loads(path.read_text())["repeat"] == 0
    assert spool.drain(ResultStore(down)).left == 1 and path.exists()  # still down: kept
    assert database_key(down) != database_key(sqlite_url)
    assert ResultSpool(sqlite_url, root=tmp_path / "spool").pending() == []  # another database's spool
    assert database_key("postgresql://u:secret@h/db") == database_key("postgresql://u:other@h/db")
    assert "pw" not in spool.folder.name and spool.folder.name == database_key(down)


def test_database_down_and_spool_disk_full_fails_naming_both_and_leaves_no_partial_file(tmp_path):
    down = "postgresql+psycopg2://postgres:pw@127.0.0.1:9/nowhere"
    spool = ResultSpool(down, root=tmp_path / "spool")
    with full_tmpfs(tmp_path / "spool", "64k", folders=(spool.folder.name,)):  # the disk full to its last byte
        with pytest.raises(SpoolFailed) as raised:
            store_or_spool(ResultStore(down), result(0), spool)
        message = str(raised.value)
        assert "results database unavailable" in message and "No space left on device" in message, message
        assert "fw/m/fp32/b8/1n1g r0" in message and "run this task again" in message
        assert list(spool.folder.iterdir()) == []  # no partial record a later drain would trip on
