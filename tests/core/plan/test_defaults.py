"""The deployment's defaults (dlperf_core/plan/defaults.py): what a run uses when its trigger leaves the suite,
runtime or inventory open, read from the environment when the run is planned, never at DAG parse time."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlperf_core.errors import ConfigError
from dlperf_core.plan.defaults import (
    DEFAULT_SUITE,
    FORM_DEFAULT,
    DeploymentDefaults,
    fill_from_defaults,
)
from dlperf_core.plan.trigger import resolve_trigger
from helpers import REPO

COMPOSE = {
    "DLPERF_DEFAULT_SUITE": "suites/smoke.yaml",
    "DLPERF_DEFAULT_RUNTIME": "docker",
    "DLPERF_DEFAULT_INVENTORY": "inventories/docker-local.yaml",
}


def test_without_a_deployment_the_defaults_are_the_smoke_suite_on_its_own_runtime():
    defaults = DeploymentDefaults.from_env({})
    assert defaults == DeploymentDefaults(DEFAULT_SUITE, "suite", None)
    assert defaults.describe() == "suites/smoke.yaml on the suite's runtime"


def test_a_wrong_runtime_in_the_environment_is_refused_naming_the_variable():
    with pytest.raises(ConfigError, match="DLPERF_DEFAULT_RUNTIME='gpu'"):
        DeploymentDefaults.from_env({"DLPERF_DEFAULT_RUNTIME": "gpu"})


def test_what_the_trigger_leaves_open_comes_from_the_defaults():
    defaults = DeploymentDefaults.from_env(COMPOSE)
    # the nightly run: nothing chosen (the form's defaults)
    nightly = fill_from_defaults("", FORM_DEFAULT, "", defaults)
    assert (nightly.suite, nightly.runtime, nightly.inventory) == (
        "suites/smoke.yaml",
        "docker",
        "inventories/docker-local.yaml",
    )
    assert nightly.from_defaults == ("suite", "runtime", "inventory")
    # a runtime picked by hand keeps its own usual inventory: the default inventory goes with the default runtime
    local = fill_from_defaults("suites/llm-cpu.yaml", "local", None, defaults)
    assert (local.suite, local.runtime, local.inventory, local.from_defaults) == (
        "suites/llm-cpu.yaml",
        "local",
        None,
        (),
    )
    # the suite's own runtime, asked for by name
    own = fill_from_defaults(None, "suite", None, defaults)
    assert (own.runtime, own.inventory, own.from_defaults) == ("suite", None, ("suite",))
    with pytest.raises(ConfigError, match="unknown runtime 'gpu'"):
        fill_from_defaults(None, "gpu", None, defaults)


def test_planning_reads_the_defaults_when_the_run_starts(monkeypatch):
    """The same parsed DAG (same Params) plans differently after the environment changed: nothing is read at
    parse time."""
    form_defaults = {"suite": "", "runtime": FORM_DEFAULT, "inventory": ""}
    for name in COMPOSE:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DLPERF_HOME", str(REPO))
    resolved = resolve_trigger(form_defaults, DeploymentDefaults.from_env())
    assert (resolved.suite.name, resolved.settings.runtime, Path(resolved.settings.inventory).name) == (
        "smoke",
        "local",
        "local.yaml",
    )
    for name, value in COMPOSE.items():
        monkeypatch.setenv(name, value)
    resolved = resolve_trigger(form_defaults, DeploymentDefaults.from_env())
    assert (resolved.suite.name, resolved.settings.runtime, resolved.inventory.name) == (
        "smoke",
        "docker",
        "docker-local",
    )
    assert resolved.from_defaults == ("suite", "runtime", "inventory")
    monkeypatch.setenv("DLPERF_DEFAULT_SUITE", "suites/llm-cpu.yaml")
    assert resolve_trigger(form_defaults, DeploymentDefaults.from_env()).suite.name == "llm-cpu"
