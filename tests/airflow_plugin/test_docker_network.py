"""The stand-in nodes' network on a real Docker Engine: the node tasks of a case on one engine, started together
on a fresh engine, each create it (dlperf did not ask Docker to refuse a name taken, and that check is best effort anyway:
Docker 20.10 made two ``dlperf-net``, and every container then failed to start, "network dlperf-net is ambiguous"). ``ensure_network``
leaves the oldest of the name and a container starts on it."""

from __future__ import annotations

import threading
import uuid

import docker
import pytest

from dlperf_airflow.docker_runtime import ensure_network, run_to_completion
from dlperf_core.model import ContainerSpec
from helpers import docker_marks

IMAGE = "dlperf/pytorch-reference:cpu"
pytestmark = docker_marks(IMAGE)


@pytest.fixture
def network_name():
    client = docker.APIClient(version="auto")
    name = f"dlperf-test-net-{uuid.uuid4().hex[:8]}"
    yield name
    for n in client.networks(names=[name]):
        client.remove_network(n["Id"])


def _named(client, name: str) -> list[dict]:
    return [n for n in client.networks(names=[name]) if n["Name"] == name]


def test_a_duplicate_network_is_removed_and_a_container_starts_on_the_name(network_name):
    client = docker.APIClient(version="auto")
    first = client.create_network(network_name, driver="bridge")["Id"]
    client.create_network(network_name, driver="bridge", check_duplicate=False)  # what two racing tasks made
    client.create_network(network_name + "-longer", driver="bridge")  # the engine's name filter matches it too
    try:
        assert len(_named(client, network_name)) == 2
        ensure_network(client, network_name)
        assert [n["Id"] for n in _named(client, network_name)] == [first]  # the oldest stays
        spec = ContainerSpec(
            f"dlperf-test-{uuid.uuid4().hex[:8]}",
            IMAGE,
            ("echo", "on the network"),
            {},
            {},
            network_name,
            "node0",
            (),
            ipc_host=False,
        )
        output, _ = run_to_completion("unix:///var/run/docker.sock", spec, 60)
        assert output.strip() == "on the network"
        assert _named(client, network_name + "-longer")  # not touched: another name
    finally:
        for n in _named(client, network_name + "-longer"):
            client.remove_network(n["Id"])


def test_tasks_that_make_the_network_at_once_leave_one(network_name):
    clients = [docker.APIClient(version="auto") for _ in range(8)]
    barrier = threading.Barrier(len(clients))
    errors: list[Exception] = []

    def one(client) -> None:
        barrier.wait()
        try:
            ensure_network(client, network_name)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(_named(clients[0], network_name)) == 1
