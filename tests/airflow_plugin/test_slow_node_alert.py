"""The slow node in the alert: ``detect_regressions`` (dlperf_airflow.regression_step) scores a scheduled run's per-node
sweeps and hands the nodes named slow to the notifiers in two more context keys, with or without regressions; the
notifiers (dlperf_airflow.notifiers) add them to the message every channel sends (text, HTML, Slack) and post a night
of slow nodes alone through the real Slack and SMTP provider notifiers (local stand-ins, tests/alert_stand_ins.py);
a manual run only logs them. The rule: tests/core/measure/test_node_peers.py."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta

import pytest

from alert_stand_ins import smtp_stand_in, webhook_stand_in
from dlperf_airflow.notifiers import LogRegressionNotifier, notify_regressions, with_slow_nodes
from dlperf_airflow.regression_step import detect_step, load_node_scores, slow_node_context
from dlperf_core.measure.node_peers import SLOW_NODES_KEY, SLOW_NODES_TEXT_KEY, NodeScore
from dlperf_core.measure.regression import RegressionAlert
from dlperf_core.model import RunIds
from dlperf_core.storage import ResultStore
from helpers import node_sweep_results, run_record

DAG = "dlperf_benchmark"
SWEEP = "pytorch_reference/resnet50_v1.5/fp32/b32/1n8g"
ARGS = "+args=0badc0de"
T0 = datetime(2026, 5, 1, 2, 0, tzinfo=UTC)


def sweep_run(store: ResultStore, trigger: str, figures: dict[str, float]) -> RunIds:
    run = run_record(
        dag_id=DAG,
        run_id=f"{trigger}__sweep",
        trigger=trigger,
        started_at=T0,
        finished_at=T0 + timedelta(hours=1),
        status="success",
    )
    store.upsert_run(run)
    store.upsert_results(node_sweep_results(run, SWEEP, figures, ARGS))
    return RunIds(DAG, run.run_id)


@pytest.fixture
def store(sqlite_url, monkeypatch):
    monkeypatch.setenv("DLPERF_DB_URL", sqlite_url)
    monkeypatch.delenv("DLPERF_SLOW_NODE_FRACTION", raising=False)
    monkeypatch.delenv("DLPERF_SLOW_NODE_Z", raising=False)
    result_store = ResultStore(sqlite_url)
    result_store.ensure_schema()
    yield result_store
    result_store.dispose()


def test_a_scheduled_nights_slow_node_reaches_the_notifiers_without_a_regression(store, caplog):
    ids = sweep_run(store, "scheduled", {"n0": 1000.0, "n1": 1004.0, "n2": 700.0, "n3": 998.0})
    calls = []
    with caplog.at_level(logging.INFO, logger="dlperf"):
        report = detect_step(ids, notify=lambda regressions, context: calls.append((regressions, context)) or 1)
    assert report.notifiers_called == 1 and report.new_regressions == ()  # no history: no regression verdict
    ((regressions, context),) = calls
    assert regressions == [] and [f["node"] for f in context[SLOW_NODES_KEY]] == ["n2"]
    finding = NodeScore.from_json(context[SLOW_NODES_KEY][0])
    assert finding.slow and finding.basis == "peers" and finding.change == pytest.approx(-0.3, abs=0.01)
    assert context[SLOW_NODES_TEXT_KEY].startswith("slow node: node n2, pytorch_reference resnet50_v1.5 fp32 b32")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(line.startswith("slow node: node n2") for line in warned)
    assert len([r for r in caplog.records if "within its peers: node n" in r.getMessage()]) == 3


def test_a_manual_run_logs_its_slow_node_and_alerts_nobody(store, caplog):
    ids = sweep_run(store, "manual", {"n0": 1000.0, "n1": 1004.0, "n2": 700.0})
    calls = []
    with caplog.at_level(logging.WARNING, logger="dlperf"):
        detect_step(ids, notify=lambda _regressions, context: calls.append(context) or 1)
    assert calls == [] and any("slow node: node n2" in r.getMessage() for r in caplog.records)
    assert [s.node for s in load_node_scores(store, ids).slow] == ["n2"]


def test_a_clean_sweep_names_nobody(store):
    ids = sweep_run(store, "scheduled", {"n0": 1000.0, "n1": 1004.0, "n2": 990.0, "n3": 998.0})
    calls = []
    detect_step(ids, notify=lambda _regressions, context: calls.append(context) or 1)
    assert calls == [] and slow_node_context(load_node_scores(store, ids)) == {}


ALERT = RegressionAlert(
    id=1,
    dag_id=DAG,
    run_id="scheduled__sweep",
    case_key="pytorch_reference/resnet50_v1.5/fp32/b32/1n1g+args=0badc0de",
    framework="pytorch_reference",
    model="resnet50_v1.5",
    precision="fp32",
    batch_size_per_device=32,
    variant=ARGS,
    nodes=1,
    gpus_per_node=1,
    night=date(2026, 5, 1),
    median_throughput=90.0,
    baseline_median=100.0,
    baseline_mad=0.5,
    baseline_nights=14,
    change_pct=-10.0,
    robust_z=-13.5,
    direction="slower",
    environment_changed=False,
    environment_changes=None,
    label="unexplained",
)
CONTEXT = {
    SLOW_NODES_KEY: [{"node": "n2"}],
    SLOW_NODES_TEXT_KEY: "slow node: node n2, pytorch_reference resnet50_v1.5 fp32 b32 1n8g: 700.00 samples/s",
}


def test_the_slow_nodes_end_every_rendering_of_the_message():
    payload = {"dlperf_alert_text": "1 regression", "dlperf_alert_html": "<p>1</p>", "dlperf_alert_slack": "*1*"}
    out = with_slow_nodes({**payload, **CONTEXT})
    assert out["dlperf_alert_text"].startswith("1 regression\n\nSlow node (a per-node sweep")
    assert out["dlperf_alert_text"].endswith(CONTEXT[SLOW_NODES_TEXT_KEY])
    assert out["dlperf_alert_html"].endswith("<ul><li>" + CONTEXT[SLOW_NODES_TEXT_KEY] + "</li></ul>")
    assert out["dlperf_alert_slack"].endswith("• " + CONTEXT[SLOW_NODES_TEXT_KEY])
    assert with_slow_nodes(payload) == payload  # no slow node: the message as it was


def test_the_log_notifier_logs_each_slow_node(caplog):
    with caplog.at_level(logging.WARNING, logger="dlperf.regressions"):
        LogRegressionNotifier().notify({"dlperf_regressions": [], **CONTEXT})
    assert [r.getMessage() for r in caplog.records] == ["dlperf slow node: " + CONTEXT[SLOW_NODES_TEXT_KEY]]


def slack_connection(host: str, port: int) -> str:
    from urllib.parse import quote

    return f"slackwebhook://:T000%2FB000%2FXXXX@{quote(f'http://{host}:{port}/services', safe='')}"


def test_slow_nodes_go_to_slack_and_email_alone_and_beside_a_regression(monkeypatch):
    with webhook_stand_in() as slack, smtp_stand_in() as smtp:
        monkeypatch.setenv("DLPERF_REGRESSION_NOTIFIERS", "slack,email")
        monkeypatch.setenv("AIRFLOW_CONN_SLACK_WEBHOOK_DEFAULT", slack_connection(*slack.address))
        host, port = smtp.address
        monkeypatch.setenv(
            "AIRFLOW_CONN_SMTP_DEFAULT", f"smtp://{host}:{port}?disable_ssl=true&disable_tls=true&retry_limit=0"
        )
        monkeypatch.setenv("DLPERF_ALERT_EMAIL_TO", "perf-team@example.org")
        monkeypatch.setenv("DLPERF_ALERT_EMAIL_FROM", "dlperf@example.org")
        assert notify_regressions([], dict(CONTEXT)) == 2  # slow nodes alone
        assert notify_regressions([], {}) == 0  # nothing at all: nobody called
        assert notify_regressions([ALERT], dict(CONTEXT)) == 2  # beside a regression: one message with both
        posted, mailed = slack.messages, smtp.messages
    assert len(posted) == 2 and len(mailed) == 2, (posted, mailed)
    alone, both = (p["json"]["text"] for p in posted)
    assert alone.startswith("*Slow node (a per-node sweep") and "• slow node: node n2" in alone
    assert "regression" in both.split("Slow node")[0] and "• slow node: node n2" in both
    assert mailed[0]["subject"].startswith("dlperf: slow node n2: slow node: node n2")
    html = "".join(p["text"] for p in mailed[1]["parts"] if p["type"] == "text/html")
    assert "<li>slow node: node n2" in html and "1 new regression" in mailed[1]["subject"]
