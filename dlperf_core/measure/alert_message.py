"""The message a regression alert sends (Slack, email): the new regressions of one run as text for people.

One message per run (per notifier call, ``dlperf_airflow.notifiers``), one block per new regression, each with the
same fields in the same order (:func:`alert_fields`), so that every channel says the same thing:

* **night**: the night the regression was found, and its run;
* **configuration**: the case key (framework/model/precision/batch/topology and the configuration's fingerprint),
  and the same in words;
* **size**: how much slower (or faster), tonight's median against the baseline (the median of the last good
  nights, how many, the robust z);
* **first bad night**: the first night at the new level (the alert's ``first_bad_night``: the change point's night
  where change points confirmed the regression; without one the night the rule flagged, which is tonight);
* **what changed** from the last good night before the first bad night to tonight: **environment** (every
  infrastructure field that differs, as the ``regressions`` row's ``environment_changes`` lists them), **image
  digest** (its change, or that it did not change) and **fabric** (whether the all-reduce benchmark of the same
  night and topology dropped too: the label ``fabric``); and **put down to**: the label;
* **regression id**: its row in ``regressions``, and how to accept it as the new normal;
* **page**: the run's "dlperf results" page in the Airflow UI (when the deployment's address is known).

:class:`AlertMessage` renders those fields as plain text, as HTML (an email's body) and as Slack's mrkdwn. Pure:
no Airflow, no database; ``dlperf_airflow.notifiers`` builds the run's page address and hands the message to the
notifiers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from html import escape

from dlperf_core.measure.regression import RegressionAlert
from dlperf_core.model import series_base

DOCS = "docs/operations.md, 'Regression alerts'"
"""Where an alert's reader learns to read and silence one (the message's last line)."""

IMAGE_DIGEST = "image_digest"

SPAN = "from the last good night before the first bad night to tonight"
"""What the environment's changes span (:func:`dlperf_core.measure.regression.confirm`; the rule alone: the
previous good night, as the first bad night is tonight)."""

LABELS = {
    "fabric": "the all-reduce benchmark of the same night and topology dropped too: the network or the collectives",
    "framework": f"the framework version or the image digest changed {SPAN}",
    "unexplained": "neither the fabric nor the framework build changed",
}
"""What each label (:data:`dlperf_core.measure.regression.Label`) says, in words."""

RunPage = Callable[[str, str], str | None]
"""The address of a run's page from its DAG id and run id (None: not known)."""


def first_bad_night(alert: RegressionAlert) -> date:
    """The first night at the regressed level: the alert's ``first_bad_night`` where change points confirmed it,
    else the night it was flagged on."""
    return alert.first_bad_night or alert.night


def _days_before(night: date, first: date) -> str:
    days = (night - first).days
    return "tonight" if days == 0 else f"{days} day{'s' if days != 1 else ''} before tonight"


def _regression_id(regression_id: int | None) -> str:
    if regression_id is None:
        return "none (not stored)"
    return (
        f"{regression_id} (to accept it as the new normal: the DAG dlperf_accept_regression, or "
        f"dlperf regressions accept {regression_id} --reason TEXT)"
    )


def _changes(alert: RegressionAlert) -> tuple[list[str], str | None]:
    """(the environment's changes other than the image digest, the image digest's change or None)."""
    parts = [p.strip() for p in (alert.environment_changes or "").split("; ") if p.strip()]
    digests = [p for p in parts if p.startswith(IMAGE_DIGEST + ":")]
    return [p for p in parts if p not in digests], (digests[0] if digests else None)


def alert_fields(alert: RegressionAlert, page: str | None = None) -> list[tuple[str, str]]:
    """The fields of one new regression, in the order every rendering shows them: (name, value)."""
    first = first_bad_night(alert)
    topology = f"{alert.nodes} node{'s' if alert.nodes != 1 else ''} x {alert.gpus_per_node} GPU"
    topology += "s" if alert.gpus_per_node != 1 else ""
    words = f"{alert.framework} {alert.model}, {alert.precision}, batch {alert.batch_size_per_device} per device, "
    options = series_base(alert.variant)  # the readable options (+compile, +name=value), without the fingerprint
    words += topology + (f", options {options}" if options else "")
    others, digest = _changes(alert)
    if others:
        environment = "; ".join(others)
    elif digest is not None:
        environment = f"only the image digest changed {SPAN}"
    else:
        environment = f"no infrastructure change {SPAN}"
    image = digest.split(":", 1)[1].strip() if digest is not None else f"unchanged {SPAN}"
    fabric = (
        "dropped: the all-reduce bus bandwidth of the same night and topology fell beyond its own noise too"
        if alert.label == "fabric"
        else "no drop found (the same night's all-reduce benchmark of this topology is steady, or not measured)"
    )
    fields = [
        ("night", f"{alert.night.isoformat()} (run {alert.run_id} of {alert.dag_id})"),
        ("configuration", f"{alert.case_key} ({words})"),
        (
            "size",
            f"{alert.direction} by {abs(alert.change_pct):.1f}%: median {alert.median_throughput:.2f} against "
            f"{alert.baseline_median:.2f}, the median of the last {alert.baseline_nights} good nights "
            f"(robust z {alert.robust_z:+.1f})",
        ),
        ("first bad night", f"{first.isoformat()} ({_days_before(alert.night, first)})"),
        ("environment", environment),
        ("image digest", image),
        ("fabric", fabric),
        ("put down to", f"{alert.label} ({LABELS[alert.label]})" if alert.label else "not labelled"),
        ("regression id", _regression_id(alert.id)),
    ]
    fields.append(("page", page if page else "not known (set AIRFLOW_BASE_URL in the deployment's .env)"))
    return fields


@dataclass(frozen=True)
class AlertMessage:
    """The new regressions of one run as one message: a subject line and the body in three renderings."""

    subject: str
    text: str  # plain text
    html: str  # an email's body
    slack: str  # Slack's mrkdwn: &, < and > escaped, the page as a link


def _intro(alerts: Sequence[RegressionAlert]) -> str:
    first = alerts[0]
    count = f"{len(alerts)} new throughput regression{'s' if len(alerts) != 1 else ''}"
    return f"dlperf found {count} on the night of {first.night.isoformat()} (run {first.run_id})."


def _subject(alerts: Sequence[RegressionAlert]) -> str:
    worst = max(alerts, key=lambda a: abs(a.change_pct))
    count = f"{len(alerts)} new regression{'s' if len(alerts) != 1 else ''}"
    where = f"{worst.case_key} {worst.direction} by {abs(worst.change_pct):.1f}%"
    return f"dlperf: {count} on {worst.night.isoformat()}: " + (where if len(alerts) == 1 else f"worst {where}")


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def alert_message(alerts: Sequence[RegressionAlert], run_page: RunPage | None = None) -> AlertMessage:
    """The message for the new regressions ``alerts`` of one run (ValueError for none: nothing to say);
    ``run_page`` gives each alert's run page address (:data:`RunPage`)."""
    if not alerts:
        raise ValueError("no regressions: no message")
    blocks = [(a, alert_fields(a, run_page(a.dag_id, a.run_id) if run_page else None)) for a in alerts]
    width = max(len(name) for _, fields in blocks for name, _ in fields) + 2
    footer = f"How to read and silence an alert: {DOCS}."

    text = [_intro(alerts), ""]
    for alert, fields in blocks:
        text += [alert.case_key, *(f"  {name + ':':<{width}}{value}" for name, value in fields), ""]
    text.append(footer)

    html = [f"<p>{escape(_intro(alerts))}</p>"]
    for alert, fields in blocks:
        rows = []
        for name, value in fields:
            shown = escape(value)
            if name == "page" and value.startswith("http"):
                shown = f'<a href="{shown}">{shown}</a>'
            rows.append(f'<tr><th align="left" valign="top">{escape(name)}</th><td>{shown}</td></tr>')
        html.append(f"<h3>{escape(alert.case_key)}</h3>\n<table>\n" + "\n".join(rows) + "\n</table>")
    html.append(f"<p>{escape(footer)}</p>")

    slack = [f"*{_slack_escape(_intro(alerts))}*"]
    for alert, fields in blocks:
        slack.append("")
        slack.append(f"*{_slack_escape(alert.case_key)}*")
        for name, value in fields:
            link = name == "page" and value.startswith("http")
            slack.append(f"• *{name}:* " + (f"<{value}|the run's dlperf results>" if link else _slack_escape(value)))
    slack += ["", _slack_escape(footer)]
    return AlertMessage(_subject(alerts), "\n".join(text), "\n".join(html), "\n".join(slack))
