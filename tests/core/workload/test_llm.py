"""The transformer workload (tokens/s, FLOPs per token) and the fabric benchmark (all-reduce bus bandwidth per size),
through the real DAG into PostgreSQL on two stand-in nodes (suites/llm-cpu.yaml)."""

from __future__ import annotations

import math
import subprocess
import sys
from datetime import UTC

import pytest
import torch

from dlperf_core.measure.efficiency import mfu, throughput_unit, training_flops_per_sample
from dlperf_core.parsing import parse_log
from dlperf_core.parsing.fabric import parse_fabric_table
from dlperf_core.workload.allreduce import bus_bandwidth, sizes
from dlperf_core.workload.llm import SIZES, Llm, LlmConfig, flops_per_token, num_parameters
from e2e_helpers import run_suite
from helpers import REPO, docker_marks, with_marks

LLM_INVENTORY = REPO / "tests" / "data" / "llm-inventory.yaml"  # docker-local's nodes on a network of their own
SMALL = LlmConfig(vocab_size=100, d_model=32, n_layers=3, n_heads=2, ffn_hidden=48, seq_len=16)


@pytest.mark.parametrize("cfg", [SMALL, SIZES["tiny"]], ids=["small", "tiny"])
def test_parameter_count_and_flops_per_token_come_from_the_model(cfg):
    model = Llm(cfg)
    params = dict(model.named_parameters())
    assert sum(p.numel() for p in params.values()) == num_parameters(cfg)
    multiplying = sum(p.numel() for name, p in params.items() if not name.startswith("embed."))
    assert num_parameters(cfg, embedding=False) == multiplying  # the embedding table is a lookup: no FLOPs
    assert flops_per_token(cfg) == 6 * multiplying + 12 * cfg.n_layers * cfg.d_model * cfg.seq_len


def test_sizes_and_the_1b_figures():
    one_b = SIZES["1b"]
    assert num_parameters(one_b) == pytest.approx(0.94e9, rel=0.01)
    assert flops_per_token(one_b) == pytest.approx(6.06e9, rel=0.01)
    assert training_flops_per_sample("llm_1b") == flops_per_token(one_b) and throughput_unit("llm_1b") == "tokens/s"
    # PROVENANCE.md's H100 run: 80,861 tokens/s at batch 8 compiled; with this count (embedding excluded) 49.5%
    assert mfu(80861, training_flops_per_sample("llm_1b"), "NVIDIA H100 80GB HBM3", "amp", 1) == pytest.approx(
        0.495, abs=0.001
    )


def test_causal_attention_sees_no_future_token():
    model = Llm(SMALL).eval()
    tokens = torch.randint(0, SMALL.vocab_size, (1, SMALL.seq_len))
    changed = tokens.clone()
    changed[0, -1] = (changed[0, -1] + 1) % SMALL.vocab_size
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert torch.allclose(a[0, :-1], b[0, :-1]) and not torch.allclose(a[0, -1], b[0, -1])


def test_tokens_per_second_log_is_read_by_the_dllogger_parser():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dlperf_core.workload.train_llm",
            "--device",
            "cpu",
            "--size",
            "tiny",
            "--batch-size",
            "4",
            "--warmup-iterations",
            "2",
            "--iterations",
            "6",
            "--threads",
            "1",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = parse_log(proc.stdout, format="ngc_pytorch_dllogger")  # detected as MLLOG: its events come too
    assert run.format == "ngc_pytorch_dllogger" and run.status == "ok" and run.window == (3, 8)
    (mllog,) = parse_log(proc.stdout)
    assert mllog.format == "mlperf_mllog" and mllog.throughput == pytest.approx(run.throughput, rel=1e-4)
    assert run.batch_size_per_device == 4 * 64  # tokens per device per step: a sample is a token
    assert run.throughput == pytest.approx(run.reported_throughput, rel=0.01)  # timestamps vs the loop's clock
    assert f"flops_per_token : {flops_per_token(SIZES['tiny'])}" in proc.stdout


def test_bus_bandwidth_is_nccl_tests_formula():
    assert bus_bandwidth(10.0, 2) == 10.0 and bus_bandwidth(10.0, 8) == 17.5 and bus_bandwidth(10.0, 32) == 19.375
    assert sizes(1 << 20, 1 << 30)[:3] == [1 << 20, 2 << 20, 4 << 20] and sizes(1 << 20, 1 << 30)[-1] == 1 << 30


def test_fabric_parser_reads_nccl_tests_and_refuses_made_up_figures():
    nccl_tests = (
        "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20\n"
        "#                                                              out-of-place                       in-place\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    )
    ours = "# dlperf all_reduce probe: ranks 8 backend nccl dtype float32 warmup 5 iters 20\n"
    rows = (
        "     1048576        262144     float     sum      -1    45.21   23.19   40.59      0    44.87   23.37   40.90      0\n"
        "  1073741824     268435456     float     sum      -1   4795.6  223.90  391.83      0   4794.2  223.97  391.94      0\n"
        "# Avg bus bandwidth    : 216.3 \n"
    )
    result = parse_fabric_table(ours + nccl_tests[nccl_tests.index("#       size") :] + rows)
    assert result.status == "ok" and result.ranks == 8 and result.avg_busbw_gbs == pytest.approx(216.3)
    assert [s.size_bytes for s in result.sizes] == [1 << 20, 1 << 30]
    assert result.largest.busbw_gbs == pytest.approx(391.83) and result.largest.time_us == pytest.approx(4795.6)
    assert parse_fabric_table(ours + rows.replace("391.83", "nan")).reason.startswith(
        "probe: a bandwidth that is not a number"
    )
    assert parse_fabric_table(ours + rows.split("# Avg")[0]).reason == "truncated probe: stopped after 2 message sizes"
    assert parse_fabric_table("Traceback...\nRuntimeError: NCCL error: out of memory\n").reason == "out of memory"


@with_marks(docker_marks("dlperf/pytorch-reference:cpu"))
def test_tiny_transformer_and_fabric_benchmark_through_the_dag_into_postgres(tmp_path, pg_url):
    # beside the Docker Engine group (tests/conftest.py: OWN_NETWORK_TESTS), so on a network of its own
    run = run_suite(tmp_path, pg_url, "suites/llm-cpu.yaml", "--inventory", str(LLM_INVENTORY), timeout=1500)
    store, run_id = run.store, run.run_id
    rows = run.results()
    assert set(rows["model"]) == {"llm_tiny"} and set(rows["status"]) == {"ok"} and len(rows) == 6
    assert {(int(r.nodes), int(r.gpus_per_node)) for r in rows.itertuples()} == {(1, 1), (1, 2), (2, 1)}
    # tokens/s, not sequences/s: dlperf's figure agrees with the workload's own train.total_tps (both tokens; a
    # sequences/s figure would be seq_len = 64 times smaller). No speed threshold: the machine may be busy.
    assert (rows["throughput"] > 0).all() and ((rows["throughput"] / rows["reported_throughput"] - 1).abs() < 0.5).all()
    assert rows["mfu"].isna().all() and rows["energy_per_sample_j"].isna().all()  # CPU: NULL, never 0
    probes = store.fabric_benchmarks(run_id=run_id)
    assert len(probes) == 6 and set(probes["status"]) == {"ok"}
    assert set(probes[probes["nodes"] * probes["gpus_per_node"] == 1]["avg_busbw_gbs"].isna()) == {True}  # no fabric
    fabric = store.fabric_summary(run_id=run_id)
    assert sorted(set(zip(fabric["nodes"], fabric["gpus_per_node"]))) == [(1, 2), (2, 1)]
    assert sorted(set(fabric["size_bytes"])) == [1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20]
    assert (fabric["busbw_gbs"] > 0).all() and (fabric["n"] == 2).all()
    # two ranks: busbw = algbw x 2(n-1)/n = algbw
    assert all(math.isclose(b, a, rel_tol=1e-9) for b, a in zip(fabric["busbw_gbs"], fabric["algbw_gbs"]))
    assert "tokens/s(pytorch_reference)" in run.stdout and "All-reduce bus bandwidth" in run.stdout


def test_fabric_benchmark_is_planned_at_every_topology_and_launched_like_the_benchmarks():
    from dlperf_core.cluster.inventory import load_inventory
    from dlperf_core.frameworks import LaunchContext, get_adapter
    from dlperf_core.plan.cases import PlanFilters, plan_suite
    from dlperf_core.plan.suite import load_suite

    suite = load_suite(REPO / "suites" / "llm-cpu.yaml")
    inventory = load_inventory(REPO / "inventories" / "docker-local.yaml")
    runs = plan_suite(suite, inventory)
    fabric = [r.case for r in runs if r.case.framework == "allreduce_probe"]
    assert [c.topology for c in fabric[::2]] == ["1n1g", "1n2g", "2n1g"] and len(fabric) == 6
    launches = get_adapter("allreduce_probe").launches(
        fabric[-1], inventory.first(2), LaunchContext("python3", "/w", 29500, 1)
    )
    assert [l.argv[:10] for l in launches][1] == (
        "python3",
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--nproc_per_node",
        "1",
        "--node_rank",
        "1",
        "--master_addr",
    )
    assert launches[0].argv[13:] == (
        "/w/allreduce.py",
        "--warmup",
        "2",
        "--iters",
        "5",
        "--dtype",
        "float32",
        "--threads",
        "1",
        "--min-bytes",
        "1048576",
        "--max-bytes",
        "16777216",
    )
    # a trigger that filters frameworks leaves the fabric benchmark out unless it names it
    only = plan_suite(suite, inventory, PlanFilters(frameworks=("pytorch_reference",)))
    assert {r.case.framework for r in only} == {"pytorch_reference"}


def test_a_fabric_run_that_failed_is_a_failed_fabric_benchmark_with_its_reason(tmp_path):
    from datetime import datetime

    from dlperf_core.measure.measurement import measure_fabric_run
    from dlperf_core.model import Case, CaseOutcome, NodeOutcome

    log = tmp_path / "node0.log"
    log.write_text("allreduce.py: error (rank 0): RuntimeError: Connection closed by peer\n")
    case = Case("allreduce_probe", "allreduce", "fp32", 1, 2, 1, 2, 5)
    now = datetime.now(UTC)
    verdict, result = measure_fabric_run(
        case, CaseOutcome(now, now, [NodeOutcome("node0", 0, 1, str(log))], "node0 exited with code 1")
    )
    assert verdict.status == "failed" and verdict.throughput is None
    assert verdict.reason == (
        "node0 exited with code 1; log: no probe output; "
        "error: allreduce.py: error (rank 0): RuntimeError: Connection closed by peer"
    )
    log.write_text(
        "# dlperf all_reduce probe: ranks 4 backend gloo dtype float32 warmup 1 iters 1\n"
        "     1048576   262144  float  sum   100.0   10.486   15.729\n# Avg bus bandwidth    : 15.729\n"
    )
    wrong, _ = measure_fabric_run(case, CaseOutcome(now, now, [NodeOutcome("node0", 0, 0, str(log))], None))
    assert wrong.status == "failed" and wrong.reason == "probe ran on 4 ranks, the case expects 2"
    four = Case("allreduce_probe", "allreduce", "fp32", 1, 2, 2, 2, 5)
    right, table = measure_fabric_run(four, CaseOutcome(now, now, [NodeOutcome("node0", 0, 0, str(log))], None))
    assert right.status == "ok" and table is not None and table.ranks == 4
    # the bandwidth has its own field: a fabric benchmark's GB/s is never a throughput
    assert right.bus_bandwidth_gbs == pytest.approx(15.729) and right.throughput is None and right.iterations == 1
