"""Docker access through Airflow connections, without a Docker engine or a metadata DB.

* Planning refuses a node whose Docker Engine is on TCP without TLS (root on the node for anyone who can reach
  the port) unless the inventory says ``insecure: true``; TLS files, unix:// and ssh:// sockets are fine.
* :class:`DockerEndpoint` (the one place a node's Docker client is built) gives the provider's ``DockerHook``
  the node's ``docker_url`` as ``base_url``, the inventory's TLS files as ``tls`` and, for a registry login,
  the node's Airflow Docker connection (here in the ``AIRFLOW_CONN_*`` form) as ``docker_conn_id``: the hook
  logs in itself. A missing login connection, or one that is no registry login, is a clear error.
* The node's engine connection (``dlperf_engine_<name>``, type ``dlperf_docker_engine``), when it exists,
  replaces the inventory's URL, TLS files and login connection; a broken one is refused naming it.
* ``dlperf cluster sync`` writes those connections from ``docker_url`` and ``docker:`` (their specs; the DB round
  trip is in test_cluster_sync.py).
* The environment probe is a ContainerSpec started by the runtime's own ``create_container``.
"""

from __future__ import annotations

import json

import pytest

from dlperf_core.cluster.inventory import Inventory, Node, check_docker_access, insecure_docker_nodes
from dlperf_core.errors import ConfigError

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
    from dlperf_core.cluster.inventory import load_inventory
    from helpers import REPO

    inventory = load_inventory(REPO / "inventories/example-cluster.yaml")
    check_docker_access(inventory, "example-cluster")
    assert all(n.docker.tls is not None for n in inventory.nodes)


def test_the_docker_runtime_refuses_it_at_planning(tmp_path):
    from dlperf_core.plan.defaults import DeploymentDefaults
    from dlperf_core.plan.trigger import resolve_trigger
    from helpers import REPO

    def resolve_settings(params):
        return resolve_trigger(params, DeploymentDefaults())

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


REGISTRY_LOGIN = {"host": "registry.example.com", "port": 5000, "login": "bench", "password": "s3cret-pw"}


@pytest.fixture
def provider_api(monkeypatch):
    """The Docker provider's own hook, its docker APIClient replaced: what the hook connects to and logs in
    with, recorded (the real engine and registry: test_docker_tls.py)."""
    import airflow.providers.docker.hooks.docker as provider

    made: list = []

    class ApiClient:
        def __init__(self, **kwargs):
            self.kwargs, self.logins = kwargs, []
            made.append(self)

        def ping(self) -> bool:
            return True

        def login(self, **kwargs) -> None:
            self.logins.append(kwargs)

    monkeypatch.setattr(provider, "APIClient", ApiClient)
    return made


@pytest.mark.usefixtures("fake_hook")
def test_tls_comes_from_the_inventory_and_the_login_from_the_nodes_connection(tmp_path, monkeypatch):
    from dlperf_airflow.docker_runtime import DockerEndpoint

    tls = _tls_files(tmp_path)
    node = _node(docker_url="tcp://10.0.0.10:2376", docker={"tls": {**tls, "verify": False}})
    _connection(monkeypatch, node.docker_conn_id, **REGISTRY_LOGIN, extra={"email": "bench@example.com"})

    endpoint = DockerEndpoint.for_node(node)
    assert endpoint.tls.ca_cert == tls["ca_cert"] and endpoint.tls.verify is False
    assert endpoint.tls.cert == (tls["client_cert"], tls["client_key"])
    assert endpoint.conn_id == "dlperf_docker_gpu0" and endpoint.logs_in
    assert "s3cret-pw" not in repr(endpoint)

    # the hook is built the way the provider takes it; the login is the hook's own (nothing logs in here)
    client = endpoint.client(timeout=30)
    assert client.hook_args == {
        "docker_conn_id": "dlperf_docker_gpu0",
        "base_url": "tcp://10.0.0.10:2376",
        "tls": endpoint.tls,
        "timeout": 30,
    }
    assert client.named("login") == []
    assert endpoint.client(login=False).hook_args["docker_conn_id"] is None  # e.g. the log stream's second client


def test_the_providers_hook_logs_in_with_the_nodes_connection(tmp_path, monkeypatch, provider_api):
    """The real DockerHook: tcp:// becomes https:// under the inventory's TLS, and it logs in itself with the
    node's connection (host:port, login, password, extras email and reauth, as the provider reads them)."""
    from dlperf_airflow.docker_runtime import DockerEndpoint

    node = _node(docker_url="tcp://10.0.0.10:2376", docker={"tls": _tls_files(tmp_path)})
    _connection(monkeypatch, node.docker_conn_id, **REGISTRY_LOGIN, extra={"email": "bench@example.com"})
    endpoint = DockerEndpoint.for_node(node)
    endpoint.client(timeout=30)
    endpoint.client(login=False)
    first, second = provider_api
    assert first.kwargs == {"base_url": "https://10.0.0.10:2376", "version": None, "tls": endpoint.tls, "timeout": 30}
    assert first.logins == [
        {
            "username": "bench",
            "password": "s3cret-pw",
            "registry": "registry.example.com:5000",
            "email": "bench@example.com",
            "reauth": True,
        }
    ]
    assert second.logins == []


@pytest.mark.usefixtures("fake_hook")
def test_a_registry_login_is_the_nodes_connection_or_a_clear_error(tmp_path, monkeypatch):
    from dlperf_airflow.docker_runtime import DockerEndpoint, endpoint_of

    tls = _tls_files(tmp_path)
    registry = {"server": "r.example.com", "username": "u", "password_env": "DLPERF_T_PW"}
    node = _node(docker_url="tcp://10.0.0.10:2376", docker={"tls": tls, "registry": registry})
    monkeypatch.delenv("AIRFLOW_CONN_DLPERF_DOCKER_GPU0", raising=False)
    monkeypatch.setenv("DLPERF_T_PW", "from-env")  # never read by the runtime: the login is the connection's

    # the inventory declares a registry, the connection is missing: no login of its own, a clear error
    endpoint = DockerEndpoint.for_node(node)
    assert endpoint.tls.ca_cert == tls["ca_cert"] and not endpoint.logs_in
    with pytest.raises(
        ConfigError,
        match="docker.registry r.example.com: the Airflow Docker connection "
        "dlperf_docker_gpu0 that logs in to the registry does not exist; run `dlperf cluster sync",
    ):
        endpoint.client()
    assert endpoint.client(login=False).hook_args["docker_conn_id"] is None  # the engine is still reachable
    # ... and once `dlperf cluster sync` wrote it, the hook logs in with it
    _connection(monkeypatch, node.docker_conn_id, host="r.example.com", login="u", password="from-env")
    assert endpoint_of(node).client().hook_args["docker_conn_id"] == "dlperf_docker_gpu0"

    # an explicit docker.conn_id must exist too
    named = _node(name="b", docker={"conn_id": "shared_registry"})
    with pytest.raises(ConfigError, match="docker.conn_id shared_registry: the Airflow Docker connection"):
        endpoint_of(named).client()

    # a Docker connection that is no registry login (the TLS-only one older versions wrote) is refused, saying why
    _connection(
        monkeypatch,
        "dlperf_docker_old",
        extra={
            "tls_ca_cert": tls["ca_cert"],
            "tls_client_cert": tls["client_cert"],
            "tls_client_key": tls["client_key"],
        },
    )
    old = _node(name="old", docker_url="tcp://10.0.0.11:2376", docker={"tls": tls})
    with pytest.raises(ConfigError, match="dlperf_docker_old has no registry host: a Docker connection is a registry"):
        endpoint_of(old).client()
    assert "docker.tls" in str(DockerEndpoint.for_node(old).login_error)

    # no registry, no connection: no login, and no pull
    plain = DockerEndpoint.for_node(_node(name="local"))
    assert (plain.base_url, plain.tls, plain.conn_id) == ("unix:///var/run/docker.sock", None, None)
    client = endpoint_of(_node(name="local")).client()
    assert client.hook_args == {
        "docker_conn_id": None,
        "base_url": "unix:///var/run/docker.sock",
        "tls": None,
        "timeout": 120,
    }
    assert endpoint_of("unix:///tmp/other.sock").client().hook_args["base_url"] == "unix:///tmp/other.sock"


def test_tls_is_never_the_registry_logins(tmp_path, monkeypatch):
    from dlperf_airflow.docker_runtime import DockerEndpoint

    tls = _tls_files(tmp_path)
    # insecure, said explicitly: plain TCP
    insecure = DockerEndpoint.for_node(
        _node(name="stand-in", docker_url="tcp://10.0.0.9:2375", docker={"insecure": True})
    )
    assert insecure.tls is None
    # a TCP node without TLS that slipped past planning is refused here too ...
    with pytest.raises(ConfigError, match="without TLS"):
        DockerEndpoint.for_node(_node(name="bare", docker_url="tcp://10.0.0.9:2375"))
    # ... and TLS files in the connection's extras (which the Docker provider does not define) do not count
    _connection(
        monkeypatch,
        "dlperf_docker_bare",
        **REGISTRY_LOGIN,
        extra={
            "tls_ca_cert": tls["ca_cert"],
            "tls_client_cert": tls["client_cert"],
            "tls_client_key": tls["client_key"],
        },
    )
    with pytest.raises(ConfigError, match="without TLS"):
        DockerEndpoint.for_node(_node(name="bare", docker_url="tcp://10.0.0.9:2375"))


def test_the_engines_ca_holds_against_a_ca_bundle_in_the_environment(tmp_path, monkeypatch):
    """requests lets $REQUESTS_CA_BUNDLE replace a session's own ``verify`` (docker/docker-py#2433), and dlperf's
    Airflow image sets it: the TLS config the runtime gives the hook keeps the engine's CA (or no verify)."""
    import docker

    from dlperf_airflow.docker_runtime import EngineTls

    tls = _tls_files(tmp_path)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/elsewhere.pem")
    url = "https://10.0.0.10:2376/v1.41/_ping"

    def verify_of(config) -> object:  # what requests verifies a request with (the client never connects here)
        client = docker.APIClient(base_url="https://10.0.0.10:2376", version="1.41", tls=config)
        return client.merge_environment_settings(url, {}, None, None, None)["verify"]

    cert = (tls["client_cert"], tls["client_key"])
    assert verify_of(docker.tls.TLSConfig(client_cert=cert, ca_cert=tls["ca_cert"], verify=True)) == (
        "/etc/ssl/certs/elsewhere.pem"  # docker-py's own: the bundle wins
    )
    assert verify_of(EngineTls(client_cert=cert, ca_cert=tls["ca_cert"], verify=True)) == tls["ca_cert"]
    assert verify_of(EngineTls(client_cert=cert, ca_cert=tls["ca_cert"], verify=False)) is False


# --------------------------------------------------------------------------- dlperf cluster sync's spec


def test_cluster_sync_spec_of_the_docker_connection(tmp_path, monkeypatch, provider_api):
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
    # the provider's registry login, nothing else: TLS is not written (the provider defines no TLS fields)
    assert spec == ConnectionSpec(
        "dlperf_docker_gpu0", "r.example.com:5000", "u", None, {"email": "e@x"}, conn_type="docker", password="pw"
    )
    with pytest.raises(ConfigError, match=r"\$PW is not set"):
        ConnectionSpec.docker_for_node(node, {})
    assert ConnectionSpec.docker_for_node(_node(), {}) is None  # nothing to put in it: no connection
    tls_only = _node(name="b", docker_url="tcp://10.0.0.11:2376", docker={"tls": tls})
    assert ConnectionSpec.docker_for_node(tls_only, {}) is None

    # what sync writes is what the provider's hook logs in with
    from dlperf_airflow.docker_runtime import DockerEndpoint

    _connection(monkeypatch, spec.conn_id, host=spec.host, login=spec.login, password=spec.password, extra=spec.extra)
    DockerEndpoint.for_node(node).client()
    assert provider_api[0].logins == [
        {"username": "u", "password": "pw", "registry": "r.example.com:5000", "email": "e@x", "reauth": True}
    ]

    shared = Inventory(
        nodes=(
            node.model_copy(update={"docker": node.docker.model_copy(update={"conn_id": "shared"})}),
            _node(
                name="b",
                docker_url="tcp://10.0.0.11:2376",
                docker={"conn_id": "shared", "tls": tls, "registry": {"server": "other.example.com", "username": "u"}},
            ),
        )
    )
    with pytest.raises(ConfigError, match="a different registry login"):
        docker_specs(shared, {"PW": "pw"})
    # nodes may share one registry login and still have their own TLS files
    same = Inventory(nodes=(shared.nodes[0], tls_only.model_copy(update={"docker": shared.nodes[0].docker})))
    assert [s.conn_id for s in docker_specs(same, {"PW": "pw"})] == ["shared"]


# --------------------------------------------------------------------------- the probe is a ContainerSpec


def test_the_environment_probe_is_started_like_every_container(fake_hook):
    from dlperf_airflow.environment_step import probe_output, probe_spec
    from dlperf_core.cluster.environment import PROBE_SCRIPT
    from dlperf_core.model import ContainerSpec, RunIds

    ids = RunIds("dlperf_benchmark", "manual__1")
    gpu = _node(accelerator="nvidia", infiniband=True)
    spec = probe_spec(gpu, "img:1", ids)
    assert isinstance(spec, ContainerSpec)
    assert (spec.image, spec.command, spec.network, spec.hostname, spec.gpu_ids, spec.devices, spec.mounts) == (
        "img:1",
        ("sh", "-c", PROBE_SCRIPT),
        "host",
        None,
        ("0",),  # the node's one GPU (gpus: 1); a case's probe gets the case's GPUs (probe_spec's gpu_ids)
        ("/dev/infiniband",),
        (),
    )
    assert spec.labels == {**ids.labels, "dlperf.probe": "gpu0"}
    assert spec.name.startswith(f"dlperf-probe-{ids.short}-gpu0-")

    found = probe_output(gpu, "img:1", ids)
    assert (found.output, found.digest) == ("probe output\n", "img@sha256:abc")
    (client,) = fake_hook
    (create,) = client.named("create_container")
    host_config = create[2]["host_config"]
    assert host_config["NetworkMode"] == "host"
    assert host_config["DeviceRequests"][0]["Capabilities"] == [["gpu"]]
    assert host_config["DeviceRequests"][0]["DeviceIDs"] == ["0"] and not host_config["DeviceRequests"][0]["Count"]
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
    assert (stand_in.network, stand_in.hostname, stand_in.gpu_ids) == ("bridge", "node1", ())
    probe_output(_node(name="node1", network="dlperf-net"), "img:cpu", ids)
    (create,) = fake_hook[-1].named("create_container")
    assert create[2]["host_config"]["NetworkMode"] == "bridge" and create[2]["hostname"] == "node1"
    assert create[2]["networking_config"] is None  # no alias on docker's own bridge
    assert fake_hook[-1].named("create_network") == []


def _engine_connection(monkeypatch, conn_id: str, host: str, **extra) -> None:
    conn = {"conn_type": "dlperf_docker_engine", "host": host, "extra": extra}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


@pytest.mark.usefixtures("fake_hook")
def test_the_engine_connection_replaces_the_inventorys_url_tls_and_login(tmp_path, monkeypatch):
    from dlperf_airflow.docker_runtime import DockerEndpoint, DockerRuntime

    node = _node()  # the inventory says: the local socket, no TLS, no login
    tls = _tls_files(tmp_path)
    _engine_connection(
        monkeypatch, "dlperf_engine_gpu0", "tcp://10.0.0.99:2376", **tls, tls_verify=False, registry_conn_id="team"
    )
    _connection(monkeypatch, "team", **REGISTRY_LOGIN)
    endpoint = DockerEndpoint.for_node(node)
    assert (endpoint.base_url, endpoint.conn_id) == ("tcp://10.0.0.99:2376", "team")
    assert endpoint.tls.ca_cert == tls["ca_cert"] and endpoint.tls.verify is False
    assert endpoint.client().hook_args["base_url"] == "tcp://10.0.0.99:2376"
    # the runtime keys its engines by where it reaches them: the connection's URL, not the inventory's
    runtime = DockerRuntime(Inventory(nodes=(node,)))
    assert runtime.engines_not_answering([node]) == []  # the fake engine answers at the connection's URL

    # edited to plain TCP without saying insecure: refused, naming the connection
    _engine_connection(monkeypatch, "dlperf_engine_gpu0", "tcp://10.0.0.99:2375")
    with pytest.raises(ConfigError, match=r"node gpu0 \(connection dlperf_engine_gpu0\).*without TLS"):
        DockerEndpoint.for_node(node)
    # not an engine connection at all: refused, naming it and the field
    monkeypatch.setenv("AIRFLOW_CONN_DLPERF_ENGINE_GPU0", json.dumps({"conn_type": "docker", "host": "x"}))
    with pytest.raises(ConfigError, match="Airflow connection dlperf_engine_gpu0.*its type is 'docker'"):
        DockerEndpoint.for_node(node)
    assert (
        DockerRuntime(Inventory(nodes=(node,)))
        .engines_not_answering([node])[0]
        .startswith("gpu0's Docker Engine cannot be reached: invalid Airflow connection dlperf_engine_gpu0")
    )


@pytest.mark.usefixtures("fake_hook")
def test_cluster_sync_spec_of_the_engine_connection_reads_back_as_the_node(tmp_path, monkeypatch):
    """What sync writes (its spec) is what the runtime reads: the same URL, TLS files and login connection."""
    from dlperf_airflow.docker_runtime import DockerEndpoint
    from dlperf_cli.cluster_cmd import ConnectionSpec

    tls = _tls_files(tmp_path)
    node = _node(
        docker_url="tcp://10.0.0.10:2376", docker={"tls": tls, "registry": {"server": "r:5000", "username": "u"}}
    )
    spec = ConnectionSpec.engine_for_node(node)
    assert (spec.conn_id, spec.conn_type, spec.host, spec.login, spec.password) == (
        "dlperf_engine_gpu0", "dlperf_docker_engine", "tcp://10.0.0.10:2376", None, None
    )  # fmt: skip
    _engine_connection(monkeypatch, spec.conn_id, spec.host, **spec.extra)
    _connection(monkeypatch, node.docker_conn_id, **REGISTRY_LOGIN)
    from_conn = DockerEndpoint.for_node(node)
    monkeypatch.delenv("AIRFLOW_CONN_DLPERF_ENGINE_GPU0")
    from_inventory = DockerEndpoint.for_node(node)
    assert (from_conn.base_url, from_conn.conn_id) == (from_inventory.base_url, from_inventory.conn_id)
    assert (from_conn.tls.ca_cert, from_conn.tls.cert) == (from_inventory.tls.ca_cert, from_inventory.tls.cert)
