"""The two halves of a case run that waits in Slurm's queue (dlperf_core.run.case_run.start_case and finish_case),
on the Slurm runtime with a login node played in memory (test_slurm_runtime.FakeLogin): what crosses the wait is
JSON, the gates are execute_case's, and the outcome is the runtime's own, its failure never a zero. Through Airflow
(a deferral, the trigger, a real sshd): tests/airflow_plugin/test_slurm_deferral.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from test_slurm_runtime import DATA, FakeLogin, recorded

from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.cluster.preflight import PreflightReport, unreachable
from dlperf_core.model import Case, CaseRun, RunIds
from dlperf_core.run.case_run import CaseRunner, StartedCase, finish_case, start_case
from dlperf_core.run.handoff import ExecutedRun, PlannedRun, RunSettings
from dlperf_core.run.runtime.local import LocalRuntime
from dlperf_core.run.runtime.slurm import RemoteResult, SlurmRuntime

IDS = RunIds(dag_id="dlperf_benchmark", run_id="deferred-unit")


def planned(tmp_path, monkeypatch) -> PlannedRun:
    monkeypatch.setenv("DLPERF_LOG_DIR", str(tmp_path / "logs"))
    inventory = load_inventory(DATA / "inventory.yaml")
    case = Case("pytorch_reference", "resnet50_v1.5", "fp32", 8, 2, 1, 2, 5)
    settings = RunSettings("suites/smoke.yaml", "slurm", str(DATA / "inventory.yaml"), 600, None)
    return PlannedRun.of(CaseRun(case, 0), settings, inventory)


def runner(login: FakeLogin, made: list[str] | None = None) -> CaseRunner:
    def make_runtime(name, inventory):
        if made is not None:
            made.append(name)
        return SlurmRuntime(inventory.slurm, login)

    def no_gpus(_planned, _ids):
        def never(node, _gpus):
            raise AssertionError(f"{node.name}: a CPU slot's GPUs were read")

        return never

    return CaseRunner(make_runtime, lambda _runtime, _nodes, exc: f"runtime error: {exc}", no_gpus)


def waiting_login() -> FakeLogin:
    return FakeLogin(states=[recorded("scontrol-pending-resources.txt"), recorded("scontrol-completed.txt")])


def test_a_submitted_job_crosses_the_wait_as_json_and_is_collected_as_any_case(tmp_path, monkeypatch):
    plan = planned(tmp_path, monkeypatch)
    login = waiting_login()
    started = start_case(plan, IDS, runner(login))
    assert isinstance(started, StartedCase) and started.job_id == "42"
    assert any(c.startswith("sbatch --parsable ") for c in login.commands)
    assert StartedCase.from_json(started.to_json()) == started  # what the deferral carries (XCom)
    assert started.launch_spec is not None and started.launch_spec.slurm is not None
    assert started.launch_spec.slurm.job_id == "42"
    # the job ran: node 0's log where the job's folder is, as srun writes it
    job_dir = started.submitted["job_dir"]
    login.files[f"{job_dir}/node0.log"] = b"node 0 trained\n"
    done = finish_case(plan, IDS, StartedCase.from_json(started.to_json()), runner(login))
    assert isinstance(done, ExecutedRun) and done.outcome.failure is None
    assert [n.exit_code for n in done.outcome.nodes] == [0, 0]
    assert Path(done.outcome.log_path).read_text() == "node 0 trained\n"  # copied into the case's log folder
    assert done.launch_spec is not None and done.launch_spec.slurm.node_list == "c[1-2]"  # known once it ran
    assert ExecutedRun.from_json(done.to_json()) == done


def test_a_job_that_ended_badly_is_a_failure_with_slurms_reason(tmp_path, monkeypatch):
    plan = planned(tmp_path, monkeypatch)
    login = waiting_login()
    started = start_case(plan, IDS, runner(login))
    assert isinstance(started, StartedCase)
    login.states = [recorded("scontrol-timeout.txt")]
    done = finish_case(plan, IDS, started, runner(login))
    assert "TIMEOUT" in (done.outcome.failure or "") and 0 not in [n.exit_code for n in done.outcome.nodes]


def test_the_waits_failure_comes_first_and_the_end_reason_fills_an_outcome_without_one(tmp_path, monkeypatch):
    plan = planned(tmp_path, monkeypatch)
    started = start_case(plan, IDS, runner(waiting_login()))
    assert isinstance(started, StartedCase)
    cancelled = FakeLogin(states=[recorded("scontrol-cancelled.txt")])
    done = finish_case(plan, IDS, started, runner(cancelled), wait_failure="slurm job 42 waits on drained nodes")
    assert done.outcome.failure.startswith("slurm job 42 waits on drained nodes; slurm job 42 was cancelled")
    # the runtime saw a clean end but the trigger said the job did not end well: never a zero
    completed = FakeLogin(states=[recorded("scontrol-completed.txt")])
    done = finish_case(plan, IDS, started, runner(completed), end_reason="slurm job 42 failed: exit code 3")
    assert done.outcome.failure == "slurm job 42 failed: exit code 3"


def test_a_login_node_away_when_collecting_fails_the_case_with_the_reason(tmp_path, monkeypatch):
    plan = planned(tmp_path, monkeypatch)
    started = start_case(plan, IDS, runner(waiting_login()))
    assert isinstance(started, StartedCase)
    away = FakeLogin(unreachable=100)
    done = finish_case(plan, IDS, started, runner(away), wait_failure="slurm job 42: its state could not be read")
    assert done.outcome.failure.startswith("slurm job 42: its state could not be read; runtime error: ")
    assert "unreachable" in done.outcome.failure


def test_a_case_that_does_not_start_or_cannot_be_submitted_ends_without_a_wait(tmp_path, monkeypatch):
    plan = planned(tmp_path, monkeypatch)
    made: list[str] = []
    sick = PreflightReport("checked", (unreachable("slot0", "refused"),))
    done = start_case(plan, IDS, runner(waiting_login(), made), sick)
    assert isinstance(done, ExecutedRun) and done.outcome.failure.startswith("preflight: slot0") and made == []
    refused = FakeLogin(sbatch=RemoteResult(1, "", "sbatch: error: invalid partition specified: debug"))
    done = start_case(plan, IDS, runner(refused))
    assert isinstance(done, ExecutedRun)
    assert "could not submit" in done.outcome.failure and "invalid partition" in done.outcome.failure
    assert done.outcome.gpu_health is not None and done.outcome.gpu_health.verdict == "no_gpus"


def test_only_a_queueing_runtime_is_resumed(tmp_path, monkeypatch):
    plan = replace(planned(tmp_path, monkeypatch), runtime="local")
    started = StartedCase("7", datetime.now(UTC), {"job_id": "7"})
    done = finish_case(plan, IDS, started, CaseRunner(lambda _name, _inventory: LocalRuntime(), lambda *a: str(a[2])))
    assert "the local runtime cannot resume a submitted job" in (done.outcome.failure or "")
