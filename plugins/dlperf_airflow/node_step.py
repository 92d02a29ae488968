"""Node routing: a case run as one task per node, each on that node's own Celery worker.

Set ``DLPERF_CLUSTER_INVENTORY`` (the deployment's inventory, the one given to ``dlperf cluster sync``) on
every Airflow component, and the DAG renders, for every case run, one task per node of that inventory:
``case_run.on_<node>`` runs on the node's ``queue``, holds the node's one-slot pool ``dlperf_node_<name>`` and
starts that node's container through the node's own Docker socket (``docker_url``, read on the node). The nodes
of a case meet on XCom (:class:`XComBoard`, protocol in :mod:`dlperf_core.runtime.gang`): they start together,
and the first failure anywhere stops them all. ``case_run.collect_case`` then puts their shares together into
the case's outcome (node 0's log, the first failure, the environment probed on each node) for ``store_result``.

Without ``DLPERF_CLUSTER_INVENTORY`` the DAG keeps one ``run_case`` task per case run that starts every node's
container from one worker through each node's ``docker_url``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from dlperf_airflow.runtimes import make_runtime
from dlperf_airflow.task_ids import ROUTING_ENV, in_case_run, node_task_id
from dlperf_core.environment import combine, parse_probe
from dlperf_core.errors import ConfigError
from dlperf_core.frameworks import get_adapter
from dlperf_core.handoff import ExecutedRun, PlannedRun
from dlperf_core.inventory import Inventory, load_inventory
from dlperf_core.jobs import build_job, case_log_dir, default_log_root
from dlperf_core.launch_spec import LaunchSpec, launch_spec_of
from dlperf_core.model import CaseOutcome, NodeOutcome, RunIds
from dlperf_core.runtime.gang import GAVE_UP, GangSettings, NodeShare, case_failure, run_node_share

log = logging.getLogger("dlperf")

NODE_ENV = "DLPERF_NODE"  # set on a node worker: the node it sits on (a task for another node refuses to run)
JOIN_ENV = "DLPERF_JOIN_TIMEOUT_S"
STATE_KEY = "dlperf_node_state"
MAX_LOG_BYTES = 32 * 1024 * 1024  # node 0's log travels to store_result through XCom


def routing_inventory(home: Path) -> Inventory | None:
    """The deployment's inventory when node routing is on (``$DLPERF_CLUSTER_INVENTORY``), else None."""
    path = os.environ.get(ROUTING_ENV)
    if not path:
        return None
    p = Path(path)
    return load_inventory(p if p.is_absolute() else home / p)


def check_routed(inventory: Inventory, routing: Inventory, what: str = "inventory") -> None:
    """Refuse a trigger whose nodes have no task of their own in the DAG (not in the deployment's inventory)."""
    known = {n.name: n for n in routing.nodes}
    problems = [
        f"node {n.name}: not in the deployment's inventory {routing.name} ({ROUTING_ENV}), so no task runs on it"
        for n in inventory.nodes
        if n.name not in known
    ]
    problems += [
        f"node {n.name}: queue {n.queue!r} differs from the deployment's {known[n.name].queue!r}"
        for n in inventory.nodes
        if n.name in known and known[n.name].queue != n.queue
    ]
    if problems:
        raise ConfigError(what, problems)


class XComBoard:
    """The gang's board on XCom: a node posts under its own task (same map index), reads its peers'.

    A read that fails (the api-server busy for a moment) answers the peer's last known state; only when reads
    keep failing for ``patience_s`` does the error reach the supervisor (and fail the case with it)."""

    def __init__(self, ti, patience_s: float = 120.0):
        self._ti = ti
        self._patience_s = patience_s
        self._known: dict[str, dict | None] = {}
        self._failing_since: float | None = None

    def post(self, state: dict) -> None:
        self._ti.xcom_push(key=STATE_KEY, value=state)

    def read(self, node: str) -> dict | None:
        try:
            state = self._ti.xcom_pull(
                task_ids=in_case_run(node_task_id(node)), key=STATE_KEY, map_indexes=self._ti.map_index
            )
        except Exception as exc:  # noqa: BLE001 - retried on the next poll
            now = time.monotonic()
            self._failing_since = self._failing_since or now
            if now - self._failing_since > self._patience_s:
                raise
            log.warning("reading %s's state from XCom failed (%s: %s); retrying", node, type(exc).__name__, exc)
            return self._known.get(node)
        self._failing_since = None
        self._known[node] = state
        return state


def _probe(node, image: str, ids: RunIds) -> dict:
    """The environment probe of ``image`` on this node, once per DAG run (cached next to the logs)."""
    from dlperf_airflow.environment_step import probe_output

    cache = (
        default_log_root() / ".probes" / ids.short / f"{node.name}-{hashlib.sha1(image.encode()).hexdigest()[:12]}.json"
    )
    if cache.exists():
        return json.loads(cache.read_text())
    output, digest = probe_output(node, image, ids)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"output": output, "digest": digest}))
    return {"output": output, "digest": digest}


def route_step(plan: list[dict]) -> list[dict]:
    """Each planned item with the nodes it runs on (``nodes``); the routing is logged once."""
    routed = []
    for item in plan:
        planned = PlannedRun.from_dict(item)
        nodes = load_inventory(planned.inventory).first(planned.run.case.nodes)
        log.info("%s -> %s", planned.label, ", ".join(f"{n.name} (queue {n.queue})" for n in nodes))
        routed.append(replace(planned, nodes=tuple(n.name for n in nodes)).to_dict())
    return routed


def node_step(item: dict, ids: RunIds, node_name: str, preflight: dict | None, board) -> dict:
    """This node's share of one case run (``{"skipped": ...}`` when the case does not use it)."""
    planned = PlannedRun.from_dict(item)
    run = planned.run
    inventory = load_inventory(planned.inventory)
    nodes = inventory.first(run.case.nodes)
    names = [n.name for n in nodes]
    if node_name not in names:
        return {"node": node_name, "skipped": f"{run.case.key} runs on {', '.join(names)}"}
    rank = names.index(node_name)
    now = datetime.now(UTC).isoformat()

    def refused(reason: str) -> dict:
        board.post({"phase": GAVE_UP, "reason": reason})
        return NodeShare(node_name, rank, None, "", reason, True, now, now).to_dict()

    here = os.environ.get(NODE_ENV)
    if here and here != node_name:
        return refused(
            f"{node_name}: its task ran on the worker of node {here}; give each node's worker only that node's "
            f"queue ({nodes[rank].queue})"
        )
    if preflight and preflight.get("nodes"):
        from dlperf_core.preflight import NodeHealth, case_blocker

        health = {name: NodeHealth.from_dict(h) for name, h in preflight["nodes"].items()}
        if blocker := case_blocker(names, health):
            return refused(blocker)
    try:
        runtime = make_runtime(planned.runtime, inventory)
        job = build_job(run, inventory, runtime, ids, timeout_s=planned.timeout_s, watchdog_s=planned.watchdog_s)
    except Exception as exc:  # noqa: BLE001 - the engine is unreachable, ...: this node gives up, with the reason
        return refused(f"runtime error: {type(exc).__name__}: {exc}")
    samples = None
    if planned.runtime == "docker":
        from dlperf_core.gpu_sampling import GpuSamples

        samples = GpuSamples()
        start = lambda i, files: runtime.start_node(job, i, files, samples=samples)  # noqa: E731
    else:
        start = lambda i, files: runtime.start_node(job, i, files)  # noqa: E731
    settings = GangSettings(join_s=float(os.environ.get(JOIN_ENV, GangSettings.join_s)))
    share = run_node_share(job, node_name, board, start, settings)
    result: dict = {
        **share.to_dict(),
        "gpu_memory_peak_mb": samples.peak_mb if samples else None,
        "gpu_power": [list(p) for p in samples.power] if samples else [],
        "ran_on": here,
    }
    try:  # what this node launched (its own container's image as its engine says), for the result's launch spec
        spec = launch_spec_of(runtime, job, run, suite=planned.suite, inventory=planned.inventory)
        if spec is not None:
            result["launch_spec"] = spec.to_dict()
    except Exception as exc:  # noqa: BLE001 - the result is stored without it
        log.warning("no launch spec from %s: %s: %s", node_name, type(exc).__name__, exc)
    if rank == 0:
        path = Path(share.log_path)
        if path.is_file():
            data = path.read_bytes()
            if len(data) > MAX_LOG_BYTES:
                result["log_error"] = f"node 0's log is {len(data)} bytes, more than {MAX_LOG_BYTES} can travel"
            else:
                result["log"] = data.decode(errors="replace")
    if planned.runtime == "docker":
        try:
            result["probe"] = _probe(nodes[rank], get_adapter(run.case.framework).image(run.case, tuple(nodes)), ids)
        except Exception as exc:  # noqa: BLE001 - the environment never fails the case
            log.warning("environment probe on %s failed: %s: %s", node_name, type(exc).__name__, exc)
    return result


def collect_step(item: dict, results: dict[str, dict | None], ids: RunIds) -> dict:
    """The case's outcome from its nodes' shares: what ``run_case`` returns when one task runs every node."""
    planned = PlannedRun.from_dict(item)
    run = planned.run
    names = [n.name for n in load_inventory(planned.inventory).first(run.case.nodes)]
    shares = {n: (NodeShare.from_dict(r) if (r := results.get(n)) and "rank" in r else None) for n in names}
    failure = case_failure(shares)
    got = [s for s in shares.values() if s is not None]
    now = datetime.now(UTC)
    started = min((datetime.fromisoformat(s.started_at) for s in got), default=now)
    finished = max((datetime.fromisoformat(s.finished_at) for s in got), default=now)
    nodes = []
    for rank, name in enumerate(names):
        share, result = shares[name], results.get(name) or {}
        path = share.log_path if share else ""
        if rank == 0 and "log" in result:  # node 0's log, where store_result reads it
            central = case_log_dir(ids, run) / "node0.log"
            central.parent.mkdir(parents=True, exist_ok=True)
            central.write_text(result["log"])
            path = str(central)
        elif rank == 0 and result.get("log_error") and not failure:
            failure = result["log_error"]
        nodes.append(NodeOutcome(node=name, rank=rank, exit_code=share.exit_code if share else None, log_path=path))
    peaks = [r["gpu_memory_peak_mb"] for r in results.values() if r and r.get("gpu_memory_peak_mb")]
    power = {n: [(t, w) for t, w in r["gpu_power"]] for n, r in results.items() if r and r.get("gpu_power")}
    outcome = CaseOutcome(started, finished, nodes, failure, max(peaks) if peaks else None, power or None)
    environment_id = _environment(planned, names, results)
    return ExecutedRun(planned.with_environment(environment_id), outcome, merged_launch_spec(results)).to_dict()


def merged_launch_spec(results: dict[str, dict | None]) -> LaunchSpec | None:
    """The case's launch spec from its nodes' shares: each node as its own task saw it (the image its engine
    ran), the nodes whose task said nothing as another node's task planned them; None if none reported one."""
    views = {name: LaunchSpec.from_dict(r["launch_spec"]) for name, r in results.items() if r and r.get("launch_spec")}
    if not views:
        return None
    return next(iter(views.values())).merged(views)


def _environment(planned: PlannedRun, names: list[str], results: dict[str, dict | None]) -> int | None:
    """Store the environment the nodes probed (as ``capture_environment`` does centrally); None if incomplete."""
    run = planned.run
    probes = [p for n in names if (p := (results.get(n) or {}).get("probe"))]
    if planned.runtime != "docker" or len(probes) < len(names):
        return planned.environment_id
    from dlperf_core.storage import ResultStore, default_db_url

    digests = list(dict.fromkeys(p["digest"] for p in probes if p["digest"]))
    environment = combine(
        [parse_probe(p["output"]) for p in probes],
        framework=run.case.framework,
        image=get_adapter(run.case.framework).image(run.case, load_inventory(planned.inventory).first(run.case.nodes)),
        image_digest=",".join(digests) or None,
    )
    try:
        store = ResultStore(default_db_url())
        try:
            return store.upsert_environment(environment, datetime.now(UTC))
        finally:
            store.dispose()
    except Exception as exc:  # noqa: BLE001 - the environment never fails the case
        log.warning("could not store the environment of %s: %s: %s", run.case.key, type(exc).__name__, exc)
        return None
