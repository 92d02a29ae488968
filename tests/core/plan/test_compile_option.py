"""`compile: true`: a suite option and a trigger-form field, its own case (key +compile, stored `variant` and
`compiled`), compilation kept out of the measured window, and a compiled run end to end on CPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.errors import ConfigError
from dlperf_core.frameworks import LaunchContext, get_adapter
from dlperf_core.model import series_base
from dlperf_core.plan.cases import check_suite, plan_suite
from dlperf_core.plan.form_overrides import with_compile_override
from dlperf_core.plan.suite import parse_suite
from e2e_helpers import run_suite
from helpers import REPO

LOCAL = load_inventory(REPO / "inventories" / "local.yaml")


def suite(compile_=None, framework="pytorch_reference", warmup=3, **top):
    bench = {"framework": framework, "model": "resnet50_v1.5", "batch_size_per_device": 8}
    if compile_ is not None:
        bench["compile"] = compile_
    return parse_suite({"name": "c", "warmup_iterations": warmup, "benchmarks": [bench], **top})


def keys(s) -> list[str]:
    return [series_base(run.case.key) for run in plan_suite(s, LOCAL)]  # the readable part: +args= aside


def test_compile_modes_expand_into_cases_of_their_own():
    assert keys(suite()) == ["pytorch_reference/resnet50_v1.5/fp32/b8/1n1g"] * 5
    both = plan_suite(suite([False, True], repeats=1), LOCAL)
    assert [(series_base(r.case.key), r.case.compile) for r in both] == [
        ("pytorch_reference/resnet50_v1.5/fp32/b8/1n1g", False),
        ("pytorch_reference/resnet50_v1.5/fp32/b8/1n1g+compile", True),
    ]
    assert set(keys(suite(True))) == {"pytorch_reference/resnet50_v1.5/fp32/b8/1n1g+compile"}
    assert set(keys(suite(None, compile=True, repeats=1))) == {"pytorch_reference/resnet50_v1.5/fp32/b8/1n1g+compile"}
    # the launch asks the workload for it
    (launch,) = get_adapter("pytorch_reference").launches(both[1].case, LOCAL.first(1), LaunchContext("python3", "/w"))
    assert "--compile" in launch.argv
    (eager,) = get_adapter("pytorch_reference").launches(both[0].case, LOCAL.first(1), LaunchContext("python3", "/w"))
    assert "--compile" not in eager.argv


def test_bad_compile_settings_are_refused_before_anything_runs():
    with pytest.raises(ConfigError, match="compile: 'ngc_mxnet' has no torch.compile mode"):
        check_suite(
            parse_suite(
                {"name": "c", "benchmarks": [{"framework": "ngc_mxnet", "model": "resnet50_v1.5", "compile": True}]}
            )
        )
    with pytest.raises(ConfigError, match="compile: give true, false or a list"):
        suite("yes")
    # a suite-wide compile: true leaves the frameworks that cannot compile eager
    mixed = parse_suite(
        {
            "name": "m",
            "compile": True,
            "repeats": 1,
            "benchmarks": [
                {"framework": "pytorch_reference", "model": "resnet50_v1.5", "batch_size_per_device": 8},
                {"framework": "ngc_mxnet", "model": "resnet50_v1.5", "batch_size_per_device": 8},
            ],
        }
    )
    assert sorted(keys(mixed)) == [
        "ngc_mxnet/resnet50_v1.5/fp32/b8/1n1g",
        "pytorch_reference/resnet50_v1.5/fp32/b8/1n1g+compile",
    ]
    with pytest.raises(ConfigError, match="torch.compile needs at least 3 warm-up iterations .it has 2."):
        plan_suite(suite(True, warmup=2), LOCAL)


def test_trigger_form_overrides_compile_where_it_can():
    s = suite()
    assert set(keys(with_compile_override(s, "compiled"))) == {"pytorch_reference/resnet50_v1.5/fp32/b8/1n1g+compile"}
    assert len(set(keys(with_compile_override(s, "both")))) == 2
    assert with_compile_override(suite(True), "eager").benchmarks[0].compile == (False,)
    assert with_compile_override(s, "suite") is s and with_compile_override(s, None) is s
    with pytest.raises(ConfigError, match="compile: must be one of suite, eager, compiled, both"):
        with_compile_override(s, "always")
    mxnet = parse_suite({"name": "x", "benchmarks": [{"framework": "ngc_mxnet", "model": "resnet50_v1.5"}]})
    with pytest.raises(ConfigError, match="nothing in suite 'x' can compile"):
        with_compile_override(mxnet, "compiled")


def test_compilation_inside_the_measured_window_fails_the_run():
    """Without warm-up the first iterations compile inside the window: no figure, a clear reason."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dlperf_core.workload.train",
            "--device",
            "cpu",
            "--batch-size",
            "2",
            "--image-size",
            "32",
            "--width",
            "8",
            "--num-classes",
            "10",
            "--warmup-iterations",
            "0",
            "--iterations",
            "2",
            "--threads",
            "1",
            "--compile",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "torch.compile compiled" in proc.stderr and "inside the measured window" in proc.stderr
    assert "Summary" not in proc.stdout


@pytest.mark.postgres
def test_eager_and_compiled_end_to_end_on_cpu(tmp_path, pg_url):
    """One 1n1g case eager and compiled (inductor on this CPU), through the DAG into PostgreSQL: two cases
    with their own key, variant and baseline, and the report tells them apart."""
    path = tmp_path / "compile.yaml"
    path.write_text(
        "name: compile-cpu\nruntime: local\nrepeats: 1\nwarmup_iterations: 3\nmeasured_iterations: 5\n"
        "timeout_s: 900\nwatchdog_s: 600\nbenchmarks:\n"
        "  - {framework: pytorch_reference, model: resnet50_v1.5, batch_size_per_device: 4, compile: [false, true],\n"
        "     extra_args: [--image-size, '32', --width, '8', --num-classes, '10', --device, cpu]}\n"
    )
    run = run_suite(tmp_path, pg_url, path, "--inventory", str(REPO / "inventories" / "local.yaml"), timeout=1200)
    rows = run.results().sort_values("case_key")
    assert [series_base(key) for key in rows["case_key"]] == [
        "pytorch_reference/resnet50_v1.5/fp32/b4/1n1g",
        "pytorch_reference/resnet50_v1.5/fp32/b4/1n1g+compile",
    ]
    assert [v.split("+args=")[0] for v in rows["variant"]] == ["", "+compile"]
    assert list(rows["compile"].astype(bool)) == [False, True]
    assert set(rows["status"]) == {"ok"} and (rows["throughput"] > 0).all()
    assert rows["mfu"].isna().all() and rows["energy_per_sample_j"].isna().all()  # CPU: unknown, not 0
    log = Path(rows.iloc[1]["log_path"]).read_text()
    assert "compile : True" in log
    summary = run.store.summary(run_id=run.run_id)
    assert sorted(summary["speedup"]) == [1.0, 1.0]  # each against its own 1n1g
    assert "### pytorch_reference resnet50_v1.5 fp32 (compiled) batch 4 (median of repeats)" in run.stdout
    assert "### pytorch_reference resnet50_v1.5 fp32 batch 4 (median of repeats)" in run.stdout


def test_gpu_single_suite_is_ready_for_one_local_gpu():
    """suites/gpu-single.yaml on inventories/gpu-local.yaml (no GPU needed to plan): AMP bf16 and fp16 and
    TF32, each eager and compiled, 5 repeats, the local runtime's commands asking for CUDA."""
    from dlperf_core.model import RunIds
    from dlperf_core.plan.suite import load_suite
    from dlperf_core.run.jobs import build_job
    from dlperf_core.run.runtime.local import LocalRuntime

    gpu = load_inventory(REPO / "inventories" / "gpu-local.yaml")
    s = load_suite(REPO / "suites" / "gpu-single.yaml")
    assert s.runtime == "local" and s.inventory_path() == REPO / "inventories" / "gpu-local.yaml"
    runs = plan_suite(s, gpu)
    keys = sorted({series_base(r.case.key) for r in runs})
    assert keys == sorted(
        f"pytorch_reference/resnet50_v1.5/{p}/1n1g{v}{c}"
        for p, v in (("amp/b256", ""), ("amp/b256", "+amp_dtype=fp16"), ("tf32/b128", ""))
        for c in ("", "+compile")
    )
    assert len(runs) == 6 * 5
    fp16 = next(r for r in runs if series_base(r.case.key).endswith("+amp_dtype=fp16+compile"))
    job = build_job(fp16, gpu, LocalRuntime(), RunIds("d", "r"), timeout_s=60, watchdog_s=None, log_root=Path("/tmp"))
    argv = " ".join(job.launches[0].argv)
    assert "--amp-dtype fp16" in argv and "--compile" in argv and "--device cuda" in argv and "--threads" not in argv
    assert job.devices_per_node == 1 and job.launches[0].node.accelerator == "nvidia"
    with pytest.raises(ConfigError, match="option amp_dtype='fp8' is not one of bf16, fp16"):
        check_suite(
            parse_suite(
                {
                    "name": "x",
                    "benchmarks": [
                        {"framework": "pytorch_reference", "model": "resnet50_v1.5", "options": {"amp_dtype": "fp8"}}
                    ],
                }
            )
        )
