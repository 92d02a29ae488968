"""``dlperf airflow-setup``: the bundle entry at the installed DAG files with the admin's own bundles kept, dlperf's
deserialization classes appended to the admin's, max_map_length and the pool, as airflow.cfg and as env lines.
(The lines at work in a fresh Airflow: tests/deploy/test_provider_install.py.)"""

from __future__ import annotations

import configparser
import json
import re
import shlex

import pytest

from dlperf_cli.airflow_setup_cmd import (
    CLUSTER_POOL,
    CLUSTER_POOL_DESCRIPTION,
    DEFAULT_BUNDLES,
    LOCAL_BUNDLE,
    bundle_path,
    pool_command,
)
from dlperf_cli.main import main
from dlperf_core.json_form import ALLOWED_DESERIALIZATION_CLASSES
from dlperf_core.plan.defaults import MAX_CASE_RUNS
from helpers import REPO


def _setup(capsys, *args: str) -> str:
    assert main(["airflow-setup", *args]) == 0
    return capsys.readouterr().out


def _env(text: str) -> dict[str, str]:
    """The ``KEY=value`` lines, read as a shell would (comments skipped)."""
    pairs = [shlex.split(l)[0].split("=", 1) for l in text.splitlines() if l and not l.startswith("#")]
    return {k: v for k, v in pairs}


def test_the_bundle_is_the_checkouts_dags_in_an_editable_install():
    assert bundle_path() == REPO / "dags"
    assert {"dlperf_benchmark.py", "dlperf_accept_regression.py"} <= {p.name for p in bundle_path().iterdir()}


def test_cfg_lines_keep_airflows_default_bundle_and_add_dlperfs(capsys):
    out = _setup(capsys)
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read_string("\n".join(l for l in out.splitlines() if not l.startswith("#")))
    bundles = json.loads(cfg["dag_processor"]["dag_bundle_config_list"])
    assert bundles == [
        {"name": "dags-folder", "classpath": LOCAL_BUNDLE, "kwargs": {}},
        {"name": "dlperf", "classpath": LOCAL_BUNDLE, "kwargs": {"path": str(REPO / "dags"), "refresh_interval": 0}},
    ]
    assert bundles[0] == DEFAULT_BUNDLES[0]
    assert cfg["core"]["allowed_deserialization_classes"] == "airflow.* dlperf_core.*"
    assert cfg["core"]["max_map_length"] == str(MAX_CASE_RUNS)
    pool_line = next(l for l in out.splitlines() if "airflow pools set" in l)
    command = shlex.split(pool_line.split(": ", 1)[1])
    assert command == ["airflow", "pools", "set", "--include-deferred", CLUSTER_POOL, "1", CLUSTER_POOL_DESCRIPTION]


def test_env_lines_append_to_the_admins_own_values(capsys):
    own = [{"name": "team", "classpath": "airflow.providers.git.bundles.git.GitDagBundle", "kwargs": {"subdir": "d"}}]
    stale = {"name": "dlperf", "classpath": LOCAL_BUNDLE, "kwargs": {"path": "/old"}}
    out = _setup(
        capsys,
        "--format",
        "env",
        "--bundles",
        json.dumps([*own, stale]),
        "--allowed-deserialization-classes",
        "airflow.* mycorp.* dlperf_core.*",
    )
    env = _env(out)
    assert set(env) == {
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST",
        "AIRFLOW__CORE__ALLOWED_DESERIALIZATION_CLASSES",
        "AIRFLOW__CORE__MAX_MAP_LENGTH",
    }
    bundles = json.loads(env["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"])
    assert bundles[0] == own[0] and [b["name"] for b in bundles] == ["team", "dlperf"]  # the old dlperf entry replaced
    assert bundles[1]["kwargs"]["path"] == str(REPO / "dags")
    # each pattern once, the admin's first
    assert env["AIRFLOW__CORE__ALLOWED_DESERIALIZATION_CLASSES"] == "airflow.* mycorp.* dlperf_core.*"
    assert set(ALLOWED_DESERIALIZATION_CLASSES.split()) <= set(
        env["AIRFLOW__CORE__ALLOWED_DESERIALIZATION_CLASSES"].split()
    )
    assert env["AIRFLOW__CORE__MAX_MAP_LENGTH"] == str(MAX_CASE_RUNS)


@pytest.mark.parametrize("bundles", ["not json", '{"name": "x"}', "[1]"])
def test_a_bundle_list_that_is_not_one_is_refused(capsys, bundles):
    assert main(["airflow-setup", "--bundles", bundles]) == 2
    assert "--bundles" in capsys.readouterr().err


def test_the_docs_example_is_what_it_prints(capsys):
    """docs/airflow-provider.md's example output, its venv's path standing for this checkout's dags/."""
    page = (REPO / "docs" / "airflow-provider.md").read_text()
    example = re.search(r"^\$ dlperf airflow-setup --format env\n(.*?)^```", page, flags=re.M | re.S)
    assert example is not None
    shown = example.group(1).replace(
        "/opt/airflow-venv/lib/python3.11/site-packages/dlperf_airflow/bundle", str(bundle_path())
    )
    assert shown == _setup(capsys, "--format", "env")
    assert f"`{pool_command()}`" in page.replace("\n  ", " ")  # the list item's text, its line breaks joined
