"""The ``capture_environment`` step: probe the environment every case will run in, store each distinct one once,
and tag every planned case run with its ``environment_id`` (store_result links the results).

What an environment is, which cases share one and how a probe container looks are decided in
:mod:`dlperf_core.cluster.environment_capture`; here the probe container is started the way the docker runtime starts
every container (``run_to_completion``, through the node's Docker connection), and the environments are stored.
Node routing captures on each node's own worker with the same cache and rule (:mod:`dlperf_airflow.node_step`).

Capturing never fails the run: a probe that cannot run (no engine, image missing, timeout) leaves the cases it
concerns without an environment and says why in the task log. On a machine without GPUs the environment records
what exists and lists what does not (``environments.missing``).
"""

from __future__ import annotations

import functools
import logging
from datetime import UTC, datetime

from dlperf_airflow.connections import results_db_url
from dlperf_core.cluster.environment import run_probe_locally
from dlperf_core.cluster.environment_capture import (
    PROBE_TIMEOUT_S,
    EnvironmentKey,
    ProbeCache,
    capture,
    describe,
    environment_key,
    probe_folder,
    probe_spec,
)
from dlperf_core.cluster.inventory import Node
from dlperf_core.model import RunIds
from dlperf_core.run.case_run import WAITS_IN_QUEUE
from dlperf_core.run.handoff import Plan, PlannedRun, ProbeOutput
from dlperf_core.run.jobs import default_log_root
from dlperf_core.storage import ResultStore

log = logging.getLogger("dlperf")

__all__ = ["capture_step", "probe_cache", "probe_output", "probe_spec"]


def _digest(client, image: str) -> str | None:
    """The image's repo digest when it has one (pulled images), else its content id (local builds)."""
    info = client.inspect_image(image)
    digests = info.get("RepoDigests") or []
    return digests[0] if digests else info.get("Id")


def probe_output(node: Node, image: str, ids: RunIds, gpu_ids: tuple[str, ...] | None = None) -> ProbeOutput:
    """The probe's raw output from a one-shot container of ``image`` on ``node`` with the GPUs ``gpu_ids`` (a
    case's; None: every GPU the inventory names), and the image digest."""
    from dlperf_airflow.docker_runtime import run_to_completion

    output, client = run_to_completion(node, probe_spec(node, image, ids, gpu_ids), PROBE_TIMEOUT_S)
    return ProbeOutput(output, _digest(client, image))


def probe_cache(ids: RunIds) -> ProbeCache:
    """This DAG run's probes, kept beside its logs: the central capture and each node task share them."""
    return ProbeCache(
        lambda node, image, gpu_ids: probe_output(node, image, ids, gpu_ids), probe_folder(default_log_root(), ids)
    )


def capture_step(plan: Plan, ids: RunIds) -> list[PlannedRun]:
    """Capture and store the environments of the plan's case runs; return them, each with an
    ``environment_id`` (None where its environment could not be captured). Never raises."""
    items = list(plan.cases)
    if not items:
        return items
    # a queueing runtime's jobs probe the nodes the scheduler gave them (dlperf_core.run.case_run.probed_environment):
    # this worker is not where they run, and which nodes they get is not known yet
    if items[0].runtime in WAITS_IN_QUEUE:
        log.info(
            "the %s runtime's jobs probe their nodes' environment themselves (store_result stores it)", items[0].runtime
        )
        return items
    try:
        store = ResultStore(results_db_url())
        store.ensure_schema()  # plan_cases did it already; cheap and idempotent
    except Exception as exc:  # noqa: BLE001 - capturing must not fail the run
        log.warning("environment capture skipped: %s: %s", type(exc).__name__, exc)
        return [item.with_environment(None) for item in items]
    cache = probe_cache(ids) if items[0].runtime == "docker" else None
    local_probe = functools.cache(run_probe_locally)
    first: dict[EnvironmentKey, PlannedRun] = {}
    for item in items:
        first.setdefault(environment_key(item), item)
    ids_by_key: dict[EnvironmentKey, int | None] = {}
    for key in sorted(first, key=lambda k: (k.framework, k.image or "", k.nodes)):
        try:
            environment = capture(first[key], cache, local_probe)
            ids_by_key[key] = store.upsert_environment(environment, datetime.now(UTC))
            log.info("environment %s for %s: %s", ids_by_key[key], key.describe(), describe(environment))
        except Exception as exc:  # noqa: BLE001 - one environment that cannot be probed is not fatal
            ids_by_key[key] = None
            log.warning("could not capture the environment of %s: %s: %s", key, type(exc).__name__, exc)
    store.dispose()
    return [item.with_environment(ids_by_key.get(environment_key(item))) for item in items]
