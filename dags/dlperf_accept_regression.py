"""dlperf_accept_regression: accept a regression as the new normal, from the Airflow UI's Trigger form.

A regression the team has looked into and decided to live with (a new framework release that is slower by design,
a driver the cluster keeps) keeps alerting until its configuration's baseline moves. Trigger this DAG with the
regression's id (``regressions.id``: the alert's ``regression_id``, the results page, ``SELECT * FROM
open_regressions``) and a reason: the regression is closed (``closed_reason`` "accepted as the new normal: ...")
and the detector's baseline of its configuration starts on its first bad night (or on ``from_night``). No night is
deleted: ``nightly_history`` keeps them all. The same as ``dlperf regressions accept ID --reason TEXT``
(:meth:`dlperf_core.storage.ResultStore.accept_regression`); docs/operations.md, "Silence an alert".
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import Param, dag, get_current_context, task

from dlperf_airflow.regression_step import accept_step


@dag(
    dag_id="dlperf_accept_regression",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["dlperf"],
    params={
        "regression_id": Param(
            1,
            type="integer",
            minimum=1,
            title="Regression id",
            description="regressions.id of the open regression (the alert's regression_id)",
        ),
        "reason": Param(
            "",
            type="string",
            minLength=1,
            title="Reason",
            description="why this level is the new normal (kept in closed_reason)",
        ),
        "from_night": Param(
            None,
            type=["null", "string"],
            format="date",
            title="Baseline from (optional)",
            description="the night the baseline starts on; empty: the regression's first bad night, else its night",
        ),
    },
    doc_md=__doc__,
)
def dlperf_accept_regression() -> None:
    @task
    def accept() -> str:
        params = get_current_context()["params"]
        return accept_step(int(params["regression_id"]), str(params["reason"]), params.get("from_night"))

    accept()


dlperf_accept_regression()
