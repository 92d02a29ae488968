"""Max batch size search: the pure search (dlperf_core.measure.maxbatch), its suite option and plan, the CPU stand-in
for a device's memory (a real kernel limit), and a real search through the DAG on the local runtime."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dlperf_core.cluster.container import container_spec_for
from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.errors import ConfigError
from dlperf_core.measure.maxbatch import MaxBatchSearch, Trial, conclude, next_batch, run_search
from dlperf_core.model import series_base
from dlperf_core.plan.cases import PlanFilters, plan_searches, plan_suite
from dlperf_core.plan.suite import parse_suite
from dlperf_core.run.runtime.base import describe_exit
from dlperf_core.run.runtime.local import with_memory_limit
from e2e_helpers import run_suite
from helpers import REPO

DATA = REPO / "tests" / "data" / "maxbatch"
OOM = "node0 exited with code 1; log: out of memory"


def fits_up_to(largest: int):
    """A trial runner for a device where batches up to ``largest`` fit."""
    return lambda b: Trial(b, "ok", None, 100.0 + b) if b <= largest else Trial(b, "failed", OOM)


# ------------------------------------------------------------------------------------------- the search
def test_steps_like_the_seeds_and_stops_at_the_first_oom():
    search = MaxBatchSearch()  # 32, 64, ... 1024
    tried = []
    verdict = run_search(search, lambda b: tried.append(b) or fits_up_to(128)(b))
    assert tried == [32, 64, 96, 128, 160]  # nothing past the first out of memory
    assert (verdict.status, verdict.max_batch, verdict.first_oom_batch) == ("found", 128, 160)
    assert "max batch 128" in verdict.summary and "160:OOM" in verdict.summary


def test_every_batch_fits_up_to_the_limit():
    verdict = run_search(MaxBatchSearch(start=64, step=64, limit=256), fits_up_to(10_000))
    assert [p.batch for p in verdict.trials] == [64, 128, 192, 256]
    assert (verdict.status, verdict.max_batch, verdict.first_oom_batch) == ("limit_reached", 256, None)


def test_limit_off_the_grid_is_not_tried():
    assert MaxBatchSearch(start=32, step=32, limit=100).candidates() == (32, 64, 96)


def test_nothing_fits():
    verdict = run_search(MaxBatchSearch(start=32), fits_up_to(16))
    assert (verdict.status, verdict.max_batch, verdict.first_oom_batch) == ("none_fit", None, 32)


def test_another_failure_stops_the_search_without_a_conclusion():
    def trial(b: int) -> Trial:
        return Trial(b, "ok", None, 1.0) if b < 96 else Trial(b, "failed", "loss is NaN/inf at iteration 3")

    verdict = run_search(MaxBatchSearch(), trial)
    assert verdict.status == "failed" and verdict.first_oom_batch is None
    assert verdict.max_batch == 64  # what trained is kept, but not called the maximum
    assert verdict.reason == "batch 96: loss is NaN/inf at iteration 3"


def test_out_of_memory_is_recognised_in_every_runtime_reason():
    assert Trial(64, "failed", "node0 exited with code 1; log: out of memory").out_of_memory
    assert Trial(64, "failed", describe_exit("node0", 137, oom_killed=True)).out_of_memory
    assert not Trial(64, "failed", "node0 was killed (exit code 137)").out_of_memory
    assert not Trial(64, "ok").out_of_memory


def test_a_trials_json_form_is_the_stored_one():
    """``max_batch_searches.probes`` holds each trial's generated JSON form: the keys and values the column always
    held (the dataclass's fields, in order), and it reads back."""
    trials = (Trial(32, "ok", None, 812.5), Trial(64, "failed", "out of memory: CUDA out of memory"))
    assert [t.to_json() for t in trials] == [
        {"batch": 32, "status": "ok", "reason": None, "throughput": 812.5},
        {"batch": 64, "status": "failed", "reason": "out of memory: CUDA out of memory", "throughput": None},
    ]
    assert tuple(Trial.from_json(t.to_json()) for t in trials) == trials


def test_the_state_machine_refuses_trials_out_of_order_and_unfinished_searches():
    search = MaxBatchSearch()
    assert next_batch(search, []) == 32
    assert next_batch(search, [Trial(32, "ok")]) == 64
    with pytest.raises(ValueError, match="not the search's first candidates"):
        next_batch(search, [Trial(64, "ok")])
    with pytest.raises(ValueError, match="not finished"):
        conclude(search, [Trial(32, "ok")])


# ------------------------------------------------------------------------------- suite option and plan
def suite_with(search: dict, **bench) -> dict:
    return {
        "name": "s",
        "benchmarks": [
            {
                "framework": "pytorch_reference",
                "model": "resnet50_v1.5",
                "precisions": ["fp32", "amp"],
                "batch_size_per_device": 8,
                "max_batch_search": search,
                **bench,
            }
        ],
    }


@pytest.mark.parametrize(
    ("search", "message"),
    [
        ({"start": 64, "limit": 32}, "limit (32) is below start (64)"),
        ({"step": 0}, "step"),
        ({"topology": "two"}, "topology"),
        ({"strat": 32}, "strat"),
    ],
)
def test_a_bad_search_option_is_refused_naming_the_field(search, message):
    with pytest.raises(ConfigError, match="max_batch_search") as err:
        parse_suite(suite_with(search))
    assert message in str(err.value)


def test_plan_has_one_search_per_precision_and_search_only_benchmarks_plan_no_cases():
    inventory = Inventory(nodes=(Node(name="n0", gpus=2), Node(name="n1", gpus=2)))
    suite = parse_suite(suite_with({"start": 16, "step": 16, "limit": 64, "topology": "1n2g"}))
    searches = plan_searches(suite, inventory)
    assert [series_base(s.key) for s in searches] == [
        "pytorch_reference/resnet50_v1.5/fp32/1n2g",
        "pytorch_reference/resnet50_v1.5/amp/1n2g",
    ]
    assert series_base(searches[0].trial_case(48).key) == "pytorch_reference/resnet50_v1.5/fp32/b48/1n2g"
    assert searches[0].key.endswith(searches[0].case.fingerprint_without("batch_size_per_device"))  # any batch
    assert [s.key for s in plan_searches(suite, inventory, PlanFilters(precisions=("amp",)))] == [searches[1].key]
    assert len(plan_suite(suite, inventory)) == 2 * 5  # the cases still run (5 repeats each)

    only = parse_suite(suite_with({"only": True}, batch_size_per_device=None))  # no batch needed then
    assert plan_suite(only, inventory, allow_empty=True) == []
    with pytest.raises(ConfigError, match="no case to run"):
        plan_suite(only, inventory)


def test_a_search_larger_than_the_inventory_is_refused_before_anything_runs():
    suite = parse_suite(suite_with({"topology": "4n8g"}))
    with pytest.raises(ConfigError, match="needs 4 nodes"):
        plan_searches(suite, Inventory(nodes=(Node(name="n0", gpus=8),)))


# ----------------------------------------------------------------- the CPU stand-in for device memory
def test_device_memory_is_only_for_cpu_nodes_and_limits_the_container():
    with pytest.raises(ValueError, match="device_memory_mb is for CPU stand-in nodes"):
        Node(name="g", accelerator="nvidia", device_memory_mb=1024)
    node = Node(name="c", gpus=2, device_memory_mb=1024)
    spec = container_spec_for(node, name="x", image="i", command=("true",), environment={}, labels={})
    assert spec.memory_limit_mb == 2048  # the container holds every "device" of the node
    assert (
        container_spec_for(Node(name="d"), name="x", image="i", command=(), environment={}, labels={}).memory_limit_mb
        is None
    )


def test_the_memory_limit_is_enforced_by_the_kernel():
    grab = "import sys; b = bytearray(int(sys.argv[1]) << 20); print('allocated', len(b) >> 20)"
    argv = (sys.executable, "-c", grab)
    free = subprocess.run([*with_memory_limit(argv, 400), "50"], capture_output=True, text=True)
    assert free.returncode == 0 and "allocated 50" in free.stdout, free.stderr
    over = subprocess.run([*with_memory_limit(argv, 400), "600"], capture_output=True, text=True)
    assert over.returncode != 0 and "MemoryError" in over.stderr
    assert with_memory_limit(argv, None) == argv


# ------------------------------------------------------------------------ a real search, through the DAG
@pytest.mark.postgres
def test_search_through_the_dag_finds_the_largest_batch_that_trains(tmp_path, pg_url):
    """Real trainings of the reference workload under a 1000 MB device; the OOM is the allocator's own."""
    run = run_suite(tmp_path, pg_url, DATA / "suite.yaml", timeout=900)
    store, run_id = run.store, run.run_id
    (search,) = store.max_batch_searches(run_id=run_id).itertuples()
    assert series_base(search.search_key) == "pytorch_reference/resnet50_v1.5/fp32/1n1g"
    assert search.status == "found", search.probes
    probes = search.probes
    assert [p["batch"] for p in probes] == list(range(32, search.first_oom_batch + 1, 32))
    assert all(p["status"] == "ok" and p["throughput"] > 0 for p in probes[:-1])
    assert search.max_batch == probes[-2]["batch"] == search.first_oom_batch - 32
    assert "out of memory" in probes[-1]["reason"]
    oom_logs = list((tmp_path / "logs").rglob(f"*b{search.first_oom_batch}_1n1g_args_*/r*/node0.log"))
    assert oom_logs and "Cannot allocate memory" in oom_logs[0].read_text(errors="replace")
    assert store.results(run_id=run_id).empty  # trials are not measurements
    assert f"| {search.max_batch} " in run.stdout.replace("  ", " ") or str(search.max_batch) in run.stdout
    info = store.run_info("dlperf_benchmark", run_id)  # a typed row (dlperf_core.storage.rows.BenchmarkRunRow)
    assert info is not None and info.status == "success"
