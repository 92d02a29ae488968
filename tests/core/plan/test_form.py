"""The trigger form's choices (dlperf_core/plan/form_choices.py), the DAG's Params built from them, and the plan-time
checks behind them (dlperf_core/plan/form_overrides.py, dlperf_core/plan/trigger.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dlperf_core.cluster.inventory import Inventory
from dlperf_core.errors import ConfigError
from dlperf_core.frameworks import ADAPTERS
from dlperf_core.plan.cases import PlanFilters, plan_suite
from dlperf_core.plan.form_choices import (
    MAX_BATCH_PER_DEVICE,
    choices_cache_path,
    choices_for,
    discover_choices,
    fitting_topologies,
    registry_choices,
    topology_label,
)
from dlperf_core.plan.form_overrides import check_trigger, with_batch_override
from dlperf_core.plan.suite import parse_suite
from helpers import REPO

TWO_BY_TWO = Inventory.model_validate({"name": "two", "nodes": [{"name": "a", "gpus": 2}, {"name": "b", "gpus": 2}]})


def suite_data(**changes):
    bench = {
        "framework": "pytorch_reference",
        "model": "resnet50_v1.5",
        "precisions": ["fp32", "amp"],
        "batch_size_per_device": {"fp32": 8, "amp": 16},
        "topologies": ["1n1g", "1n2g", "2n1g", "2n2g", "1n4g", "4n8g"],
    }
    return {"name": "t", "runtime": "local", "benchmarks": [bench | changes]}


def write_home(tmp_path: Path, suites: dict[str, str], inventory: str | None = None) -> Path:
    (tmp_path / "suites").mkdir()
    (tmp_path / "inventories").mkdir()
    (tmp_path / "inventories" / "local.yaml").write_text(
        inventory or "name: local\nnodes:\n  - {name: n0, gpus: 2}\n  - {name: n1, gpus: 2}\n"
    )
    for name, text in suites.items():
        (tmp_path / "suites" / name).write_text(textwrap.dedent(text))
    return tmp_path


def test_topologies_offered_are_those_the_inventory_can_hold():
    choices = choices_for(parse_suite(suite_data()), TWO_BY_TWO, "suites/t.yaml")
    # 1n4g needs 4 devices on a node and 4n8g four nodes: left out; ordered by devices, then nodes
    assert choices.topologies == ("1n1g", "1n2g", "2n1g", "2n2g")
    assert choices.precisions == ("fp32", "amp")
    assert choices.frameworks == ("pytorch_reference",) and choices.models == ("resnet50_v1.5",)
    assert choices.batch.in_suites == (8, 16)
    assert (choices.batch.minimum, choices.batch.maximum) == (1, MAX_BATCH_PER_DEVICE)


def test_topology_fit_rule_is_planning_s():
    """A topology is offered when planning (plan.check_fits) accepts one of its cases on the inventory."""
    suite = parse_suite(suite_data(topologies=["2n2g", "3n1g", "1n4g"]))
    assert fitting_topologies(suite, TWO_BY_TWO) == {"2n2g"}
    for topology in ("3n1g", "1n4g"):  # what the form leaves out, planning refuses
        with pytest.raises(ConfigError):
            plan_suite(suite, TWO_BY_TWO, PlanFilters(topologies=(topology,)))
    # a case the adapter cannot run there (AMP on PaddlePaddle's CPU image) does not offer its topology;
    # the same topology stays offered through a precision that runs
    cpu = Inventory.model_validate({"name": "cpu", "nodes": [{"name": "a", "gpus": 2, "accelerator": "cpu"}]})
    amp_only = parse_suite(
        {
            "name": "p",
            "runtime": "local",
            "benchmarks": [
                {
                    "framework": "paddle_plsc",
                    "model": "arcface_iresnet50",
                    "precisions": ["amp"],
                    "batch_size_per_device": 4,
                    "topologies": ["1n1g"],
                }
            ],
        }
    )
    assert fitting_topologies(amp_only, cpu) == set()
    both = parse_suite(
        {
            "name": "p",
            "runtime": "local",
            "benchmarks": [
                {
                    "framework": "paddle_plsc",
                    "model": "arcface_iresnet50",
                    "precisions": ["fp32", "amp"],
                    "batch_size_per_device": 4,
                    "topologies": ["1n1g"],
                }
            ],
        }
    )
    assert fitting_topologies(both, cpu) == {"1n1g"}
    assert topology_label("2n8g") == "2n8g: 2 nodes x 8 devices (16)"
    assert topology_label("1n1g") == "1n1g: 1 node x 1 device (1)"


def test_discover_merges_suites_default_first_and_skips_broken_ones(tmp_path):
    home = write_home(
        tmp_path,
        {
            "b-gpu.yaml": """
            name: gpu
            inventory: ../inventories/big.yaml
            benchmarks:
              - {framework: pytorch_reference, model: resnet50_v1.5, precisions: [tf32],
                 batch_size_per_device: 2048, topologies: [1n8g, 2n8g]}
        """,
            "smoke.yaml": """
            name: smoke
            benchmarks:
              - {framework: pytorch_reference, model: resnet50_v1.5, batch_size_per_device: 8,
                 topologies: [1n1g, 1n2g, 2n1g, 1n4g]}
        """,
            "broken.yaml": "name: broken\nbenchmarks: [{framework: nope}]\n",
        },
    )
    (home / "inventories" / "big.yaml").write_text(
        "name: big\nnodes:\n" + "".join(f"  - {{name: g{i}, gpus: 8}}\n" for i in range(2))
    )
    choices = discover_choices(home, default_suite="suites/smoke.yaml")
    assert choices.suites == ("suites/smoke.yaml", "suites/b-gpu.yaml")  # default first, broken one skipped
    assert choices.inventories == ("inventories/big.yaml", "inventories/local.yaml")
    assert choices.topologies == ("1n1g", "1n2g", "2n1g", "1n8g", "2n8g")  # 1n4g fits neither inventory
    assert choices.precisions == ("fp32", "tf32")
    assert choices.batch.maximum == 2048  # a suite already uses more than the default ceiling


def test_without_readable_suites_the_adapter_registry_is_offered(tmp_path):
    for home in (tmp_path / "missing", write_home(tmp_path, {"bad.yaml": ": not yaml ["})):
        choices = discover_choices(home)
        registry = registry_choices()
        for field in ("suites", "frameworks", "models", "precisions", "topologies", "batch"):
            assert getattr(choices, field) == getattr(registry, field), field
        assert choices.frameworks == tuple(sorted(ADAPTERS))
        assert choices.sources == ("framework adapter registry",)


SMOKE = """
name: smoke
benchmarks:
  - {framework: pytorch_reference, model: resnet50_v1.5, batch_size_per_device: 8, topologies: [1n1g, 1n2g]}
"""


def spy_loads(monkeypatch) -> list[Path]:
    """Every suite and inventory file discover_choices loads from now on."""
    from dlperf_core.plan import form_choices as form

    loaded: list[Path] = []
    for name in ("load_suite", "load_inventory"):
        real = getattr(form, name)

        def spy(path, real=real):
            loaded.append(Path(path))
            return real(path)

        monkeypatch.setattr(form, name, spy)
    return loaded


def test_an_unchanged_home_reads_the_cached_choices_and_no_suite(tmp_path, monkeypatch, caplog):
    home = write_home(tmp_path, {"smoke.yaml": SMOKE, "broken.yaml": "name: broken\nbenchmarks: [{framework: nope}]\n"})
    first = discover_choices(home, default_suite="suites/smoke.yaml")
    assert choices_cache_path(home) == home / ".dlperf" / "cache" / "form-choices.json"
    assert choices_cache_path(home).is_file()
    loaded = spy_loads(monkeypatch)
    opened: list[str] = []
    real_open = Path.open
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: opened.append(str(self)) or real_open(self, *a, **k))
    caplog.clear()
    again = discover_choices(home, default_suite="suites/smoke.yaml")
    assert again == first  # the same choices, every field as computed
    assert loaded == []  # no suite, no inventory loaded
    assert opened == [str(choices_cache_path(home))]  # the one file read: the cache
    assert "trigger form: skipping suites/broken.yaml" in caplog.text  # its warning is still logged on each parse
    # another default suite is another key: computed again (and cached for it)
    assert discover_choices(home, default_suite="suites/broken.yaml").suites == ("suites/smoke.yaml",)
    assert any(p.name == "smoke.yaml" for p in loaded)


def test_a_changed_added_or_removed_file_recomputes_the_choices(tmp_path, monkeypatch):
    home = write_home(tmp_path, {"smoke.yaml": SMOKE})
    assert discover_choices(home).topologies == ("1n1g", "1n2g")
    loaded = spy_loads(monkeypatch)
    suite = home / "suites" / "smoke.yaml"
    suite.write_text(SMOKE.replace("1n2g]", "1n2g, 2n1g]"))
    assert discover_choices(home).topologies == ("1n1g", "1n2g", "2n1g")  # the edited suite
    seen = len(loaded)
    assert seen and discover_choices(home).topologies == ("1n1g", "1n2g", "2n1g")
    assert len(loaded) == seen  # cached again
    stat = suite.stat()
    suite.write_text(SMOKE.replace("1n2g]", "1n2g, 2n2g]"))  # the same size: its mtime tells
    os.utime(suite, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert suite.stat().st_size == stat.st_size
    assert discover_choices(home).topologies == ("1n1g", "1n2g", "2n2g")
    (home / "suites" / "gpu.yaml").write_text(SMOKE.replace("smoke", "gpu").replace("1n1g, 1n2g", "2n1g"))
    assert discover_choices(home).suites == ("suites/smoke.yaml", "suites/gpu.yaml")
    (home / "suites" / "gpu.yaml").unlink()
    assert discover_choices(home).suites == ("suites/smoke.yaml",)
    (home / "inventories" / "tiny.yaml").write_text("name: tiny\nnodes:\n  - {name: n0, gpus: 1}\n")
    assert discover_choices(home).inventories == ("inventories/local.yaml", "inventories/tiny.yaml")
    # an inventory a suite names outside inventories/ counts too
    (home / "elsewhere").mkdir()
    (home / "elsewhere" / "one.yaml").write_text("name: one\nnodes:\n  - {name: n0, gpus: 1}\n")
    suite.write_text("inventory: ../elsewhere/one.yaml\n" + SMOKE.replace("1n2g]", "1n2g, 1n1g]"))
    assert discover_choices(home).topologies == ("1n1g",)  # 1n2g does not fit one device
    (home / "elsewhere" / "one.yaml").write_text("name: one\nnodes:\n  - {name: n0, gpus: 2}\n")
    assert discover_choices(home).topologies == ("1n1g", "1n2g")


@pytest.mark.parametrize(
    "content",
    [b"", b"{not json", b"[]", b'{"key": 1}', b"\xff\xfe", "{}"],
    ids=["empty", "not-json", "a-list", "foreign-key", "not-utf8", "another-layout"],
)
def test_a_broken_cache_file_is_ignored_and_rewritten(tmp_path, content):
    home = write_home(tmp_path, {"smoke.yaml": SMOKE})
    expected = discover_choices(home)
    cache = choices_cache_path(home)
    if content == "{}":  # the right key, choices of another form
        data = json.loads(cache.read_text())
        data["choices"]["batch"] = {"minimum": "1"}
        content = json.dumps(data).encode()
    cache.write_bytes(content)
    assert discover_choices(home) == expected
    assert json.loads(cache.read_text())["choices"]["suites"] == ["suites/smoke.yaml"]  # rewritten
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]  # and no temporary file left


def test_without_a_writable_state_folder_the_choices_are_just_computed(tmp_path, monkeypatch):
    home = write_home(tmp_path, {"smoke.yaml": SMOKE})
    (home / ".dlperf").write_text("a file where the state folder would be")  # no folder can be made there
    loaded = spy_loads(monkeypatch)
    for _ in range(2):
        assert discover_choices(home).suites == ("suites/smoke.yaml",)
    assert [p.name for p in loaded].count("smoke.yaml") == 2  # computed each time, never an error
    assert list(home.rglob("*.tmp")) == []  # no stray temporary file


def test_check_trigger_names_values_the_chosen_suite_lacks():
    suite = parse_suite(suite_data(topologies=["1n1g", "1n2g"]))
    check_trigger(suite, PlanFilters(topologies=("1n2g",), precisions=("amp",), repeats=3))
    with pytest.raises(ConfigError) as err:
        check_trigger(suite, PlanFilters(topologies=("1n1g", "2n8g"), precisions=("tf32",), models=("bert",)))
    text = str(err.value)
    assert "invalid trigger form" in text
    assert "topologies: 2n8g not in suite 't' (it has 1n1g, 1n2g)" in text
    assert "precisions: tf32 not in suite 't' (it has fp32, amp)" in text
    assert "models: bert not in suite" in text
    with pytest.raises(ConfigError, match="repeats: must be from 1 to 100, got 500"):
        check_trigger(suite, PlanFilters(repeats=500))


def test_batch_override_replaces_every_batch_and_is_bounded():
    suite = parse_suite(suite_data())
    assert with_batch_override(suite, None) is suite and with_batch_override(suite, 0) is suite
    runs = plan_suite(with_batch_override(suite, 32), TWO_BY_TWO, PlanFilters(topologies=("1n1g",), repeats=1))
    assert sorted({r.case.batch_size_per_device for r in runs}) == [32]
    assert {r.case.precision for r in runs} == {"fp32", "amp"}
    for bad in (MAX_BATCH_PER_DEVICE + 1, -4, True, "64"):
        with pytest.raises(ConfigError, match="batch_size: must be an integer from 1 to 1024"):
            with_batch_override(suite, bad)


def test_plan_step_settings_refuse_and_override(monkeypatch):
    """What plan_cases does with the form's values (dlperf_core.plan.trigger): refused before any case runs when the
    chosen suite lacks a value; the batch override reaches every planned case."""
    from dlperf_core.plan.defaults import DeploymentDefaults
    from dlperf_core.plan.trigger import plan_trigger, resolve_trigger

    def resolve(params):
        return resolve_trigger(params, DeploymentDefaults())

    monkeypatch.setenv("DLPERF_HOME", str(REPO))
    params = {"suite": "suites/smoke.yaml", "runtime": "local", "topologies": ["4n8g"]}
    with pytest.raises(ConfigError, match="topologies: 4n8g not in suite 'smoke'"):
        resolve(params)
    resolved = resolve(
        {
            "suite": "suites/smoke.yaml",
            "runtime": "local",
            "topologies": ["1n2g"],
            "repeats": 1,
            "batch_size": 4,
            "frameworks": None,
            "models": None,
            "precisions": None,
        }  # the UI sends null for a cleared multi-select
    )
    runs = [p.run for p in plan_trigger(resolved).cases]
    assert [(r.case.framework, r.case.topology, r.case.batch_size_per_device) for r in runs] == [
        ("pytorch_reference", "1n2g", 4),
        ("allreduce_probe", "1n2g", 1),  # the suite's fabric probe at the same topology (messages, no batch)
    ]
    with pytest.raises(ConfigError, match="batch_size"):
        resolve({"suite": "suites/smoke.yaml", "batch_size": 5000})


def test_a_plan_over_the_deployments_map_length_is_refused_before_any_case_runs(monkeypatch):
    """Airflow maps at most ``[core] max_map_length`` items from one list; a bigger plan is refused when it is
    planned, with the count, the limit and the ways out, instead of failing the run after planning. dlperf's own
    deployments raise the limit above a real night's 1,350 case runs."""
    from dlperf_cli.embedded import airflow_settings
    from dlperf_core.plan.defaults import MAX_CASE_RUNS, DeploymentDefaults
    from dlperf_core.plan.trigger import plan_trigger, resolve_trigger

    monkeypatch.setenv("DLPERF_HOME", str(REPO))
    resolved = resolve_trigger({"suite": "suites/smoke.yaml", "runtime": "local"}, DeploymentDefaults())
    planned = len(plan_trigger(resolved).cases)
    assert len(plan_trigger(resolved, max_case_runs=planned).cases) == planned
    with pytest.raises(ConfigError, match=rf"plans {planned} case runs; this deployment maps at most {planned - 1} "):
        plan_trigger(resolved, max_case_runs=planned - 1)
    assert MAX_CASE_RUNS >= 1350
    assert airflow_settings(Path("/tmp"))["AIRFLOW__CORE__MAX_MAP_LENGTH"] == str(MAX_CASE_RUNS)


def test_an_unknown_trigger_key_is_refused_first_naming_it_the_closest_key_and_the_known_ones(monkeypatch):
    """Airflow accepts any key in a trigger's conf: a misspelt ``topology`` planned every topology of the suite.
    plan_cases refuses it (dlperf_core.plan.trigger.check_keys) before it reads anything else, in words."""
    from dlperf_core.plan.defaults import DeploymentDefaults
    from dlperf_core.plan.trigger import TRIGGER_KEYS, resolve_trigger, unknown_keys

    known = ", ".join(TRIGGER_KEYS)
    assert unknown_keys(["suite", "topologies", "repeats"]) is None
    assert unknown_keys(["topology", "repeats"]) == (
        f"unknown key 'topology' (did you mean 'topologies'?); the known keys are {known}"
    )
    assert unknown_keys(["suit", "repeats", "fast"]) == (
        f"unknown keys 'suit' (did you mean 'suite'?), 'fast'; the known keys are {known}"
    )
    assert unknown_keys(["batch"], ("batch_size", "compile")) == (
        "unknown key 'batch' (did you mean 'batch_size'?); the known keys are batch_size, compile"
    )
    monkeypatch.setenv("DLPERF_HOME", str(REPO))
    with pytest.raises(ConfigError) as refused:  # the key first: the suite named is not even looked for
        resolve_trigger({"suite": "nope.yaml", "topology": ["1n1g"], "repeats": 1}, DeploymentDefaults())
    assert str(refused.value) == (
        "invalid trigger form (1 problem(s)):\n"
        f"  trigger form: unknown key 'topology' (did you mean 'topologies'?); the known keys are {known}"
    )


def test_a_suite_or_inventory_that_is_not_there_is_refused_in_words(monkeypatch, tmp_path):
    """The form's suite and inventory are free text without a JSON schema pattern (Airflow would answer a bad one
    with the schema's text); plan_cases refuses a name that is no YAML file there, with the known files and the
    closest of them."""
    from dlperf_core.plan.defaults import DeploymentDefaults
    from dlperf_core.plan.trigger import known_files, resolve_trigger, unknown_file

    known = ["suites/seeds.yaml", "suites/smoke.yaml"]
    home = Path("/opt/dlperf")
    tail = "(or a YAML file's path, relative to the dlperf home /opt/dlperf or absolute)"
    assert unknown_file("suite", "suites", "x", known, home) == (
        f"suite: unknown suite 'x'; known suites: suites/seeds.yaml, suites/smoke.yaml {tail}"
    )
    for near in ("smoke", "smoke.yml", "suites/smok.yaml"):  # by stem, file name or path
        said = unknown_file("suite", "suites", near, known, home)
        assert f"unknown suite {near!r} (did you mean 'suites/smoke.yaml'?); known suites: " in said
    assert unknown_file("inventory", "inventories", "x.yaml", [], home).startswith(
        "inventory: unknown inventory 'x.yaml'; known inventories: none "
    )

    monkeypatch.setenv("DLPERF_HOME", str(REPO))
    suites = known_files("suites")
    assert "suites/smoke.yaml" in suites and suites == sorted(suites)

    def refusal(params):
        with pytest.raises(ConfigError) as refused:
            resolve_trigger(params, DeploymentDefaults())
        assert len(refused.value.problems) == 1, refused.value.problems
        return refused.value.problems[0]

    assert refusal({"suite": "x", "runtime": "local"}) == (
        f"suite: unknown suite 'x'; known suites: {', '.join(suites)} "
        f"(or a YAML file's path, relative to the dlperf home {REPO} or absolute)"
    )
    assert refusal({"suite": "README.md"}).startswith("suite: unknown suite 'README.md'; known suites: ")  # no YAML
    assert refusal({"suite": str(tmp_path / "gone.yaml")}).startswith(f"suite: unknown suite '{tmp_path}/gone.yaml'")
    said = refusal({"suite": "suites/smoke.yaml", "runtime": "local", "inventory": "inventories/locl.yaml"})
    assert said.startswith(
        "inventory: unknown inventory 'inventories/locl.yaml' (did you mean 'inventories/local.yaml'?); "
        "known inventories: inventories/docker-local.yaml, "
    )
    # a file that is there is read as before, relative to the dlperf home or absolute
    assert resolve_trigger({"suite": str(REPO / "suites/smoke.yaml"), "runtime": "local"}, DeploymentDefaults())


PROBE = r"""
import copy, json
from dlperf_cli.embedded import prepare_environment
prepare_environment()
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=__import__("os").environ["AIRFLOW__CORE__DAGS_FOLDER"])
dag = bag.dags["dlperf_benchmark"]
def accepted(key, value):
    params = copy.deepcopy(dag.params)
    try:
        params[key] = value
        return True
    except Exception:
        return False
trials = [("topologies", ["2n1g"]), ("topologies", ["3n3g"]), ("topologies", ["1n1g", "1n1g"]),
          ("topologies", None), ("models", ["resnet50_v1.5"]), ("models", ["bert"]),
          ("batch_size", 64), ("batch_size", 0), ("batch_size", None), ("batch_size", 5000), ("batch_size", -1),
          ("repeats", 1), ("repeats", 101), ("suite", "suites/resnet50-gpu.yaml"), ("suite", "suites/x.txt"),
          ("suite", "x"), ("inventory", ""), ("inventory", None), ("inventory", "inventories/local.yaml"),
          ("inventory", "a b")]
schema = {k: dag.params.get_param(k).schema for k in dag.params}
declared = {k: [dag.params.get_param(k).value, dag.params.get_param(k).description] for k in dag.params}
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()},
                  "accepted": [[k, v, accepted(k, v)] for k, v in trials], "schema": schema, "declared": declared}))
"""


def test_dag_params_are_the_form_choices(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")} | {
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "DLPERF_HOME": str(REPO),
    }
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["errors"] == {}
    accepted = {(k, json.dumps(v)): ok for k, v, ok in info["accepted"]}
    refused = sorted(k for k, ok in accepted.items() if not ok)
    assert refused == sorted(
        [
            ("topologies", '["3n3g"]'),
            ("topologies", '["1n1g", "1n1g"]'),
            ("models", '["bert"]'),
            ("batch_size", "5000"),
            ("batch_size", "-1"),
            ("repeats", "101"),
        ]
    )
    # a suite or inventory name is free text: plan_cases refuses one that is not there, in words (Airflow's answer
    # to a JSON schema pattern was the schema itself; test_a_suite_or_inventory_that_is_not_there_is_refused_...)
    assert accepted[("suite", '"x"')] and accepted[("inventory", '"a b"')]
    expected = discover_choices(REPO)
    schema = info["schema"]
    # the form's fields are the trigger's keys: any other key is refused at planning (dlperf_core.plan.trigger)
    from dlperf_core.plan.trigger import TRIGGER_KEYS
    from dlperf_core.plan.trigger_form import form_params

    assert list(schema) == list(TRIGGER_KEYS)
    # each Param is what the form's type renders for these choices (dlperf_airflow.trigger_params)
    for name, param in form_params(expected).items():
        assert [param.default, param.schema["description"]] == info["declared"][name], name
        assert schema[name] == {k: v for k, v in param.schema.items() if k != "description"}, name
    assert schema["topologies"]["items"]["enum"] == list(expected.topologies)
    assert schema["topologies"]["examples"] == list(expected.topologies)
    # each topology names the suites that have it, so a pick the chosen suite lacks is visible in the form
    assert schema["topologies"]["values_display"]["1n2g"].startswith("1n2g: 1 node x 2 devices (2) - in smoke, ")
    assert "smoke" not in schema["topologies"]["values_display"]["4n8g"]
    assert schema["precisions"]["items"]["enum"] == list(expected.precisions)
    assert schema["suite"]["examples"][0] == "suites/smoke.yaml"
    assert schema["batch_size"]["maximum"] == expected.batch.maximum
    assert {"What to run", "Filters", "Measurement"} <= {schema[k].get("section") for k in schema}
    # a cleared field is null in the UI: allowed for every optional field, so the form never blocks on it
    # suite and runtime left at their defaults mean the deployment's defaults (dlperf_core.plan.defaults)
    assert schema["runtime"]["enum"][0] == "default"
    for name in ("suite", "inventory", "frameworks", "models", "precisions", "topologies", "repeats", "batch_size"):
        assert "null" in schema[name]["type"], name
