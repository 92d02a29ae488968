"""Regression alerts through the real provider notifiers (dlperf_airflow.notifiers): ``slack`` is the Slack
provider's SlackWebhookNotifier, ``email`` the SMTP provider's SmtpNotifier, each on its provider's default
connection given as Airflow reads one from the environment (AIRFLOW_CONN_..., as docker-compose.yaml passes them
from .env). They post to local stand-ins (tests/alert_stand_ins.py: an HTTP webhook and an SMTP server in threads),
one message each per run."""

from __future__ import annotations

import json
import re
from datetime import date
from urllib.parse import quote

import pytest

from alert_stand_ins import smtp_stand_in, webhook_stand_in
from dlperf_airflow.notifiers import (
    RUN_TAB_ROUTE,
    configured_notifiers,
    notifier_entries,
    notify_regressions,
    run_page_url,
)
from dlperf_core.measure.regression import RegressionAlert
from helpers import REPO

ALERT = RegressionAlert(
    id=7,
    dag_id="dlperf_benchmark",
    run_id="scheduled__2026-01-21T02:00:00+00:00",
    case_key="pytorch_reference/resnet50_v1.5/fp32/b32/1n1g+args=1f0c9a2e",
    framework="pytorch_reference",
    model="resnet50_v1.5",
    precision="fp32",
    batch_size_per_device=32,
    variant="+args=1f0c9a2e",
    nodes=1,
    gpus_per_node=1,
    night=date(2026, 1, 21),
    median_throughput=41.2,
    baseline_median=58.9,
    baseline_mad=0.15,
    baseline_nights=5,
    change_pct=-30.05,
    robust_z=-79.6,
    direction="slower",
    environment_changed=True,
    environment_changes="image_digest: sha256:0000 -> sha256:4aae",
    environment_id=2,
    label="framework",
    first_bad_night=date(2026, 1, 20),  # change points confirmed it the night after
)
SLACK = "airflow.providers.slack.notifications.slack_webhook.SlackWebhookNotifier"
SMTP = "airflow.providers.smtp.notifications.smtp.SmtpNotifier"


def slack_connection(host: str, port: int) -> str:
    """The connection slack_webhook_default as a URI: the token in the password, where it is posted in the host
    (a host with its scheme and port is written %-encoded; the hook posts to <host>/<token>)."""
    return f"slackwebhook://:T000%2FB000%2FXXXX@{quote(f'http://{host}:{port}/services', safe='')}"


def smtp_connection(host: str, port: int) -> str:
    """The connection smtp_default as a URI: a server without TLS or login."""
    return f"smtp://{host}:{port}?disable_ssl=true&disable_tls=true&timeout=10&retry_limit=0"


def test_the_names_build_the_provider_notifiers(monkeypatch):
    monkeypatch.delenv("DLPERF_REGRESSION_NOTIFIERS", raising=False)
    monkeypatch.setenv("DLPERF_ALERT_EMAIL_TO", "perf-team@example.org, oncall@example.org")
    monkeypatch.setenv("DLPERF_ALERT_EMAIL_FROM", "dlperf@example.org")
    entries = notifier_entries("slack, email")
    assert entries == [
        {
            "class": SLACK,
            "kwargs": {"slack_webhook_conn_id": "slack_webhook_default", "text": "{{ dlperf_alert_slack }}"},
        },
        {
            "class": SMTP,
            "kwargs": {
                "to": ["perf-team@example.org", "oncall@example.org"],
                "from_email": "dlperf@example.org",
                "subject": "{{ dlperf_alert_subject }}",
                "html_content": "{{ dlperf_alert_html }}",
                "smtp_conn_id": "smtp_default",
            },
        },
    ]
    assert notifier_entries(json.dumps(entries)) == entries  # the list a name stands for, written out, is the same
    assert [type(n).__name__ for n in configured_notifiers("slack,email,log")] == [
        "SlackWebhookNotifier",
        "SmtpNotifier",
        "LogRegressionNotifier",
    ]
    assert notifier_entries("none") == [] and notifier_entries("") == []
    monkeypatch.setenv("DLPERF_ALERT_EMAIL_TO", "")
    with pytest.raises(ValueError, match="names email, but DLPERF_ALERT_EMAIL_TO"):
        notifier_entries("email")
    with pytest.raises(ValueError, match="give a name \\(log, slack, email\\) or a dotted path"):
        configured_notifiers("pager")


def test_the_run_tab_route_is_the_plugins():
    plugin = (REPO / "plugins" / "dlperf_airflow" / "plugin.py").read_text()
    assert f'"url_route": "{RUN_TAB_ROUTE}"' in plugin


def test_slack_and_email_post_one_message_each_to_local_stand_ins(monkeypatch, capsys):
    with webhook_stand_in() as slack, smtp_stand_in() as smtp:
        monkeypatch.setenv("DLPERF_REGRESSION_NOTIFIERS", "slack,email")
        monkeypatch.setenv("AIRFLOW_CONN_SLACK_WEBHOOK_DEFAULT", slack_connection(*slack.address))
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", smtp_connection(*smtp.address))
        monkeypatch.setenv("DLPERF_ALERT_EMAIL_TO", "perf-team@example.org")
        monkeypatch.setenv("DLPERF_ALERT_EMAIL_FROM", "dlperf@example.org")
        monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://airflow.example:8080/")
        assert notify_regressions([ALERT], {"ts": "now"}) == 2
        posted, mailed = slack.messages, smtp.messages
    page = (
        "http://airflow.example:8080/dags/dlperf_benchmark/runs/"
        "scheduled__2026-01-21T02%3A00%3A00%2B00%3A00/plugin/dlperf-run-results"
    )
    assert len(posted) == 1 and len(mailed) == 1, (posted, mailed)
    assert posted[0]["path"] == "/services/T000/B000/XXXX"
    text = posted[0]["json"]["text"]
    for field in ("night", "configuration", "size", "first bad night", "environment", "image digest", "fabric"):
        assert f"• *{field}:* " in text, field
    assert "• *size:* slower by 30.1%: median 41.20 against 58.90, the median of the last 5 good nights" in text
    assert "• *image digest:* sha256:0000 -&gt; sha256:4aae" in text
    assert f"• *page:* <{page}|the run's dlperf results>" in text
    mail = mailed[0]
    assert mail["from"] == "dlperf@example.org" and mail["to"] == ["perf-team@example.org"]
    assert mail["subject"] == (
        "dlperf: 1 new regression on 2026-01-21: pytorch_reference/resnet50_v1.5/fp32/b32/1n1g+args=1f0c9a2e "
        "slower by 30.1%"
    )
    html = "".join(p["text"] for p in mail["parts"] if p["type"] == "text/html")
    assert (
        '<tr><th align="left" valign="top">first bad night</th><td>2026-01-20 (1 day before tonight)</td></tr>' in html
    )
    assert f'<a href="{page}">' in html
    with capsys.disabled():  # the message as the team reads it (the plain rendering of the same fields)
        from dlperf_core.measure.alert_message import alert_message

        print("\n" + alert_message([ALERT], run_page_url).text)


def test_a_notifier_that_cannot_reach_its_server_fails_the_task_after_the_others(monkeypatch):
    with webhook_stand_in() as slack:
        closed = smtp_stand_in()  # a port that was free: closed again, nobody answers there
        host, port = closed.address
        closed.stop()
        monkeypatch.setenv("DLPERF_REGRESSION_NOTIFIERS", "email,slack")
        monkeypatch.setenv("AIRFLOW_CONN_SLACK_WEBHOOK_DEFAULT", slack_connection(*slack.address))
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", smtp_connection(host, port))
        monkeypatch.setenv("DLPERF_ALERT_EMAIL_TO", "perf-team@example.org")
        monkeypatch.setenv("DLPERF_ALERT_EMAIL_FROM", "dlperf@example.org")
        with pytest.raises(RuntimeError, match=re.escape("regression notifiers failed: SmtpNotifier: ")):
            notify_regressions([ALERT])
        assert len(slack.messages) == 1  # the one after it was still called
