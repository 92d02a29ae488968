"""The docker runtime's create kwargs give a case's container exactly its GPUs: ``DeviceRequest(device_ids=...)``,
never ``count=-1`` (every GPU of the node), and its node's CPU quota. docker-py builds the host config without an
engine (the API version is given), so nothing is simulated: these are the kwargs ``create_container`` sends."""

from __future__ import annotations

import docker
from docker.types import DeviceRequest

from dlperf_airflow.docker_runtime import device_requests_for, host_config_for
from dlperf_core.cluster.container import container_spec_for
from dlperf_core.cluster.inventory import Node

UUIDS = ("GPU-3f0c1a2b-0000-1111-2222-333344445555", "GPU-9e8d7c6b-aaaa-bbbb-cccc-ddddeeeeffff")


def _spec(node: Node, gpus: int):
    return container_spec_for(node, name="c", image="i", command=("true",), environment={}, labels={}, gpus=gpus)


def _host_config(spec) -> dict:
    client = docker.APIClient(base_url="unix:///nonexistent/docker.sock", version="1.43")  # never connects
    return host_config_for(client, spec)


def test_a_1n1g_case_on_an_8_gpu_node_requests_gpu_0_only():
    spec = _spec(Node(name="gpu0", gpus=8, accelerator="nvidia"), 1)
    assert device_requests_for(spec) == [DeviceRequest(device_ids=["0"], capabilities=[["gpu"]])]
    (request,) = _host_config(spec)["DeviceRequests"]
    assert request["DeviceIDs"] == ["0"] and request["Capabilities"] == [["gpu"]] and request["Count"] != -1


def test_two_gpus_listed_by_uuid_are_requested_by_uuid():
    spec = _spec(Node(name="gpu0", gpus=[*UUIDS, "GPU-00000000-0000-0000-0000-000000000003"], accelerator="nvidia"), 2)
    (request,) = _host_config(spec)["DeviceRequests"]
    assert request["DeviceIDs"] == list(UUIDS)


def test_a_cpu_node_requests_no_gpu():
    spec = _spec(Node(name="cpu0", gpus=2), 2)
    assert device_requests_for(spec) is None and "DeviceRequests" not in _host_config(spec)


def test_a_nodes_cpu_quota_is_the_containers_nano_cpus():
    """An inventory node's ``cpu_quota`` (CPUs of time, ``docker run --cpus``) is the engine's NanoCpus; a node without
    one sets none."""
    spec = _spec(Node(name="slow0", gpus=1, cpu_quota=0.5), 1)
    assert _host_config(spec)["NanoCpus"] == 500_000_000
    assert "NanoCpus" not in _host_config(_spec(Node(name="cpu0", gpus=1), 1))
