"""dlperf_benchmark: run a benchmark suite on the cluster and store every repeat in the results database.

Nightly at 02:00 UTC on the default suite (Airflow's configuration option ``[dlperf] schedule``, environment
variable ``AIRFLOW__DLPERF__SCHEDULE``, sets another cron expression or ``none``: :mod:`dlperf_airflow.schedule`),
and on demand from the Trigger form (suite, runtime, filters,
repeats). Planning happens once: ``plan_cases`` returns the plan (:class:`dlperf_core.run.handoff.Plan`): its
``cases``, ``searches`` and ``settings`` are what every later task reads. Every task takes and returns
dlperf's own types (:mod:`dlperf_core.run.handoff` and their kin); XCom carries their JSON form
(:mod:`dlperf_core.json_form`), so Airflow's ``allowed_deserialization_classes`` must name ``dlperf_core.*``.
Shape (one module renders both, whatever the routing; a case run is always the mapped task group ``case_run``):

    plan_cases (setup) -> preflight, capture_environment -> case_run[i](run_case -> store_result) -> finish_run
    plan_cases -> plan_searches -> search_max_batch[j] -> finish_run      (suites with max_batch_search)
    finish_run -> detect_regressions; remove_containers (teardown); finish_run, detect_regressions -> make_report (teardown)

``finish_run`` runs when every case run is done (all_done): a case run that stored nothing is stored there from
what its ``run_case`` handed over, or told lost. The group is mapped over the plan's case runs (over their indexes:
each task pulls its own planned run from an XCom of its own, :mod:`dlperf_airflow.handout`, so that no task pulls
the whole list); ``run_case`` holds the ``dlperf_cluster`` pool for the whole case run (start every node at once,
wait, collect logs, remove the containers), one case run at a time, so no two benchmarks share a device, also
across DAG runs. On the ``slurm`` runtime ``run_case`` submits the case's Slurm job and defers to a trigger that
watches it from the triggerer (no worker held while it queues and runs), then resumes to collect it
(:mod:`dlperf_airflow.case_operator`); the pool counts deferred tasks, so it still holds the cluster meanwhile. ``search_max_batch`` holds the same pool while it tries batch after batch (``dlperf_core.measure.maxbatch``)
and stores what it found in ``max_batch_searches``. A failed training is stored as a failed row with its reason and
fails only its own ``store_result``; ``finish_run`` then fails the DAG run.
With per-node Celery workers (Airflow's configuration option ``[dlperf] cluster_inventory``, environment
variable ``AIRFLOW__DLPERF__CLUSTER_INVENTORY``, set to the cluster's inventory) the group holds, instead of
``run_case``, ``on_<node>`` for each node of that inventory, on the node's queue and in its one-slot pool, which
starts that node's container (the nodes of a case gang up through XCom), and ``collect_case``, which puts their
shares together (the same outcome builder as ``run_case``'s, :mod:`dlperf_core.run.case_run`); ``route_cases`` hands the
case runs out (each node probes its own environment) and ``remove_containers_<node>`` tears down on each node:

    plan_cases -> route_cases -> case_run[i](on_<node>... -> collect_case -> store_result) -> finish_run

``make_report`` writes the run's report (HTML, markdown, DLPerf JSON, PNG plots) after ``finish_run``
whatever its outcome; it is a teardown so that it never decides the DAG run's state (a plain all_done
leaf would turn a failed run green): ``finish_run`` stays the task that does.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task, task_group

from dlperf_airflow import steps
from dlperf_airflow.case_operator import RunCaseOperator
from dlperf_airflow.handout import hand_out, handed_out
from dlperf_airflow.node_step import routing_inventory
from dlperf_airflow.schedule import nightly_schedule
from dlperf_airflow.task_ids import (
    CAPTURE_ENVIRONMENT,
    CASE_RUN_GROUP,
    COLLECT_CASE,
    PLAN_CASES,
    ROUTE_CASES,
    RUN_CASE,
    STORE_RESULT,
    in_case_run,
    node_task_id,
)
from dlperf_airflow.trigger_params import trigger_params
from dlperf_core.cluster.preflight import PreflightReport
from dlperf_core.measure.maxbatch import SearchResult
from dlperf_core.measure.measurement import Measurement
from dlperf_core.measure.regression import DetectionReport
from dlperf_core.model import RunIds
from dlperf_core.plan.defaults import CLUSTER_POOL
from dlperf_core.run.handoff import ExecutedRun, NodeReport, Plan, PlannedRun
from dlperf_core.run.run_status import RunCounts

DAG_ID = "dlperf_benchmark"
POOL = CLUSTER_POOL
# Tasks that hold the cluster's devices (case runs, max batch trials): one at a time, across DAG runs.
ON_THE_CLUSTER = dict(
    pool=POOL,
    max_active_tis_per_dagrun=1,
    map_index_template="{{ dlperf_case }}",
    execution_timeout=timedelta(hours=6),
)
# Node routing (Airflow's configuration option [dlperf] cluster_inventory, read through airflow.sdk.conf): one
# task per node of the deployment's inventory, on that node's Celery queue and one-slot pool, for every case run
# (dlperf_airflow.node_step); else one run_case per case run. Nothing else in the environment decides the tasks.
ROUTING = routing_inventory(steps.dlperf_home())
HAND_OUT = CAPTURE_ENVIRONMENT if ROUTING is None else ROUTE_CASES  # the task that hands the case runs out
EXECUTING = in_case_run(RUN_CASE if ROUTING is None else COLLECT_CASE)  # the task that hands a case's outcome over
SCHEDULE = nightly_schedule()  # [dlperf] schedule, read at parse time; a value that is not a schedule fails the parse


def _ids() -> RunIds:
    ctx = get_current_context()
    return RunIds(dag_id=ctx["dag"].dag_id, run_id=ctx["run_id"])


@dag(
    dag_id=DAG_ID,
    schedule=SCHEDULE,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["dlperf", "benchmark"],
    doc_md=__doc__,
    default_args={"retries": 0},
    # The Trigger form: a Param per field of dlperf_core.plan.trigger_form.TriggerForm, offering what the suites in
    # suites/ allow on their inventories (cached in the dlperf home's state folder; the adapter registry's if none can
    # be read: never raises, so a broken suite cannot break parsing). plan_cases re-checks every value.
    params=trigger_params(steps.dlperf_home()),
)
def dlperf_benchmark():
    @task(task_id=PLAN_CASES)
    def plan_cases() -> Plan:
        ctx = get_current_context()
        run = ctx["dag_run"]
        trigger = "scheduled" if run.run_type == "scheduled" else "manual"
        who = "scheduler" if trigger == "scheduled" else getattr(run, "triggering_user_name", None)
        return steps.plan_step(ctx["params"], _ids(), trigger, who)

    @task
    def plan_searches(plan: Plan) -> list[PlannedRun]:
        """The plan's max batch size searches, as a task's return value: what a mapped task can expand over
        (Airflow maps only over a task's whole return value)."""
        return list(plan.searches)

    @task(**ON_THE_CLUSTER)
    def search_max_batch(search: PlannedRun, health: PreflightReport) -> SearchResult:
        from dlperf_airflow.maxbatch_step import search_step

        get_current_context()["dlperf_case"] = search.label  # type: ignore[typeddict-unknown-key]
        found = search_step(search, _ids(), health)
        if found.status == "failed":
            from airflow.sdk.exceptions import AirflowFailException

            raise AirflowFailException(f"{search.label}: {found.reason}")
        return found

    @task(task_id=CAPTURE_ENVIRONMENT)
    def capture_environment(plan: Plan) -> list[int]:
        """GPUs, driver, CUDA/cuDNN/NCCL, framework, image, topology, IB, hosts: stored once per distinct
        environment; each case run is tagged with its environment_id and handed out under its own XCom key
        (dlperf_airflow.handout); returns their indexes, which run_case is mapped over. Never fails the run."""
        from dlperf_airflow.environment_step import capture_step

        return hand_out(get_current_context()["ti"], capture_step(plan, _ids()))

    def run_case(index, health):
        """Every node of the case from this task (dlperf_core.run.case_run.execute_case); a runtime whose jobs queue
        in a scheduler (slurm) submits, defers to a trigger while the job waits and runs, and collects when it ended
        (dlperf_airflow.case_operator): its output is the case's ExecutedRun either way."""
        return RunCaseOperator(task_id=RUN_CASE, index=index, health=health, hand_out=HAND_OUT, **ON_THE_CLUSTER).output

    @task(execution_timeout=timedelta(minutes=30))
    def preflight(plan: Plan) -> PreflightReport:
        """Every node over SSH before any case runs; a sick node's cases fail with the reason."""
        return steps.preflight_step(plan)

    @task(task_id=STORE_RESULT, map_index_template="{{ dlperf_case }}")
    def store_result(executed: ExecutedRun) -> Measurement:
        get_current_context()["dlperf_case"] = executed.label  # type: ignore[typeddict-unknown-key]
        measurement = steps.store_step(executed, _ids())
        if measurement.status != "ok":
            from airflow.sdk.exceptions import AirflowFailException

            raise AirflowFailException(f"{executed.label} failed: {measurement.reason}")
        return measurement

    @task(trigger_rule="all_done")
    def finish_run() -> RunCounts:
        """Close the run; a planned case run that stored nothing is stored now: from what its task handed over, or
        as failed with its tasks' states as the reason (its task was killed with its worker)."""
        from dlperf_airflow.case_tasks import CaseTasks

        ti = get_current_context()["ti"]
        plan = ti.xcom_pull(task_ids=PLAN_CASES)  # None when planning failed
        return steps.finish_step(_ids(), plan, CaseTasks(ti, _ids(), executing=EXECUTING))

    @task
    def make_report() -> str:
        from dlperf_airflow.report_step import report_step  # matplotlib: imported at run time, not at parse time

        return report_step(_ids())

    @task
    def detect_regressions() -> DetectionReport:
        """Each case's median against its last good nights (median/MAD); store verdicts, alert (nightly)."""
        from dlperf_airflow.regression_step import detect_step

        return detect_step(_ids(), context=get_current_context())

    @task
    def remove_containers(plan: Plan) -> list[str]:
        return steps.cleanup_step(plan.settings, _ids())

    @task(task_id=ROUTE_CASES)
    def route_cases(plan: Plan) -> list[int]:
        """Which node tasks each case run uses (the others skip it), logged once for the whole plan; each case
        run handed out under its own XCom key (dlperf_airflow.handout), their indexes returned."""
        from dlperf_airflow.node_step import route_step

        return hand_out(get_current_context()["ti"], route_step(plan))

    def on_node(node):
        """The task of ``node`` in every case run: on its queue, in its one-slot pool."""

        @task(
            task_id=node_task_id(node.name),
            queue=node.queue,
            pool=node.airflow_id,
            max_active_tis_per_dagrun=1,
            map_index_template="{{ dlperf_case }}",
            execution_timeout=ON_THE_CLUSTER["execution_timeout"],
        )
        def run_on_node(index: int, health: PreflightReport) -> NodeReport:
            from airflow.sdk.exceptions import AirflowSkipException

            from dlperf_airflow.node_step import XComBoard, node_step

            ctx = get_current_context()
            item = handed_out(ctx["ti"], HAND_OUT, index)
            ctx["dlperf_case"] = item.label  # type: ignore[typeddict-unknown-key]
            report = node_step(item, _ids(), node.name, health, XComBoard(ctx["ti"]))
            if report.skipped is not None:
                raise AirflowSkipException(report.skipped)
            return report

        return run_on_node

    @task(task_id=COLLECT_CASE, trigger_rule="all_done", map_index_template="{{ dlperf_case }}")
    def collect_case(index: int) -> ExecutedRun:
        """The case's outcome from its nodes' tasks (a node task that failed or never ran reads as None)."""
        from dlperf_airflow.node_step import collect_step

        ctx = get_current_context()
        item = handed_out(ctx["ti"], HAND_OUT, index)
        ctx["dlperf_case"] = item.label  # type: ignore[typeddict-unknown-key]
        ti = ctx["ti"]
        assert ROUTING is not None  # the case_run group exists only under node routing
        reports = {
            node.name: ti.xcom_pull(task_ids=in_case_run(node_task_id(node.name)), map_indexes=ti.map_index)
            for node in ROUTING.nodes
        }
        return collect_step(item, reports, _ids())

    @task_group(group_id=CASE_RUN_GROUP)
    def case_run(index: int, health: PreflightReport):
        """One case run, whatever the routing: its nodes run (run_case, or on_<node> per node and collect_case),
        then store_result; mapped over the handed-out case runs, one group instance per case run."""
        if ROUTING is None:
            executed = run_case(index, health)
        else:
            shares = [on_node(node)(index=index, health=health) for node in ROUTING.nodes]
            executed = collect_case(index)
            shares >> executed
        return store_result(executed)

    def remove_containers_on(node):
        @task(task_id=f"remove_containers_{node.name}", queue=node.queue)
        def remove_node_containers(plan: Plan) -> list[str]:
            return steps.cleanup_node_step(plan.settings, _ids(), node.name)

        return remove_node_containers

    plan = plan_cases()
    done = finish_run()
    searches = plan_searches(plan)
    health = preflight(plan)
    found = search_max_batch.partial(health=health).expand(search=searches)
    # the case runs are handed out once (each under its own XCom key, dlperf_airflow.handout) by capture_environment,
    # or by route_cases under node routing (where each node task probes its own node's environment)
    handed = capture_environment(plan) if ROUTING is None else route_cases(plan)
    stored = case_run.partial(health=health).expand(index=handed)
    if ROUTING is None:
        cleanups = [remove_containers(plan)]
    else:  # each node's container from a task on that node's worker
        stored >> found  # max batch trials (central) never share a node with a case run
        cleanups = [remove_containers_on(node)(plan) for node in ROUTING.nodes]
    [stored, found] >> done
    detected = done >> detect_regressions()
    for cleanup in cleanups:
        done >> cleanup.as_teardown(setups=plan)
    [done, detected] >> make_report().as_teardown(setups=plan)  # after detection: the report shows its verdicts


dlperf_benchmark()
