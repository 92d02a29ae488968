"""The message of a regression alert (dlperf_core.measure.alert_message): pure text, every field an alert's reader
needs (docs/operations.md, "Regression alerts"), the same in the plain, HTML and Slack renderings."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest

from dlperf_core.measure.alert_message import DOCS, SPAN, alert_fields, alert_message, first_bad_night
from dlperf_core.measure.regression import RegressionAlert
from helpers import REPO

PAGE = "http://ui.example:8080/dags/dlperf_benchmark/runs/scheduled__2026-01-21T02%3A00%3A00%2B00%3A00/plugin/x"

ALERT = RegressionAlert(
    id=7,
    dag_id="dlperf_benchmark",
    run_id="scheduled__2026-01-21T02:00:00+00:00",
    case_key="pt/resnet50/amp/b256/1n8g+compile+args=1f0c9a2e",
    framework="pt",
    model="resnet50",
    precision="amp",
    batch_size_per_device=256,
    variant="+compile+args=1f0c9a2e",
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
    environment_changed=True,
    environment_changes="driver_version: 535.1 -> 550.2; image_digest: sha256:aa -> sha256:bb",
    environment_id=3,
    label="framework",
)


def test_every_field_an_alert_reader_needs_in_order():
    got = dict(alert_fields(ALERT, PAGE))
    assert list(got) == [
        "night",
        "configuration",
        "size",
        "first bad night",
        "environment",
        "image digest",
        "fabric",
        "put down to",
        "regression id",
        "page",
    ]
    assert got["night"] == "2026-01-21 (run scheduled__2026-01-21T02:00:00+00:00 of dlperf_benchmark)"
    assert got["configuration"] == (
        "pt/resnet50/amp/b256/1n8g+compile+args=1f0c9a2e "
        "(pt resnet50, amp, batch 256 per device, 1 node x 8 GPUs, options +compile)"
    )
    assert got["size"] == (
        "slower by 10.0%: median 900.00 against 1000.00, the median of the last 14 good nights (robust z -16.9)"
    )
    assert got["first bad night"] == "2026-01-21 (tonight)"
    assert got["environment"] == "driver_version: 535.1 -> 550.2"  # the image digest has a line of its own
    assert got["image digest"] == "sha256:aa -> sha256:bb"
    assert got["fabric"].startswith("no drop found")
    assert got["put down to"].startswith("framework (the framework version or the image digest changed")
    assert got["regression id"] == (
        "7 (to accept it as the new normal: the DAG dlperf_accept_regression, or dlperf regressions accept 7 --reason TEXT)"
    )
    assert got["page"] == PAGE


def test_what_changed_when_nothing_or_only_the_digest_did_and_when_the_fabric_dropped():
    quiet = dict(alert_fields(replace(ALERT, environment_changed=False, environment_changes=None, label="unexplained")))
    assert quiet["environment"] == "no infrastructure change " + SPAN
    assert SPAN == "from the last good night before the first bad night to tonight"
    assert quiet["image digest"] == "unchanged " + SPAN
    assert quiet["put down to"] == "unexplained (neither the fabric nor the framework build changed)"
    assert quiet["page"].startswith("not known (set AIRFLOW_BASE_URL")
    assert dict(alert_fields(replace(ALERT, id=None)))["regression id"] == "none (not stored)"
    digest_only = dict(alert_fields(replace(ALERT, environment_changes="image_digest: sha256:aa -> sha256:bb")))
    assert digest_only["environment"] == "only the image digest changed " + SPAN
    fabric = dict(alert_fields(replace(ALERT, environment_changes=None, label="fabric")))
    assert fabric["fabric"].startswith("dropped: the all-reduce bus bandwidth of the same night and topology")
    assert fabric["put down to"].startswith("fabric (the all-reduce benchmark")
    faster = dict(alert_fields(replace(ALERT, direction="faster", change_pct=12.345, robust_z=8.04)))
    assert faster["size"].startswith("faster by 12.3%: ") and "(robust z +8.0)" in faster["size"]
    one_gpu = dict(alert_fields(replace(ALERT, gpus_per_node=1, variant="+args=1f0c9a2e")))
    assert one_gpu["configuration"].endswith("batch 256 per device, 1 node x 1 GPU)")  # no options but the fingerprint


def test_the_first_bad_night_is_the_change_points_where_they_confirmed_it():
    assert first_bad_night(ALERT) == ALERT.night  # the rule alone: the night it flagged
    earlier = replace(ALERT, first_bad_night=date(2026, 1, 19))
    assert first_bad_night(earlier) == date(2026, 1, 19)
    assert dict(alert_fields(earlier))["first bad night"] == "2026-01-19 (2 days before tonight)"
    assert dict(alert_fields(replace(ALERT, first_bad_night=date(2026, 1, 20))))["first bad night"] == (
        "2026-01-20 (1 day before tonight)"
    )


def test_one_message_per_run_in_three_renderings():
    second = replace(
        ALERT, case_key="pt/resnet50/amp/b256/1n1g+args=1f0c9a2e", change_pct=-25.0, environment_changes=None
    )
    message = alert_message([ALERT, second], lambda dag, run: f"http://ui/{dag}/{run}")
    assert message.subject == (
        "dlperf: 2 new regressions on 2026-01-21: worst pt/resnet50/amp/b256/1n1g+args=1f0c9a2e slower by 25.0%"
    )
    lines = message.text.splitlines()
    assert lines[0] == (
        "dlperf found 2 new throughput regressions on the night of 2026-01-21 (run scheduled__2026-01-21T02:00:00+00:00)."
    )
    assert lines[2] == ALERT.case_key
    assert "  night:           2026-01-21 (run scheduled__2026-01-21T02:00:00+00:00 of dlperf_benchmark)" in lines
    assert "  page:            http://ui/dlperf_benchmark/scheduled__2026-01-21T02:00:00+00:00" in lines
    assert message.text.count("  first bad night: ") == 2
    assert lines[-1] == "How to read and silence an alert: docs/operations.md, 'Regression alerts'."
    # HTML: escaped, the page a link
    assert "<h3>pt/resnet50/amp/b256/1n8g+compile+args=1f0c9a2e</h3>" in message.html
    assert "<td>driver_version: 535.1 -&gt; 550.2</td>" in message.html
    assert '<a href="http://ui/dlperf_benchmark/scheduled__2026-01-21T02:00:00+00:00">' in message.html
    # Slack's mrkdwn: &, <, > escaped, the page as <url|label>
    assert "• *environment:* driver_version: 535.1 -&gt; 550.2" in message.slack
    assert "• *page:* <http://ui/dlperf_benchmark/scheduled__2026-01-21T02:00:00+00:00|the run's dlperf results>" in (
        message.slack
    )
    assert message.slack.startswith("*dlperf found 2 new throughput regressions")


def test_no_regression_no_message():
    with pytest.raises(ValueError, match="no regressions"):
        alert_message([])
    one = alert_message([ALERT])
    assert one.subject == (
        "dlperf: 1 new regression on 2026-01-21: pt/resnet50/amp/b256/1n8g+compile+args=1f0c9a2e slower by 10.0%"
    )
    assert "<a href" not in one.html and "|the run's dlperf results>" not in one.slack  # no address: no link


def test_the_docs_the_message_names_read_every_field_and_say_how_to_silence():
    text = (REPO / "docs" / "operations.md").read_text()
    assert DOCS == "docs/operations.md, 'Regression alerts'" and "\n### Regression alerts\n" in text
    section = text.split("\n### Regression alerts\n", 1)[1].split("\n## ", 1)[0]
    for name, _ in alert_fields(ALERT, PAGE):
        assert f"\n| {name} | " in section, name
    assert "`DLPERF_REGRESSION_NOTIFIERS=none`" in section and "**Silence alerts.**" in section
