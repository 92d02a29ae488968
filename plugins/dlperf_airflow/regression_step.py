"""The ``detect_regressions`` step: judge every case of a finished run against its nightly history
(dlperf_core.measure.regression: median and MAD over the last good nights), store the verdicts and alert.

* Scheduled (nightly) run: new regressions are stored in ``regressions`` and sent to the notifiers;
  a night that is still at a regressed level only updates ``last_seen_run_id``; a night back within
  the noise closes the regression (``closed_reason`` says so).
* Manual run: compared against the same nightly history and the verdicts are logged and returned,
  but nothing is stored and nobody is alerted. A manual run is usually an experiment (a filter, a
  new image, different repeats) watched by the person who started it; it is not part of the nightly
  history, so it must not open or close the regressions the nightly series tracks.

A good night of a configuration: a scheduled run, finished, where the configuration had at least one
ok repeat and no failed one.

The run's per-node sweeps are scored too (:mod:`dlperf_core.measure.node_peers`: each node against its peers, or
with two nodes against its own good nights): a node named slow is logged at WARNING, and on a scheduled run handed
to the notifiers with the regressions, in two more keys of their context (``dlperf_slow_nodes``: each finding's
JSON form, :class:`~dlperf_core.measure.node_peers.NodeScore`; ``dlperf_slow_nodes_text``: a line each); a night
with slow nodes and no new regression calls them with no regression.

The rules (good nights, verdicts, labels, open / touch / close) are the core's:
:func:`dlperf_core.measure.regression.decide_run`. This step reads what they need from the store, writes the
decisions back, logs them and calls the notifiers.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import date, datetime
from typing import Any

from dlperf_airflow.connections import results_db_url
from dlperf_core.measure.node_peers import (
    SLOW_NODES_KEY,
    SLOW_NODES_TEXT_KEY,
    NodePolicy,
    NodeScores,
    good_night_medians,
    node_figures,
    score_sweeps,
)
from dlperf_core.measure.regression import (
    CaseResult,
    DetectionReport,
    FabricFigure,
    NightlyRow,
    OpenRegression,
    Policy,
    RegressionAlert,
    RunDecisions,
    decide_run,
    environment_ids,
    fabric_dropped_tonight,
)
from dlperf_core.model import RunIds, series_base
from dlperf_core.storage import ResultStore

log = logging.getLogger("dlperf")

Notify = Callable[[list[RegressionAlert], Mapping[str, Any]], int]
"""What is called with the new regressions of a scheduled run and the task context (with the slow nodes' keys
when it named some: then also with no regression): how many notifiers ran."""


def _environments(store: ResultStore, ids: set[int]) -> dict[int, dict[str, object]]:
    """The infrastructure fields (what a regression is compared by) of the environments ``ids``."""
    return store.environment_infrastructure(ids)


def fabric_of(
    store: ResultStore, ids: RunIds, nodes: int, gpus_per_node: int, started_at: datetime, policy: Policy
) -> bool | None:
    """Whether this run's all-reduce probe of the topology dropped against its own nightly history (at the
    largest message size both measured); None when there is no probe of it tonight or too little history
    (the rule: :func:`dlperf_core.measure.regression.fabric_dropped_tonight`)."""
    tonight = [FabricFigure.from_summary(r) for r in store.fabric_summary_rows(run_id=ids.run_id, dag_id=ids.dag_id)]
    if not any((f.nodes, f.gpus_per_node) == (nodes, gpus_per_node) for f in tonight):
        return None  # no probe of this topology tonight: its history is not needed
    history = store.fabric_history_rows(nodes=nodes, gpus_per_node=gpus_per_node, before=started_at)
    return fabric_dropped_tonight(
        tonight,
        [FabricFigure.from_history(r) for r in history],
        (nodes, gpus_per_node),
        started_at.date(),
        ids.run_id,
        policy,
    )


def detect_step(
    ids: RunIds,
    policy: Policy = Policy(),
    notify: Notify | None = None,
    context: Mapping[str, Any] | None = None,
) -> DetectionReport:
    """Judge run ``ids``; store and alert for a scheduled run (see module docstring)."""
    store = ResultStore(results_db_url())
    try:
        return _detect(store, ids, policy, notify, context)
    finally:
        store.dispose()


def load_decisions(store: ResultStore, ids: RunIds, policy: Policy = Policy()) -> RunDecisions:
    """Read what run ``ids`` is judged on from the store and let the core decide
    (:func:`dlperf_core.measure.regression.decide_run`); nothing is written."""
    run = store.run_info(ids.dag_id, ids.run_id)
    if run is None:
        raise RuntimeError(f"no benchmark run {ids.dag_id}/{ids.run_id} in the results database")
    cases = [CaseResult.from_summary(row) for row in store.summary_rows(run_id=ids.run_id, dag_id=ids.dag_id)]
    cases = [case for case in cases if case.n > 0]
    history = {case.case_key: _series_history(store, case, run.started_at) for case in cases}
    open_regressions = {}
    for case in cases:
        row = store.open_regression(case.configuration)
        if row is not None:
            open_regressions[case.case_key] = OpenRegression.from_stored(row)
    return decide_run(
        run_id=ids.run_id,
        trigger=run.trigger,
        night=run.started_at.date(),
        cases=cases,
        history=history,
        open_regressions=open_regressions,
        environments=_environments(store, environment_ids(cases, history, policy)),
        fabric=lambda nodes, gpus: fabric_of(store, ids, nodes, gpus, run.started_at, policy),
        policy=policy,
        baseline_starts=accepted_starts(store, cases),
    )


def accepted_starts(store: ResultStore, cases: list[CaseResult]) -> dict[str, date]:
    """By case key, the night its configuration's baseline starts on, where a regression of it was accepted as the
    new normal (``ResultStore.accepted_from``)."""
    starts = {case.case_key: store.accepted_from(case.configuration) for case in cases}
    return {key: night for key, night in starts.items() if night is not None}


def _series_history(store: ResultStore, case: CaseResult, before: datetime) -> list[NightlyRow]:
    """The nightly rows before ``before`` of ``case``'s configuration under every fingerprint (its own series and
    those :func:`dlperf_core.measure.regression.history_restart` reports): same fields and options, any ``+args=``."""
    rows = store.history_rows(case.configuration, any_variant=True, before=before)
    base = series_base(case.case_key)
    return [NightlyRow.from_history(row) for row in rows if series_base(row.case_key) == base]


def load_node_scores(store: ResultStore, ids: RunIds, policy: NodePolicy | None = None) -> NodeScores:
    """Run ``ids``'s per-node sweeps scored node by node (:func:`dlperf_core.measure.node_peers.score_sweeps`): its
    pinned cases' medians, and for a sweep of two nodes each one's nightly history before the run."""
    policy = policy or NodePolicy.from_env()
    run = store.run_info(ids.dag_id, ids.run_id)
    if run is None:
        raise RuntimeError(f"no benchmark run {ids.dag_id}/{ids.run_id} in the results database")
    rows = {row.case_key: row for row in store.summary_rows(run_id=ids.run_id, dag_id=ids.dag_id)}
    figures = node_figures((key, row.median_throughput) for key, row in rows.items())
    pairs = Counter(f.sweep for f in figures)
    history = {}
    for figure in (f for f in figures if pairs[f.sweep] == 2):  # two nodes: each against its own nights
        configuration = CaseResult.from_summary(rows[figure.case_key]).configuration
        nights = [NightlyRow.from_history(r) for r in store.history_rows(configuration, before=run.started_at)]
        history[figure.case_key] = good_night_medians(nights, figure.case_key, ids.run_id)
    return score_sweeps(figures, history, policy)


def slow_node_context(scores: NodeScores) -> dict[str, Any]:
    """The notifiers' context keys of the nodes ``scores`` names slow (none: empty)."""
    if not scores.slow:
        return {}
    return {
        SLOW_NODES_KEY: [score.to_json() for score in scores.slow],  # the notifier edge: JSON
        SLOW_NODES_TEXT_KEY: "\n".join(score.describe() for score in scores.slow),
    }


def _detect(
    store: ResultStore, ids: RunIds, policy: Policy, notify: Notify | None, context: Mapping[str, Any] | None
) -> DetectionReport:
    decided = load_decisions(store, ids, policy)
    nodes = load_node_scores(store, ids)
    for score in nodes.scores:
        log.log(logging.WARNING if score.slow else logging.INFO, "%s", score.describe())
    new: list[RegressionAlert] = []
    for decision in decided.decisions:
        log.log(logging.WARNING if decision.verdict.kind == "new" else logging.INFO, "%s", decision.describe())
        regression_id = decision.verdict.open_regression_id
        if decision.action == "open":
            regression_id = store.record_regression(
                ids.dag_id,
                ids.run_id,
                decision.case_key,
                decision.configuration,
                decision.verdict,
                decision.environment_id,
                label=decision.label,
            )
            new.append(decision.alert(ids.dag_id, regression_id))
        elif decision.action == "touch" and regression_id is not None:
            store.touch_regression(regression_id, ids.run_id)
        elif decision.action == "close" and regression_id is not None and decision.closed_reason is not None:
            store.close_regression(regression_id, decision.closed_reason)
    for restart in decided.restarts:
        log.warning("%s", restart.describe(policy))
    notified = 0
    slow = slow_node_context(nodes) if decided.scheduled else {}  # alerts: of scheduled runs only, as regressions
    if new or slow:
        if notify is None:
            from dlperf_airflow.notifiers import notify_regressions

            notify = notify_regressions
        notified = notify(new, {**(context or {}), **slow})
    result = decided.result(notified)
    log.info("regression detection on %s run %s: %s", decided.trigger, ids.run_id, decided.counts)
    return result


def accept_step(regression_id: int, reason: str, from_night: str | None = None) -> str:
    """The ``dlperf_accept_regression`` DAG's task: accept regression ``regression_id`` as the new normal
    (:meth:`dlperf_core.storage.ResultStore.accept_regression`); fails, saying why, when there is no such open one."""
    start = date.fromisoformat(from_night) if from_night else None
    store = ResultStore(results_db_url())
    try:
        accepted = store.accept_regression(regression_id, reason, start)
    finally:
        store.dispose()
    if accepted is None:
        raise ValueError(f"no open regression with id {regression_id} (closed already, or no such id)")
    line = f"regression {regression_id} accepted as the new normal: its configuration's baseline starts on {accepted}"
    log.info("%s", line)
    return line
