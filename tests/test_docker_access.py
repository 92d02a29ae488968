"""Docker access through Airflow connections, without a Docker engine or a metadata DB.

* Planning refuses a node whose Docker Engine is on TCP without TLS (root on the node for anyone who can reach
  the port) unless the inventory says ``insecure: true``; TLS files, unix:// and ssh:// sockets are fine.
* :class:`DockerEndpoint` (the one place a node's Docker client is built) takes the TLS client and registry
  login from the node's Airflow Docker connection (here in the ``AIRFLOW_CONN_*`` form) when it exists, else
  from the inventory, and makes the client through the provider's ``DockerHook``.
* ``dlperf cluster sync`` writes that connection (its spec; the DB round trip is in test_cluster_sync.py).
* The environment probe is a ContainerSpec started by the runtime's own ``create_container``.
"""

from __future__ import annotations

import json

import pytest

from dlperf_core.errors import ConfigError
from dlperf_core.inventory import Inventory, Node, check_docker_access, insecure_docker_nodes

pytest.importorskip("docker")


def _tls_files(tmp_path) -> dict[str, str]:
    files = {}
    for key, name in (("ca_cert", "ca.pem"), ("client_cert", "cert.pem"), ("client_key", "key.pem")):
        (tmp_path / name).write_text("-----BEGIN PLACEHOLDER-----\n")  # docker-py only checks that they exist
        files[key] = str(tmp_path / name)
    return files


def _node(**fields) -> Node:
    return Node.model_validate({"name": "gpu0", "address": "10.0.0.10", **fields})


# --------------------------------------------------------------------------- planning refuses TCP without TLS


def test_a_tcp_node_without_tls_is_refused_with_the_reason_and_the_ways_out():
    inventory = Inventory(nodes=(_node(docker_url="tcp://10.0.0.10:2375"), _node(name="ok")))
    with pytest.raises(ConfigError) as err:
        check_docker_access(inventory, "inventories/cluster.yaml")
    assert err.value.source == "inventories/cluster.yaml"
    (problem,) = err.value.problems
    assert problem.startswith("node gpu0: docker_url tcp://10.0.0.10:2375 is a Docker socket on TCP without TLS")
    assert "root on the node" in problem
    assert "docker: {tls: {ca_cert: ..., client_cert: ..., client_key: ...}}" in problem
    assert "docker: {insecure: true}" in problem
    for scheme in ("http", "https", "TCP"):
        assert insecure_docker_nodes([_node(docker_url=f"{scheme}://10.0.0.10:2376")]), scheme


def test_insecure_tls_and_local_sockets_are_accepted(tmp_path):
    nodes = (
        _node(name="insecure", docker_url="tcp://10.0.0.10:2375", docker={"insecure": True}),
        _node(name="tls", docker_url="tcp://10.0.0.11:2376", docker={"tls": _tls_files(tmp_path)}),
        _node(name="socket"),  # unix:///var/run/docker.sock
        _node(name="ssh", docker_url="ssh://bench@10.0.0.12"),
    )
    check_docker_access(Inventory(nodes=nodes), "inventory")  # no error
    assert insecure_docker_nodes(nodes) == []


def test_the_docker_block_is_validated(tmp_path):
    with pytest.raises(ValueError, match="docker.tls is for a tcp:// docker_url"):
        _node(docker={"tls": _tls_files(tmp_path)})  # a unix socket
    with pytest.raises(ValueError, match="exclude each other"):
        _node(docker_url="tcp://10.0.0.10:2376", docker={"tls": _tls_files(tmp_path), "insecure": True})
    with pytest.raises(ValueError):
        _node(docker={"tls": {"ca_cert": "/ca.pem"}})  # the client's certificate and key are required
    with pytest.raises(ValueError):
        _node(docker={"registry": {"server": "r:5000", "username": "u", "password": "in the inventory"}})
    assert _node().docker_conn_id == "dlperf_docker_gpu0"
    assert _node(docker={"conn_id": "shared_registry"}).docker_conn_id == "shared_registry"


def test_the_example_cluster_declares_tls():
    from dlperf_core.inventory import load_inventory
    from helpers import REPO

    inventory = load_inventory(REPO / "inventories/example-cluster.yaml")
    check_docker_access(inventory, "example-cluster")
    assert all(n.docker.tls is not None for n in inventory.nodes)


def test_the_docker_runtime_refuses_it_at_planning(tmp_path):
    from dlperf_airflow.steps import resolve_settings
    from helpers import REPO

    path = tmp_path / "inventory.yaml"
    path.write_text("nodes:\n  - {name: n0, gpus: 2, docker_url: 'tcp://10.9.9.9:2375'}\n")
    params = {"suite": str(REPO / "suites/smoke.yaml"), "runtime": "docker", "inventory": str(path)}
    with pytest.raises(ConfigError, match="n0: docker_url tcp://10.9.9.9:2375 is a Docker socket on TCP without TLS"):
        resolve_settings(params)
    resolve_settings({**params, "runtime": "local"})  # the local runtime never reaches docker_url
    path.write_text("nodes:\n  - {name: n0, gpus: 2, docker_url: 'tcp://10.9.9.9:2375', docker: {insecure: true}}\n")
    resolve_settings(params)


# --------------------------------------------------------------------------- the client of a node


class FakeApiClient:
    """What the runtime asks a docker APIClient, recorded; host configs are docker-py's own."""

    def __init__(self, **hook_args):
        import docker

        self.hook_args = hook_args
        self.calls: list[tuple] = []
        self._real = docker.APIClient(base_url="tcp://127.0.0.1:9", version="1.41")  # never connects

    def __getattr__(self, name):
        if name in ("create_host_config", "create_networking_config", "create_endpoint_config"):
            return getattr(self._real, name)

        def record(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            return {
                "create_container": {"Id": "c0ffee"},
                "logs": b"probe output\n",
                "inspect_image": {"RepoDigests": ["img@sha256:abc"]},
                "networks": [],
            }.get(name)

        return record

    def named(self, name: str) -> list[tuple]:
        return [c for c in self.calls if c[0] == name]


@pytest.fixture
def fake_hook(monkeypatch):
    """DockerHook in docker_runtime, replaced: every client it would make is a FakeApiClient."""
    import dlperf_airflow.docker_runtime as runtime

    made: list[FakeApiClient] = []

    class FakeHook:
        construct_tls_config = staticmethod(runtime.DockerHook.construct_tls_config)

        def __init__(self, **kwargs):
            self.api_client = FakeApiClient(**kwargs)
            made.append(self.api_client)

    monkeypatch.setattr(runtime, "DockerHook", FakeHook)
    return made


def _connection(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "docker", **fields}))


def test_tls_and_registry_login_come_from_the_nodes_connection(tmp_path, monkeypatch, fake_hook):
    from dlperf_airflow.docker_runtime import DockerEndpoint

    (tmp_path / "inv").mkdir()
    (tmp_path / "conn").mkdir()
    inventory_tls, conn_tls = _tls_files(tmp_path / "inv"), _tls_files(tmp_path / "conn")
    node = _node(docker_url="tcp://10.0.0.10:2376", docker={"tls": inventory_tls})
    _connection(
        monkeypatch,
        node.docker_conn_id,
        host="registry.example.com",
        port=5000,
        login="bench",
        password="s3cret-pw",
        extra={
            "tls_ca_cert": conn_tls["ca_cert"],
            "tls_client_cert": conn_tls["client_cert"],
            "tls_client_key": conn_tls["client_key"],
            "tls_verify": "true",
            "email": "bench@example.com",
        },
    )

    endpoint = DockerEndpoint.for_node(node)
    assert endpoint.source == "connection dlperf_docker_gpu0"
    assert endpoint.tls.ca_cert == conn_tls["ca_cert"] and endpoint.tls.verify is True
    assert endpoint.tls.cert == (conn_tls["client_cert"], conn_tls["client_key"])
    assert "s3cret-pw" not in repr(endpoint)

    client = endpoint.client(timeout=30)
    assert client.hook_args == {
        "docker_conn_id": None,
        "base_url": "tcp://10.0.0.10:2376",
        "tls": endpoint.tls,
        "timeout": 30,
    }
    assert client.named("login") == [
        (
            "login",
            (),
            {
                "username": "bench",
                "password": "s3cret-pw",
                "registry": "registry.example.com:5000",
                "email": "bench@example.com",
                "reauth": True,
            },
        )
    ]
    assert endpoint.client(login=False).named("login") == []  # e.g. the log stream's second client


def test_without_a_connection_the_inventory_decides(tmp_path, monkeypatch, fake_hook):
    from dlperf_airflow.docker_runtime import DockerEndpoint, docker_client

    tls = _tls_files(tmp_path)
    node = _node(
        docker_url="tcp://10.0.0.10:2376",
        docker={
            "tls": {**tls, "verify": False},
            "registry": {"server": "r.example.com", "username": "u", "password_env": "DLPERF_T_PW"},
        },
    )
    monkeypatch.delenv("AIRFLOW_CONN_DLPERF_DOCKER_GPU0", raising=False)
    monkeypatch.setenv("DLPERF_T_PW", "from-env")
    endpoint = DockerEndpoint.for_node(node)
    assert endpoint.source == "inventory"
    assert endpoint.tls.ca_cert == tls["ca_cert"] and endpoint.tls.verify is False
    assert (endpoint.registry.registry, endpoint.registry.username, endpoint.registry.password) == (
        "r.example.com",
        "u",
        "from-env",
    )

    # a connection with only a registry login: TLS still from the inventory
    _connection(monkeypatch, node.docker_conn_id, host="other.example.com", login="v", password="pw2")
    endpoint = DockerEndpoint.for_node(node)
    assert endpoint.tls.ca_cert == tls["ca_cert"] and endpoint.registry.registry == "other.example.com"

    # a unix socket as today: no TLS, no login
    plain = DockerEndpoint.for_node(_node(name="local"))
    assert (plain.base_url, plain.tls, plain.registry) == ("unix:///var/run/docker.sock", None, None)
    client = docker_client(_node(name="local"))
    assert client.hook_args["tls"] is None and client.named("login") == []
    assert docker_client("unix:///tmp/other.sock").hook_args["base_url"] == "unix:///tmp/other.sock"

    # insecure, said explicitly: plain TCP
    insecure = DockerEndpoint.for_node(
        _node(name="stand-in", docker_url="tcp://10.0.0.9:2375", docker={"insecure": True})
    )
    assert insecure.tls is None
    # a TCP node without TLS that slipped past planning is refused here too
    with pytest.raises(ConfigError, match="without TLS"):
        DockerEndpoint.for_node(_node(name="bare", docker_url="tcp://10.0.0.9:2375"))
    # ... unless its connection brings the TLS files
    _connection(
        monkeypatch,
        "dlperf_docker_bare",
        extra={
            "tls_ca_cert": tls["ca_cert"],
            "tls_client_cert": tls["client_cert"],
            "tls_client_key": tls["client_key"],
        },
    )
    assert DockerEndpoint.for_node(_node(name="bare", docker_url="tcp://10.0.0.9:2375")).tls is not None


def test_the_provider_hook_takes_tcp_to_https_under_tls(tmp_path):
    """The real DockerHook (no daemon needed to construct it) gets the TLS config the endpoint built."""
    from dlperf_airflow.docker_runtime import DockerEndpoint, DockerHook

    endpoint = DockerEndpoint.for_node(_node(docker_url="tcp://10.0.0.10:2376", docker={"tls": _tls_files(tmp_path)}))
    hook = DockerHook(docker_conn_id=None, base_url=endpoint.base_url, tls=endpoint.tls, timeout=5)
    assert hook._DockerHook__base_url == ["https://10.0.0.10:2376"] and hook._DockerHook__tls is endpoint.tls


# --------------------------------------------------------------------------- dlperf cluster sync's spec


def test_cluster_sync_spec_of_the_docker_connection(tmp_path, monkeypatch):
    from dlperf_cli.cluster_cmd import ConnectionSpec, docker_specs

    tls = _tls_files(tmp_path)
    node = _node(
        docker_url="tcp://10.0.0.10:2376",
        docker={
            "tls": tls,
            "registry": {"server": "r.example.com:5000", "username": "u", "password_env": "PW", "email": "e@x"},
        },
    )
    spec = ConnectionSpec.docker_for_node(node, {"PW": "pw"})
    assert spec == ConnectionSpec(
        "dlperf_docker_gpu0",
        "r.example.com:5000",
        "u",
        None,
        {
            "tls_ca_cert": tls["ca_cert"],
            "tls_client_cert": tls["client_cert"],
            "tls_client_key": tls["client_key"],
            "tls_verify": True,
            "email": "e@x",
        },
        conn_type="docker",
        password="pw",
    )
    with pytest.raises(ConfigError, match=r"\$PW is not set"):
        ConnectionSpec.docker_for_node(node, {})
    assert ConnectionSpec.docker_for_node(_node(), {}) is None  # nothing to put in it: no connection
    tls_only = ConnectionSpec.docker_for_node(
        _node(name="b", docker_url="tcp://10.0.0.11:2376", docker={"tls": tls}), {}
    )
    assert (tls_only.host, tls_only.login, tls_only.password) == (None, None, None)

    # what sync writes is what the endpoint reads back
    from dlperf_airflow.docker_runtime import DockerEndpoint

    _connection(monkeypatch, spec.conn_id, host=spec.host, login=spec.login, password=spec.password, extra=spec.extra)
    endpoint = DockerEndpoint.for_node(node)
    assert endpoint.source == "connection dlperf_docker_gpu0"
    assert (endpoint.registry.registry, endpoint.registry.username, endpoint.registry.password) == (
        "r.example.com:5000",
        "u",
        "pw",
    )

    shared = Inventory(
        nodes=(
            node.model_copy(update={"docker": node.docker.model_copy(update={"conn_id": "shared"})}),
            _node(name="b", docker_url="tcp://10.0.0.11:2376", docker={"conn_id": "shared", "tls": tls}),
        )
    )
    with pytest.raises(ConfigError, match="different TLS files or registry"):
        docker_specs(shared, {"PW": "pw"})


# --------------------------------------------------------------------------- the probe is a ContainerSpec


def test_the_environment_probe_is_started_like_every_container(fake_hook):
    from dlperf_airflow.environment_step import probe_output, probe_spec
    from dlperf_core.environment import PROBE_SCRIPT
    from dlperf_core.model import ContainerSpec, RunIds

    ids = RunIds("dlperf_benchmark", "manual__1")
    gpu = _node(accelerator="nvidia", infiniband=True)
    spec = probe_spec(gpu, "img:1", ids)
    assert isinstance(spec, ContainerSpec)
    assert (spec.image, spec.command, spec.network, spec.hostname, spec.gpus, spec.devices, spec.mounts) == (
        "img:1",
        ("sh", "-c", PROBE_SCRIPT),
        "host",
        None,
        True,
        ("/dev/infiniband",),
        (),
    )
    assert spec.labels == {**ids.labels, "dlperf.probe": "gpu0"}
    assert spec.name.startswith(f"dlperf-probe-{ids.short}-gpu0-")

    output, digest = probe_output(gpu, "img:1", ids)
    assert (output, digest) == ("probe output\n", "img@sha256:abc")
    (client,) = fake_hook
    (create,) = client.named("create_container")
    host_config = create[2]["host_config"]
    assert host_config["NetworkMode"] == "host"
    assert host_config["DeviceRequests"][0]["Capabilities"] == [["gpu"]]
    assert host_config["Devices"][0]["PathOnHost"] == "/dev/infiniband"
    assert create[2]["labels"]["dlperf.probe"] == "gpu0" and create[2]["networking_config"] is None
    assert [c[0] for c in client.calls] == [
        "create_container",
        "start",
        "wait",
        "logs",
        "remove_container",
        "inspect_image",
    ]

    # a stand-in node on a user-defined network: probed on docker's default bridge with its hostname
    stand_in = probe_spec(_node(name="node1", network="dlperf-net"), "img:cpu", ids)
    assert (stand_in.network, stand_in.hostname, stand_in.gpus) == ("bridge", "node1", False)
    probe_output(_node(name="node1", network="dlperf-net"), "img:cpu", ids)
    (create,) = fake_hook[-1].named("create_container")
    assert create[2]["host_config"]["NetworkMode"] == "bridge" and create[2]["hostname"] == "node1"
    assert create[2]["networking_config"] is None  # no alias on docker's own bridge
    assert fake_hook[-1].named("create_network") == []
