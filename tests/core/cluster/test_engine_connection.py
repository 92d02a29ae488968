"""A node's engine connection (``dlperf_docker_engine``): the inventory's engine fields written as a connection's
fields and read back as the same node; a connection edited by hand replaces them, and a broken one is refused
with the connection and the field named. Pure: no Airflow."""

from __future__ import annotations

import pytest

from dlperf_core.cluster.engine_connection import (
    ENGINE_CONN_TYPE,
    EXTRA_KEYS,
    EngineConnection,
    engine_conn_id,
)
from dlperf_core.cluster.inventory import Node
from dlperf_core.errors import ConfigError

TLS = {"ca_cert": "/certs/ca.pem", "client_cert": "/certs/cert.pem", "client_key": "/certs/key.pem"}
NODES = [
    Node(name="local"),  # the default unix socket, no login
    Node(name="tls", docker_url="tcp://10.0.0.1:2376", docker={"tls": {**TLS, "verify": False}}),
    Node(name="stand-in", docker_url="tcp://10.0.0.2:2375", docker={"insecure": True}),
    Node(
        name="login",
        docker_url="tcp://10.0.0.3:2376",
        docker={"tls": TLS, "registry": {"server": "r.example.com:5000", "username": "u"}},
    ),
    Node(name="shared", docker_url="ssh://bench@10.0.0.4", docker={"conn_id": "team_registry"}),
]


@pytest.mark.parametrize("node", NODES, ids=lambda n: n.name)
def test_a_node_written_as_its_engine_connection_reads_back_as_the_same_node(node):
    engine = EngineConnection.of_node(node)
    conn_id = engine_conn_id(node)
    assert conn_id == f"dlperf_engine_{node.name}"
    read = EngineConnection.from_fields(conn_id, ENGINE_CONN_TYPE, engine.docker_url, engine.extra())
    assert read == engine
    assert read.applied_to(node, conn_id) == node
    assert set(engine.extra()) <= set(EXTRA_KEYS)


def test_the_extras_say_only_what_the_node_declares():
    local, tls, stand_in, login, shared = (EngineConnection.of_node(n).extra() for n in NODES)
    assert local == {}
    assert tls == {**TLS, "tls_verify": False}
    assert stand_in == {"insecure": True}
    assert login == {**TLS, "tls_verify": True, "registry_conn_id": "dlperf_docker_login"}
    assert shared == {"registry_conn_id": "team_registry"}


def test_an_edited_connection_replaces_the_inventorys_engine_fields():
    node = NODES[1]  # tcp://10.0.0.1:2376 with TLS, verify off
    moved = EngineConnection.from_fields(
        "dlperf_engine_tls",
        ENGINE_CONN_TYPE,
        "tcp://10.9.9.9:2376",
        {"ca_cert": "/new/ca.pem", "client_cert": "/new/c.pem", "client_key": "/new/k.pem", "tls_verify": "true"},
    )
    reached = moved.applied_to(node, "dlperf_engine_tls")
    assert reached.docker_url == "tcp://10.9.9.9:2376"
    assert reached.docker.tls.ca_cert == "/new/ca.pem" and reached.docker.tls.verify is True
    assert reached.model_dump(exclude={"docker_url", "docker"}) == node.model_dump(exclude={"docker_url", "docker"})
    # the UI's older form prefixed its extras: read the same
    prefixed = {f"extra__{ENGINE_CONN_TYPE}__{k}": v for k, v in moved.extra().items()}
    assert EngineConnection.from_fields("c", ENGINE_CONN_TYPE, moved.docker_url, prefixed) == moved
    # a login dropped from the connection drops the inventory's registry with it
    login = NODES[3]
    bare = EngineConnection(login.docker_url, login.docker.tls).applied_to(login, "dlperf_engine_login")
    assert bare.docker.registry is None and bare.docker.conn_id is None


def test_a_broken_engine_connection_is_refused_naming_it_and_each_field():
    with pytest.raises(ConfigError) as refused:
        EngineConnection.from_fields(
            "dlperf_engine_x", "docker", "10.0.0.1", {"ca_cert": "/ca.pem", "tls_ca": "/ca.pem"}
        )
    text = str(refused.value)
    assert "Airflow connection dlperf_engine_x" in text
    assert "its type is 'docker', not 'dlperf_docker_engine'" in text
    assert "host '10.0.0.1' is no Docker engine URL" in text
    assert "extras tls_ca are not fields of it" in text
    assert "client_cert, client_key missing" in text
    # fields that each pass but not together: the node's own validation, named by the connection
    tls_on_a_socket = EngineConnection("unix:///var/run/docker.sock", NODES[1].docker.tls)
    with pytest.raises(ConfigError, match=r"Airflow connection dlperf_engine_tls.*docker.tls is for a tcp"):
        tls_on_a_socket.applied_to(NODES[1], "dlperf_engine_tls")
