"""Whether a run passed (dlperf_core.run.run_status): verdicts on hand-made lists of outcomes, then status_of_run on a
SQLite results database. The DAG's finish_run step over it: tests/airflow_plugin/test_steps.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from dlperf_core.run.run_status import (
    NOTHING_STORED,
    Outcome,
    RunCounts,
    case_run,
    fabric_benchmark,
    max_batch_search,
    status_of_outcomes,
    status_of_run,
)
from dlperf_core.storage import ResultStore
from helpers import result_record, run_record

KEY = "pytorch_reference/resnet50_v1.5/fp32/b8/1n2g"


def test_a_run_that_stored_nothing_failed():
    verdict = status_of_outcomes([])
    assert not verdict.passed and verdict.status == "failed"
    assert verdict.message == NOTHING_STORED
    assert verdict.summary() == RunCounts(results=0, failed=0, max_batch_searches=0, fabric_benchmarks=0)


def test_every_outcome_ok_passes():
    verdict = status_of_outcomes(
        [
            case_run(KEY, 0, "ok"),
            case_run(KEY, 1, "ok"),
            max_batch_search("s", "found"),
            max_batch_search("t", "none_fit"),
            max_batch_search("u", "limit_reached"),
            fabric_benchmark("p", 0, "ok"),
        ]
    )
    assert verdict.passed and verdict.status == "success" and verdict.message is None and verdict.reasons == []
    assert verdict.summary() == RunCounts(results=2, failed=0, max_batch_searches=3, fabric_benchmarks=1)


def test_a_search_or_a_fabric_benchmark_alone_is_a_run():
    assert status_of_outcomes([max_batch_search("s", "found")]).passed
    assert status_of_outcomes([fabric_benchmark("p", 0, "ok")]).passed


@pytest.mark.parametrize("status", ["failed", "timeout", "skipped"])
def test_a_case_run_counts_only_when_ok(status):
    verdict = status_of_outcomes([case_run(KEY, 0, "ok"), case_run(KEY, 1, status, "no throughput")])
    assert verdict.status == "failed" and verdict.summary().failed == 1
    assert verdict.reasons == [f"{KEY} r1: no throughput"]


def test_the_message_names_every_failure_case_runs_first():
    outcomes = [
        fabric_benchmark("allreduce_probe/allreduce/fp32/b1/2n1g", 1, "failed", "rank 1 timed out"),
        max_batch_search("pytorch_reference/resnet50_v1.5/fp32/1n1g", "failed", "batch 96: loss is NaN/inf"),
        case_run(KEY, 0, "ok"),
        case_run(KEY, 1, "failed", "node0 exited with code 2"),
        max_batch_search("other", "found"),
        fabric_benchmark("allreduce_probe/allreduce/fp32/b1/2n1g", 0, "ok"),
        case_run(KEY, 2, "failed", None),
    ]
    verdict = status_of_outcomes(outcomes)
    assert verdict.message == (
        "2 of 3 case runs, 1 of 2 max batch searches and 1 of 2 fabric benchmarks failed: "
        f"{KEY} r1: node0 exited with code 2; {KEY} r2: None; "
        "max batch search pytorch_reference/resnet50_v1.5/fp32/1n1g: batch 96: loss is NaN/inf; "
        "fabric benchmark allreduce_probe/allreduce/fp32/b1/2n1g r1: rank 1 timed out"
    )
    assert verdict.summary() == RunCounts(results=3, failed=2, max_batch_searches=2, fabric_benchmarks=2)


def test_only_failed_searches_and_fabric_benchmarks_fail_the_run():
    assert not Outcome("max_batch_search", "s", "none_fit").failed
    assert Outcome("max_batch_search", "s", "failed").failed
    assert not Outcome("fabric_benchmark", "p", "ok", repeat=0).failed
    assert Outcome("fabric_benchmark", "p", "failed", repeat=0).failed
    assert Outcome("case_run", KEY, "failed", repeat=0).failed


# --------------------------------------------------------------------------- status_of_run on a results database


@pytest.mark.parametrize("failed_repeat", [False, True])
def test_status_of_run_judges_the_stored_rows_of_that_run_only(sqlite_url, failed_repeat):
    run = run_record(dag_id="dlperf_benchmark", run_id="manual__1", trigger="manual", runtime="local")
    other = replace(run, dag_id="another_dag")  # same run id, another DAG
    store = ResultStore(sqlite_url)
    store.ensure_schema()
    try:
        store.upsert_run(run)
        store.upsert_results([_result(run, 0, "ok"), _result(run, 1, "failed" if failed_repeat else "ok", "boom")])
        store.upsert_run(other)
        store.upsert_results([_result(other, 0, "failed", "not ours")])
        verdict = status_of_run(store, run.dag_id, run.run_id)
        assert verdict.summary() == RunCounts(
            results=2, failed=int(failed_repeat), max_batch_searches=0, fabric_benchmarks=0
        )
        assert verdict.passed is not failed_repeat
        if failed_repeat:
            assert verdict.message == (
                f"1 of 2 case runs, 0 of 0 max batch searches and 0 of 0 fabric benchmarks failed: {KEY} r1: boom"
            )
        assert not status_of_run(store, run.dag_id, "manual__nothing").passed
    finally:
        store.dispose()


def _result(run, repeat: int, status: str, reason: str | None = None):
    return result_record(
        case_key=KEY,
        repeat=repeat,
        status=status,
        reason=reason,
        throughput=100.0 + repeat if status == "ok" else None,
        started_at=run.started_at + timedelta(minutes=repeat),
        benchmark_run=run,
    )
