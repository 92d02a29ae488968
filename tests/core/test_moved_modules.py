"""The core's modules moved into subpackages; their old import paths still give the same module (an XCom value an
older dlperf wrote names its class by module, e.g. ``dlperf_core.handoff.PlannedRun``), and the top level holds
the subpackages and a few modules only."""

import importlib
from pathlib import Path

import dlperf_core
from dlperf_core.run.handoff import PlannedRun

TOP_LEVEL_MODULES = {"__init__", "model", "errors", "json_form", "home"}


def test_every_old_module_path_is_the_module_where_it_is_now():
    assert dlperf_core.MOVED, "the table of moved modules"
    for old, new in dlperf_core.MOVED.items():
        assert importlib.import_module(f"dlperf_core.{old}") is importlib.import_module(f"dlperf_core.{new}"), old
    assert importlib.import_module("dlperf_core.handoff").PlannedRun is PlannedRun
    # dlperf_core/measure.py became the package dlperf_core.measure: its class path still names the class
    from dlperf_core.measure import Measurement
    from dlperf_core.measure.measurement import Measurement as now

    assert Measurement is now


def test_the_top_level_holds_subpackages_and_a_few_modules():
    top = Path(dlperf_core.__file__).parent
    assert {p.stem for p in top.glob("*.py")} == TOP_LEVEL_MODULES
    packages = {p.name for p in top.iterdir() if (p / "__init__.py").is_file()}
    assert {"plan", "cluster", "run", "measure", "importers", "storage", "reporting", "parsing"} <= packages
    for package in packages:  # each says what it owns
        assert importlib.import_module(f"dlperf_core.{package}").__doc__, package
