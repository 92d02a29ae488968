"""dlperf_benchmark: run a benchmark suite on the cluster and store every repeat in the results database.

Nightly at 02:00 UTC on the default suite, and on demand from the Trigger form (suite, runtime, filters,
repeats). Shape:

    plan_cases (setup) -> run_case[i] -> store_result[i] -> finish_run -> remove_containers (teardown)

``run_case`` is mapped over the plan and holds the ``dlperf_cluster`` pool for the whole case run (start
every node at once, wait, collect logs, remove the containers), one case run at a time, so no two
benchmarks share a device, also across DAG runs. A failed training is stored as a failed row with its
reason and fails only its own ``store_result``; ``finish_run`` then fails the DAG run.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import get_args

from airflow.sdk import Param, dag, get_current_context, task

from dlperf_airflow import steps
from dlperf_core.frameworks import ADAPTERS
from dlperf_core.jobs import RunIds
from dlperf_core.suite import Precision

DAG_ID = "dlperf_benchmark"
POOL = "dlperf_cluster"
PRECISIONS = list(get_args(Precision))
TOPOLOGIES = ["1n1g", "1n2g", "1n4g", "1n8g", "2n1g", "2n8g", "4n8g"]
FRAMEWORKS = sorted(ADAPTERS)


def _ids() -> RunIds:
    ctx = get_current_context()
    return RunIds(dag_id=ctx["dag"].dag_id, run_id=ctx["run_id"])


@dag(
    dag_id=DAG_ID,
    schedule="0 2 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["dlperf", "benchmark"],
    doc_md=__doc__,
    default_args={"retries": 0},
    params={
        "suite": Param(
            "suites/smoke.yaml",
            type="string",
            title="Suite",
            description="Suite file, relative to the dlperf home (the repository) or absolute.",
            section="What to run",
        ),
        "runtime": Param(
            "suite",
            type="string",
            enum=["suite", "local", "docker"],
            title="Runtime",
            description="'suite' uses the suite's own runtime and inventory.",
            section="What to run",
        ),
        "inventory": Param(
            "",
            type="string",
            title="Inventory",
            description="Node inventory file; empty = the suite's, or the runtime's default.",
            section="What to run",
        ),
        "frameworks": Param(
            [], type="array", items={"type": "string", "enum": FRAMEWORKS}, examples=FRAMEWORKS,
            title="Frameworks", description="Empty = every framework in the suite.", section="Filters",
        ),
        "models": Param(
            [], type="array", items={"type": "string"}, title="Models",
            description="Empty = every model in the suite.", section="Filters",
        ),
        "precisions": Param(
            [], type="array", items={"type": "string", "enum": PRECISIONS}, examples=PRECISIONS,
            title="Precisions", description="Empty = every precision in the suite.", section="Filters",
        ),
        "topologies": Param(
            [], type="array", items={"type": "string", "enum": TOPOLOGIES}, examples=TOPOLOGIES,
            title="Topologies", description="Empty = every topology in the suite.", section="Filters",
        ),
        "repeats": Param(
            0, type="integer", minimum=0, maximum=100, title="Repeats",
            description="Repeats per case; 0 = the suite's.", section="Filters",
        ),
    },
)
def dlperf_benchmark():
    @task
    def plan_cases(**context) -> list[dict]:
        trigger = "scheduled" if context["dag_run"].run_type == "scheduled" else "manual"
        return steps.plan_step(dict(context["params"]), _ids(), trigger)

    @task(
        pool=POOL,
        max_active_tis_per_dagrun=1,
        map_index_template="{{ dlperf_case }}",
        execution_timeout=timedelta(hours=6),
    )
    def run_case(item: dict) -> dict:
        get_current_context()["dlperf_case"] = steps.item_label(item)  # type: ignore[typeddict-unknown-key]
        return steps.execute_step(item, _ids())

    @task(map_index_template="{{ dlperf_case }}")
    def store_result(executed: dict) -> dict:
        get_current_context()["dlperf_case"] = steps.item_label(executed)  # type: ignore[typeddict-unknown-key]
        verdict = steps.store_step(executed, _ids())
        if verdict.status != "ok":
            from airflow.sdk.exceptions import AirflowFailException

            raise AirflowFailException(f"{steps.item_label(executed)} failed: {verdict.reason}")
        return verdict.to_dict()

    @task(trigger_rule="all_done")
    def finish_run() -> dict:
        return steps.finish_step(_ids())

    @task
    def remove_containers(**context) -> list[str]:
        return steps.cleanup_step(dict(context["params"]), _ids())

    plan = plan_cases()
    stored = store_result.expand(executed=run_case.expand(item=plan))
    done = finish_run()
    stored >> done
    done >> remove_containers().as_teardown(setups=plan)


dlperf_benchmark()
