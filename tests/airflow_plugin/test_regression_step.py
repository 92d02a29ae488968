"""The detect_regressions step (dlperf_airflow.regression_step) against a real PostgreSQL history: a planted 5%
slowdown is suspected the first night and raises exactly one regression the second (change points confirm it and
name the first bad night), a step that comes with a framework change is labelled as such, a slower
fabric the same night takes the blame, a manual run stores nothing; and the notifiers (dlperf_airflow.notifiers)
are configured and handed JSON. The rules themselves, pure: tests/core/measure/test_regression.py."""

from __future__ import annotations

import json
import os
import random
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from airflow.sdk import BaseNotifier

from dlperf_airflow.notifiers import LogRegressionNotifier, configured_notifiers, notify_regressions
from dlperf_airflow.regression_step import accept_step, detect_step
from dlperf_cli.main import main as dlperf
from dlperf_core.cluster.environment import capture_local
from dlperf_core.measure.regression import RegressionAlert
from dlperf_core.model import RunIds
from dlperf_core.storage import FabricRecord, FabricSizeRecord, ResultStore
from dlperf_core.storage.models import ACCEPTED
from helpers import result_record, run_record

START = date(2026, 1, 1)
GIB = 1 << 30
ALERT = RegressionAlert(  # a new regression as detect_regressions hands it to the notifiers
    id=7,
    dag_id="dlperf_benchmark",
    run_id="scheduled__20",
    case_key="pt/resnet50/amp/b256/1n8g",
    framework="pt",
    model="resnet50",
    precision="amp",
    batch_size_per_device=256,
    variant="",
    nodes=1,
    gpus_per_node=8,
    night=date(2026, 1, 21),
    median_throughput=900.0,
    baseline_median=1000.0,
    baseline_mad=4.0,
    baseline_nights=14,
    change_pct=-10.0,
    robust_z=-16.9,
    direction="slower",
    environment_changed=False,
    environment_changes=None,
    label="unexplained",
)


NOTIFIED = "DLPERF_TEST_NOTIFIED_FILE"


class FileNotifier(BaseNotifier):
    """A real notifier for the test: appends what it was given to the file named by $DLPERF_TEST_NOTIFIED_FILE."""

    def notify(self, context):
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
    store, env_a, env_b, notified_file = history_db
    slow_key = "pt/resnet50/amp/b256/1n8g"
    # the first slow night: outside the noise, but one night is no change yet: suspected, nothing stored or sent
    run_1 = add_night(store, 20, slow={slow_key: 0.95}, env_id=env_a)
    first = detect_step(RunIds("dlperf_benchmark", run_1))
    assert first.stored and first.verdicts == {"suspected": 1, "steady": 1} and first.new_regressions == ()
    assert store.regressions(open_only=False).empty and notified(notified_file) == []

    # the second: change points confirm it, from the first slow night on
    run_id = add_night(store, 21, slow={slow_key: 0.95}, env_id=env_a)
    result = detect_step(RunIds("dlperf_benchmark", run_id))
    assert result.stored and result.verdicts == {"new": 1, "steady": 1}
    stored = store.regressions()
    assert len(stored) == 1
    row = stored.iloc[0]
    assert row["case_key"] == slow_key and row["direction"] == "slower" and row["status"] == "open"
    assert row["change_pct"] == pytest.approx(-5, abs=1.0) and row["baseline_nights"] == 14
    assert not row["environment_changed"] and row["night"] == date(2026, 1, 22)
    assert row["trigger"] == "scheduled"
    assert row["label"] == "unexplained"  # no probe of the fabric that night, the framework unchanged
    calls = notified(notified_file)
    assert len(calls) == 1 and [r["case_key"] for r in calls[0]] == [slow_key]
    assert calls[0][0]["first_bad_night"] == "2026-01-21" and calls[0][0]["night"] == "2026-01-22"

    # the same DAG run judged again: no duplicate row
    detect_step(RunIds("dlperf_benchmark", run_id), notify=lambda _regressions, _context: 0)
    assert len(store.regressions(open_only=False)) == 1

    # the next night is still slow: the same regression, seen again, no new alert
    run_2 = add_night(store, 22, slow={slow_key: 0.95}, env_id=env_a)
    assert detect_step(RunIds("dlperf_benchmark", run_2)).verdicts == {"continuing": 1, "steady": 1}
    assert len(store.regressions(open_only=False)) == 1
    assert store.regressions().iloc[0]["last_seen_run_id"] == run_2
    assert len(notified(notified_file)) == 1

    # back to normal: closed
    run_3 = add_night(store, 23, env_id=env_a)
    assert detect_step(RunIds("dlperf_benchmark", run_3)).verdicts == {"recovered": 1, "steady": 1}
    assert store.regressions().empty
    closed = store.regressions(open_only=False).iloc[0]
    assert closed["status"] == "closed" and run_3 in closed["closed_reason"]


@pytest.mark.postgres
def test_an_accepted_regression_restarts_the_baseline_and_keeps_the_history(history_db, capsys):
    """Accepted as the new normal (the dlperf_accept_regression DAG's task, and the CLI for the refusals): closed,
    the baseline of its configuration starts on its first bad night (stored with it), no night is deleted; the
    nights at the new level alert no more and, once there are enough of them, are steady."""
    store, env_a, _env_b, notified_file = history_db
    slow_key = "pt/resnet50/amp/b256/1n8g"
    for i in (20, 21):
        run_id = add_night(store, i, slow={slow_key: 0.95}, env_id=env_a)
        detect_step(RunIds("dlperf_benchmark", run_id))
    row = store.regressions().iloc[0]
    assert row["first_bad_night"] == date(2026, 1, 21) and row["accepted_from"] is None
    regression_id = int(row["id"])

    line = accept_step(regression_id, "torch 2.6's new allocator: slower by design")
    assert line.endswith("baseline starts on 2026-01-21")
    accepted = store.regressions(open_only=False).iloc[0]
    assert accepted["status"] == "closed" and accepted["accepted_from"] == date(2026, 1, 21)
    assert accepted["closed_reason"] == f"{ACCEPTED} torch 2.6's new allocator: slower by design"
    assert store.accepted_from(CaseResult_configuration(store, slow_key)) == date(2026, 1, 21)
    with pytest.raises(ValueError, match=f"no open regression with id {regression_id}"):
        accept_step(regression_id, "again")
    db = store.engine.url.render_as_string(hide_password=False)
    assert dlperf(["regressions", "accept", str(regression_id), "--reason", "again", "--db", db]) == 1
    assert dlperf(["regressions", "accept", "999999", "--reason", " ", "--db", db]) == 2
    assert "reason is empty" in capsys.readouterr().err

    # the nights at the new level: too few since the first bad night to judge, then steady; never a new alert
    kinds = []
    for i in range(22, 28):
        run_id = add_night(store, i, slow={slow_key: 0.95}, env_id=env_a)
        kinds.append(detect_step(RunIds("dlperf_benchmark", run_id)).verdicts)  # the other configuration: steady
    assert kinds[:3] == [{"insufficient_history": 1, "steady": 1}] * 3 and kinds[-1] == {"steady": 2}, kinds
    assert len(store.regressions(open_only=False)) == 1 and len(notified(notified_file)) == 1
    history = store.history_rows(CaseResult_configuration(store, slow_key))
    assert min(r.night for r in history) == date(2026, 1, 1)  # the nights before it are kept


def CaseResult_configuration(store, case_key):  # noqa: N802 - reads like the type it returns
    """The configuration of ``case_key`` as the detector reads it (its latest summary row)."""
    from dlperf_core.measure.regression import CaseResult

    row = next(r for r in store.summary_rows() if r.case_key == case_key)
    return CaseResult.from_summary(row).configuration


@pytest.mark.postgres
def test_step_with_framework_change_is_labelled_environment_change(history_db):
    store, env_a, env_b, notified_file = history_db
    suspected = add_night(store, 20, slow={"pt/resnet50/amp/b256/1n1g": 0.94}, env_id=env_b)  # the upgrade's night
    assert detect_step(RunIds("dlperf_benchmark", suspected)).verdicts["suspected"] == 1
    run_id = add_night(store, 21, slow={"pt/resnet50/amp/b256/1n1g": 0.94}, env_id=env_b)
    detect_step(RunIds("dlperf_benchmark", run_id))
    stored = store.regressions(run_id=run_id)
    assert len(stored) == 1
    row = stored.iloc[0]
    assert row["case_key"] == "pt/resnet50/amp/b256/1n1g" and row["environment_changed"]
    assert row["environment_changes"] == "framework_version: 2.5.0 -> 2.6.0"  # since the last night before the step
    assert row["environment_id"] == env_b
    assert row["label"] == "framework"  # the framework version changed, and nothing says the fabric did
    alert = notified(notified_file)[0][0]
    assert alert["environment_changed"] is True and alert["environment_changes"] == row["environment_changes"]
    assert alert["label"] == "framework"


@pytest.mark.postgres
def test_manual_run_is_judged_but_stores_and_alerts_nothing(history_db):
    store, env_a, _, notified_file = history_db
    run_id = add_night(
        store, 20, trigger="manual", slow={"pt/resnet50/amp/b256/1n8g": 0.95}, env_id=env_a, run_id="manual__2026-01-21"
    )
    result = detect_step(RunIds("dlperf_benchmark", run_id))
    assert not result.stored and result.verdicts == {"suspected": 1, "steady": 1}  # one night: never confirmed
    assert result.new_regressions == ()
    assert store.regressions(open_only=False).empty
    assert notified(notified_file) == []
    # and a manual run is not part of the nightly history
    assert "manual__2026-01-21" not in set(store.history(nights=None)["run_id"])


def test_notifier_configuration(monkeypatch):
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


def add_probe(store, run_id: str, night: int, busbw: float, nodes: int = 1, gpn: int = 8, rng=None) -> None:
    """The night's all-reduce probe of one topology: two repeats around ``busbw`` GB/s at 256 MiB and 1 GiB."""
    rng = rng or random.Random(1000 + night)
    started = datetime(2026, 1, 1, 2, 30, tzinfo=UTC) + timedelta(days=night)
    for repeat in range(2):
        value = busbw * (1 + rng.gauss(0, 0.005))
        sizes = tuple(
            FabricSizeRecord(size, size / (value * 1e9) * 1e6 * 8 / 14, value * 8 / 14, value)
            for size in (GIB // 4, GIB)
        )
        store.upsert_fabric(
            FabricRecord(
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

    store, env_a, _, notified_file = fabric_history_db
    first = add_night(store, 20, slow={"pt/resnet50/amp/b256/1n8g": 0.95}, env_id=env_a)
    add_probe(store, first, 20, 120.0)
    detect_step(RunIds("dlperf_benchmark", first))  # suspected
    run_id = add_night(store, 21, slow={"pt/resnet50/amp/b256/1n8g": 0.95}, env_id=env_a)
    add_probe(store, run_id, 21, 120.0)
    detect_step(RunIds("dlperf_benchmark", run_id))
    (row,) = store.regressions(run_id=run_id).itertuples()
    assert (row.case_key, row.label) == ("pt/resnet50/amp/b256/1n8g", "fabric")
    assert notified(notified_file)[-1][0]["label"] == "fabric"
    fabric = store.fabric_history_rows(nodes=1, gpus_per_node=8)
    assert {f.size_bytes for f in fabric} == {GIB // 4, GIB} and len(fabric) == 2 * 22
    assert max(f.busbw_gbs for f in fabric if f.run_id == run_id) == pytest.approx(120.0, rel=0.02)
    assert {f.night for f in fabric if f.run_id == first} == {date(2026, 1, 21)}
    assert all(f.started_at.tzinfo is not None and f.run_status == "success" for f in fabric)
    assert store.fabric_history_rows(nodes=1, gpus_per_node=8, before=datetime(2026, 1, 2, tzinfo=UTC)) == [
        f for f in fabric if f.night == START
    ]


@pytest.mark.postgres
def test_a_slowdown_with_a_new_framework_and_a_steady_fabric_is_the_frameworks(fabric_history_db):
    store, _, env_b, _ = fabric_history_db
    for night in (20, 21):  # suspected, then confirmed
        run_id = add_night(store, night, slow={"pt/resnet50/amp/b256/1n8g": 0.95}, env_id=env_b)
        add_probe(store, run_id, night, 180.5)  # the fabric as every night
        detect_step(RunIds("dlperf_benchmark", run_id))
    (row,) = store.regressions(run_id=run_id).itertuples()
    assert row.label == "framework" and row.environment_changes == "framework_version: 2.5.0 -> 2.6.0"


def test_notify_regressions_hands_the_notifiers_json(monkeypatch, caplog):
    """The alerts become JSON where they reach the notifiers: the context's list, and its lines as text; the log
    notifier reads the JSON back."""

    alert = ALERT
    seen = []

    class Keep(BaseNotifier):
        def notify(self, context):
            seen.append(json.loads(json.dumps(context["dlperf_regressions"])))  # plain JSON, nothing else
            seen.append(context["dlperf_regressions_text"])

    monkeypatch.setattr(f"{__name__}.Keep", Keep, raising=False)
    monkeypatch.setenv(
        "DLPERF_REGRESSION_NOTIFIERS", f"{__name__}.Keep,{LogRegressionNotifier.__module__}.LogRegressionNotifier"
    )
    assert notify_regressions([]) == 0
    with caplog.at_level("WARNING", logger="dlperf.regressions"):
        assert notify_regressions([alert], {"ts": "now"}) == 2
    assert seen == [[alert.to_json()], alert.describe()]
    assert [RegressionAlert.from_json(item) for item in seen[0]] == [alert]
    assert f"dlperf regression: {alert.describe()}" in caplog.text
