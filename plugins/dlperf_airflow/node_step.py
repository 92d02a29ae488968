"""Node routing: a case run as one task per node, each on that node's own Celery worker.

Set Airflow's configuration option ``[dlperf] cluster_inventory`` (the deployment's inventory, the one given to
``dlperf cluster sync``; environment variable ``AIRFLOW__DLPERF__CLUSTER_INVENTORY`` or ``airflow.cfg``) on
every Airflow component, and the DAG renders, for every case run, one task per node of that inventory:
``case_run.on_<node>`` runs on the node's ``queue``, holds the node's one-slot pool ``dlperf_node_<name>`` and
starts that node's container through the node's own Docker socket (``docker_url``, read on the node). The nodes
of a case meet on XCom (:class:`XComBoard`, protocol in :mod:`dlperf_core.runtime.gang`): they start together,
and the first failure anywhere stops them all. ``case_run.collect_case`` then puts their shares together into
the case's outcome (node 0's log, the first failure, the environment probed on each node) for ``store_result``.

Without ``[dlperf] cluster_inventory`` the DAG keeps one ``run_case`` task per case run that starts every node's
container from one worker through each node's ``docker_url``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from dlperf_airflow.runtimes import make_runtime, runtime_error
from dlperf_airflow.task_ids import OLD_ROUTING_ENV, ROUTING_ENV, cluster_inventory, in_case_run, node_task_id
from dlperf_core.environment import combine, parse_probe
from dlperf_core.frameworks import get_adapter
from dlperf_core.handoff import ExecutedRun, NodeReport, Plan, PlannedRun, ProbeOutput
from dlperf_core.inventory import Inventory, Node, load_inventory
from dlperf_core.jobs import build_job, case_log_dir, default_log_root
from dlperf_core.launch_spec import LaunchSpec, launch_spec_of
from dlperf_core.model import CaseOutcome, NodeOutcome, RunIds
from dlperf_core.preflight import PreflightReport
from dlperf_core.runtime.gang import (
    GAVE_UP,
    Board,
    GangSettings,
    NodeShare,
    NodeState,
    case_failure,
    run_node_share,
)

log = logging.getLogger("dlperf")

NODE_ENV = "DLPERF_NODE"  # set on a node worker: the node it sits on (a task for another node refuses to run)
JOIN_ENV = "DLPERF_JOIN_TIMEOUT_S"
STATE_KEY = "dlperf_node_state"
MAX_LOG_BYTES = 32 * 1024 * 1024  # node 0's log travels to store_result through XCom


def routing_inventory(home: Path) -> Inventory | None:
    """The deployment's inventory when node routing is on (Airflow's ``[dlperf] cluster_inventory``, read
    through Airflow's configuration: :func:`dlperf_airflow.task_ids.cluster_inventory`; a relative path is
    under ``home``), else None. The variable dlperf read before (``DLPERF_CLUSTER_INVENTORY``) is not read
    any more: set alone, it is only warned about."""
    path = cluster_inventory()
    if not path:
        if os.environ.get(OLD_ROUTING_ENV):
            log.warning(
                "%s is no longer read: node routing is off. Set Airflow's [dlperf] cluster_inventory (%s) instead",
                OLD_ROUTING_ENV,
                ROUTING_ENV,
            )
        return None
    p = Path(path)
    return load_inventory(p if p.is_absolute() else home / p)


class XComBoard:
    """The gang's board on XCom: a node posts under its own task (same map index), reads its peers'. XCom holds
    a post's JSON form (:class:`~dlperf_core.runtime.gang.NodeState`'s ``to_json``), read back as the type.

    A read that fails (the api-server busy for a moment, a post that is not a state) answers the peer's last
    known state; only when reads keep failing for ``patience_s`` does the error reach the supervisor (and fail
    the case with it)."""

    def __init__(self, ti, patience_s: float = 120.0):
        self._ti = ti
        self._patience_s = patience_s
        self._known: dict[str, NodeState | None] = {}
        self._failing_since: float | None = None

    def post(self, state: NodeState) -> None:
        self._ti.xcom_push(key=STATE_KEY, value=state.to_json())

    def read(self, node: str) -> NodeState | None:
        try:
            posted = self._ti.xcom_pull(
                task_ids=in_case_run(node_task_id(node)), key=STATE_KEY, map_indexes=self._ti.map_index
            )
            state = None if posted is None else NodeState.from_json(posted)
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


def _probe(node: Node, image: str, ids: RunIds) -> ProbeOutput:
    """The environment probe of ``image`` on this node, once per DAG run (cached next to the logs)."""
    from dlperf_airflow.environment_step import probe_output

    cache = (
        default_log_root() / ".probes" / ids.short / f"{node.name}-{hashlib.sha1(image.encode()).hexdigest()[:12]}.json"
    )
    if cache.exists():
        return ProbeOutput(**json.loads(cache.read_text()))
    output, digest = probe_output(node, image, ids)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"output": output, "digest": digest}))
    return ProbeOutput(output, digest)


def route_step(plan: Plan) -> list[PlannedRun]:
    """Each planned case run with the nodes it runs on (``nodes``); the routing is logged once."""
    routed = []
    for planned in plan.cases:
        nodes = load_inventory(planned.inventory).first(planned.run.case.nodes)
        log.info("%s -> %s", planned.label, ", ".join(f"{n.name} (queue {n.queue})" for n in nodes))
        routed.append(replace(planned, nodes=tuple(n.name for n in nodes)))
    return routed


def node_step(
    planned: PlannedRun, ids: RunIds, node_name: str, preflight: PreflightReport | None, board: Board
) -> NodeReport:
    """This node's share of one case run (``skipped`` set when the case does not use it)."""
    run = planned.run
    inventory = load_inventory(planned.inventory)
    nodes = inventory.first(run.case.nodes)
    names = [n.name for n in nodes]
    if node_name not in names:
        return NodeReport(node_name, skipped=f"{run.case.key} runs on {', '.join(names)}")
    rank = names.index(node_name)
    now = datetime.now(UTC).isoformat()

    def refused(reason: str) -> NodeReport:
        board.post(NodeState(GAVE_UP, reason=reason))
        return NodeReport(node_name, NodeShare(node_name, rank, None, "", reason, True, now, now))

    here = os.environ.get(NODE_ENV)
    if here and here != node_name:
        return refused(
            f"{node_name}: its task ran on the worker of node {here}; give each node's worker only that node's "
            f"queue ({nodes[rank].queue})"
        )
    if preflight is not None and (blocker := preflight.blocker(names)):
        return refused(blocker)
    runtime = None
    try:
        runtime = make_runtime(planned.runtime, inventory)
        job = build_job(run, inventory, runtime, ids, timeout_s=planned.timeout_s, watchdog_s=planned.watchdog_s)
    except Exception as exc:  # noqa: BLE001 - the engine is unreachable, ...: this node gives up, with the reason
        return refused(runtime_error(runtime, [nodes[rank]], exc))
    samples = None
    if planned.runtime == "docker":
        from dlperf_core.gpu_sampling import GpuSamples

        samples = GpuSamples()
        start = lambda i, files: runtime.start_node(job, i, files, samples=samples)  # noqa: E731
    else:
        start = lambda i, files: runtime.start_node(job, i, files)  # noqa: E731
    settings = GangSettings(join_s=float(os.environ.get(JOIN_ENV, GangSettings.join_s)))
    share = run_node_share(job, node_name, board, start, settings)
    spec = None
    try:  # what this node launched (its own container's image as its engine says), for the result's launch spec
        spec = launch_spec_of(runtime, job, run, suite=planned.suite, inventory=planned.inventory)
    except Exception as exc:  # noqa: BLE001 - the result is stored without it
        log.warning("no launch spec from %s: %s: %s", node_name, type(exc).__name__, exc)
    node_log, log_error = _node0_log(share) if rank == 0 else (None, None)
    probe = None
    if planned.runtime == "docker":
        try:
            probe = _probe(nodes[rank], get_adapter(run.case.framework).image(run.case, tuple(nodes)), ids)
        except Exception as exc:  # noqa: BLE001 - the environment never fails the case
            log.warning("environment probe on %s failed: %s: %s", node_name, type(exc).__name__, exc)
    return NodeReport(
        node_name,
        share,
        ran_on=here,
        gpu_memory_peak_mb=samples.peak_mb if samples else None,
        gpu_power=tuple(samples.power) if samples else (),
        launch_spec=spec,
        log=node_log,
        log_error=log_error,
        probe=probe,
        oversubscription=job.oversubscription,
    )


def _node0_log(share: NodeShare) -> tuple[str | None, str | None]:
    """Node 0's log, to travel to ``store_result`` (its text, or why it cannot)."""
    path = Path(share.log_path)
    if not path.is_file():
        return None, None
    data = path.read_bytes()
    if len(data) > MAX_LOG_BYTES:
        return None, f"node 0's log is {len(data)} bytes, more than {MAX_LOG_BYTES} can travel"
    return data.decode(errors="replace"), None


def collect_step(planned: PlannedRun, reports: Mapping[str, NodeReport | None], ids: RunIds) -> ExecutedRun:
    """The case's outcome from its nodes' reports: what ``run_case`` returns when one task runs every node."""
    run = planned.run
    names = [n.name for n in load_inventory(planned.inventory).first(run.case.nodes)]
    got = {n: r for n in names if (r := reports.get(n)) is not None and r.share is not None}
    shares = {n: (got[n].share if n in got else None) for n in names}
    failure = case_failure(shares)
    now = datetime.now(UTC)
    started = min((datetime.fromisoformat(r.share.started_at) for r in got.values() if r.share), default=now)
    finished = max((datetime.fromisoformat(r.share.finished_at) for r in got.values() if r.share), default=now)
    nodes = []
    for rank, name in enumerate(names):
        share, report = shares[name], got.get(name)
        path = share.log_path if share else ""
        if rank == 0 and report is not None and report.log is not None:  # node 0's log, where store_result reads it
            central = case_log_dir(ids, run) / "node0.log"
            central.parent.mkdir(parents=True, exist_ok=True)
            central.write_text(report.log)
            path = str(central)
        elif rank == 0 and report is not None and report.log_error and not failure:
            failure = report.log_error
        nodes.append(NodeOutcome(node=name, rank=rank, exit_code=share.exit_code if share else None, log_path=path))
    peaks = [r.gpu_memory_peak_mb for r in got.values() if r.gpu_memory_peak_mb]
    power = {n: list(r.gpu_power) for n, r in got.items() if r.gpu_power}
    crowded = next((r.oversubscription for r in got.values() if r.oversubscription), None)
    outcome = CaseOutcome(
        started, finished, nodes, failure, max(peaks) if peaks else None, power or None, oversubscription=crowded
    )
    environment_id = _environment(planned, names, got)
    return ExecutedRun(planned.with_environment(environment_id), outcome, merged_launch_spec(got))


def merged_launch_spec(reports: Mapping[str, NodeReport]) -> LaunchSpec | None:
    """The case's launch spec from its nodes' reports: each node as its own task saw it (the image its engine
    ran), the nodes whose task said nothing as another node's task planned them; None if none reported one."""
    views = {name: r.launch_spec for name, r in reports.items() if r.launch_spec is not None}
    if not views:
        return None
    return next(iter(views.values())).merged(views)


def _environment(planned: PlannedRun, names: list[str], reports: Mapping[str, NodeReport]) -> int | None:
    """Store the environment the nodes probed (as ``capture_environment`` does centrally); None if incomplete."""
    run = planned.run
    probes = [r.probe for n in names if (r := reports.get(n)) is not None and r.probe is not None]
    if planned.runtime != "docker" or len(probes) < len(names):
        return planned.environment_id
    from dlperf_core.storage import ResultStore, default_db_url

    digests = list(dict.fromkeys(p.digest for p in probes if p.digest))
    environment = combine(
        [parse_probe(p.output) for p in probes],
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
