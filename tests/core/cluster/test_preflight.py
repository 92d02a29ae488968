"""Preflight's pure judgement (dlperf_core.cluster.preflight): the check script, the output of the checks split into
blocks and judged against what the inventory declares, and which case a sick node blocks. The checks over real
ssh against a private sshd, and the DAG's preflight step: tests/airflow_plugin/test_ssh_preflight.py."""

from __future__ import annotations

from dlperf_core.cluster.inventory import Node
from dlperf_core.cluster.preflight import (
    NOT_PULLED,
    NodeHealth,
    case_blocker,
    health_of_output,
    preflight_script,
    split_blocks,
)

# --------------------------------------------------------------------------- the pure judgement


def _node(**kw) -> Node:
    return Node(name=kw.pop("name", "n0"), **kw)


def _blocks(**checks: tuple[int, str]) -> str:
    return "".join(
        f"@@dlperf-check {name.replace('__', ' ')}\n{body}\n@@dlperf-end {name.replace('__', ' ')} {rc}\n"
        for name, (rc, body) in checks.items()
    )


def test_split_blocks_keeps_each_check_and_its_status():
    out = _blocks(docker=(0, "20.10.24"), disk=(1, "df: oops"))
    assert split_blocks("banner line\n" + out) == {"docker": (0, "20.10.24"), "disk": (1, "df: oops")}


def test_gpu_count_and_runtime_judged_against_the_declaration():
    node = _node(accelerator="nvidia", gpus=8)
    smi = "\n".join(f"{i}, NVIDIA H100 80GB HBM3" for i in range(7))
    out = _blocks(
        docker=(0, "24.0.7"),
        nvidia_runtime=(
            0,
            'runtimes={"nvidia":{"path":"nvidia-container-runtime"}}\n'
            "nvidia-container-cli=/usr/bin/nvidia-container-cli",
        ),
        gpus=(0, smi),
        disk=(0, "free_kb 99999999 /var/lib/docker"),
    )
    health = health_of_output(node, [], out)
    assert health.problems == ("7 GPUs found, 8 declared",)
    assert health.checks["nvidia_runtime"] == "nvidia runtime, nvidia-container-cli"
    ok = health_of_output(node, [], out.replace(smi, smi + "\n7, NVIDIA H100 80GB HBM3"))
    assert ok.ok and ok.checks["gpus"] == "8 GPUs"


def test_infiniband_ports_must_be_active_on_declared_devices():
    node = _node(infiniband=True, infiniband_devices=("mlx5_0", "mlx5_1", "mlx5_2"))
    ib = "/sys/class/infiniband/mlx5_0/ports/1/state 4: ACTIVE\n/sys/class/infiniband/mlx5_1/ports/1/state 1: DOWN\n"
    health = health_of_output(node, [], _blocks(docker=(0, "x"), infiniband=(0, ib), disk=(0, "free_kb 1 /")))
    assert health.problems == ("InfiniBand device mlx5_1 has no ACTIVE port", "InfiniBand device mlx5_2 not found")
    assert health.checks["infiniband"] == "mlx5_0:1, mlx5_1:down"


def test_a_check_that_never_reported_is_a_problem_not_a_pass():
    node = _node(accelerator="nvidia", gpus=1)
    health = health_of_output(node, ["img:1"], _blocks(docker=(0, "x")) + "bash: line 9: syntax error", exit_status=2)
    assert not health.ok
    assert any(p.startswith("check gpus did not report (script exit status 2)") for p in health.problems)
    assert any(p.startswith("check image img:1 did not report") for p in health.problems)


def test_case_blocker_names_the_first_sick_node():
    health = {"a": NodeHealth("a", True), "b": NodeHealth("b", False, ("disk: 1.0 GB free on /, 50 GB wanted",))}
    assert case_blocker(["a"], health) is None
    assert case_blocker(["a", "b"], health) == "preflight: b: disk: 1.0 GB free on /, 50 GB wanted"
    assert case_blocker(["c"], health) is None  # not checked (no ssh): not blocked


def test_script_quotes_paths_and_images():
    node = _node(data_paths=("/data/it's here",), log_dir="/var/log/dl perf")
    script = preflight_script(node, ["reg.example/img:1;rm -rf /"])
    assert "'/data/it'\"'\"'s here'" in script
    assert "'reg.example/img:1;rm -rf /'" in script
    assert "docker pull 'reg.example/img:1;rm -rf /'" in script


def test_dlperf_images_are_not_pulled_but_named_with_how_to_load_them():
    """dlperf's own images (dlperf/...) are in no registry: preflight does not pull them from Docker Hub, and a
    missing one is named with the load command; any other image is pulled."""
    script = preflight_script(_node(), ["dlperf/ngc-pytorch:25.12", "nvcr.io/nvidia/pytorch:25.12-py3"])
    assert "docker pull 'dlperf/ngc-pytorch:25.12'" not in script and "docker pull dlperf/" not in script
    assert "docker pull nvcr.io/nvidia/pytorch:25.12-py3" in script
    out = (
        "@@dlperf-check docker\n27.0.1\n@@dlperf-end docker 0\n"
        "@@dlperf-check disk\nfree_kb 999999999 /var/lib/docker\n@@dlperf-end disk 0\n"
        f"@@dlperf-check image dlperf/ngc-pytorch:25.12\n{NOT_PULLED}\n@@dlperf-end image dlperf/ngc-pytorch:25.12 1\n"
    )
    health = health_of_output(_node(), ["dlperf/ngc-pytorch:25.12"], out)
    assert health.checks["image dlperf/ngc-pytorch:25.12"] == "missing"
    (problem,) = health.problems
    assert problem.startswith("image dlperf/ngc-pytorch:25.12 missing: dlperf builds it (scripts/build-images.sh)")
    assert "docker save dlperf/ngc-pytorch:25.12 | ssh <node> docker load" in problem
