"""The deployment: docker-compose.yaml validates (Compose's own `config`), needs every secret from .env,
and the Airflow image built from the local Debian base runs Airflow, imports the DAG without torch, and
runs as a non-root user. The PostgreSQL init script makes dlperf's own database and user.

Compose comes from ``scripts/ensure-compose.sh`` (the `docker compose` plugin, or Debian's docker-compose);
the image from ``scripts/build-images.sh`` (``DLPERF_TEST_NO_BUILD=1``: use the image that is there).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from dlperf_core.json_form import ALLOWED_DESERIALIZATION_CLASSES
from dlperf_core.plan.defaults import (
    CELERY_CONFIG_OPTIONS,
    EXECUTION_API_RETRIES,
    MAX_CASE_RUNS,
    TASK_SUPERVISOR_WAKE_S,
)
from e2e_helpers import docker_output
from helpers import REPO, docker_available, image_present

AIRFLOW_IMAGE = os.environ.get("DLPERF_AIRFLOW_IMAGE", "dlperf/airflow:3.3.2")
CORE_SERVICES = {
    "postgres",
    "redis",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-worker",
    "airflow-triggerer",
    "airflow-init",
}
SECRETS = [
    "AIRFLOW_POSTGRES_PASSWORD",
    "DLPERF_DB_PASSWORD",
    "REDIS_PASSWORD",
    "AIRFLOW_FERNET_KEY",
    "AIRFLOW_JWT_SECRET",
    "AIRFLOW_API_SECRET_KEY",
    "DLPERF_ADMIN_PASSWORD",
]


@pytest.fixture(scope="module")
def compose() -> list[str]:
    proc = subprocess.run(
        ["bash", str(REPO / "scripts/ensure-compose.sh")], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        pytest.skip(f"no Compose implementation (scripts/ensure-compose.sh): {proc.stderr.strip()[-300:]}")
    return shlex.split(proc.stdout.strip().splitlines()[-1])


def _config(compose: list[str], env_file: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    # A clean environment: values come from the env file only, not from whoever runs the tests.
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DOCKER_HOST", "LANG")}
    return subprocess.run(
        [
            *compose,
            "--env-file",
            str(env_file),
            "-f",
            str(REPO / "docker-compose.yaml"),
            "--project-directory",
            str(REPO),
            *extra,
            "config",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _env_example(tmp_path: Path, drop: str | None = None) -> Path:
    lines = (REPO / ".env.example").read_text().splitlines()
    kept = [line for line in lines if not (drop and line.startswith(f"{drop}="))]
    path = tmp_path / "env"
    path.write_text("\n".join(kept) + "\n")
    return path


def test_env_example_documents_every_variable_the_compose_file_reads():
    compose_vars = set(re.findall(r"(?<!\$)\$\{([A-Z0-9_]+)", (REPO / "docker-compose.yaml").read_text()))
    example = (REPO / ".env.example").read_text()
    documented = set(re.findall(r"^([A-Z0-9_]+)=", example, re.M))
    assert compose_vars - documented == set(), "read by docker-compose.yaml but not in .env.example"
    for name in SECRETS:  # each secret has a comment above it and only a placeholder value
        assert re.search(rf"^# .*\n(?:# .*\n)*{name}=change-me$", example, re.M), name


def test_compose_file_validates_with_the_example_env(compose, tmp_path):
    out = _config(compose, _env_example(tmp_path))
    assert out.returncode == 0, out.stderr
    config = yaml.safe_load(out.stdout)
    services = config["services"]
    assert CORE_SERVICES.issubset(services)
    for name in CORE_SERVICES - {"postgres", "redis"}:
        svc = services[name]
        assert svc["image"] == AIRFLOW_IMAGE, name
        env = svc["environment"]
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
        # the tasks' hand-offs are dlperf's types: every Airflow component may read them back from XCom
        assert env["AIRFLOW__CORE__ALLOWED_DESERIALIZATION_CLASSES"] == ALLOWED_DESERIALIZATION_CLASSES
        # a real night's matrix (1,350 case runs) maps: above Airflow's default 1,024, on every component
        assert env["AIRFLOW__CORE__MAX_MAP_LENGTH"] == str(MAX_CASE_RUNS)
        # a finished task gives its worker slot back within 1 s, not Airflow's 5 (bench/growth_nodes.py)
        assert env["AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL"] == str(TASK_SUPERVISOR_WAKE_S)
        # a task rides out an api-server restart (tests/chaos/)
        assert env["AIRFLOW__WORKERS__EXECUTION_API_RETRIES"] == str(EXECUTION_API_RETRIES)
        # a Celery worker imports dlperf's modules once, not each task (bench/growth_nodes.py)
        assert env["AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS"] == CELERY_CONFIG_OPTIONS
        # dlperf's results: own database and user in the same server as Airflow's metadata DB
        assert env["DLPERF_DB_URL"] == "postgresql+psycopg2://dlperf:change-me@postgres:5432/dlperf"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres:5432/airflow")
    assert services["airflow-apiserver"]["command"] in ("api-server", ["api-server"])
    assert services["airflow-init"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["airflow-scheduler"]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    assert any("/var/run/docker.sock" in str(v) for v in services["airflow-worker"]["volumes"])


def test_node_worker_listens_on_its_queue_with_its_docker_socket(compose, tmp_path):
    env = _env_example(tmp_path)
    env.write_text(
        env.read_text() + "DLPERF_NODE_QUEUE=gpu-node-3\nDLPERF_NODE_DOCKER_SOCKET=/run/node3.sock\n"
        "DLPERF_CENTRAL_HOST=10.9.8.7\nDLPERF_NODE_NAME=gpu-node-3\n"
        "DLPERF_CLUSTER_INVENTORY=inventories/example-cluster.yaml\nDLPERF_SCHEDULE=30 1 * * 1-5\n"
    )
    out = _config(compose, env, "--profile", "node-worker")
    assert out.returncode == 0, out.stderr
    worker = yaml.safe_load(out.stdout)["services"]["airflow-node-worker"]
    command = worker["command"] if isinstance(worker["command"], list) else shlex.split(worker["command"])
    assert command[:2] == ["celery", "worker"]
    assert command[command.index("--queues") + 1] == "gpu-node-3"
    assert worker["environment"]["DLPERF_NODE"] == "gpu-node-3"  # a task for another node refuses to run here
    # .env's DLPERF_CLUSTER_INVENTORY reaches every Airflow component as Airflow's option [dlperf] cluster_inventory
    assert worker["environment"]["AIRFLOW__DLPERF__CLUSTER_INVENTORY"] == "inventories/example-cluster.yaml"
    assert "DLPERF_CLUSTER_INVENTORY" not in worker["environment"]  # the DAG reads no such variable
    assert worker["environment"]["AIRFLOW__DLPERF__SCHEDULE"] == "30 1 * * 1-5"  # Airflow's [dlperf] schedule
    assert worker["environment"]["DLPERF_DB_URL"].endswith("@postgres:5432/dlperf")  # the common environment too
    assert any(
        str(v).startswith("/run/node3.sock:/var/run/docker.sock")
        or (isinstance(v, dict) and v.get("source") == "/run/node3.sock")
        for v in worker["volumes"]
    )
    assert sorted(worker["extra_hosts"]) == sorted(
        ["postgres:10.9.8.7", "redis:10.9.8.7", "airflow-apiserver:10.9.8.7"]
    )


@pytest.mark.parametrize("secret", SECRETS)
def test_compose_refuses_to_run_without_each_secret(compose, tmp_path, secret):
    out = _config(compose, _env_example(tmp_path, drop=secret))
    assert out.returncode != 0
    assert f"set {secret} in .env" in out.stderr


def test_no_secret_is_committed():
    text = (REPO / "docker-compose.yaml").read_text()
    secret_keys = re.finditer(r"^\s*([A-Z_]*(?:PASSWORD|SECRET|FERNET_KEY)[A-Z_]*):\s+(\S+)", text, re.M)
    literal = {k: v for k, v in (m.groups() for m in secret_keys) if not k.endswith("_FILE") and not v.startswith("${")}
    assert literal == {}, "a literal secret in docker-compose.yaml"
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=REPO).returncode == 0
    tracked = (
        subprocess.run(["git", "ls-files", "--error-unmatch", ".env"], cwd=REPO, capture_output=True).returncode == 0
    )
    assert not tracked and ignored, ".env must be git-ignored and never committed"


# --------------------------------------------------------------------------- the image


@pytest.fixture(scope="module")
def airflow_image() -> str:
    if not docker_available():
        pytest.skip("no Docker engine (scripts/ensure-docker.sh starts one)")
    if os.environ.get("DLPERF_TEST_NO_BUILD") != "1":
        proc = subprocess.run(
            [str(REPO / "scripts/build-images.sh")],
            capture_output=True,
            text=True,
            timeout=1800,
            env={**os.environ, "BUILD_AIRFLOW_IMAGE": "yes"},
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
    if not image_present(AIRFLOW_IMAGE):
        pytest.fail(f"{AIRFLOW_IMAGE} missing after scripts/build-images.sh")
    return AIRFLOW_IMAGE


def _run(image: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "run", "--rm", image, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.docker
def test_image_runs_airflow_like_the_official_one(airflow_image):
    for args in (["airflow", "version"], ["version"]):  # `airflow <cmd>` and the entrypoint's `<cmd>`
        out = _run(airflow_image, *args)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip().splitlines()[-1] == "3.3.2"
    who = _run(airflow_image, "id", "-u")
    assert who.returncode == 0 and who.stdout.strip() == "50000"  # non-root
    labels = docker_output("image", "inspect", "--format", "{{json .Config.Labels}}", airflow_image)
    assert "dlperf.inputs-hash" in labels


@pytest.mark.docker
def test_image_imports_the_dag_without_torch(airflow_image):
    script = (
        "import importlib.util, sys\n"
        "assert importlib.util.find_spec('torch') is None, 'torch is installed'\n"
        "import os, dlperf_airflow.bundle\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        "bundle = os.path.dirname(dlperf_airflow.bundle.__file__)\n"
        "assert bundle.startswith('/opt/venv/lib/'), bundle  # the installed wheel's, not a copy of dags/\n"
        "assert os.listdir('/opt/airflow/dags') == [] and os.listdir('/opt/airflow/plugins') == []\n"
        "bag = DagBag(dag_folder=bundle)\n"
        "assert not bag.import_errors, bag.import_errors\n"
        "dag = bag.dags['dlperf_benchmark']\n"
        "import airflow.providers.celery, airflow.providers.ssh, airflow.providers.docker\n"
        "from airflow.providers.celery.executors.celery_executor import CeleryExecutor  # the scheduler loads it\n"
        "print(sorted(t.task_id for t in dag.tasks))\n"
        "print('torch' in sys.modules)\n"
    )
    out = _run(airflow_image, "python", "-c", script)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    tasks, torch_loaded = out.stdout.strip().splitlines()[-2:]
    assert "preflight" in tasks and "case_run.run_case" in tasks
    assert torch_loaded == "False"
    cli = _run(airflow_image, "dlperf", "cluster", "sync", "--help")
    assert cli.returncode == 0 and "--inventory" in cli.stdout
    # every service's DAGs: the entrypoint's bundle list, dlperf's installed bundle beside the (empty) dags folder
    bundles = _run(airflow_image, "bash", "-c", 'printf %s "$AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"')
    entries = {entry["name"]: entry["kwargs"] for entry in json.loads(bundles.stdout)}
    assert set(entries) == {"dags-folder", "dlperf"} and entries["dlperf"]["path"].startswith("/opt/venv/lib/"), entries


ONE_CASE_SUITE = """
name: one
runtime: local
repeats: 1
warmup_iterations: 2
measured_iterations: 5
timeout_s: 300
benchmarks:
  - framework: pytorch_reference
    model: resnet50_v1.5
    precisions: [fp32]
    batch_size_per_device: 4
    topologies: [1n1g]
    extra_args: [--image-size, "32", --width, "8", --device, cpu]
"""


@pytest.mark.docker
def test_a_case_that_cannot_start_names_the_missing_module(airflow_image, tmp_path):
    """The local runtime inside the Airflow image, which has no torch (what every night did before the
    deployment's defaults said docker): the run fails, and the reason on the row and in the task's error is
    the interpreter's own words, not just "no training lines"."""
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "one.yaml").write_text(ONE_CASE_SUITE)
    suites.chmod(0o755)
    (suites / "one.yaml").chmod(0o644)
    out = subprocess.run(
        ["docker", "run", "--rm", "-v", f"{suites}:/suites:ro", airflow_image, "dlperf", "run", "/suites/one.yaml"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode != 0
    said = out.stdout + out.stderr
    reason = "error: ModuleNotFoundError: No module named 'torch' (python -m torch.distributed.run)"
    assert re.search(
        r"pytorch_reference/resnet50_v1\.5/fp32/b4/1n1g\+args=[0-9a-f]{8} r0: node0 exited with code 1; "
        + re.escape(f"log: no training lines; {reason}"),
        said,
    ), said[-3000:]


# --------------------------------------------------------------------------- PostgreSQL init


@pytest.mark.postgres
def test_postgres_init_script_creates_dlperf_database_and_user(pg_server):
    import psycopg2

    base, admin = pg_server
    suffix = uuid.uuid4().hex[:8]
    user, db = f"dlperf_u_{suffix}", f"dlperf_db_{suffix}"
    env = {
        **os.environ,
        "POSTGRES_USER": base.username or "postgres",
        "POSTGRES_DB": base.database or "postgres",
        "PGHOST": base.host or "127.0.0.1",
        "PGPORT": str(base.port or 5432),
        "DLPERF_DB_USER": user,
        "DLPERF_DB_NAME": db,
        "DLPERF_DB_PASSWORD": "pw'with\"quotes",
    }
    try:
        out = subprocess.run(
            ["bash", str(REPO / "docker/airflow/postgres-init/10-dlperf-results-db.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        conn = psycopg2.connect(host=env["PGHOST"], port=env["PGPORT"], dbname="postgres", user=env["POSTGRES_USER"])
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", (db,))
                assert cur.fetchone() == (user,)
                cur.execute("SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = %s", (user,))
                assert cur.fetchone() == (True,)
        finally:
            conn.close()
        missing = subprocess.run(
            ["bash", str(REPO / "docker/airflow/postgres-init/10-dlperf-results-db.sh")],
            env={k: v for k, v in env.items() if k != "DLPERF_DB_PASSWORD"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert missing.returncode != 0 and "DLPERF_DB_PASSWORD must be set" in missing.stderr
    finally:
        admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin(f'DROP ROLE IF EXISTS "{user}"')


# --------------------------------------------------------------------------- secrets and .env


def _new_env(tmp_path: Path, *args: str) -> Path:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    out = subprocess.run(
        ["bash", str(REPO / "scripts/new-env.sh"), *args], capture_output=True, text=True, timeout=60, env=env
    )
    assert out.returncode == 0, out.stderr
    path = tmp_path / "new.env"
    path.write_text(out.stdout)
    return path


def test_new_env_replaces_every_example_secret(tmp_path):
    from cryptography.fernet import Fernet

    text = _new_env(tmp_path, "DLPERF_PUBLISH_ADDR=127.0.0.9").read_text()
    values = dict(re.findall(r"^([A-Z0-9_]+)=(.*)$", text, re.M))
    assert "change-me" not in values.values()
    assert all(len(values[name]) >= 32 for name in SECRETS)
    assert len({values[name] for name in SECRETS}) == len(SECRETS)  # each its own
    Fernet(values["AIRFLOW_FERNET_KEY"].encode())  # a real Fernet key
    assert values["DLPERF_PUBLISH_ADDR"] == "127.0.0.9"
    # the deployment's nightly defaults: the smoke suite on the docker runtime, single-host inventory
    assert values["DLPERF_DEFAULT_RUNTIME"] == "docker"
    assert values["DLPERF_DEFAULT_INVENTORY"] == "inventories/docker-local.yaml"
    assert _new_env(tmp_path).read_text() != text  # new secrets every time


def test_compose_passes_the_nightly_defaults_and_state_volumes(compose, tmp_path):
    out = _config(compose, _new_env(tmp_path))
    assert out.returncode == 0, out.stderr
    services = yaml.safe_load(out.stdout)["services"]
    for name in CORE_SERVICES - {"postgres", "redis"}:
        env = services[name]["environment"]
        assert env["DLPERF_DEFAULT_SUITE"] == "suites/smoke.yaml"
        assert env["DLPERF_DEFAULT_RUNTIME"] == "docker"
        assert env["AIRFLOW__DLPERF__SCHEDULE"] == ""  # [dlperf] schedule unset: the DAG's 0 2 * * *
        volumes = [str(v.get("target") if isinstance(v, dict) else v.split(":")[1]) for v in services[name]["volumes"]]
        assert "/opt/dlperf/.dlperf" in volumes, name  # reports and the spool outlive the containers
    for name in CORE_SERVICES:  # nothing starts before check-env has passed
        depends = services[name].get("depends_on", {})
        assert "check-env" in depends or {"postgres", "redis"} & set(depends), name
    assert services["postgres"]["image"] == "postgres:15-bookworm"
    assert services["redis"]["image"] == "redis:7.0-bookworm"


ALERT_SETTINGS = {  # .env's regression alert lines (docs/operations.md, "Regression alerts")
    "DLPERF_REGRESSION_NOTIFIERS": "slack,email",
    "AIRFLOW_CONN_SLACK_WEBHOOK_DEFAULT": "slackwebhook://:T0000%2FB0000%2FXXXXXXXX@",
    "AIRFLOW_CONN_SMTP_DEFAULT": "smtp://relay.example.org:25?disable_ssl=true&disable_tls=true",
    "DLPERF_ALERT_EMAIL_TO": "perf-team@example.org,oncall@example.org",
    "DLPERF_ALERT_EMAIL_FROM": "dlperf@example.org",
    "DLPERF_SLOW_NODE_FRACTION": "0.08",  # and the slow-node policy (docs/operations.md, "Slow nodes")
    "DLPERF_SLOW_NODE_Z": "3",
}


def test_compose_passes_the_regression_alert_settings(compose, tmp_path):
    """Every Airflow service, the node worker too, gets .env's alert settings (detect_regressions runs on a worker);
    empty in a fresh .env (the task log). new-env.sh quotes a value the shell would read (the SMTP URI's &), so that
    `set -a; . ./.env` (docs/deploy.md, step 3) reads what compose reads."""
    fresh = yaml.safe_load(_config(compose, _new_env(tmp_path)).stdout)["services"]
    assert all(fresh["airflow-worker"]["environment"][name] == "" for name in ALERT_SETTINGS)
    env_file = _new_env(tmp_path, *(f"{name}={value}" for name, value in ALERT_SETTINGS.items()))
    smtp = ALERT_SETTINGS["AIRFLOW_CONN_SMTP_DEFAULT"]
    assert f"AIRFLOW_CONN_SMTP_DEFAULT='{smtp}'" in env_file.read_text().splitlines()
    sourced = subprocess.run(
        ["bash", "-c", f'set -a; . "{env_file}"; set +a; printf %s "$AIRFLOW_CONN_SMTP_DEFAULT"'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sourced.stdout == smtp, sourced.stderr
    out = _config(compose, env_file, "--profile", "node-worker")
    assert out.returncode == 0, out.stderr
    services = yaml.safe_load(out.stdout)["services"]
    for name in (CORE_SERVICES - {"postgres", "redis"}) | {"airflow-node-worker"}:
        env = services[name]["environment"]
        assert {key: env[key] for key in ALERT_SETTINGS} == ALERT_SETTINGS, name


@pytest.mark.docker
@pytest.mark.usefixtures("airflow_image")
def test_check_env_refuses_the_examples_secrets_naming_them(compose, tmp_path):
    example = _env_example(tmp_path)
    args = [*compose, "--env-file", str(example), "-f", str(REPO / "docker-compose.yaml")]
    project = ["--project-directory", str(REPO), "-p", f"dlperfcheck{uuid.uuid4().hex[:6]}"]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DOCKER_HOST", "LANG")}
    refused = subprocess.run(
        [*args, *project, "run", "--rm", "check-env"], capture_output=True, text=True, timeout=300, env=env
    )
    assert refused.returncode != 0
    line = [ln for ln in (refused.stdout + refused.stderr).splitlines() if "refusing to start" in ln]
    assert len(line) == 1, refused.stdout + refused.stderr
    for name in SECRETS:
        assert f"{name} (still 'change-me')" in line[0]
    fresh = _new_env(tmp_path)
    args[args.index(str(example))] = str(fresh)
    passed = subprocess.run(
        [*args, *project, "run", "--rm", "check-env"], capture_output=True, text=True, timeout=300, env=env
    )
    assert passed.returncode == 0, passed.stdout + passed.stderr


# --------------------------------------------------------------------------- PostgreSQL and Redis images


def _service_images() -> None:
    if not docker_available():
        pytest.skip("no Docker engine (scripts/ensure-docker.sh starts one)")
    if os.environ.get("DLPERF_TEST_NO_BUILD") != "1":
        out = subprocess.run(
            ["bash", str(REPO / "scripts/build-service-images.sh")], capture_output=True, text=True, timeout=900
        )
        assert out.returncode == 0, out.stderr[-3000:]


def _wait_for(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if out.returncode == 0 or time.monotonic() > deadline:
            return out
        time.sleep(1)


@pytest.mark.docker
def test_postgres_image_keeps_the_official_images_contract():
    """POSTGRES_* variables, the init folder (dlperf's own script), pg_isready, password auth over TCP, and a
    data folder that survives a new container."""
    _service_images()
    name = f"dlperf-pgtest-{uuid.uuid4().hex[:6]}"
    volume = f"{name}-data"
    run = ["docker", "run", "-d", "--name", name, "-v", f"{volume}:/var/lib/postgresql/data"]
    run += ["-v", f"{REPO / 'docker/airflow/postgres-init'}:/docker-entrypoint-initdb.d:ro"]
    run += ["-e", "POSTGRES_USER=airflow", "-e", "POSTGRES_PASSWORD=pw-airflow-1", "-e", "POSTGRES_DB=airflow"]
    run += ["-e", "DLPERF_DB_PASSWORD=pw-dlperf-1", "postgres:15-bookworm"]
    try:
        subprocess.run(run, check=True, capture_output=True, timeout=60)
        ready = _wait_for(["docker", "exec", name, "pg_isready", "-U", "airflow", "-h", "127.0.0.1"], timeout=90)
        assert ready.returncode == 0, docker_output("logs", name)
        # the init script made dlperf's database and user; password auth over TCP, as the workers connect
        query = ["docker", "exec", "-e", "PGPASSWORD=pw-dlperf-1", name, "psql", "-h", "127.0.0.1", "-U", "dlperf"]
        out = _wait_for([*query, "-d", "dlperf", "-Atc", "SELECT current_user, version()"], timeout=30)
        assert out.returncode == 0, out.stderr + docker_output("logs", name)
        assert out.stdout.startswith("dlperf|PostgreSQL 15."), out.stdout
        wrong = subprocess.run(
            [
                "docker",
                "exec",
                "-e",
                "PGPASSWORD=wrong",
                name,
                "psql",
                "-h",
                "127.0.0.1",
                "-U",
                "dlperf",
                "-c",
                "SELECT 1",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert wrong.returncode != 0 and "password authentication failed" in wrong.stderr
        subprocess.run(["docker", "rm", "-f", name], check=True, capture_output=True, timeout=60)
        # a new container on the same volume starts without initialising again
        subprocess.run(run, check=True, capture_output=True, timeout=60)
        assert _wait_for(["docker", "exec", name, "pg_isready", "-U", "airflow"], timeout=90).returncode == 0
        assert "initialising" not in docker_output("logs", name)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)
        subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True, timeout=60)


@pytest.mark.docker
def test_redis_image_needs_the_password_compose_gives_it():
    _service_images()
    name = f"dlperf-redistest-{uuid.uuid4().hex[:6]}"
    try:
        subprocess.run(
            [
                "docker",
                "run",
                "-d",
                "--name",
                name,
                "redis:7.0-bookworm",
                "redis-server",
                "--requirepass",
                "pw-redis-1",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        ok = _wait_for(["docker", "exec", "-e", "REDISCLI_AUTH=pw-redis-1", name, "redis-cli", "ping"])
        assert ok.stdout.strip() == "PONG", ok.stdout + ok.stderr
        anonymous = subprocess.run(["docker", "exec", name, "redis-cli", "ping"], capture_output=True, text=True)
        assert "NOAUTH" in anonymous.stdout + anonymous.stderr
        version = subprocess.run(["docker", "exec", name, "redis-server", "--version"], capture_output=True, text=True)
        assert "v=7.0." in version.stdout
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)
