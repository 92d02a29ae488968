"""Regression detection (dlperf_core.measure.regression), pure: median/MAD verdicts on synthetic nightly histories (the
rule alone, ``RULE``), the rule's flags confirmed by change points (the default policy), the labels (fabric or
framework), what a run decides and the alert it stores, the store's rows as the core's types.
The detect_regressions step against a real PostgreSQL history (a planted 5% slowdown raises exactly one
regression, a manual run stores nothing, the notifiers): tests/airflow_plugin/test_regression_step.py."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from dlperf_core.cluster.environment import INFRASTRUCTURE_FIELDS
from dlperf_core.measure.regression import (
    CaseResult,
    FabricFigure,
    Night,
    NightlyRow,
    OpenRegression,
    Policy,
    RegressionAlert,
    decide_run,
    describe_regression,
    describe_verdict,
    environment_ids,
    fabric_dropped_tonight,
    good_nights,
    is_good_night,
    judge_night,
    judge_series,
    robust_baseline,
)
from dlperf_core.storage.rows import (
    CaseSummaryRow,
    Configuration,
    FabricHistoryRow,
    FabricSummaryRow,
    HistoryRow,
    RegressionRow,
)

START = date(2026, 1, 1)
ENV_A = {f: None for f in INFRASTRUCTURE_FIELDS} | {"driver_version": "535.104.05", "image_digest": "sha256:a"}
ENV_B = ENV_A | {"driver_version": "550.54.15"}
RULE = Policy(confirm_nights=1)
"""The median/MAD rule alone: a night outside the noise opens a regression the morning after."""


def series(levels: list[float], noise: float = 0.005, seed: int = 1, envs: list[dict] | None = None) -> list[Night]:
    """One configuration's nights: level x (1 + gaussian noise of ``noise`` relative sigma)."""
    rng = random.Random(seed)
    return [
        Night(
            START + timedelta(days=i),
            f"scheduled__{i}",
            level * (1 + rng.gauss(0, noise)),
            (envs[i] if envs else ENV_A),
        )
        for i, level in enumerate(levels)
    ]


def kinds(verdicts) -> list[str]:
    return [v.kind for v in verdicts]


# --------------------------------------------------------------------------- pure


@pytest.mark.parametrize("seed", range(10))
def test_steady_history_with_noise_raises_nothing(seed):
    verdicts = judge_series(series([1000.0] * 60, seed=seed))
    assert "new" not in kinds(verdicts)
    assert kinds(verdicts)[:5] == ["insufficient_history"] * 5
    assert set(kinds(verdicts)[5:]) == {"steady"}


@pytest.mark.parametrize("seed", range(5))
def test_the_rule_alone_alerts_a_five_percent_step_once_the_morning_after(seed):
    verdicts = judge_series(series([1000.0] * 30 + [950.0] * 20, seed=seed), RULE)
    new = [i for i, v in enumerate(verdicts) if v.kind == "new"]
    assert new == [30]
    step = verdicts[30]
    assert step.direction == "slower" and step.change_pct == pytest.approx(-5, abs=1.5)
    assert step.robust_z <= -3.5 and not step.environment_changed and step.first_bad_night is None
    assert set(kinds(verdicts)[31:]) == {"continuing"}  # the same regression, not a new alert each night


@pytest.mark.parametrize("seed", range(5))
def test_a_five_percent_step_is_suspected_then_confirmed_naming_its_first_night(seed):
    nights = series([1000.0] * 30 + [950.0] * 20, seed=seed)
    verdicts = judge_series(nights)
    assert kinds(verdicts)[:30] == ["insufficient_history"] * 5 + ["steady"] * 25
    assert verdicts[30].kind == "suspected" and verdicts[30].first_bad_night is None  # one night: not yet
    assert [i for i, v in enumerate(verdicts) if v.kind == "new"] == [31]
    step = verdicts[31]
    assert step.first_bad_night == nights[30].night and step.night == nights[31].night
    assert step.direction == "slower" and step.change_pct == pytest.approx(-5, abs=1.5)
    assert kinds(verdicts)[32] == "continuing" or verdicts[32].change_pct < -6  # a further move is only suspected
    assert set(kinds(verdicts)[33:]) == {"continuing"}
    assert "first bad night " + nights[30].night.isoformat() in describe_verdict(KEY, step)
    assert "not confirmed by change points" in describe_verdict(KEY, verdicts[30])


@pytest.mark.parametrize("seed", range(5))
def test_single_odd_nights_are_suspected_never_alerted(seed):
    levels = [1000.0] * 20 + [920.0] + [1000.0] * 9 + [1080.0] + [1000.0] * 9 + [900.0] + [1000.0] * 9
    verdicts = judge_series(series(levels, seed=seed))
    assert "new" not in kinds(verdicts)
    assert [kinds(verdicts)[i] for i in (20, 30, 40)] == ["suspected"] * 3
    assert len([v for v in judge_series(series(levels, seed=seed), RULE) if v.kind == "new"]) == 3  # the rule alone


def test_a_step_with_a_driver_change_is_labelled_as_environment_change():
    envs = [ENV_A] * 30 + [ENV_B] * 10
    verdicts = judge_series(series([1000.0] * 30 + [950.0] * 10, envs=envs))
    step = verdicts[31]  # confirmed the second night: the driver changed on the first, compared from the night before
    assert step.kind == "new" and step.environment_changed
    assert step.environment_changes == ("driver_version: 535.104.05 -> 550.54.15",)
    assert verdicts[30].kind == "suspected" and verdicts[30].environment_changed
    rule = judge_series(series([1000.0] * 30 + [950.0] * 10, envs=envs), RULE)[30]
    assert rule.kind == "new" and rule.environment_changes == step.environment_changes


def test_a_driver_change_without_a_step_is_no_alert():
    envs = [ENV_A] * 30 + [ENV_B] * 10
    verdicts = judge_series(series([1000.0] * 40, envs=envs))
    assert "new" not in kinds(verdicts)
    assert verdicts[30].environment_changed  # noted, but not an alert


def test_one_bad_night_opens_and_the_next_good_night_closes():
    levels = [1000.0] * 20 + [900.0] + [1000.0] * 5
    verdicts = judge_series(series(levels), RULE)
    assert kinds(verdicts)[20:22] == ["new", "recovered"]
    assert verdicts[21].open_regression_id == 20


def test_a_further_drop_while_open_is_a_new_regression():
    levels = [1000.0] * 20 + [950.0] * 5 + [900.0] * 5
    verdicts = judge_series(series(levels), RULE)
    assert [i for i, v in enumerate(verdicts) if v.kind == "new"] == [20, 25]


def test_a_speedup_is_reported_as_faster():
    verdicts = judge_series(series([1000.0] * 20 + [1060.0] * 3), RULE)
    assert verdicts[20].kind == "new" and verdicts[20].direction == "faster"
    confirmed = judge_series(series([1000.0] * 20 + [1060.0] * 3))
    assert kinds(confirmed)[20:22] == ["suspected", "new"] and confirmed[21].direction == "faster"
    assert confirmed[21].first_bad_night == START + timedelta(days=20)


def test_an_outlier_in_the_baseline_does_not_hide_a_step():
    nights = series([1000.0] * 14)
    nights[5] = Night(nights[5].night, nights[5].run_id, 700.0, ENV_A)  # one broken night
    tonight = Night(START + timedelta(days=14), "tonight", 950.0, ENV_A)
    assert judge_night(nights, tonight, RULE).kind == "new"
    assert judge_night(nights, tonight).kind == "suspected"  # one bad night: confirmed by none after it


def test_baseline_uses_the_window_and_a_mad_floor():
    centre, mad = robust_baseline([100.0] * 10, floor_pct=0.25)
    assert centre == 100.0 and mad == pytest.approx(0.25)
    nights = series([2000.0] * 30 + [1000.0] * 14)
    verdict = judge_night(nights, Night(START + timedelta(days=44), "t", 1000.0, ENV_A), Policy(window=14))
    assert verdict.baseline_nights == 14 and verdict.kind == "steady"  # only the last 14 nights count


def test_policy_refuses_nonsense():
    with pytest.raises(ValueError):
        Policy(window=3, min_nights=5)
    with pytest.raises(ValueError):
        Policy(z_threshold=0)
    with pytest.raises(ValueError):
        Policy(confirm_nights=0)
    with pytest.raises(ValueError):
        Policy(change_pvalue=1.5)
    assert Policy().confirms and not RULE.confirms
    assert (Policy().history_nights, RULE.history_nights) == (30, 14)


# ---- fabric or framework: the all-reduce probe of the same night and topology
GIB = 1 << 30


def test_labels_follow_the_rules():
    from dlperf_core.measure.regression import FabricNight, Verdict, fabric_dropped, label_regression

    nights = [FabricNight(date(2026, 1, 1 + i), f"r{i}", 180.0 + (i % 3) * 0.5) for i in range(14)]
    assert fabric_dropped(nights, FabricNight(date(2026, 1, 20), "t", 150.0)) is True
    assert fabric_dropped(nights, FabricNight(date(2026, 1, 20), "t", 180.4)) is False
    assert fabric_dropped(nights, FabricNight(date(2026, 1, 20), "t", 210.0)) is False  # faster is no culprit
    assert fabric_dropped(nights[:3], FabricNight(date(2026, 1, 20), "t", 150.0)) is None  # too little history
    assert fabric_dropped(nights, None) is None

    def slower(*environment_changes: str) -> Verdict:
        """A new regression to 95 samples/s whose environment changed by ``environment_changes``."""
        return Verdict(
            "new", date(2026, 1, 20), "t", 95.0, environment_changed=True, environment_changes=environment_changes
        )

    image = slower("image_digest: sha256:a -> sha256:b")
    assert label_regression(image, True) == "fabric"
    assert label_regression(image, False) == "framework" == label_regression(image, None)
    assert label_regression(slower("driver_version: 550 -> 560"), False) == "unexplained"


# --------------------------------------------------------------------------- what a run decides (pure)


KEY = "pt/resnet50/amp/b256/1n8g"
CONFIG = Configuration(
    framework="pt", model="resnet50", precision="amp", batch_size_per_device=256, variant="", nodes=1, gpus_per_node=8
)
INFRA_A = {"framework_version": "2.5.0", "image_digest": "sha256:a", "driver_version": "550"}
INFRA_B = INFRA_A | {"framework_version": "2.6.0"}
NIGHT_20 = START + timedelta(days=20)


def rows(levels: list[float], key: str = KEY, env_id: int | None = 1, **overrides) -> list[NightlyRow]:
    """Nightly rows of ``key``, one a night from START, at ``levels`` (no noise: medians are exact)."""
    return [
        NightlyRow(
            **{
                "case_key": key,
                "night": START + timedelta(days=i),
                "run_id": f"scheduled__{i}",
                "median_throughput": level,
                "n": 3,
                "n_failed": 0,
                "run_status": "success",
                "environment_id": env_id,
                **overrides,
            }
        )
        for i, level in enumerate(levels)
    ]


def wiggle(n: int, level: float = 1000.0) -> list[float]:
    return [level * (1 + 0.004 * ((i % 5) - 2)) for i in range(n)]


def tonight(median: float, n: int = 3, env_id: int | None = 1, key: str = KEY, config=CONFIG) -> CaseResult:
    return CaseResult(key, config, median, n, env_id)


def decide(
    case: CaseResult, history: list[NightlyRow], trigger: str = "scheduled", run_id: str = "scheduled__20", **kwargs
):
    """What run ``run_id`` decides for ``case``; by today's rule alone (``RULE``) unless ``policy`` says otherwise:
    the open / touch / close mechanics and the labels are the same under both."""
    kwargs.setdefault("environments", {1: INFRA_A, 2: INFRA_B})
    kwargs.setdefault("policy", RULE)
    return decide_run(
        run_id=run_id, trigger=trigger, night=NIGHT_20, cases=[case], history={case.case_key: history}, **kwargs
    )


def test_a_good_night_is_finished_with_ok_repeats_and_no_failure():
    good = rows([1000.0])[0]
    assert is_good_night(good, KEY)
    assert not is_good_night(good, "other/key")
    assert not is_good_night(NightlyRow(**{**good.__dict__, "n_failed": 1}), KEY)
    assert not is_good_night(NightlyRow(**{**good.__dict__, "n": 0}), KEY)
    assert not is_good_night(NightlyRow(**{**good.__dict__, "run_status": "running"}), KEY)
    assert is_good_night(NightlyRow(**{**good.__dict__, "run_status": "failed"}), KEY)  # finished, case was fine


def test_the_baseline_is_the_last_window_of_good_nights():
    history = rows(wiggle(20))
    history[18] = NightlyRow(**{**history[18].__dict__, "n_failed": 1, "median_throughput": 10.0})
    history[19] = NightlyRow(**{**history[19].__dict__, "run_status": "running", "median_throughput": 10.0})
    baseline = good_nights(history + rows([5.0], key="other/key"), KEY, Policy(window=14, confirm_nights=1))
    assert [r.run_id for r in baseline] == [f"scheduled__{i}" for i in range(4, 18)]
    read = good_nights(history, KEY)  # with the change points: their window, 30 nights
    assert [r.run_id for r in read] == [f"scheduled__{i}" for i in range(18)]
    verdict = decide(tonight(1000.0), history).decisions[0].verdict
    assert verdict.kind == "steady" and verdict.baseline_nights == 14  # the bad nights did not count


def test_a_new_regression_on_a_scheduled_night_is_opened_with_its_label():
    decided = decide(tonight(900.0), rows(wiggle(20)))
    (decision,) = decided.decisions
    assert decided.scheduled and decision.verdict.kind == "new" and decision.action == "open"
    assert decision.label == "unexplained" and decision.closed_reason is None
    assert decision.configuration == CONFIG and decision.case_key == KEY
    assert decided.counts == {"new": 1} and decided.new == (decision,)
    assert decision.describe().startswith(f"{KEY}: new, median 900.00 vs 1000.00 (-10.00%, robust z ")
    assert decision.describe().endswith(", 14 nights) [unexplained]")


def test_labels_come_from_the_fabric_and_the_framework():
    history = rows(wiggle(20))
    asked = []

    def fabric(nodes, gpus):
        asked.append((nodes, gpus))
        return True

    assert decide(tonight(900.0), history, fabric=fabric).decisions[0].label == "fabric"
    assert asked == [(1, 8)]
    assert decide(tonight(900.0), history, fabric={(1, 8): True}).decisions[0].label == "fabric"
    assert decide(tonight(900.0), history, fabric={(2, 8): True}).decisions[0].label == "unexplained"
    framework = decide(tonight(900.0, env_id=2), history, fabric={(1, 8): False}).decisions[0]
    assert framework.label == "framework"
    assert framework.verdict.environment_changes == ("framework_version: 2.5.0 -> 2.6.0",)
    asked.clear()
    steady = decide(tonight(1001.0), history, fabric=fabric).decisions[0]
    assert steady.label is None and steady.action is None and asked == []  # the fabric is asked only to explain


def test_an_open_regression_is_touched_while_slow_and_closed_when_back():
    history = rows(wiggle(20))
    open_ = OpenRegression(7, 900.0, 1000.0, 4.0, "slower", run_id="scheduled__19")
    still = decide(tonight(902.0), history, open_regressions={KEY: open_}).decisions[0]
    assert (still.verdict.kind, still.action, still.verdict.open_regression_id) == ("continuing", "touch", 7)
    assert still.label is None
    back = decide(tonight(999.0), history, open_regressions={KEY: open_}).decisions[0]
    assert (back.verdict.kind, back.action, back.closed_reason) == (
        "recovered",
        "close",
        "recovered in run scheduled__20",
    )
    further = decide(tonight(800.0), history, open_regressions={KEY: open_}).decisions[0]
    assert (further.verdict.kind, further.action) == ("new", "open")


def test_the_run_that_opened_a_regression_judged_again_opens_it_again():
    open_ = OpenRegression(7, 900.0, 1000.0, 4.0, "slower", run_id="scheduled__20")
    again = decide(tonight(900.0), rows(wiggle(20)), open_regressions={KEY: open_}).decisions[0]
    assert (again.verdict.kind, again.action, again.verdict.open_regression_id) == ("new", "open", None)


def test_a_manual_run_is_judged_but_decides_nothing():
    history = rows(wiggle(20))
    open_ = OpenRegression(7, 900.0, 1000.0, 4.0, "slower", run_id="scheduled__19")
    decided = decide(tonight(800.0), history, trigger="manual", run_id="manual__1", fabric={(1, 8): True})
    (decision,) = decided.decisions
    assert not decided.scheduled and decision.verdict.kind == "new" and decision.label == "fabric"
    assert decision.action is None
    result = decided.result(0)
    assert result.stored is False and result.verdicts == {"new": 1} and result.judged == 1
    (listed,) = result.new_regressions
    assert listed.case_key == KEY and listed.label == "fabric" and listed.description == decision.describe()
    back = decide(tonight(1000.0), history, trigger="manual", open_regressions={KEY: open_}).decisions[0]
    assert back.verdict.kind == "recovered" and back.action is None  # the nightly series' regression stays open


def test_cases_without_an_ok_repeat_and_short_histories():
    decided = decide_run(
        run_id="scheduled__20",
        trigger="scheduled",
        night=NIGHT_20,
        cases=[tonight(None, n=0), tonight(1000.0, key="pt/resnet50/amp/b256/1n1g")],
        history={KEY: rows(wiggle(20)), "pt/resnet50/amp/b256/1n1g": rows(wiggle(3), key="pt/resnet50/amp/b256/1n1g")},
    )
    (decision,) = decided.decisions
    assert decision.case_key == "pt/resnet50/amp/b256/1n1g" and decision.action is None
    assert decision.verdict.kind == "insufficient_history"
    assert decision.describe() == "pt/resnet50/amp/b256/1n1g: 3 good nights so far, no verdict yet"


def test_the_environments_needed_are_the_baselines_and_tonights():
    history = rows(wiggle(30), env_id=5)[:16] + rows(wiggle(14), env_id=6)
    cases = [tonight(1000.0, env_id=9), tonight(1000.0, n=0, env_id=10, key="x")]
    assert environment_ids(cases, {KEY: history}, RULE) == {6, 9}
    assert environment_ids(cases, {KEY: history}, Policy(window=20, confirm_nights=1)) == {5, 6, 9}
    assert environment_ids(cases, {KEY: history}) == {5, 6, 9}  # the change points' 30 nights


def test_the_stored_alert_of_a_new_regression():
    (decision,) = decide(tonight(900.0, env_id=2), rows(wiggle(20)), fabric={(1, 8): False}).decisions
    alert = decision.alert("dlperf_benchmark", 41)
    assert isinstance(alert, RegressionAlert)
    assert (alert.id, alert.dag_id, alert.run_id, alert.case_key, alert.label, alert.direction, alert.night) == (
        41,
        "dlperf_benchmark",
        "scheduled__20",
        KEY,
        "framework",
        "slower",
        date(2026, 1, 21),
    )
    assert (alert.framework, alert.batch_size_per_device, alert.variant, alert.nodes, alert.gpus_per_node) == (
        "pt",
        256,
        "",
        1,
        8,
    )
    assert alert.environment_changes == "framework_version: 2.5.0 -> 2.6.0" and alert.environment_id == 2
    assert alert.baseline_nights == 14 and alert.change_pct == pytest.approx(-10.0)
    assert (
        describe_regression(alert)
        == alert.describe()
        == (
            f"{KEY}: slower by 10.0% on 2026-01-21 (median 900.00 vs baseline 1000.00 over 14 nights, robust z "
            f"{alert.robust_z:+.1f}); an environment change (framework_version: 2.5.0 -> 2.6.0); run scheduled__20"
        )
    )
    # its JSON form (what a notifier's context carries): the regressions table's names, the night as ISO text
    form = alert.to_json()
    assert form["night"] == "2026-01-21" and form["case_key"] == KEY and form["environment_changed"] is True
    assert "kind" not in form and "open_regression_id" not in form
    assert RegressionAlert.from_json(json.loads(json.dumps(form))) == alert
    steady = decide(tonight(1000.0), rows(wiggle(20))).decisions[0]
    with pytest.raises(ValueError, match="no new regression"):
        steady.alert("dlperf_benchmark", None)


def test_a_drop_is_suspected_the_first_night_and_opened_the_second_naming_its_first_night():
    """The default policy: the rule flags the first 10% night (suspected: nothing opened), the second confirms it;
    the framework changed on the first bad night, and the regression is put down to it the night it is opened."""
    first = decide(tonight(900.0, env_id=2), rows(wiggle(20)), policy=Policy(), fabric={(1, 8): False}).decisions[0]
    assert (first.verdict.kind, first.action, first.label) == ("suspected", None, None)
    assert "not confirmed by change points" in first.describe()
    history = rows(wiggle(19) + [900.0])
    history[19] = NightlyRow(**{**history[19].__dict__, "environment_id": 2})
    decided = decide(tonight(905.0, env_id=2), history, policy=Policy(), fabric={(1, 8): False})
    (decision,) = decided.decisions
    verdict = decision.verdict
    assert (verdict.kind, decision.action, decision.label) == ("new", "open", "framework")
    assert verdict.first_bad_night == date(2026, 1, 20) and verdict.night == NIGHT_20 == date(2026, 1, 21)
    assert verdict.environment_changes == ("framework_version: 2.5.0 -> 2.6.0",)  # from the night before the change
    alert = decision.alert("dlperf_benchmark", 5)
    assert alert.first_bad_night == date(2026, 1, 20) and alert.night == date(2026, 1, 21)
    assert ", first bad night 2026-01-20 (median 905.00 vs baseline " in alert.describe()
    form = alert.to_json()
    assert form["first_bad_night"] == "2026-01-20"
    assert RegressionAlert.from_json(json.loads(json.dumps(form))) == alert
    assert RegressionAlert.__version__ == 2
    old = {k: v for k, v in form.items() if k != "first_bad_night"}  # what a version 1 dlperf wrote
    assert RegressionAlert.deserialize(old, 1) == replace(alert, first_bad_night=None)
    # a manual run: one night, so only suspected, and nothing listed as new
    manual = decide(tonight(800.0), rows(wiggle(20)), trigger="manual", run_id="manual__1", policy=Policy())
    assert manual.result(0).verdicts == {"suspected": 1} and manual.result(0).new_regressions == ()


def test_the_fabric_is_judged_at_tonights_largest_message_size():
    def figure(size, busbw, run_id, night=None, status=None, nodes=1):
        return FabricFigure(nodes, 8, size, busbw, run_id, night, status)

    past = [figure(GIB, 180.0 + (i % 3) * 0.5, f"r{i}", START + timedelta(days=i), "success") for i in range(14)]
    past += [figure(GIB // 4, 50.0, f"r{i}", START + timedelta(days=i), "success") for i in range(14)]
    now = [
        figure(GIB // 4, 50.0, "t"),
        figure(GIB, 150.0, "t"),
        figure(2 * GIB, None, "t"),
        figure(GIB, 5.0, "t", nodes=2),
    ]
    assert fabric_dropped_tonight(now, past, (1, 8), NIGHT_20, "t") is True
    steady = [figure(GIB // 4, 20.0, "t"), figure(GIB, 180.2, "t")]  # a drop at a smaller size does not count
    assert fabric_dropped_tonight(steady, past, (1, 8), NIGHT_20, "t") is False
    assert fabric_dropped_tonight(now, past, (2, 8), NIGHT_20, "t") is None  # no history of 2n8g
    assert fabric_dropped_tonight(now, past, (4, 8), NIGHT_20, "t") is None  # no probe of 4n8g tonight
    running = [figure(f.size_bytes, f.busbw_gbs, f.run_id, f.night, "running") for f in past]
    assert fabric_dropped_tonight(now, running, (1, 8), NIGHT_20, "t") is None  # unfinished runs are no history


def test_store_rows_become_the_core_types():
    """Each core type has its typed constructor from the store's row (no dicts, no pandas in between)."""
    stamp = datetime(2026, 1, 21, 2, tzinfo=UTC)
    common = {"dag_id": "d", "run_id": "r", "case_key": KEY, **CONFIG.__dict__, "compile": False}
    summary = CaseSummaryRow(
        **common,
        total_gpus=8,
        n=2,
        n_failed=0,
        median_throughput=1.5,
        mean_throughput=1.5,
        min_throughput=1.4,
        max_throughput=1.6,
        speedup=None,
        scaling_efficiency=None,
        stdev_throughput=0.1,
        cv=0.07,
        gpu_memory_peak_mb=None,
        mfu=None,
        energy_per_sample_j=None,
        environment_id=None,
        unreliable=False,
        unreliable_reason=None,
    )
    case = CaseResult.from_summary(summary)
    assert case == CaseResult(KEY, CONFIG, 1.5, 2, None) and case.topology == (1, 8)
    history = HistoryRow(
        **common,
        night=START,
        started_at=stamp,
        run_status="failed",
        median_throughput=None,
        n=0,
        n_failed=3,
        speedup=None,
        scaling_efficiency=None,
        mfu=None,
        energy_per_sample_j=None,
        environment_id=4,
    )
    night = NightlyRow.from_history(history)
    assert night == NightlyRow(KEY, START, "r", None, 0, 3, "failed", 4) and not is_good_night(night, KEY)
    stored = RegressionRow(
        id=3,
        benchmark_run_id=1,
        **{k: v for k, v in common.items() if k != "compile"},
        night=START,
        median_throughput=9.0,
        baseline_median=10.0,
        baseline_mad=0.1,
        baseline_nights=14,
        change_pct=-10.0,
        robust_z=-7.0,
        direction="slower",
        environment_changed=False,
        environment_changes=None,
        environment_id=None,
        status="open",
        last_seen_run_id="r",
        closed_at=None,
        closed_reason=None,
        created_at=stamp,
        label=None,
        first_bad_night=None,
        accepted_from=None,
    )
    assert OpenRegression.from_stored(stored) == OpenRegression(3, 9.0, 10.0, 0.1, "slower", "r", stored.night)
    assert stored.configuration == CONFIG == summary.configuration == history.configuration
    fabric = {"probe_key": "p", "nodes": 1, "gpus_per_node": 8, "total_gpus": 8, "size_bytes": GIB, "n": 0}
    sizes = {"busbw_gbs": None, "algbw_gbs": None, "time_us": None, "environment_id": None}
    probe = FabricFigure.from_summary(FabricSummaryRow(dag_id="d", run_id="r", **fabric, **sizes))
    assert probe == FabricFigure(1, 8, GIB, None, "r") and probe.night is None
    past = FabricHistoryRow(
        dag_id="d", run_id="r", **fabric, **sizes, night=START, started_at=stamp, run_status="success"
    )
    assert FabricFigure.from_history(past) == FabricFigure(1, 8, GIB, None, "r", START, "success")
