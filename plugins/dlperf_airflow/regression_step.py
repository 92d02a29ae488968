"""The ``detect_regressions`` step: judge every case of a finished run against its nightly history
(dlperf_core.regression: median and MAD over the last good nights), store the verdicts and alert.

* Scheduled (nightly) run: new regressions are stored in ``regressions`` and sent to the notifiers;
  a night that is still at a regressed level only updates ``last_seen_run_id``; a night back within
  the noise closes the regression (``closed_reason`` says so).
* Manual run: compared against the same nightly history and the verdicts are logged and returned,
  but nothing is stored and nobody is alerted. A manual run is usually an experiment (a filter, a
  new image, different repeats) watched by the person who started it; it is not part of the nightly
  history, so it must not open or close the regressions the nightly series tracks.

A good night of a configuration: a scheduled run, finished, where the configuration had at least one
ok repeat and no failed one.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from dlperf_core.environment import INFRASTRUCTURE_FIELDS
from dlperf_core.jobs import RunIds
from dlperf_core.regression import (
    FabricNight,
    Night,
    OpenRegression,
    Policy,
    Verdict,
    fabric_dropped,
    judge,
    label_regression,
)
from dlperf_core.storage import CONFIGURATION_COLUMNS, ResultStore, default_db_url

log = logging.getLogger("dlperf")


def _environments(store: ResultStore, ids: set[int]) -> dict[int, dict]:
    frame = store.environments(ids) if ids else None
    if frame is None or frame.empty:
        return {}
    return {int(row["id"]): {f: row[f] for f in INFRASTRUCTURE_FIELDS} for _, row in frame.iterrows()}


def _env_id(value: Any) -> int | None:
    try:
        return None if value is None or value != value else int(value)  # NaN/NA -> None
    except TypeError:
        return None


def fabric_of(store: ResultStore, ids: RunIds, nodes: int, gpus_per_node: int, started_at, policy: Policy) -> bool | None:
    """Whether this run's all-reduce probe of the topology dropped against its own nightly history (at the
    largest message size both measured); None when there is no probe of it tonight or too little history."""
    tonight = store.fabric_summary(run_id=ids.run_id, dag_id=ids.dag_id)
    tonight = tonight[(tonight["nodes"] == nodes) & (tonight["gpus_per_node"] == gpus_per_node)
                      & tonight["busbw_gbs"].notna()] if len(tonight) else tonight
    if tonight.empty:
        return None
    size = int(tonight["size_bytes"].max())
    history = store.fabric_history(nodes=nodes, gpus_per_node=gpus_per_node, before=started_at)
    history = history[(history["size_bytes"] == size) & history["busbw_gbs"].notna()
                      & (history["run_status"] != "running")] if len(history) else history
    nights = [FabricNight(r.night, r.run_id, float(r.busbw_gbs)) for r in history.itertuples()]
    now = FabricNight(started_at.date(), ids.run_id, float(tonight[tonight["size_bytes"] == size]["busbw_gbs"].iloc[0]))
    return fabric_dropped(nights, now, policy)


def detect_step(
    ids: RunIds,
    policy: Policy = Policy(),
    notify: Callable[[list[dict], dict], int] | None = None,
    context: dict | None = None,
) -> dict:
    """Judge run ``ids``; store and alert for a scheduled run (see module docstring)."""
    store = ResultStore(default_db_url())
    try:
        return _detect(store, ids, policy, notify, context)
    finally:
        store.dispose()


def _detect(store: ResultStore, ids: RunIds, policy: Policy, notify, context) -> dict:
    run = store.run_info(ids.dag_id, ids.run_id)
    if run is None:
        raise RuntimeError(f"no benchmark run {ids.dag_id}/{ids.run_id} in the results database")
    scheduled = run["trigger"] == "scheduled"
    tonight_date = run["started_at"].date()
    summary = store.summary(run_id=ids.run_id, dag_id=ids.dag_id)
    summary = summary[summary["n"] > 0]
    judged: list[tuple[dict, Verdict, int | None]] = []
    histories = {}
    env_ids: set[int] = set()
    for case in summary.to_dict("records"):
        history = store.history(
            **{"batch" if c == "batch_size_per_device" else c: case[c] for c in CONFIGURATION_COLUMNS},
            nights=None, before=run["started_at"],
        )
        history = history[(history["case_key"] == case["case_key"]) & (history["n"] > 0)
                          & (history["n_failed"] == 0) & (history["run_status"] != "running")]
        history = history.tail(policy.window)
        histories[case["case_key"]] = history
        env_ids |= {int(e) for e in history["environment_id"].dropna()}
        if _env_id(case["environment_id"]) is not None:
            env_ids.add(_env_id(case["environment_id"]))  # type: ignore[arg-type]
    environments = _environments(store, env_ids)

    for case in summary.to_dict("records"):
        history = histories[case["case_key"]]
        nights = [
            Night(row.night, row.run_id, float(row.median_throughput),
                  environments.get(_env_id(row.environment_id)), _env_id(row.environment_id))
            for row in history.itertuples()
        ]
        env_id = _env_id(case["environment_id"])
        tonight = Night(tonight_date, ids.run_id, float(case["median_throughput"]), environments.get(env_id), env_id)
        configuration = {c: case[c] for c in CONFIGURATION_COLUMNS}
        open_row = store.open_regression(configuration)
        open_ = None
        if open_row is not None and open_row["run_id"] != ids.run_id:
            open_ = OpenRegression(open_row["id"], open_row["median_throughput"], open_row["baseline_median"],
                                   open_row["baseline_mad"], open_row["direction"])
        judged.append(({**configuration, "case_key": case["case_key"]}, judge(nights, tonight, policy, open_), env_id))

    new: list[dict] = []
    counts: dict[str, int] = {}
    labels = {  # what each new regression is put down to: the fabric, the framework, or neither
        case["case_key"]: label_regression(
            verdict, fabric_of(store, ids, int(case["nodes"]), int(case["gpus_per_node"]), run["started_at"], policy)
        )
        for case, verdict, _ in judged if verdict.kind == "new"
    }
    for case, verdict, env_id in judged:
        counts[verdict.kind] = counts.get(verdict.kind, 0) + 1
        line = _describe(case["case_key"], verdict) + (f" [{labels[case['case_key']]}]" if case["case_key"] in labels else "")
        log.log(logging.WARNING if verdict.kind == "new" else logging.INFO, "%s", line)
        if not scheduled:
            continue
        if verdict.kind == "new":
            label = labels[case["case_key"]]
            regression_id = store.record_regression(ids.dag_id, ids.run_id, case, verdict, env_id, label=label)
            new.append({"id": regression_id, "dag_id": ids.dag_id, "run_id": ids.run_id, **case,
                        **{k: v for k, v in verdict.to_dict().items() if k not in ("kind", "run_id")},
                        "environment_changes": "; ".join(verdict.environment_changes) or None, "label": label})
        elif verdict.kind == "continuing" and verdict.open_regression_id is not None:
            store.touch_regression(verdict.open_regression_id, ids.run_id)
        elif verdict.kind == "recovered" and verdict.open_regression_id is not None:
            store.close_regression(verdict.open_regression_id, f"recovered in run {ids.run_id}")
    notified = 0
    if new:
        if notify is None:
            from dlperf_airflow.notifiers import notify_regressions as notify
        notified = notify(new, context or {})
    result = {
        "trigger": run["trigger"],
        "stored": scheduled,
        "judged": len(judged),
        "verdicts": counts,
        "new_regressions": new if scheduled else [
            {**case, **verdict.to_dict(), "label": labels[case["case_key"]]}
            for case, verdict, _ in judged if verdict.kind == "new"
        ],
        "notifiers_called": notified,
    }
    log.info("regression detection on %s run %s: %s", run["trigger"], ids.run_id, counts)
    return result


def _describe(case_key: str, verdict: Verdict) -> str:
    if verdict.kind == "insufficient_history":
        return f"{case_key}: {verdict.baseline_nights} good nights so far, no verdict yet"
    env = f"; environment changed: {'; '.join(verdict.environment_changes)}" if verdict.environment_changed else ""
    return (
        f"{case_key}: {verdict.kind}, median {verdict.median_throughput:.2f} vs {verdict.baseline_median:.2f} "
        f"({verdict.change_pct:+.2f}%, robust z {verdict.robust_z:+.2f}, {verdict.baseline_nights} nights){env}"
    )
