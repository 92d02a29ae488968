"""What finish_run learns of a case run's tasks: the states of the tasks of its ``case_run`` group instance, named
within the group (a lost case run's reason reads "lost: run_case failed, store_result upstream_failed, ..."
whatever the DAG's shape), and the outcome its case-running task handed over."""

from dlperf_airflow.case_tasks import CaseTasks
from dlperf_core.model import RunIds
from dlperf_core.run.run_status import lost_reason

IDS = RunIds("dlperf_benchmark", "manual__1")


class FakeTi:
    """The task SDK's answers for map index 1 of a run (task ids suffixed with the map index, as Airflow keys them)."""

    def __init__(self) -> None:
        self.pulled: list[tuple[str, int]] = []

    def get_task_states(self, dag_id, run_ids, map_index):
        assert (dag_id, run_ids, map_index) == (IDS.dag_id, [IDS.run_id], 1)
        return {
            IDS.run_id: {
                "case_run.run_case_1": "failed",
                "case_run.store_result_1": "upstream_failed",
                "search_max_batch_1": "success",  # a search's map index 1: not a task of this case run
            }
        }

    def xcom_pull(self, task_ids, map_indexes):
        self.pulled.append((task_ids, map_indexes))
        return {"not": "an executed run"}


def test_a_case_runs_tasks_are_named_within_its_group():
    ti = FakeTi()
    tasks = CaseTasks(ti, IDS, executing="case_run.run_case")
    states = tasks.states(1)
    assert states == {"run_case": "failed", "store_result": "upstream_failed"}
    assert lost_reason(states).startswith("lost: run_case failed, store_result upstream_failed, before a result")
    assert tasks.outcome(1) is None and ti.pulled == [("case_run.run_case", 1)]  # what is no outcome reads as none
