"""The five seed frameworks end to end without their GPUs: suite case -> the adapter's job (commands, container
specs, per-case ssh keys for mpirun) -> containers on a real Docker Engine -> the log -> parse -> PostgreSQL.

What cannot run here is the framework itself (no GPU, no vendor image): each container keeps the adapter's
spec (labels, environment, mounts, ssh files, sshd roles) but runs a stand-in command, node 0 printing a real
log of that framework (../shared/reallogs, or the seeds' own lines for MindSpore and OneFlow) and the other
nodes idling like an sshd or exiting like a launcher. So the test covers everything dlperf does around the
framework: the job, the supervisor (services, first failure, cleanup), the adapter's log format and window,
the device-count check against the case, and the stored row. The commands themselves are checked
token by token against the seeds in tests/core/frameworks/test_commands_golden.py.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from dlperf_core.cluster.inventory import Inventory, Mount, Node
from dlperf_core.frameworks import get_adapter
from dlperf_core.frameworks.releases import releases_of
from dlperf_core.model import Case, CaseRun, RunIds
from dlperf_core.parsing import parse_file
from dlperf_core.run.handoff import ExecutedRun, PlannedRun
from dlperf_core.run.jobs import build_job
from dlperf_core.storage import ResultStore
from helpers import SHARED, dlperf_containers, docker_marks
from parsing_logs import ms_log, of_log

IMAGE = "dlperf/debian-base:bookworm"
pytestmark = docker_marks(IMAGE)
REAL = SHARED / "reallogs"


def case(framework: str, precision: str, batch: int, nodes: int, gpn: int, warmup: int, measured: int) -> Case:
    """A case in the seed's release (the logs replayed are the seeds'; suites/seeds.yaml names those releases)."""
    seed_release = next(r.name for r in releases_of(framework) if r.seed)
    return Case(
        framework,
        "arcface_resnet50" if framework == "paddle_plsc" else "resnet50_v1.5",
        precision,
        batch,
        nodes,
        gpn,
        warmup,
        measured,
        options=(("release", seed_release),),
    )


def _mindspore_log(path: Path) -> Path:
    path.write_text(ms_log(nodes=2, per_node=8, batch=128, rate=5483.22, prefix=True, seed=7))  # seed 000, 2n8g
    return path


def _oneflow_log(path: Path) -> Path:
    path.write_text(of_log([5700.0 + k for k in range(10)], nodes=2, gpn=8, batch=128))  # 200 iterations, 2n8g
    return path


# framework -> (case, log of node 0); windows as the logs allow (the NGC PyTorch log has 100 iterations)
SEEDS = {
    "ngc_pytorch": (
        case("ngc_pytorch", "fp32", 128, 1, 8, 5, 90),
        lambda _tmp: REAL / "ngc_pytorch" / "pytorch_gpu8_fp32_bs128.txt",
    ),
    "ngc_mxnet": (
        case("ngc_mxnet", "fp32", 96, 1, 1, 100, 400),  # the file's first run (1 GPU) is node 0's
        lambda _tmp: REAL / "ngc_mxnet" / "mxnet_gpu1_gpu8_fp32_bs96.txt",
    ),
    "mindspore": (case("mindspore", "fp32", 128, 2, 8, 100, 100), lambda tmp: _mindspore_log(tmp / "ms.log")),
    "oneflow": (case("oneflow", "fp32", 128, 2, 8, 20, 180), lambda tmp: _oneflow_log(tmp / "of.log")),
    # the published PLSC log prints every 100 steps of a long training: a window of whole prints
    "paddle_plsc": (
        case("paddle_plsc", "amp", 128, 1, 8, 1000, 10000),
        lambda _tmp: REAL / "paddle_plsc_arcface" / "static" / "ms1mv3_r50_static_128_fp16_1.0" / "training.log",
    ),
}


def stand_in(job, log: Path):
    """The adapter's job with each container's command replaced: node 0 prints ``log``, sshd nodes idle; no
    GPU is asked of the engine (the only part of the spec that cannot exist here)."""
    containers = []
    for launch, spec in zip(job.launches, job.containers):
        if launch.role == "sshd":
            command = ("sleep", "300")
        elif launch.node_rank == 0:
            command = ("cat", "/replay/node0.log")
        else:
            command = ("true",)
        mounts = spec.mounts + (Mount(source=str(log.resolve()), target="/replay/node0.log"),)
        containers.append(replace(spec, image=IMAGE, command=command, mounts=mounts, gpu_ids=()))
    return replace(job, containers=tuple(containers))


def the_case_gpus(case) -> tuple[str, ...]:
    """The GPUs a case gets on each 8-GPU node (gpus: 8): the first gpus_per_node of 0..7."""
    return tuple(str(i) for i in range(case.gpus_per_node))


@pytest.mark.parametrize("framework", list(SEEDS))
def test_seed_framework_from_case_to_stored_row(framework, tmp_path, pg_url, monkeypatch):
    from dlperf_airflow import steps
    from dlperf_airflow.docker_runtime import DockerRuntime

    monkeypatch.setenv("DLPERF_DB_URL", pg_url)
    ResultStore(pg_url).ensure_schema()  # plan_cases does this in the DAG
    the_case, log_of = SEEDS[framework]
    log = log_of(tmp_path)
    # GPU nodes: the adapter's GPU job (its CPU-node job trains for real in tests/e2e/test_seeds_cpu.py)
    nodes = tuple(Node(name=f"node{i}", gpus=8, accelerator="nvidia") for i in range(4))
    inventory = Inventory(name="replay", nodes=nodes)
    ids = RunIds("dlperf_seed_replay", f"replay__{framework}_{uuid.uuid4().hex[:8]}")
    run = CaseRun(the_case, 0, 0, 1)
    runtime = DockerRuntime(inventory)
    job = build_job(run, inventory, runtime, ids, timeout_s=120, watchdog_s=60, log_root=tmp_path / "logs")
    adapter = get_adapter(framework)
    assert {spec.image for spec in job.containers} == {adapter.image(the_case)}  # the seed's GPU image, not the CPU one
    assert all(spec.gpu_ids == the_case_gpus(the_case) for spec in job.containers)  # the case's GPUs, no other
    if adapter.launcher == "mpirun" and the_case.nodes > 1:  # per-case keys went into every container
        assert {lc.role for lc in job.launches} == {"launcher", "sshd"}
        assert all(spec.files for spec in job.containers)
    outcome = runtime.execute(stand_in(job, log))
    assert outcome.failure is None, outcome.failure
    planned = PlannedRun(run, "docker", inventory="<in memory: replay>", timeout_s=120, watchdog_s=60)
    verdict = steps.store_step(ExecutedRun(planned, outcome), ids)
    assert verdict.status == "ok", verdict.reason

    warmup, measured = adapter.parse_window(the_case)
    expected = parse_file(log, format=adapter.log_format, warmup=warmup, measured=measured)[0]
    assert expected.gpus in (None, the_case.total_gpus)
    (row,) = ResultStore(pg_url).results(run_id=ids.run_id).itertuples()
    assert (row.framework, row.case_key, row.status) == (framework, the_case.key, "ok")
    assert row.throughput == pytest.approx(expected.throughput, rel=1e-12) and row.throughput > 0
    if expected.reported_throughput is not None:  # the framework's own figure is kept beside ours
        assert row.reported_throughput == pytest.approx(expected.reported_throughput)
    assert not [c for c in dlperf_containers() if job.run_label in c]  # every container removed
