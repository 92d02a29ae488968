"""The Params of ``dlperf_benchmark`` (its Trigger form), rendered from the form's type.

Each field of :class:`dlperf_core.plan.trigger_form.TriggerForm` is one Param, declared as its metadata says
(:func:`dlperf_core.plan.trigger_form.form_params`) with the choices the suites found in the dlperf home allow
(:func:`dlperf_core.plan.form_choices.discover_choices`: the adapter registry's if none can be read; it never raises,
so a broken suite cannot break parsing, and planning re-checks every value against the suite picked). The choices
are cached in the dlperf home's state folder (``.dlperf/cache/form-choices.json``), keyed by the names, sizes and
mtimes of the suite and inventory files: a parse where none changed reads that one file and no suite.
"""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import Param

from dlperf_core.plan.form_choices import FormChoices, discover_choices
from dlperf_core.plan.trigger_form import form_params


def params_of(choices: FormChoices) -> dict[str, Param]:
    """The DAG's Params offering ``choices``: one per field of the trigger form, in its order."""
    return {name: Param(param.default, **param.schema) for name, param in form_params(choices).items()}


def trigger_params(home: Path) -> dict[str, Param]:
    """The DAG's Params offering what the suites of the dlperf home ``home`` allow (computed at parse time)."""
    return params_of(discover_choices(home))
