"""Regression alerts through Airflow's notifier mechanism.

``detect_regressions`` hands :func:`notify_regressions` the new regressions as typed alerts
(:class:`dlperf_core.measure.regression.RegressionAlert`); it calls every configured notifier (an Airflow
``BaseNotifier``) once with the task context plus two keys: ``dlperf_regressions`` (the alerts' JSON form, a
list of objects, one per new regression, with the names of the ``regressions`` table's columns; the night as
ISO text) and ``dlperf_regressions_text`` (the same as readable lines). The context is where the alerts
become JSON: a notifier may post it anywhere, and ``RegressionAlert.from_json`` reads one back. So a dlperf
notifier reads the list, and any provider notifier with templated fields can be used as is, e.g. the SMTP
provider's ``SmtpNotifier`` with ``html_content="{{ dlperf_regressions_text }}"``.

Configuration, first found wins:

1. ``$DLPERF_REGRESSION_NOTIFIERS``
2. the Airflow Variable ``dlperf_regression_notifiers``
3. the default: :class:`LogRegressionNotifier` (the task log, at WARNING)

The value is either comma-separated dotted class paths (``my_pkg.alerts.PagerNotifier``), or a JSON
list of ``{"class": "dotted.path", "kwargs": {...}}``. ``none`` turns alerts off.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseNotifier

from dlperf_core.measure.regression import RegressionAlert, describe_regression

log = logging.getLogger("dlperf.regressions")

ENV_VAR = "DLPERF_REGRESSION_NOTIFIERS"
VARIABLE = "dlperf_regression_notifiers"
DEFAULT = "dlperf_airflow.notifiers.LogRegressionNotifier"


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
        raise ValueError(f"notifier {path!r}: give a dotted path, module.Class")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseNotifier)):  # a bad configuration value, not a bad type
        raise ValueError(f"notifier {path!r} is not an Airflow BaseNotifier subclass")  # noqa: TRY004
    return cls


def configured_notifiers(value: str | None = None) -> list[BaseNotifier]:
    """The notifiers named by ``value`` (default: the configuration, see module docstring)."""
    value = (value if value is not None else _configuration()).strip()
    if value.lower() == "none":
        return []
    if value.startswith("["):
        entries = json.loads(value)
        if not all(isinstance(e, dict) and isinstance(e.get("class"), str) for e in entries):
            raise ValueError(f"{ENV_VAR}: a JSON list of {{'class': ..., 'kwargs': {{...}}}} objects expected")
        return [_load(e["class"])(**e.get("kwargs", {})) for e in entries]
    return [_load(path)() for path in value.split(",") if path.strip()]


def notify_regressions(regressions: list[RegressionAlert], context: Mapping[str, Any] | None = None) -> int:
    """Call every configured notifier with the new ``regressions`` (as JSON in their context, see module
    docstring); return how many were called.

    Every notifier is tried; if any failed, a RuntimeError names them afterwards (the verdicts are
    already stored, so nothing is lost, and the failure is visible on the task).
    """
    if not regressions:
        return 0
    notifiers = configured_notifiers()
    payload = dict(context or {})
    payload["dlperf_regressions"] = [alert.to_json() for alert in regressions]  # the notifier edge: JSON
    payload["dlperf_regressions_text"] = "\n".join(describe_regression(r) for r in regressions)
    failed = []
    for notifier in notifiers:
        try:
            notifier(payload)
        except Exception as exc:  # noqa: BLE001 - try the others, then report
            failed.append(f"{type(notifier).__name__}: {type(exc).__name__}: {exc}")
    if failed:
        raise RuntimeError("regression notifiers failed: " + "; ".join(failed))
    return len(notifiers)
