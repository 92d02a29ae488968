"""Whether a run passed (dlperf_core.run_status): verdicts on hand-made lists of outcomes, then finish_run on a
SQLite results database (the run's status, its summary and the message the DAG run fails with)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from dlperf_core.run_status import (
    NOTHING_STORED,
    Outcome,
    RunCounts,
    case_run,
    fabric_benchmark,
    max_batch_search,
    status_of_outcomes,
)
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


# --------------------------------------------------------------------------- finish_run on a results database


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


@pytest.mark.parametrize("failed_repeat", [False, True])
def test_finish_run_closes_the_run_with_the_core_verdict(sqlite_url, monkeypatch, tmp_path, failed_repeat):
    from dlperf_airflow import steps
    from dlperf_core.model import RunIds
    from dlperf_core.run_status import status_of_run
    from dlperf_core.storage import ResultStore

    monkeypatch.setenv("DLPERF_DB_URL", sqlite_url)
    monkeypatch.setenv("DLPERF_SPOOL_DIR", str(tmp_path / "spool"))
    store = ResultStore(sqlite_url)
    store.ensure_schema()
    run = run_record(dag_id="dlperf_benchmark", run_id="manual__1", trigger="manual", runtime="local")
    store.upsert_run(run)
    store.upsert_results([_result(run, 0, "ok"), _result(run, 1, "failed" if failed_repeat else "ok", "boom")])
    other = replace(run, dag_id="another_dag")  # same run id, another DAG
    store.upsert_run(other)
    store.upsert_results([_result(other, 0, "failed", "not ours")])
    try:
        verdict = status_of_run(store, run.dag_id, run.run_id)
        assert verdict.summary() == RunCounts(
            results=2, failed=int(failed_repeat), max_batch_searches=0, fabric_benchmarks=0
        )
        ids = RunIds(run.dag_id, run.run_id)
        if failed_repeat:
            with pytest.raises(RuntimeError) as raised:
                steps.finish_step(ids)
            assert str(raised.value) == (
                f"1 of 2 case runs, 0 of 0 max batch searches and 0 of 0 fabric benchmarks failed: {KEY} r1: boom"
            )
        else:
            assert steps.finish_step(ids) == verdict.summary()
        info = store.run_info(run.dag_id, run.run_id)
        assert info is not None and info.status == ("failed" if failed_repeat else "success")
        assert info.finished_at is not None
    finally:
        store.dispose()


def test_finish_run_fails_a_run_that_stored_nothing(sqlite_url, monkeypatch, tmp_path):
    from dlperf_airflow import steps
    from dlperf_core.model import RunIds
    from dlperf_core.storage import ResultStore

    monkeypatch.setenv("DLPERF_DB_URL", sqlite_url)
    monkeypatch.setenv("DLPERF_SPOOL_DIR", str(tmp_path / "spool"))
    ResultStore(sqlite_url).ensure_schema()
    with pytest.raises(RuntimeError, match="^no case run was stored: planning failed"):
        steps.finish_step(RunIds("dlperf_benchmark", "manual__nothing"))


def test_a_planned_case_run_that_stored_nothing_is_stored_failed_with_what_its_tasks_say(
    sqlite_url, monkeypatch, tmp_path
):
    """A case run whose task was killed with its worker hands nothing over: finish_run stores it as failed, with
    its tasks' states as the reason, so the run fails naming it instead of passing without it; once the cleared
    task stores it after all, the row is replaced (one row per case run and repeat), and the run passes."""
    from dlperf_airflow import steps
    from dlperf_core.defaults import DeploymentDefaults
    from dlperf_core.handoff import Plan
    from dlperf_core.model import RunIds
    from dlperf_core.run_status import lost_reason, unstored
    from dlperf_core.storage import ResultStore
    from dlperf_core.trigger import plan_trigger, resolve_trigger
    from helpers import REPO

    monkeypatch.setenv("DLPERF_HOME", str(REPO))
    monkeypatch.setenv("DLPERF_DB_URL", sqlite_url)
    monkeypatch.setenv("DLPERF_SPOOL_DIR", str(tmp_path / "spool"))
    full = plan_trigger(resolve_trigger({"suite": "suites/smoke.yaml", "runtime": "local"}, DeploymentDefaults()))
    plan = Plan(full.settings, cases=full.cases[:2])
    kept, lost = (p.run for p in plan.cases)
    run = run_record(dag_id="dlperf_benchmark", run_id="manual__killed", trigger="manual", runtime="local")
    ids = RunIds(run.dag_id, run.run_id)
    store = ResultStore(sqlite_url)
    store.ensure_schema()
    store.upsert_run(run)

    def stored(case_run, status="ok"):
        return result_record(
            case_key=case_run.case.key, repeat=case_run.repeat, status=status, benchmark_run=run, throughput=50.0
        )

    store.upsert_result(stored(kept))

    class Killed:
        """run_case[1] handed nothing over: it was killed with its worker."""

        asked: list[int] = []

        def outcome(self, index):  # noqa: ARG002 - the interface's
            return None

        def states(self, index):
            self.asked.append(index)
            return {"run_case": "failed", "store_result": "upstream_failed"}

    try:
        with pytest.raises(RuntimeError, match=r"1 of 2 case runs, .* failed: .* lost: run_case failed, store_result "):
            steps.finish_step(ids, plan, Killed())
        assert Killed.asked == [1]
        rows = {(r.case_key, r.repeat): r for r in store.result_rows(run_id=run.run_id)}
        assert rows[(lost.case.key, lost.repeat)].status == "failed"
        assert rows[(lost.case.key, lost.repeat)].reason == lost_reason(Killed().states(1))
        assert "killed, lost its worker" in lost_reason({})  # what the reason offers as causes
        assert "none of its tasks ran" in lost_reason({})

        store.upsert_result(stored(lost))  # the cleared run_case and store_result, run again
        assert steps.finish_step(ids, plan, Killed()).failed == 0
        assert len(store.result_rows(run_id=run.run_id)) == 2
        assert unstored([(kept.case.key, kept.repeat), ("other", 0)], []) == [0, 1]
    finally:
        store.dispose()


def test_a_case_run_whose_store_result_never_ran_is_stored_from_what_its_task_handed_over(
    sqlite_url, monkeypatch, tmp_path
):
    """When one run_case fails (killed), Airflow marks the mapped store_result upstream_failed as a whole: the
    other case runs ran but nothing stored them. finish_run stores each from the outcome its run_case handed over
    (here one that failed with its own reason), not as lost."""
    from datetime import UTC, datetime

    from dlperf_airflow import steps
    from dlperf_core.defaults import DeploymentDefaults
    from dlperf_core.handoff import ExecutedRun, Plan
    from dlperf_core.model import CaseOutcome, RunIds
    from dlperf_core.storage import ResultStore
    from dlperf_core.trigger import plan_trigger, resolve_trigger
    from helpers import REPO

    monkeypatch.setenv("DLPERF_HOME", str(REPO))
    monkeypatch.setenv("DLPERF_DB_URL", sqlite_url)
    monkeypatch.setenv("DLPERF_SPOOL_DIR", str(tmp_path / "spool"))
    full = plan_trigger(resolve_trigger({"suite": "suites/smoke.yaml", "runtime": "local"}, DeploymentDefaults()))
    plan = Plan(full.settings, cases=full.cases[:1])
    now = datetime.now(UTC)
    handed_over = ExecutedRun(plan.cases[0], CaseOutcome(now, now, [], "exit code 3 on node0"), None)

    class RanUnstored:
        def outcome(self, index):
            return handed_over if index == 0 else None

        def states(self, index):  # noqa: ARG002 - the interface's
            raise AssertionError("not asked: the outcome is there")

    ResultStore(sqlite_url).ensure_schema()
    with pytest.raises(RuntimeError, match="exit code 3 on node0"):
        steps.finish_step(RunIds("dlperf_benchmark", "manual__unstored"), plan, RanUnstored())
    store = ResultStore(sqlite_url)
    try:
        (row,) = store.result_rows(run_id="manual__unstored")
        assert (row.status, row.reason) == ("failed", "exit code 3 on node0")
    finally:
        store.dispose()
