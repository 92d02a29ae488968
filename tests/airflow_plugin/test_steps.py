"""The DAG's step functions (dlperf_airflow.steps) over the core, on a real results database: finish_run closes
a run with the core's verdict (dlperf_core.run.run_status, tests/core/run/test_run_status.py) and stores the case runs its
tasks lost; store_result stores the adapter's figure origin (tests/core/measure/test_figure_origin.py) and the launch spec
of the executed run (tests/core/plan/test_reproduce.py); plan_cases plans from the suites and inventories of
``DLPERF_HOME`` (tests/core/test_home.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from dlperf_airflow import steps
from dlperf_core.cluster.inventory import Inventory, Node, load_inventory
from dlperf_core.frameworks import get_adapter
from dlperf_core.model import Case, CaseOutcome, CaseRun, NodeOutcome, RunIds
from dlperf_core.plan.cases import plan_suite
from dlperf_core.plan.defaults import DeploymentDefaults
from dlperf_core.plan.suite import load_suite
from dlperf_core.plan.trigger import plan_trigger, resolve_trigger
from dlperf_core.run.commands import DryRunDocker
from dlperf_core.run.handoff import ExecutedRun, Plan, PlannedRun, RunSettings
from dlperf_core.run.jobs import build_job
from dlperf_core.run.launch_spec import LaunchSpec
from dlperf_core.run.run_status import lost_reason, status_of_run, unstored
from dlperf_core.run.runtime.local import LocalRuntime
from dlperf_core.storage import ResultStore
from helpers import REPO, T0, result_record, run_record

KEY = "pytorch_reference/resnet50_v1.5/fp32/b8/1n2g"


# --------------------------------------------------------------------------- finish_run


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
        verdict = status_of_run(store, run.dag_id, run.run_id)  # the core's verdict (tests/core/run/test_run_status.py)
        assert (verdict.summary().results, verdict.summary().failed) == (2, int(failed_repeat))
        ids = RunIds(run.dag_id, run.run_id)
        if failed_repeat:
            with pytest.raises(RuntimeError) as raised:
                steps.finish_step(ids)
            assert str(raised.value) == verdict.message  # the DAG run fails with the core's message
            assert str(raised.value).startswith("1 of 2 case runs, ") and str(raised.value).endswith(f"{KEY} r1: boom")
        else:
            assert steps.finish_step(ids) == verdict.summary()
        info = store.run_info(run.dag_id, run.run_id)
        assert info is not None and info.status == ("failed" if failed_repeat else "success")
        assert info.finished_at is not None
    finally:
        store.dispose()


def test_finish_run_fails_a_run_that_stored_nothing(sqlite_url, monkeypatch, tmp_path):

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


# --------------------------------------------------------------------------- store_result: the figure's origin

ONEFLOW_LOG = REPO / "tests" / "data" / "cpu_logs" / "oneflow_1n2g.log"  # OneFlow's CPU image, 1n2g, batch 4


@pytest.fixture
def store(dialect_url: str):
    result_store = ResultStore(dialect_url)
    result_store.ensure_schema()
    yield result_store
    result_store.dispose()


def a_case(framework: str, nodes: int, gpus: int, batch: int) -> Case:
    return Case(
        framework=framework,
        model=sorted(get_adapter(framework).models)[0],
        precision="fp32",
        batch_size_per_device=batch,
        nodes=nodes,
        gpus_per_node=gpus,
        warmup_iterations=5,
        measured_iterations=10,
    )


def nodes_of(accelerator: str, count: int = 2, gpus: int = 1) -> tuple[Node, ...]:
    return tuple(Node(name=f"node{i}", gpus=gpus, accelerator=accelerator) for i in range(count))


def _inventory_file(tmp_path: Path, accelerator: str) -> Path:
    path = tmp_path / f"{accelerator}.yaml"
    inventory = Inventory(name=accelerator, nodes=nodes_of(accelerator, gpus=2))
    path.write_text(yaml.safe_dump(inventory.model_dump(mode="json")))
    return path


def _executed(case: Case, inventory: str | None, log: Path, repeat: int, failure: str | None = None) -> ExecutedRun:
    """A case run planned on the inventory file ``inventory`` (None: a planned run that carries no figure origin,
    as one read back from an older dlperf's XCom whose inventory was gone)."""
    outcome = CaseOutcome(T0, T0 + timedelta(seconds=30), [NodeOutcome("node0", 0, 0, str(log))], failure)
    run = CaseRun(case, repeat)
    if inventory is None:
        planned = PlannedRun(run, "docker", inventory="gone.yaml", timeout_s=60, watchdog_s=None)
    else:
        settings = RunSettings("suite.yaml", "docker", inventory, 60, None)
        planned = PlannedRun.of(run, settings, load_inventory(inventory))
    return ExecutedRun(planned, outcome)


def test_the_store_step_stores_the_adapters_origin(store: ResultStore, dialect_url: str, tmp_path, monkeypatch):
    """The OneFlow CPU log through store_result: on CPU nodes dlperf's driver printed it, on nvidia nodes in the
    seed's release 0.1.8 (its GPU image) OneFlow-Benchmark would have (planning asked the adapter); a failed repeat
    keeps its origin; a planned run without one is unknown."""
    monkeypatch.setenv("DLPERF_DB_URL", dialect_url)
    monkeypatch.setenv("DLPERF_SPOOL_DIR", str(tmp_path / "spool"))
    case = a_case("oneflow", nodes=1, gpus=2, batch=4)
    ids = RunIds("dlperf_benchmark", "manual__origin")
    cpu, gpu = str(_inventory_file(tmp_path, "cpu")), str(_inventory_file(tmp_path, "nvidia"))
    verdict = steps.store_step(_executed(case, cpu, ONEFLOW_LOG, 0), ids)
    assert verdict.status == "ok", verdict.reason
    seed_release = replace(case, options=(("release", "0.1.8"),))
    assert steps.store_step(_executed(seed_release, gpu, ONEFLOW_LOG, 1), ids).status == "ok"
    assert steps.store_step(_executed(case, cpu, ONEFLOW_LOG, 2, failure="exit code 1"), ids).status == "failed"
    assert steps.store_step(_executed(case, None, ONEFLOW_LOG, 3), ids).status == "ok"
    rows = store.results(run_id=ids.run_id).set_index("repeat").sort_index()
    assert list(rows["figure_origin"].fillna("NULL")) == ["dlperf", "framework", "dlperf", "NULL"]


# --------------------------------------------------------------------------- store_result: the launch spec

IDS = RunIds("dlperf_benchmark", "manual__repro")


def smoke_job(inventory: Inventory, runtime):
    """The smoke suite's ResNet-50 at 1n1g (repeat 0) on ``inventory``: the job ``runtime`` would start."""
    runs = plan_suite(load_suite(REPO / "suites/smoke.yaml"), inventory)
    run = next(r for r in runs if r.case.framework == "pytorch_reference" and r.case.topology == "1n1g")
    return run, build_job(run, inventory, runtime or DryRunDocker(), IDS, timeout_s=60, watchdog_s=None)


def test_store_result_keeps_the_launch_spec(tmp_path, monkeypatch):
    """The DAG's store step writes the executed run's launch spec on the row; the executed run carries it in
    its JSON form from run_case (XCom)."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    monkeypatch.setenv("DLPERF_DB_URL", db)
    monkeypatch.setenv("DLPERF_SPOOL_DIR", str(tmp_path / "spool"))
    store = ResultStore(db)
    store.ensure_schema()  # plan_cases' doing in a DAG run
    inventory = load_inventory(REPO / "inventories/local.yaml")
    runtime = LocalRuntime()
    run, job = smoke_job(inventory, runtime)
    log = tmp_path / "node0.log"  # the log does not matter here: the row is stored, ok or failed
    log.write_text("")
    outcome = CaseOutcome(T0, T0 + timedelta(seconds=9), [NodeOutcome("node0", 0, 0, str(log))], None)
    planned = PlannedRun(run, "local", "inventories/local.yaml", 60, None, suite="suites/smoke.yaml")
    spec = LaunchSpec(
        case_key=run.case.key,
        repeat=0,
        nodes=runtime.node_specs(job),
        suite=planned.suite,
        inventory=planned.inventory,
    )
    executed = ExecutedRun(planned, outcome, spec)
    carried = ExecutedRun.from_json(json.loads(json.dumps(executed.to_json())))  # through XCom
    assert carried == executed
    steps.store_step(carried, IDS)
    try:
        row = store.results(run_id=IDS.run_id).iloc[0]
        assert LaunchSpec.from_json(row["launch_spec"]) == spec
        assert row["configuration"] == run.case.configuration
    finally:
        store.dispose()


# --------------------------------------------------------------------------- plan_cases: one home


def test_plan_cases_plans_the_suite_and_inventory_of_dlperf_home(tmp_path, monkeypatch, sqlite_url):
    """Relative suite and inventory paths of the trigger form are taken against ``DLPERF_HOME``, never against the
    current directory (the home rules themselves: tests/core/test_home.py)."""
    for name in ("suites/smoke.yaml", "inventories/local.yaml"):
        (tmp_path / "home" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "home" / name).write_text((REPO / name).read_text())
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DLPERF_DB_URL", sqlite_url)
    form = {"suite": "suites/smoke.yaml", "runtime": "local", "inventory": "inventories/local.yaml", "repeats": 1}
    plan = steps.plan_step(form, RunIds("dlperf_benchmark", "manual__home"), "manual")
    assert (plan.settings.suite, plan.settings.inventory) == (
        str(tmp_path / "home" / "suites/smoke.yaml"),
        str(tmp_path / "home" / "inventories/local.yaml"),
    )
    assert plan.cases
