"""The trigger form's type (dlperf_core/plan/trigger_form.py): its keys, reading a trigger's params, writing them back,
and the Params it renders (compared with the hand-written Params it replaced: tests/data/trigger-params.json)."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from dlperf_core.errors import ConfigError
from dlperf_core.plan.cases import PlanFilters
from dlperf_core.plan.form_choices import FormChoices, registry_choices
from dlperf_core.plan.trigger_form import COMPILE_MODES, TRIGGER_KEYS, TriggerForm, form_fields, form_params
from helpers import REPO

BEFORE = json.loads((REPO / "tests/data/trigger-params.json").read_text())
"""The DAG's Params as dags/dlperf_benchmark.py declared them by hand before the form had a type (each Param's
``dump()``, captured from that DAG for the fixed choices stored beside them)."""


def test_the_trigger_keys_are_the_forms_fields_in_the_forms_order():
    keys = TRIGGER_KEYS
    assert keys == tuple(f.name for f in fields(TriggerForm))
    assert keys == (
        "suite",
        "runtime",
        "inventory",
        "frameworks",
        "models",
        "precisions",
        "topologies",
        "case_keys",
        "repeats",
        "batch_size",
        "compile",
    )
    # each field's kind is its Python type
    python_type = {
        "text": "str",
        "choice": "str",
        "multi": "tuple[str, ...]",
        "keys": "tuple[str, ...]",
        "count": "int",
    }
    for f in fields(TriggerForm):
        assert f.type == python_type[form_fields()[f.name].kind], f.name


def test_an_empty_trigger_and_nulls_read_as_the_forms_defaults():
    assert TriggerForm.from_params({}) == TriggerForm()
    cleared = {key: None for key in TRIGGER_KEYS}  # the UI sends null for a cleared field
    assert TriggerForm.from_params(cleared) == TriggerForm()
    form = TriggerForm()
    assert (form.suite, form.runtime, form.inventory, form.compile) == ("", "default", "", "suite")
    assert form.filters() == PlanFilters()


def test_a_trigger_reads_into_the_typed_form_and_back():
    params = {
        "suite": "suites/smoke.yaml",
        "runtime": "local",
        "inventory": "",
        "frameworks": ["pytorch_reference"],
        "models": [],
        "precisions": None,
        "topologies": ["1n1g", "1n2g"],
        "case_keys": [],
        "repeats": 3,
        "batch_size": 0,
        "compile": "both",
    }
    form = TriggerForm.from_params(params)
    assert form == TriggerForm(
        suite="suites/smoke.yaml",
        runtime="local",
        frameworks=("pytorch_reference",),
        topologies=("1n1g", "1n2g"),
        repeats=3,
        compile="both",
    )
    assert form.filters() == PlanFilters(frameworks=("pytorch_reference",), topologies=("1n1g", "1n2g"), repeats=3)
    # back: what differs from the form's defaults, as JSON, in the form's order
    assert form.to_params() == {
        "suite": "suites/smoke.yaml",
        "runtime": "local",
        "frameworks": ["pytorch_reference"],
        "topologies": ["1n1g", "1n2g"],
        "repeats": 3,
        "compile": "both",
    }
    assert list(form.to_params()) == [k for k in TRIGGER_KEYS if k in form.to_params()]
    assert TriggerForm.from_params(form.to_params()) == form
    assert TriggerForm().to_params() == {}


def test_an_unknown_key_is_refused_before_any_value_is_read():
    known = ", ".join(TRIGGER_KEYS)
    with pytest.raises(ConfigError) as refused:
        TriggerForm.from_params({"topology": ["1n1g"], "repeats": "many"})
    assert refused.value.problems == [
        f"unknown key 'topology' (did you mean 'topologies'?); the known keys are {known}"
    ]


def test_a_value_of_the_wrong_kind_is_refused_naming_each():
    with pytest.raises(ConfigError) as refused:
        TriggerForm.from_params(
            {"suite": 3, "frameworks": "mxnet", "case_keys": [1], "repeats": "3", "batch_size": True, "compile": "both"}
        )
    assert refused.value.source == "trigger form"
    assert refused.value.problems == [
        "suite: must be a string, got 3",
        "frameworks: must be a list of strings, got 'mxnet'",
        "case_keys: must be a list of strings, got [1]",
        "repeats: must be an integer, got '3'",
        "batch_size: must be an integer, got True",
    ]
    # values the suite decides on are left to it (dlperf_core.plan.form_overrides), in its words
    assert TriggerForm.from_params({"compile": "always", "repeats": -1}).compile == "always"


def test_the_rendered_params_are_the_hand_written_ones():
    """Each field's Param as the DAG declares it from the form's metadata (default, description, JSON schema with
    the form's keywords) is the Param the DAG declared by hand before, for the same choices."""
    choices = FormChoices.from_json(BEFORE["choices"])
    rendered = {}
    for name, param in form_params(choices).items():
        schema = dict(param.schema)
        description = schema.pop("description")
        rendered[name] = {"value": param.default, "description": description, "schema": schema}
    before = {
        name: {k: v for k, v in dump.items() if k in ("value", "description", "schema")}
        for name, dump in BEFORE["params"].items()
    }
    assert list(rendered) == list(before) == list(TRIGGER_KEYS)
    for name in before:
        assert rendered[name] == before[name], name


def test_the_rendered_params_offer_the_choices():
    choices = registry_choices()
    params = form_params(choices)
    assert params["frameworks"].schema["items"]["enum"] == list(choices.frameworks)
    assert params["topologies"].schema["values_display"] == {t: choices.topology_display(t) for t in choices.topologies}
    assert params["compile"].schema["enum"] == list(COMPILE_MODES)
    assert params["repeats"].schema["maximum"] == choices.max_repeats
    assert params["batch_size"].schema["maximum"] == choices.batch.maximum
    assert "none found" in params["batch_size"].schema["description"]  # the registry has no suite's batch sizes
    assert {name: p.default for name, p in params.items()} == {
        f.name: list(f.default) if isinstance(f.default, tuple) else f.default for f in fields(TriggerForm)
    }
