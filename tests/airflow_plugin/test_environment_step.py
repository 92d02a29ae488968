"""The DAG's capture_environment step (dlperf_airflow.environment_step): it tags every planned case run with the
environment it stored once per content hash (PostgreSQL), and never fails the run. The probe and its parsers:
tests/core/cluster/test_environment.py."""

from __future__ import annotations

import pytest

from dlperf_airflow.environment_step import capture_step
from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.model import Case, CaseRun, RunIds
from dlperf_core.run.handoff import Plan, PlannedRun, RunSettings
from dlperf_core.storage import ResultStore
from helpers import REPO

# A case as the DAG's capture step gets it in an item.
STEP_CASE = {
    "framework": "pytorch_reference",
    "model": "resnet50_v1.5",
    "precision": "fp32",
    "batch_size_per_device": 8,
    "nodes": 1,
    "gpus_per_node": 1,
    "warmup_iterations": 1,
    "measured_iterations": 2,
}


@pytest.mark.postgres
def test_capture_step_tags_every_item(pg_url, monkeypatch):
    monkeypatch.setenv("DLPERF_DB_URL", pg_url)
    runs = [CaseRun(Case(**STEP_CASE), r) for r in range(2)] + [CaseRun(Case(**{**STEP_CASE, "nodes": 2}), 0)]
    settings = RunSettings("suites/smoke.yaml", "local", "inventories/local.yaml", 60.0, None)
    inventory = load_inventory(REPO / "inventories/local.yaml")
    tagged = capture_step(
        Plan(settings, [PlannedRun.of(run, settings, inventory) for run in runs]), RunIds("dag", "run")
    )
    env_ids = {item.environment_id for item in tagged}
    assert len(tagged) == 3 and len(env_ids) == 1 and None not in env_ids  # one machine, one environment
    store = ResultStore(pg_url)
    assert len(store.environments()) == 1
    store.dispose()


def test_capture_step_never_raises(monkeypatch):
    monkeypatch.setenv("DLPERF_DB_URL", "postgresql+psycopg2://nobody@127.0.0.1:1/none")
    settings = RunSettings("suites/smoke.yaml", "docker", "/nonexistent/inventory.yaml", 60.0, None)
    run = CaseRun(Case(**{**STEP_CASE, "model": "m"}), 0)  # a model no adapter knows: no image to probe
    item = PlannedRun(run, "docker", settings.inventory, 60.0, None, image="no-such-image").with_environment(3)
    assert capture_step(Plan(settings, [item]), RunIds("dag", "run")) == [item.with_environment(None)]
