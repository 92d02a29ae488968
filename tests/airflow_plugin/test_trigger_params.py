"""The DAG's Params rendered from the trigger form's type (plugins/dlperf_airflow/trigger_params.py): the very
Params dags/dlperf_benchmark.py declared by hand before (tests/data/trigger-params.json: each Param's ``dump()``
captured from that DAG, for the choices stored beside them)."""

from __future__ import annotations

import json
from pathlib import Path

from dlperf_airflow.trigger_params import params_of, trigger_params
from dlperf_core.plan.form_choices import FormChoices, discover_choices
from dlperf_core.plan.trigger_form import TRIGGER_KEYS
from helpers import REPO

BEFORE = json.loads((REPO / "tests/data/trigger-params.json").read_text())


def dumps(params) -> dict:
    return {name: json.loads(json.dumps(param.dump())) for name, param in params.items()}


def test_the_params_are_those_the_dag_declared_by_hand():
    rendered = dumps(params_of(FormChoices.from_json(BEFORE["choices"])))
    assert list(rendered) == list(BEFORE["params"]) == list(TRIGGER_KEYS)
    for name, before in BEFORE["params"].items():
        assert rendered[name] == before, name  # default, description, schema (types, enums, sections, ...), source


def test_the_params_offer_what_the_suites_of_the_home_allow(tmp_path: Path):
    home = tmp_path / "home"
    (home / "suites").mkdir(parents=True)
    (home / "inventories").mkdir()
    (home / "inventories" / "local.yaml").write_text("name: local\nnodes:\n  - {name: n0, gpus: 2}\n")
    (home / "suites" / "smoke.yaml").write_text(
        "name: smoke\nbenchmarks:\n  - {framework: pytorch_reference, model: resnet50_v1.5, batch_size_per_device: 8, "
        "topologies: [1n1g, 1n2g]}\n"
    )
    params = trigger_params(home)
    assert dumps(params) == dumps(params_of(discover_choices(home)))
    assert params["topologies"].schema["items"]["enum"] == ["1n1g", "1n2g"]
    assert params["suite"].schema["examples"] == ["suites/smoke.yaml"]
