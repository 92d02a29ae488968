"""Preflight refuses an image whose CUDA is too old for a node's GPUs or driver, from nvidia-smi's facts
(tests/data/nvidia-smi/, see its README: the seeds' nodes as seed 003 recorded them, the others written by hand)."""

from __future__ import annotations

import pytest

from dlperf_core.cluster.cuda_compat import driver_problem, image_problems, parse_driver_cuda, parse_gpu_facts
from dlperf_core.cluster.inventory import Node
from dlperf_core.cluster.preflight import BEGIN, END, health_of_output, preflight_script
from dlperf_core.frameworks.releases import RELEASES, release_named
from helpers import REPO

FACTS = REPO / "tests" / "data" / "nvidia-smi"


def facts(name: str):
    text = (FACTS / name).read_text()
    return parse_gpu_facts(text), parse_driver_cuda(text)


def test_parsing_the_recorded_facts():
    gpus, cuda = facts("seed-v100-440.txt")
    assert len(gpus) == 8 and cuda == "10.2"
    assert (gpus[0].index, gpus[0].name, gpus[0].driver_version) == ("0", "Tesla V100-SXM2-16GB", "440.33.01")
    assert gpus[0].compute_capability == (7, 0)
    old, cuda = facts("a100-470-no-compute-cap.txt")  # the error line is skipped, the fallback's rows kept
    assert [g.index for g in old] == ["0", "1"] and old[0].compute_capability is None and cuda == "11.4"


@pytest.mark.parametrize("fixture", ["a100-535.txt", "h100-550.txt"])
@pytest.mark.parametrize("release", [r for r in RELEASES if r.seed], ids=lambda r: f"{r.framework}-{r.name}")
def test_the_seeds_cuda_10_images_are_refused_on_ampere_and_hopper(release, fixture):
    gpus, cuda = facts(fixture)
    problems = image_problems("gpu-node-1", release.image, gpus, cuda)
    generation, capability, needs = ("Ampere", "8.0", "11.0") if "a100" in fixture else ("Hopper", "9.0", "11.8")
    assert problems == [
        f"gpu-node-1: GPUs 0,1,2,3,4,5,6,7 {gpus[0].name} cannot run {release.image} ({release.framework} release"
        f" {release.name}, CUDA {release.cuda}): CUDA {release.cuda} predates {generation} (compute capability"
        f" {capability} needs CUDA {needs} or later)"
    ]


def test_the_seed_image_runs_where_the_seed_ran():
    gpus, cuda = facts("seed-v100-440.txt")
    assert image_problems("node1", "dlperf/ngc-pytorch:20.03", gpus, cuda) == []


def test_a_driver_too_old_for_the_images_cuda_is_refused_naming_the_versions():
    gpus, cuda = facts("seed-v100-440.txt")
    assert image_problems("node1", "dlperf/ngc-mxnet:24.06", gpus, cuda) == [
        "node1: dlperf/ngc-mxnet:24.06 (ngc_mxnet release 24.06, CUDA 12.4): driver 440.33.01 (CUDA 10.2) is too"
        " old for its CUDA 12.4: needs driver 545 or later (data center GPUs: 470.57+, 525.85+, 535.86+, 545.23+)"
    ]
    # NGC PyTorch 25.12 is CUDA 13.1, whose minimum driver the catalogue does not know: the driver's own CUDA decides
    gpus, cuda = facts("h100-550.txt")
    assert image_problems("h1", "dlperf/ngc-pytorch:25.12", gpus, cuda) == [
        "h1: dlperf/ngc-pytorch:25.12 (ngc_pytorch release 25.12, CUDA 13.1): driver 550.54.15 (CUDA 12.4) is too"
        " old for its CUDA 13.1: needs a driver for CUDA 13.1"
    ]


def test_forward_compatibility_branches_the_release_notes_allow():
    mxnet = release_named("ngc_mxnet", "24.06")
    gpus, cuda = facts("a100-535.txt")  # CUDA 12.2 driver, but R535 >= 535.86: allowed on data center GPUs
    assert image_problems("a1", mxnet.image, gpus, cuda) == []
    gpus, cuda = facts("a100-470-no-compute-cap.txt")  # R470 >= 470.57; no compute capability: not judged
    assert image_problems("a2", mxnet.image, gpus, cuda) == []
    assert driver_problem(mxnet, "470.42.01", "11.4") is not None  # R470, but below 470.57
    assert driver_problem(mxnet, "550.54.15", "12.4") is None  # its own CUDA is new enough


def test_an_image_the_catalogue_does_not_know_is_not_judged():
    gpus, cuda = facts("h100-550.txt")
    assert image_problems("h1", "registry.example/my-own:1", gpus, cuda) == []


def _block(name: str, body: str, rc: int = 0) -> str:
    return f"{BEGIN} {name}\n{body}\n{END} {name} {rc}\n"


def test_preflight_refuses_the_image_before_any_gpu_time():
    node = Node(name="gpu-node-1", gpus=8, accelerator="nvidia")
    images = ["dlperf/ngc-pytorch:20.03", "dlperf/ngc-mxnet:24.06"]
    script = preflight_script(node, images)
    assert "--query-gpu=index,name,driver_version,compute_cap" in script and "CUDA Version" in script
    assert "compute_cap" not in preflight_script(node, [])  # no image, nothing to judge
    assert "compute_cap" not in preflight_script(Node(name="c", gpus=2, accelerator="cpu"), images)
    smi = "\n".join(f"{i}, NVIDIA H100 80GB HBM3" for i in range(8))
    out = (
        _block("docker", "24.0.7")
        + _block("nvidia_runtime", 'runtimes={"nvidia":{}}\nnvidia-container-cli=/usr/bin/nvidia-container-cli')
        + _block("gpus", smi)
        + _block("disk", "free_kb 99999999 /var/lib/docker")
        + "".join(_block(f"image {image}", "present sha256:1") for image in images)
        + _block("cuda", (FACTS / "h100-550.txt").read_text())
    )
    health = health_of_output(node, images, out)
    assert not health.ok
    assert health.checks["cuda"] == "driver 550.54.15, CUDA 12.4, compute capability 9.0"
    assert health.problems == (
        "gpu-node-1: GPUs 0,1,2,3,4,5,6,7 NVIDIA H100 80GB HBM3 cannot run dlperf/ngc-pytorch:20.03 (ngc_pytorch"
        " release 20.03, CUDA 10.2): CUDA 10.2 predates Hopper (compute capability 9.0 needs CUDA 11.8 or later)",
    )
    fine = health_of_output(node, images[1:], out)
    assert fine.ok, fine.problems
