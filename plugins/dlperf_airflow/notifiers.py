"""Regression alerts through Airflow's notifier mechanism.

``detect_regressions`` hands :func:`notify_regressions` the new regressions of a scheduled run as typed alerts
(:class:`dlperf_core.measure.regression.RegressionAlert`); it calls every configured notifier (an Airflow
``BaseNotifier``) once with the task context plus these keys:

* ``dlperf_regressions``: the alerts' JSON form, a list of objects, one per new regression, with the names of the
  ``regressions`` table's columns (the night as ISO text); ``RegressionAlert.from_json`` reads one back;
* ``dlperf_regressions_text``: one line per regression;
* the run's message (:func:`dlperf_core.measure.alert_message.alert_message`: the night, the configuration, the
  size, the first bad night, what changed, the run's page): ``dlperf_alert_subject``, ``dlperf_alert_text`` (plain
  text), ``dlperf_alert_html`` (an email's body) and ``dlperf_alert_slack`` (Slack's mrkdwn).

So any provider notifier with templated fields can be used as is. Configuration, first found wins:

1. ``$DLPERF_REGRESSION_NOTIFIERS``
2. the Airflow Variable ``dlperf_regression_notifiers``
3. the default: :class:`LogRegressionNotifier` (the task log, at WARNING)

The value is a comma-separated list of names and dotted class paths (``slack,email``,
``my_pkg.alerts.PagerNotifier``), or a JSON list of ``{"class": "dotted.path", "kwargs": {...}}``; ``none`` turns
alerts off. The names stand for entries of that JSON list (:func:`notifier_entries` shows what a value comes to):

* ``log``: :class:`LogRegressionNotifier`;
* ``slack``: the Slack provider's ``SlackWebhookNotifier`` on the connection ``slack_webhook_default`` (an Incoming
  Webhook: its password the webhook's token or whole URL, its host where the token is posted, default
  ``https://hooks.slack.com/services``) with the message as ``text``;
* ``email``: the SMTP provider's ``SmtpNotifier`` on the connection ``smtp_default``, to
  ``$DLPERF_ALERT_EMAIL_TO`` (comma-separated), from ``$DLPERF_ALERT_EMAIL_FROM`` (empty: the connection's
  ``from_email``), the message as subject and HTML body.

The run's page in the message is its "dlperf results" tab in the Airflow UI, under the UI's address (Airflow's
``[api] base_url``, which dlperf's image sets from ``AIRFLOW_BASE_URL`` or ``DLPERF_PUBLISH_ADDR``).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from collections.abc import Mapping
from html import escape
from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseNotifier

from dlperf_core.measure.alert_message import alert_message
from dlperf_core.measure.node_peers import SLOW_NODES_KEY, SLOW_NODES_TEXT_KEY
from dlperf_core.measure.regression import RegressionAlert, describe_regression

log = logging.getLogger("dlperf.regressions")

ENV_VAR = "DLPERF_REGRESSION_NOTIFIERS"
VARIABLE = "dlperf_regression_notifiers"
DEFAULT = "dlperf_airflow.notifiers.LogRegressionNotifier"
EMAIL_TO = "DLPERF_ALERT_EMAIL_TO"
EMAIL_FROM = "DLPERF_ALERT_EMAIL_FROM"
SLACK_CONN_ID = "slack_webhook_default"  # the Slack provider's default Incoming Webhook connection
SMTP_CONN_ID = "smtp_default"  # the SMTP provider's default connection
RUN_TAB_ROUTE = "dlperf-run-results"
"""The ``url_route`` of the "dlperf results" tab of a DAG run (plugins/dlperf_airflow/plugin.py)."""


class LogRegressionNotifier(BaseNotifier):
    """Writes each new regression to the log (the default; works out of the box)."""

    def __init__(self, level: str = "WARNING") -> None:
        super().__init__()
        self.level = logging.getLevelName(level.upper())
        if not isinstance(self.level, int):  # a level name logging does not know: a bad value, not a bad type
            raise ValueError(f"unknown log level {level!r}")  # noqa: TRY004

    def notify(self, context: Any) -> None:
        for regression in context.get("dlperf_regressions", []):
            log.log(self.level, "dlperf regression: %s", describe_regression(RegressionAlert.from_json(regression)))
        for line in str(context.get(SLOW_NODES_TEXT_KEY) or "").splitlines():
            log.log(self.level, "dlperf slow node: %s", line)


def _configuration() -> str:
    value = os.environ.get(ENV_VAR)
    if value:
        return value
    try:
        from airflow.sdk import Variable

        value = Variable.get(VARIABLE, default=None)
    except Exception:  # noqa: BLE001 - no Airflow context (a plain call): use the default
        value = None
    return value or DEFAULT


def _load(path: str) -> type[BaseNotifier]:
    module_name, _, class_name = path.strip().rpartition(".")
    if not module_name:
        raise ValueError(f"notifier {path!r}: give a name ({', '.join(NAMES)}) or a dotted path, module.Class")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseNotifier)):  # a bad configuration value, not a bad type
        raise ValueError(f"notifier {path!r} is not an Airflow BaseNotifier subclass")  # noqa: TRY004
    return cls


def _slack() -> dict[str, Any]:
    return {
        "class": "airflow.providers.slack.notifications.slack_webhook.SlackWebhookNotifier",
        "kwargs": {"slack_webhook_conn_id": SLACK_CONN_ID, "text": "{{ dlperf_alert_slack }}"},
    }


def _email() -> dict[str, Any]:
    to = [a.strip() for a in os.environ.get(EMAIL_TO, "").split(",") if a.strip()]
    if not to:
        raise ValueError(f"{ENV_VAR} names email, but {EMAIL_TO} (the addresses, comma-separated) is empty")
    return {
        "class": "airflow.providers.smtp.notifications.smtp.SmtpNotifier",
        "kwargs": {
            "to": to,
            "from_email": os.environ.get(EMAIL_FROM) or None,  # None: the connection's from_email
            "subject": "{{ dlperf_alert_subject }}",
            "html_content": "{{ dlperf_alert_html }}",
            "smtp_conn_id": SMTP_CONN_ID,
        },
    }


NAMES = {"log": lambda: {"class": DEFAULT}, "slack": _slack, "email": _email}
"""What each name in the configuration stands for: an entry of the JSON list form (module docstring)."""


def notifier_entries(value: str | None = None) -> list[dict[str, Any]]:
    """The configuration ``value`` (default: the configured one, see module docstring) as the JSON list form:
    ``{"class": ..., "kwargs": {...}}`` per notifier; ``none``: no notifier."""
    value = (value if value is not None else _configuration()).strip()
    if value.lower() == "none":
        return []
    if value.startswith("["):
        entries = json.loads(value)
        if not all(isinstance(e, dict) and isinstance(e.get("class"), str) for e in entries):
            raise ValueError(f"{ENV_VAR}: a JSON list of {{'class': ..., 'kwargs': {{...}}}} objects expected")
        return list(entries)
    items = [item.strip() for item in value.split(",") if item.strip()]
    return [NAMES[item.lower()]() if item.lower() in NAMES else {"class": item} for item in items]


def configured_notifiers(value: str | None = None) -> list[BaseNotifier]:
    """The notifiers named by ``value`` (default: the configuration, see module docstring)."""
    return [_load(e["class"])(**e.get("kwargs", {})) for e in notifier_entries(value)]


def ui_base_url() -> str | None:
    """The Airflow UI's address (``[api] base_url``: dlperf's image sets it from ``AIRFLOW_BASE_URL`` or
    ``DLPERF_PUBLISH_ADDR``), or None when it is not known."""
    try:
        from airflow.sdk import conf

        base = conf.get("api", "base_url", fallback=None)
    except Exception:  # noqa: BLE001 - no Airflow configuration: no link, the message says so
        base = None
    base = base or os.environ.get("AIRFLOW_BASE_URL") or None
    return base.rstrip("/") if base and "://" in base else None


def run_page_url(dag_id: str, run_id: str) -> str | None:
    """A run's "dlperf results" tab in the Airflow UI, or None when the UI's address is not known."""
    base = ui_base_url()
    if base is None:
        return None
    return f"{base}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}/plugin/{RUN_TAB_ROUTE}"


def notify_regressions(regressions: list[RegressionAlert], context: Mapping[str, Any] | None = None) -> int:
    """Call every configured notifier with the new ``regressions`` (as JSON in their context, see module
    docstring); return how many were called.

    Every notifier is tried; if any failed, a RuntimeError names them afterwards (the verdicts are
    already stored, so nothing is lost, and the failure is visible on the task).
    """
    if not regressions:
        return notify_slow_nodes(context)  # a night that named slow nodes only; nothing otherwise
    notifiers = configured_notifiers()
    message = alert_message(regressions, run_page_url)
    payload = dict(context or {})
    payload["dlperf_regressions"] = [alert.to_json() for alert in regressions]  # the notifier edge: JSON
    payload["dlperf_regressions_text"] = "\n".join(describe_regression(r) for r in regressions)
    payload |= {
        "dlperf_alert_subject": message.subject,
        "dlperf_alert_text": message.text,
        "dlperf_alert_html": message.html,
        "dlperf_alert_slack": message.slack,
    }
    payload = with_slow_nodes(payload)
    failed = []
    for notifier in notifiers:
        try:
            notifier(dict(payload))  # each its own copy: a notifier adds its template fields to its context
        except Exception as exc:  # noqa: BLE001 - try the others, then report
            failed.append(f"{type(notifier).__name__}: {type(exc).__name__}: {exc}")
    if failed:
        raise RuntimeError("regression notifiers failed: " + "; ".join(failed))
    return len(notifiers)


# --------------------------------------------------------------------------- slow nodes (per-node sweeps)


def _slow_lines(payload: Mapping[str, Any]) -> list[str]:
    return [line for line in str(payload.get(SLOW_NODES_TEXT_KEY) or "").splitlines() if line.strip()]


def with_slow_nodes(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with the slow nodes its context carries (``dlperf_slow_nodes_text``, set by ``detect_regressions``
    when a per-node sweep named some: :mod:`dlperf_core.measure.node_peers`) added at the end of the message keys
    it has (``dlperf_alert_text``, ``dlperf_alert_html``, ``dlperf_alert_slack``); as it is when it carries none."""
    lines = _slow_lines(payload)
    if not lines:
        return payload
    heading = f"Slow node{'s' if len(lines) != 1 else ''} (a per-node sweep: each node against its peers):"
    out = dict(payload)
    if "dlperf_alert_text" in out:
        out["dlperf_alert_text"] = "\n\n".join(filter(None, [out["dlperf_alert_text"], heading, "\n".join(lines)]))
    if "dlperf_alert_html" in out:
        items = "".join(f"<li>{escape(line)}</li>" for line in lines)
        out["dlperf_alert_html"] = f"{out['dlperf_alert_html']}<h3>{escape(heading)}</h3><ul>{items}</ul>"
    if "dlperf_alert_slack" in out:
        slack = [f"*{_slack_text(heading)}*", *(f"• {_slack_text(line)}" for line in lines)]
        out["dlperf_alert_slack"] = "\n\n".join(filter(None, [out["dlperf_alert_slack"], "\n".join(slack)]))
    return out


def _slack_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def notify_slow_nodes(context: Mapping[str, Any] | None = None) -> int:
    """Call every configured notifier with the slow nodes of ``context`` alone (a scheduled night whose per-node sweep
    named slow nodes and found no new regression): the keys a regression alert has, ``dlperf_regressions`` empty and
    the message the slow nodes (:func:`with_slow_nodes`). Returns how many were called (none without slow nodes);
    a notifier that fails is reported afterwards, as by :func:`notify_regressions`."""
    payload = dict(context or {})
    lines = _slow_lines(payload)
    if not lines:
        return 0
    nodes = sorted({str(f.get("node")) for f in payload.get(SLOW_NODES_KEY) or () if isinstance(f, dict)})
    subject = f"dlperf: slow node{'s' if len(nodes) != 1 else ''} {', '.join(nodes) or '?'}: " + lines[0]
    payload |= {
        "dlperf_regressions": [],
        "dlperf_regressions_text": "",
        "dlperf_alert_subject": subject if len(lines) == 1 else f"{subject} (and {len(lines) - 1} more)",
        "dlperf_alert_text": "",
        "dlperf_alert_html": "",
        "dlperf_alert_slack": "",
    }
    payload = with_slow_nodes(payload)
    notifiers = configured_notifiers()
    failed = []
    for notifier in notifiers:
        try:
            notifier(dict(payload))
        except Exception as exc:  # noqa: BLE001 - try the others, then report
            failed.append(f"{type(notifier).__name__}: {type(exc).__name__}: {exc}")
    if failed:
        raise RuntimeError("slow-node notifiers failed: " + "; ".join(failed))
    return len(notifiers)
