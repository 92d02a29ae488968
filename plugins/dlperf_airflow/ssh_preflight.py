"""Preflight over SSH: run ``dlperf_core.cluster.preflight``'s check script on every node with the SSH provider.

Each node is reached through its Airflow connection ``dlperf_node_<name>`` (made by ``dlperf cluster
sync``) when it exists, else straight from the inventory's ``ssh`` block. Nodes are checked at the same
time; a node that cannot be reached or fails a check is reported, never raised: its cases are skipped with
the reason and the rest run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from airflow.providers.ssh.hooks.ssh import SSHHook

from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.cluster.preflight import NodeHealth, health_of_output, preflight_script, unreachable

log = logging.getLogger("dlperf.preflight")

SCRIPT_TIMEOUT_S = 600.0
"""Whole-script bound; an image pull can take minutes. (Not the SSH provider's 10 s of silence.)"""


def _connection_exists(conn_id: str) -> bool:
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return False
    return True


def ssh_hook_for(node: Node, *, use_connection: bool = True) -> SSHHook:
    """The SSH hook of a node: its ``dlperf_node_<name>`` connection, else the inventory's ssh block."""
    ssh = node.ssh
    if ssh is None:
        raise ValueError(f"node {node.name} declares no ssh access")
    if use_connection and _connection_exists(node.airflow_id):
        return SSHHook(ssh_conn_id=node.airflow_id, cmd_timeout=SCRIPT_TIMEOUT_S, conn_retry_attempts=1)
    hook = SSHHook(
        remote_host=node.address,
        username=ssh.user,
        port=ssh.port,
        key_file=ssh.key_file,
        conn_timeout=ssh.connect_timeout_s,
        cmd_timeout=SCRIPT_TIMEOUT_S,
        conn_retry_attempts=1,
    )
    if ssh.host_key:  # the same parsing the provider applies to a connection's `host_key` extra
        key_type, data = ssh.host_key.split()[:2]
        from base64 import decodebytes

        hook.host_key = SSHHook._host_key_mappings[key_type](data=decodebytes(data.encode()))
    hook.look_for_keys = ssh.key_file is None
    return hook


def check_node(node: Node, images: Iterable[str], *, use_connection: bool = True) -> NodeHealth:
    """Run the check script on one node and judge its output. Never raises for a sick node."""
    images = tuple(images)
    try:
        hook = ssh_hook_for(node, use_connection=use_connection)
        with hook.get_conn() as client:
            status, out, err = hook.exec_ssh_client_command(
                client, preflight_script(node, images), get_pty=False, environment=None, timeout=SCRIPT_TIMEOUT_S
            )
    except Exception as exc:  # noqa: BLE001 - refused, timed out, auth failed, host key mismatch: unreachable
        detail = str(exc).strip() or type(exc).__name__
        return unreachable(node.name, f"{type(exc).__name__}: {detail}")
    text = out.decode(errors="replace") + (("\n" + err.decode(errors="replace")) if err else "")
    return health_of_output(node, images, text, status)


def check_nodes(inventory: Inventory, images: Iterable[str], *, use_connection: bool = True) -> dict[str, NodeHealth]:
    """Health of every node with ``ssh`` declared, checked concurrently: ``{node name: NodeHealth}``."""
    images = tuple(images)
    nodes = [n for n in inventory.nodes if n.ssh is not None]
    if not nodes:
        return {}
    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
        results = list(pool.map(lambda n: check_node(n, images, use_connection=use_connection), nodes))
    for h in results:
        if h.ok:
            log.info("preflight %s: ok (%s)", h.name, "; ".join(f"{k}: {v}" for k, v in h.checks.items()))
        else:
            log.warning("preflight %s: FAILED: %s", h.name, "; ".join(h.problems))
    return {h.name: h for h in results}
