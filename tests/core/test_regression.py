"""Regression detection: median/MAD verdicts on synthetic nightly histories (pure), then the
detect_regressions step against a real PostgreSQL history: a planted 5% slowdown raises exactly one
regression, a step that comes with a driver change is labelled as an environment change, a manual run
stores nothing, and the configured notifier is called."""

from __future__ import annotations

import json
import random
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from airflow.sdk import BaseNotifier

from dlperf_core.environment import INFRASTRUCTURE_FIELDS
from dlperf_core.regression import (
    CaseResult,
    FabricFigure,
    Night,
    NightlyRow,
    OpenRegression,
    Policy,
    RegressionAlert,
    decide_run,
    describe_regression,
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
from helpers import result_record, run_record

START = date(2026, 1, 1)
ENV_A = {f: None for f in INFRASTRUCTURE_FIELDS} | {"driver_version": "535.104.05", "image_digest": "sha256:a"}
ENV_B = ENV_A | {"driver_version": "550.54.15"}


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
def test_a_five_percent_step_alerts_once_at_the_right_night(seed):
    verdicts = judge_series(series([1000.0] * 30 + [950.0] * 20, seed=seed))
    new = [i for i, v in enumerate(verdicts) if v.kind == "new"]
    assert new == [30]
    step = verdicts[30]
    assert step.direction == "slower" and step.change_pct == pytest.approx(-5, abs=1.5)
    assert step.robust_z <= -3.5 and not step.environment_changed
    assert set(kinds(verdicts)[31:]) == {"continuing"}  # the same regression, not a new alert each night


def test_a_step_with_a_driver_change_is_labelled_as_environment_change():
    envs = [ENV_A] * 30 + [ENV_B] * 10
    verdicts = judge_series(series([1000.0] * 30 + [950.0] * 10, envs=envs))
    step = verdicts[30]
    assert step.kind == "new" and step.environment_changed
    assert step.environment_changes == ("driver_version: 535.104.05 -> 550.54.15",)


def test_a_driver_change_without_a_step_is_no_alert():
    envs = [ENV_A] * 30 + [ENV_B] * 10
    verdicts = judge_series(series([1000.0] * 40, envs=envs))
    assert "new" not in kinds(verdicts)
    assert verdicts[30].environment_changed  # noted, but not an alert


def test_one_bad_night_opens_and_the_next_good_night_closes():
    levels = [1000.0] * 20 + [900.0] + [1000.0] * 5
    verdicts = judge_series(series(levels))
    assert kinds(verdicts)[20:22] == ["new", "recovered"]
    assert verdicts[21].open_regression_id == 20


def test_a_further_drop_while_open_is_a_new_regression():
    levels = [1000.0] * 20 + [950.0] * 5 + [900.0] * 5
    verdicts = judge_series(series(levels))
    assert [i for i, v in enumerate(verdicts) if v.kind == "new"] == [20, 25]


def test_a_speedup_is_reported_as_faster():
    verdicts = judge_series(series([1000.0] * 20 + [1060.0] * 3))
    assert verdicts[20].kind == "new" and verdicts[20].direction == "faster"


def test_an_outlier_in_the_baseline_does_not_hide_a_step():
    nights = series([1000.0] * 14)
    nights[5] = Night(nights[5].night, nights[5].run_id, 700.0, ENV_A)  # one broken night
    tonight = Night(START + timedelta(days=14), "tonight", 950.0, ENV_A)
    assert judge_night(nights, tonight).kind == "new"


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


# --------------------------------------------------------------------------- against PostgreSQL

NOTIFIED = "DLPERF_TEST_NOTIFIED_FILE"


class FileNotifier(BaseNotifier):
    """A real notifier for the test: appends what it was given to the file named by $DLPERF_TEST_NOTIFIED_FILE."""

    def notify(self, context):
        import os

        with Path(os.environ[NOTIFIED]).open("a") as out:
            out.write(json.dumps(context["dlperf_regressions"], default=str) + "\n")


CONFIGS = [  # (framework, model, precision, batch, nodes, gpus_per_node, level)
    ("pt", "resnet50", "amp", 256, 1, 8, 20000.0),
    ("pt", "resnet50", "amp", 256, 1, 1, 2600.0),
]


def add_night(
    store,
    i: int,
    *,
    trigger: str = "scheduled",
    slow: dict | None = None,
    env_id=None,
    rng=None,
    run_id: str | None = None,
) -> str:
    """One benchmark run on night ``i``: 3 ok repeats per configuration around its level."""
    rng = rng or random.Random(i)
    started = datetime(2026, 1, 1, 2, 0, tzinfo=UTC) + timedelta(days=i)
    run_id = run_id or f"{trigger}__2026-{i:03d}"
    run = run_record(
        dag_id="dlperf_benchmark",
        run_id=run_id,
        suite="nightly",
        trigger=trigger,
        started_at=started,
        finished_at=started + timedelta(hours=1),
        status="success",
    )
    store.upsert_run(run)
    records = []
    for fw, model, prec, batch, nodes, gpn, level in CONFIGS:
        key = f"{fw}/{model}/{prec}/b{batch}/{nodes}n{gpn}g"
        factor = (slow or {}).get(key, 1.0)
        records.extend(
            result_record(
                case_key=key,
                repeat=repeat,
                throughput=level * factor * (1 + rng.gauss(0, 0.004)),
                started_at=started + timedelta(minutes=repeat),
                environment_id=env_id,
                benchmark_run=run,
            )
            for repeat in range(3)
        )
    store.upsert_results(records)
    return run_id


@pytest.fixture
def history_db(pg_url, monkeypatch, tmp_path):
    from dlperf_core.environment import capture_local
    from dlperf_core.storage import ResultStore

    monkeypatch.setenv("DLPERF_DB_URL", pg_url)
    monkeypatch.setenv("DLPERF_REGRESSION_NOTIFIERS", f"{__name__}.FileNotifier")
    monkeypatch.setenv(NOTIFIED, str(tmp_path / "notified.jsonl"))
    store = ResultStore(pg_url)
    store.ensure_schema()
    section = "@@dlperf:hostname@@\nnode0\n@@dlperf:python@@\n" + json.dumps(
        {"frameworks": {"torch": "2.5.0"}, "env": {"CUDA_VERSION": "12.6"}}
    )
    env_a = store.upsert_environment(capture_local("pytorch_reference", section))
    env_b = store.upsert_environment(capture_local("pytorch_reference", section.replace("2.5.0", "2.6.0")))
    for i in range(20):
        add_night(store, i, env_id=env_a)
    yield store, env_a, env_b, tmp_path / "notified.jsonl"
    store.dispose()


def notified(path: Path) -> list[list[dict]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.postgres
def test_planted_slowdown_raises_exactly_one_regression(history_db):
    from dlperf_airflow.regression_step import detect_step
    from dlperf_core.model import RunIds

    store, env_a, env_b, notified_file = history_db
    slow_key = "pt/resnet50/amp/b256/1n8g"
    run_id = add_night(store, 20, slow={slow_key: 0.95}, env_id=env_a)
    result = detect_step(RunIds("dlperf_benchmark", run_id))
    assert result.stored and result.verdicts == {"new": 1, "steady": 1}
    stored = store.regressions()
    assert len(stored) == 1
    row = stored.iloc[0]
    assert row["case_key"] == slow_key and row["direction"] == "slower" and row["status"] == "open"
    assert row["change_pct"] == pytest.approx(-5, abs=1.0) and row["baseline_nights"] == 14
    assert not row["environment_changed"] and row["night"] == date(2026, 1, 21)
    assert row["trigger"] == "scheduled"
    assert row["label"] == "unexplained"  # no probe of the fabric that night, the framework unchanged
    calls = notified(notified_file)
    assert len(calls) == 1 and [r["case_key"] for r in calls[0]] == [slow_key]

    # the same DAG run judged again: no duplicate row
    detect_step(RunIds("dlperf_benchmark", run_id), notify=lambda _regressions, _context: 0)
    assert len(store.regressions(open_only=False)) == 1

    # the next night is still slow: the same regression, seen again, no new alert
    run_2 = add_night(store, 21, slow={slow_key: 0.95}, env_id=env_a)
    assert detect_step(RunIds("dlperf_benchmark", run_2)).verdicts == {"continuing": 1, "steady": 1}
    assert len(store.regressions(open_only=False)) == 1
    assert store.regressions().iloc[0]["last_seen_run_id"] == run_2
    assert len(notified(notified_file)) == 1

    # back to normal: closed
    run_3 = add_night(store, 22, env_id=env_a)
    assert detect_step(RunIds("dlperf_benchmark", run_3)).verdicts == {"recovered": 1, "steady": 1}
    assert store.regressions().empty
    closed = store.regressions(open_only=False).iloc[0]
    assert closed["status"] == "closed" and run_3 in closed["closed_reason"]


@pytest.mark.postgres
def test_step_with_framework_change_is_labelled_environment_change(history_db):
    from dlperf_airflow.regression_step import detect_step
    from dlperf_core.model import RunIds

    store, env_a, env_b, notified_file = history_db
    run_id = add_night(store, 20, slow={"pt/resnet50/amp/b256/1n1g": 0.94}, env_id=env_b)
    detect_step(RunIds("dlperf_benchmark", run_id))
    stored = store.regressions(run_id=run_id)
    assert len(stored) == 1
    row = stored.iloc[0]
    assert row["case_key"] == "pt/resnet50/amp/b256/1n1g" and row["environment_changed"]
    assert row["environment_changes"] == "framework_version: 2.5.0 -> 2.6.0"
    assert row["environment_id"] == env_b
    assert row["label"] == "framework"  # the framework version changed, and nothing says the fabric did
    alert = notified(notified_file)[0][0]
    assert alert["environment_changed"] is True and alert["environment_changes"] == row["environment_changes"]
    assert alert["label"] == "framework"


@pytest.mark.postgres
def test_manual_run_is_judged_but_stores_and_alerts_nothing(history_db):
    from dlperf_airflow.regression_step import detect_step
    from dlperf_core.model import RunIds

    store, env_a, _, notified_file = history_db
    run_id = add_night(
        store, 20, trigger="manual", slow={"pt/resnet50/amp/b256/1n8g": 0.95}, env_id=env_a, run_id="manual__2026-01-21"
    )
    result = detect_step(RunIds("dlperf_benchmark", run_id))
    assert not result.stored and result.verdicts == {"new": 1, "steady": 1}
    assert [r.case_key for r in result.new_regressions] == ["pt/resnet50/amp/b256/1n8g"]
    assert store.regressions(open_only=False).empty
    assert notified(notified_file) == []
    # and a manual run is not part of the nightly history
    assert "manual__2026-01-21" not in set(store.history(nights=None)["run_id"])


def test_notifier_configuration(monkeypatch):
    from dlperf_airflow.notifiers import LogRegressionNotifier, configured_notifiers

    monkeypatch.delenv("DLPERF_REGRESSION_NOTIFIERS", raising=False)
    assert [type(n) for n in configured_notifiers()] == [LogRegressionNotifier]
    assert configured_notifiers("none") == []
    chosen = configured_notifiers(
        '[{"class": "dlperf_airflow.notifiers.LogRegressionNotifier", "kwargs": {"level": "error"}}]'
    )
    assert chosen[0].level == 40
    with pytest.raises(ValueError, match="BaseNotifier"):
        configured_notifiers("json.JSONDecoder")
    with pytest.raises(ValueError, match="dotted path"):
        configured_notifiers("LogRegressionNotifier")


# ---- fabric or framework: the all-reduce probe of the same night and topology
GIB = 1 << 30


def add_probe(store, run_id: str, night: int, busbw: float, nodes: int = 1, gpn: int = 8, rng=None) -> None:
    """The night's all-reduce probe of one topology: two repeats around ``busbw`` GB/s at 256 MiB and 1 GiB."""
    from dlperf_core.storage import ProbeRecord, ProbeSizeRecord

    rng = rng or random.Random(1000 + night)
    started = datetime(2026, 1, 1, 2, 30, tzinfo=UTC) + timedelta(days=night)
    for repeat in range(2):
        value = busbw * (1 + rng.gauss(0, 0.005))
        sizes = tuple(
            ProbeSizeRecord(size, size / (value * 1e9) * 1e6 * 8 / 14, value * 8 / 14, value)
            for size in (GIB // 4, GIB)
        )
        store.upsert_probe(
            ProbeRecord(
                dag_id="dlperf_benchmark",
                run_id=run_id,
                probe_key=f"allreduce_probe/allreduce/fp32/b1/{nodes}n{gpn}g",
                nodes=nodes,
                gpus_per_node=gpn,
                repeat=repeat,
                status="ok",
                ranks=nodes * gpn,
                backend="nccl",
                dtype="float32",
                avg_busbw_gbs=value,
                started_at=started + timedelta(minutes=repeat),
                sizes=sizes,
            )
        )


@pytest.fixture
def fabric_history_db(history_db):
    """history_db with 20 good nights of the 1n8g probe (about 180 GB/s bus bandwidth)."""
    store, env_a, env_b, notified_file = history_db
    for i in range(20):
        add_probe(store, f"scheduled__2026-{i:03d}", i, 180.0)
    return store, env_a, env_b, notified_file


@pytest.mark.postgres
def test_a_slowdown_with_a_slower_fabric_is_put_down_to_the_fabric(fabric_history_db):
    """Night 20: 1n8g 5% slower, and its all-reduce bus bandwidth fell from 180 to 120 GB/s (a link down to a
    slower path): the regression is the fabric's, even though nothing in the framework changed."""
    from dlperf_airflow.regression_step import detect_step
    from dlperf_core.model import RunIds

    store, env_a, _, notified_file = fabric_history_db
    run_id = add_night(store, 20, slow={"pt/resnet50/amp/b256/1n8g": 0.95}, env_id=env_a)
    add_probe(store, run_id, 20, 120.0)
    detect_step(RunIds("dlperf_benchmark", run_id))
    (row,) = store.regressions(run_id=run_id).itertuples()
    assert (row.case_key, row.label) == ("pt/resnet50/amp/b256/1n8g", "fabric")
    assert notified(notified_file)[-1][0]["label"] == "fabric"
    fabric = store.fabric_history_rows(nodes=1, gpus_per_node=8)
    assert {f.size_bytes for f in fabric} == {GIB // 4, GIB} and len(fabric) == 2 * 21
    assert max(f.busbw_gbs for f in fabric if f.run_id == run_id) == pytest.approx(120.0, rel=0.02)
    assert {f.night for f in fabric if f.run_id == run_id} == {date(2026, 1, 21)}
    assert all(f.started_at.tzinfo is not None and f.run_status == "success" for f in fabric)
    assert store.fabric_history_rows(nodes=1, gpus_per_node=8, before=datetime(2026, 1, 2, tzinfo=UTC)) == [
        f for f in fabric if f.night == START
    ]


@pytest.mark.postgres
def test_a_slowdown_with_a_new_framework_and_a_steady_fabric_is_the_frameworks(fabric_history_db):
    from dlperf_airflow.regression_step import detect_step
    from dlperf_core.model import RunIds

    store, _, env_b, _ = fabric_history_db
    run_id = add_night(store, 20, slow={"pt/resnet50/amp/b256/1n8g": 0.95}, env_id=env_b)
    add_probe(store, run_id, 20, 180.5)  # the fabric as every night
    detect_step(RunIds("dlperf_benchmark", run_id))
    (row,) = store.regressions(run_id=run_id).itertuples()
    assert row.label == "framework" and row.environment_changes == "framework_version: 2.5.0 -> 2.6.0"


def test_labels_follow_the_rules():
    from dlperf_core.regression import FabricNight, Verdict, fabric_dropped, label_regression

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
    kwargs.setdefault("environments", {1: INFRA_A, 2: INFRA_B})
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
    baseline = good_nights(history + rows([5.0], key="other/key"), KEY, Policy(window=14))
    assert [r.run_id for r in baseline] == [f"scheduled__{i}" for i in range(4, 18)]
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
    assert environment_ids(cases, {KEY: history}) == {6, 9}
    assert environment_ids(cases, {KEY: history}, Policy(window=20)) == {5, 6, 9}


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


def test_notify_regressions_hands_the_notifiers_json(monkeypatch, caplog):
    """The alerts become JSON where they reach the notifiers: the context's list, and its lines as text; the log
    notifier reads the JSON back."""
    from dlperf_airflow.notifiers import notify_regressions

    (decision,) = decide(tonight(900.0), rows(wiggle(20))).decisions
    alert = decision.alert("dlperf_benchmark", 7)
    seen = []

    class Keep(BaseNotifier):
        def notify(self, context):
            seen.append(json.loads(json.dumps(context["dlperf_regressions"])))  # plain JSON, nothing else
            seen.append(context["dlperf_regressions_text"])

    monkeypatch.setattr(f"{__name__}.Keep", Keep, raising=False)
    monkeypatch.setenv("DLPERF_REGRESSION_NOTIFIERS", f"{__name__}.Keep,dlperf_airflow.notifiers.LogRegressionNotifier")
    assert notify_regressions([]) == 0
    with caplog.at_level("WARNING", logger="dlperf.regressions"):
        assert notify_regressions([alert], {"ts": "now"}) == 2
    assert seen == [[alert.to_json()], alert.describe()]
    assert [RegressionAlert.from_json(item) for item in seen[0]] == [alert]
    assert f"dlperf regression: {alert.describe()}" in caplog.text


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
    )
    assert OpenRegression.from_stored(stored) == OpenRegression(3, 9.0, 10.0, 0.1, "slower", "r")
    assert stored.configuration == CONFIG == summary.configuration == history.configuration
    fabric = {"probe_key": "p", "nodes": 1, "gpus_per_node": 8, "total_gpus": 8, "size_bytes": GIB, "n": 0}
    sizes = {"busbw_gbs": None, "algbw_gbs": None, "time_us": None, "environment_id": None}
    probe = FabricFigure.from_summary(FabricSummaryRow(dag_id="d", run_id="r", **fabric, **sizes))
    assert probe == FabricFigure(1, 8, GIB, None, "r") and probe.night is None
    past = FabricHistoryRow(
        dag_id="d", run_id="r", **fabric, **sizes, night=START, started_at=stamp, run_status="success"
    )
    assert FabricFigure.from_history(past) == FabricFigure(1, 8, GIB, None, "r", START, "success")
