"""``dlperf cluster sync`` against a real Airflow metadata DB in PostgreSQL: creates one SSH connection, one
engine connection (``dlperf_docker_engine``: the Docker engine's URL, TLS files and registry login connection)
and one one-slot pool per node, and the Docker connection (the Docker provider's registry login) of a node that
declares a registry, a second run changes nothing, a changed inventory updates in place, --prune removes
nodes that left, and a bad inventory is refused without writing anything.

The metadata DB is a fresh PostgreSQL database (``pg_url``) migrated by the real ``airflow db migrate``;
the CLI runs as a subprocess with ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`` pointing at it, like in the
compose deployment (``docker compose run --rm airflow-cli dlperf cluster sync ...``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from helpers import DLPERF, REPO

pytestmark = pytest.mark.postgres

AIRFLOW = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin" / "airflow"

INVENTORY = """\
name: test-cluster
nodes:
  - name: gpu-a
    address: 10.1.0.10
    gpus: 8
    accelerator: nvidia
    queue: gpu-a
    ssh: {{user: bench, port: {port}, key_file: /home/airflow/.ssh/id_ed25519,
           host_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"}}
    docker_url: tcp://10.1.0.10:2376
    docker:
      tls: {{ca_cert: /certs/ca.pem, client_cert: /certs/cert.pem, client_key: /certs/key.pem}}
      registry: {{server: "registry.example.com:5000", username: bench, password_env: DLPERF_TEST_REGISTRY_PASSWORD}}
  - name: gpu-b
    address: 10.1.0.11
    gpus: 8
    accelerator: nvidia
    queue: gpu-b
    ssh: {{user: bench}}
{extra}"""


def _env(tmp_path: Path, pg_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=pg_url,
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__FERNET_KEY="",
        DLPERF_TEST_REGISTRY_PASSWORD="s3cret-registry",
    )
    return env


def _sync(tmp_path: Path, env: dict, inventory: str, *extra: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "inventory.yaml"
    path.write_text(inventory)
    return subprocess.run(
        [*DLPERF, "cluster", "sync", "--inventory", str(path), "--json", *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _actions(out: subprocess.CompletedProcess[str]) -> dict[tuple[str, str], str]:
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return {(c["kind"], c["name"]): c["action"] for c in json.loads(out.stdout)}


def _state(pg_url: str) -> tuple[dict, dict]:
    engine = sa.create_engine(pg_url)
    try:
        with engine.connect() as conn:
            conns = {
                r.conn_id: r
                for r in conn.execute(
                    sa.text(
                        "SELECT conn_id, conn_type, host, login, port, password, extra FROM connection "
                        "WHERE conn_id LIKE 'dlperf_node_%' OR conn_id LIKE 'dlperf_docker_%' OR conn_id LIKE 'dlperf_engine_%'"
                    )
                )
            }
            pools = {
                r.pool: r
                for r in conn.execute(
                    sa.text("SELECT pool, slots, include_deferred FROM slot_pool WHERE pool LIKE 'dlperf_node_%'")
                )
            }
    finally:
        engine.dispose()
    return conns, pools


def test_cluster_sync_is_idempotent_against_a_real_metadata_db(tmp_path, pg_url):
    env = _env(tmp_path, pg_url)
    migrate = subprocess.run([str(AIRFLOW), "db", "migrate"], env=env, capture_output=True, text=True, timeout=600)
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    _sync_scenario(tmp_path, env, pg_url, through_api=False)


def test_cluster_sync_through_airflows_rest_api_makes_the_same_changes(tmp_path, metadata_url):
    """The same scenario through a real api-server's REST API (the simple auth manager's user logs in with
    DLPERF_AIRFLOW_API_USER/PASSWORD); the sync process reaches no metadata DB: its environment names none."""
    from airflow_stack import prepare_stack

    password = f"pw-{uuid.uuid4().hex[:10]}"
    # no Fernet key, as above: the stored password and extra read back as written
    stack = prepare_stack(
        tmp_path / "airflow", metadata_url, metadata_url, "admin", password, {"AIRFLOW__CORE__FERNET_KEY": ""}
    )
    stack.start("api-server", "api-server", "--host", "127.0.0.1", "--port", str(stack.port), "--workers", "1")
    try:
        stack.wait_until("the api-server", lambda: stack.request("GET", "/api/v2/monitor/health")[0] == 200, 240)
        env = {k: v for k, v in _env(tmp_path, metadata_url).items() if k != "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"}
        env.update(
            AIRFLOW_HOME=str(tmp_path / "no-airflow-here"),  # were it read, it would be an empty SQLite DB
            DLPERF_AIRFLOW_API_URL=stack.url,
            DLPERF_AIRFLOW_API_USER=stack.username,
            DLPERF_AIRFLOW_API_PASSWORD=stack.password,
        )
        _sync_scenario(tmp_path, env, metadata_url, through_api=True)
        assert not (tmp_path / "no-airflow-here" / "airflow.db").exists()
        wrong = _sync(tmp_path, {**env, "DLPERF_AIRFLOW_API_PASSWORD": "wrong"}, INVENTORY.format(port=22, extra=""))
        assert wrong.returncode == 2 and "could not log in as admin: HTTP 401" in wrong.stderr, wrong.stderr
        bare = {k: v for k, v in env.items() if not k.startswith("DLPERF_AIRFLOW_API_USER")}
        none = _sync(tmp_path, bare, INVENTORY.format(port=22, extra=""))
        assert none.returncode == 2 and "give a token (--api-token" in none.stderr, none.stderr
    finally:
        stack.stop()


def _sync_scenario(tmp_path: Path, env: dict[str, str], pg_url: str, *, through_api: bool) -> None:
    """Create, again (nothing changes), change, rotate a password, refuse a bad inventory, prune: each step's
    actions and what is in the metadata DB after it. Through the API a managed password cannot be compared (the API
    never shows it): its connection is ``updated`` each time."""
    managed_password_again = "updated" if through_api else "unchanged"
    first = _actions(_sync(tmp_path, env, INVENTORY.format(port=2222, extra="")))
    assert first == {
        ("connection", "dlperf_node_gpu-a"): "created",
        ("connection", "dlperf_docker_gpu-a"): "created",
        ("connection", "dlperf_engine_gpu-a"): "created",
        ("pool", "dlperf_node_gpu-a"): "created",
        ("connection", "dlperf_node_gpu-b"): "created",
        ("connection", "dlperf_engine_gpu-b"): "created",
        ("pool", "dlperf_node_gpu-b"): "created",
    }
    conns, pools = _state(pg_url)
    assert set(pools) == {"dlperf_node_gpu-a", "dlperf_node_gpu-b"}
    engines = {"dlperf_engine_gpu-a", "dlperf_engine_gpu-b"}
    assert set(conns) == set(pools) | {"dlperf_docker_gpu-a"} | engines  # gpu-b: no registry, no Docker connection
    d = conns["dlperf_docker_gpu-a"]
    assert (d.conn_type, d.host, d.login, d.port, d.password) == (
        "docker",
        "registry.example.com:5000",
        "bench",
        None,
        "s3cret-registry",
    )
    assert json.loads(d.extra) == {}  # a registry login only: the engine's TLS client is its engine connection's
    e = conns["dlperf_engine_gpu-a"]
    assert (e.conn_type, e.host, e.login, e.password) == ("dlperf_docker_engine", "tcp://10.1.0.10:2376", None, None)
    assert json.loads(e.extra) == {
        "ca_cert": "/certs/ca.pem",
        "client_cert": "/certs/cert.pem",
        "client_key": "/certs/key.pem",
        "tls_verify": True,
        "registry_conn_id": "dlperf_docker_gpu-a",
    }
    b = conns["dlperf_engine_gpu-b"]
    assert (b.host, json.loads(b.extra)) == ("unix:///var/run/docker.sock", {})  # the inventory's default
    a = conns["dlperf_node_gpu-a"]
    assert (a.conn_type, a.host, a.login, a.port) == ("ssh", "10.1.0.10", "bench", 2222)
    # No Fernet key here, so the extra is stored as plain JSON and can be read back as such.
    assert json.loads(a.extra) == {
        "cmd_timeout": None,
        "conn_timeout": 10,
        "host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
        "key_file": "/home/airflow/.ssh/id_ed25519",
    }
    assert conns["dlperf_node_gpu-b"].port == 22
    assert all(p.slots == 1 and p.include_deferred is True for p in pools.values())  # a deferred task holds

    # Again: nothing changes, nothing is duplicated.
    again = _actions(_sync(tmp_path, env, INVENTORY.format(port=2222, extra="")))
    assert again.pop(("connection", "dlperf_docker_gpu-a")) == managed_password_again
    assert set(again.values()) == {"unchanged"} and set(again) | {("connection", "dlperf_docker_gpu-a")} == set(first)
    assert _state(pg_url)[0].keys() == conns.keys()

    # A changed port updates the connection in place; a new node gets its own pair.
    changed = _actions(_sync(tmp_path, env, INVENTORY.format(port=2200, extra="  - {name: cpu-c, gpus: 2}\n")))
    assert changed[("connection", "dlperf_node_gpu-a")] == "updated"
    assert changed[("connection", "dlperf_node_gpu-b")] == "unchanged"
    assert changed[("connection", "dlperf_docker_gpu-a")] == managed_password_again
    assert changed[("pool", "dlperf_node_cpu-c")] == "created"
    assert ("connection", "dlperf_node_cpu-c") not in changed  # no ssh declared: no SSH connection
    conns, pools = _state(pg_url)
    assert conns["dlperf_node_gpu-a"].port == 2200 and "dlperf_node_cpu-c" in pools

    # A new registry password (the variable the inventory names) updates the Docker connection.
    rotated = _actions(
        _sync(
            tmp_path,
            {**env, "DLPERF_TEST_REGISTRY_PASSWORD": "rotated-password"},
            INVENTORY.format(port=2200, extra="  - {name: cpu-c, gpus: 2}\n"),
        )
    )
    assert rotated[("connection", "dlperf_docker_gpu-a")] == "updated"
    assert _state(pg_url)[0]["dlperf_docker_gpu-a"].password == "rotated-password"
    # ... and without the variable, nothing is written at all.
    unset = _sync(
        tmp_path,
        {k: v for k, v in env.items() if k != "DLPERF_TEST_REGISTRY_PASSWORD"},
        INVENTORY.format(port=2200, extra="  - {name: cpu-c, gpus: 2}\n"),
    )
    assert unset.returncode == 2 and "DLPERF_TEST_REGISTRY_PASSWORD is not set" in unset.stderr
    assert _state(pg_url)[0]["dlperf_docker_gpu-a"].password == "rotated-password"

    # --prune: gpu-b left the cluster.
    smaller = INVENTORY.format(port=2200, extra="  - {name: cpu-c, gpus: 2}\n").replace(
        "  - name: gpu-b\n    address: 10.1.0.11\n    gpus: 8\n    accelerator: nvidia\n    queue: gpu-b\n    ssh: {user: bench}\n",
        "",
    )
    pruned = _actions(_sync(tmp_path, env, smaller, "--prune"))
    assert pruned[("connection", "dlperf_node_gpu-b")] == "removed"
    assert pruned[("pool", "dlperf_node_gpu-b")] == "removed"
    conns, pools = _state(pg_url)
    assert pruned[("connection", "dlperf_engine_gpu-b")] == "removed"
    assert set(conns) == {"dlperf_node_gpu-a", "dlperf_docker_gpu-a", "dlperf_engine_gpu-a", "dlperf_engine_cpu-c"}
    assert set(pools) == {"dlperf_node_gpu-a", "dlperf_node_cpu-c"}

    # gpu-a drops its registry and TLS (an insecure test engine): --prune removes its Docker connection.
    no_docker = re.sub(r"    docker:\n(      .*\n)+", "    docker: {insecure: true}\n", smaller)
    assert "tls" not in no_docker
    dropped = _actions(_sync(tmp_path, env, no_docker, "--prune"))
    assert dropped[("connection", "dlperf_docker_gpu-a")] == "removed"
    assert dropped[("connection", "dlperf_node_gpu-a")] == "unchanged"
    assert dropped[("connection", "dlperf_engine_gpu-a")] == "updated"  # no TLS, no login: insecure
    conns, pools = _state(pg_url)
    assert set(conns) == {"dlperf_node_gpu-a", "dlperf_engine_gpu-a", "dlperf_engine_cpu-c"}
    assert json.loads(conns["dlperf_engine_gpu-a"].extra) == {"insecure": True}
    assert _actions(_sync(tmp_path, env, smaller))[("connection", "dlperf_docker_gpu-a")] == "created"
    conns, pools = _state(pg_url)

    # A bad inventory is refused with the file and field named, and nothing is written.
    bad = _sync(tmp_path, env, "name: x\nnodes:\n  - {name: z, ssh: {port: 70000}}\n")
    assert bad.returncode == 2
    assert "inventory.yaml" in bad.stderr and "nodes[0].ssh.port" in bad.stderr
    assert _state(pg_url) == (conns, pools)


def test_cluster_sync_refuses_an_unmigrated_metadata_db(tmp_path, pg_url):
    out = _sync(tmp_path, _env(tmp_path, pg_url), INVENTORY.format(port=22, extra=""))
    assert out.returncode == 2
    assert "airflow db migrate" in out.stderr
