"""``run_case``: one case run from one task, which waits without a worker when its runtime queues its jobs.

A TaskFlow ``@task`` cannot defer and come back: resuming calls ``getattr(operator, next_method)(context, **kwargs)``
on the operator (``BaseOperator.resume_execution``), and a plain ``@task``'s operator has no method of the case's. So
``run_case`` is this classic operator, used inside the mapped task group ``case_run`` as the ``@task`` was: its
``index`` and ``health`` are template fields, so the group's mapped index and the preflight's report reach it as
they reached the ``@task`` (resolved when the task runs), with the same task id, pool, limits and map index label.

* ``local`` and ``docker`` (every runtime not in :data:`~dlperf_core.run.case_run.WAITS_IN_QUEUE`): :meth:`execute`
  runs the case to its end as before (:func:`dlperf_airflow.steps.execute_step`): they never defer.
* ``slurm``: :meth:`execute` submits the job (:func:`dlperf_airflow.steps.start_case_step`), keeps what the wait needs
  (:class:`~dlperf_core.run.case_run.StartedCase`, JSON) in an XCom of its own, and defers to
  :class:`~dlperf_airflow.slurm_trigger.SlurmJobTrigger`; when the trigger fires, :meth:`collect` reads the job back
  (:func:`dlperf_airflow.steps.finish_case_step`) and returns the same :class:`~dlperf_core.run.handoff.ExecutedRun`
  a docker case run returns. The started state travels in an XCom rather than in the deferral's ``kwargs``:
  ``dag.test()`` (Airflow 3.3) hands a resumed task the trigger's event alone and drops those kwargs, and a task's
  XComs are kept across its deferral (cleared only when it starts afresh).

While deferred the task keeps its slot of the ``dlperf_cluster`` pool: the pool counts deferred tasks
(``include_deferred``), so no other case starts on the cluster while a job waits in Slurm's queue.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import TaskDeferred

from dlperf_core.cluster.preflight import PreflightReport
from dlperf_core.errors import ConfigError
from dlperf_core.model import RunIds
from dlperf_core.run.case_run import WAITS_IN_QUEUE, StartedCase
from dlperf_core.run.handoff import ExecutedRun, PlannedRun

STARTED_KEY = "dlperf_started_case"
"""The XCom key of a deferred case run's :class:`StartedCase` (on the run_case task instance itself)."""


def wait_trigger(planned: PlannedRun, started: StartedCase):  # noqa: ANN201 - SlurmJobTrigger, imported here
    """The trigger that waits on ``started``'s job: the inventory's ``slurm:`` block says how to reach the login node
    (``connection``), how often to look (``poll_s``) and what a job pending on drained nodes does (``on_drained``)."""
    from dlperf_airflow.slurm_trigger import SlurmJobTrigger

    slurm = planned.slurm
    if slurm is None:
        raise ConfigError(planned.inventory, [f"{planned.label}: runtime {planned.runtime}, but no slurm: block"])
    return SlurmJobTrigger(
        ssh_conn_id=slurm.connection, job_id=started.job_id, poll_s=slurm.poll_s, on_drained=slurm.on_drained
    )


class RunCaseOperator(BaseOperator):
    """Every node of one case run, from this task (module docstring). ``hand_out``: the task that handed the case
    runs out (each under its own XCom key, :mod:`dlperf_airflow.handout`); ``index``: this case run's index."""

    template_fields: Collection[str] = ("index", "health")
    ui_color = "#e8f0fe"

    def __init__(self, *, index: Any, health: Any, hand_out: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index = index
        self.health = health
        self.hand_out = hand_out

    def _planned(self, context: Any) -> PlannedRun:
        from dlperf_airflow.handout import handed_out

        item = handed_out(context["ti"], self.hand_out, int(self.index))
        context["dlperf_case"] = item.label  # the map index's label (map_index_template)
        return item

    @staticmethod
    def _ids(context: Any) -> RunIds:
        return RunIds(dag_id=context["dag"].dag_id, run_id=context["run_id"])

    def _preflight(self) -> PreflightReport | None:
        return self.health if isinstance(self.health, PreflightReport) else None

    def execute(self, context: Any) -> ExecutedRun:
        from dlperf_airflow import steps

        planned = self._planned(context)
        if planned.runtime not in WAITS_IN_QUEUE:
            return steps.execute_step(planned, self._ids(context), self._preflight())
        started = steps.start_case_step(planned, self._ids(context), self._preflight())
        if isinstance(started, ExecutedRun):  # not started, refused, or the submission failed: nothing to wait on
            return started
        trigger = wait_trigger(planned, started)
        context["ti"].xcom_push(key=STARTED_KEY, value=started)
        self.log.info("%s: waiting for slurm job %s without a worker", planned.label, started.job_id)
        raise TaskDeferred(trigger=trigger, method_name="collect")  # what BaseOperator.defer raises

    def collect(self, context: Any, event: dict[str, Any] | None = None) -> ExecutedRun:
        """Resumed when the trigger fired: the job's end read back, the case's outcome."""
        from dlperf_airflow import steps
        from dlperf_airflow.slurm_trigger import WaitEnd

        planned = self._planned(context)
        ti = context["ti"]
        started = ti.xcom_pull(task_ids=ti.task_id, key=STARTED_KEY, map_indexes=ti.map_index)
        if not isinstance(started, StartedCase):
            raise TypeError(f"{planned.label}: resumed without its submitted job (XCom {STARTED_KEY}: {started!r})")
        end = WaitEnd.from_json(event or {})
        if end.reason:
            named = end.reason.startswith(f"slurm job {end.job_id}")  # most of the trigger's reasons name the job
            self.log.warning("%s: %s", planned.label, end.reason if named else f"slurm job {end.job_id}: {end.reason}")
        else:
            self.log.info("%s: slurm job %s ended: %s", planned.label, end.job_id, end.state)
        return steps.finish_case_step(
            planned, self._ids(context), started, wait_failure=end.wait_failure, end_reason=end.end_reason
        )
