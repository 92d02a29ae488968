"""The GPU recipes build each catalogued release (dlperf_core/frameworks/releases.py), and stay out of CI's builds.

A recipe's build arguments default to its framework's default release; every other release of that recipe is
named in the recipe's header with the build arguments that make it. NGC PyTorch's multi-node edit of main.py is
applied where the seed's code needs it and left out where DLE's last commit would break under it.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from dlperf_core.frameworks import ADAPTERS
from dlperf_core.frameworks.releases import DEFAULT_RELEASE, RELEASES, default_release
from helpers import REPO


def recipe(image: str) -> str:
    return (REPO / "docker" / image.split("/", 1)[1].split(":", 1)[0] / "Dockerfile").read_text()


@pytest.mark.parametrize("release", RELEASES, ids=lambda r: f"{r.framework}-{r.name}")
def test_the_recipe_builds_the_release(release):
    text = recipe(release.image)
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.M).group(1)
    commit = re.search(r"^ARG \w+_COMMIT=(\S+)$", text, re.M).group(1)
    if release.name == DEFAULT_RELEASE[release.framework]:
        assert (base, commit) == (release.base_image, release.source_commit)
        recipe_dir = release.image.split("/", 1)[1].split(":", 1)[0]
        assert (
            f"docker build -t {release.image} docker/" in text
            or f"docker build -t {release.image} -f docker/{recipe_dir}/Dockerfile ." in text  # repo root context
        )
        return
    header = "\n".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    build = re.search(rf"docker build -t {re.escape(release.image)} (.*?)docker/", header, re.S)
    assert build, f"the recipe's header names how to build {release.image}"
    flags = build.group(1)
    assert (base == release.base_image) or f"BASE_IMAGE={release.base_image}" in flags
    assert (commit == release.source_commit) or f"_COMMIT={release.source_commit}" in flags


def test_adapters_default_to_their_default_release():
    for framework in DEFAULT_RELEASE:
        adapter = ADAPTERS[framework]
        assert adapter.default_image == default_release(framework).image
        assert adapter.option_defaults["release"] == DEFAULT_RELEASE[framework]


def test_ci_does_not_build_the_gpu_images():
    """scripts/build-images.sh builds the docker/*/image.env recipes (CPU, services); nvcr.io is unreachable."""
    for release in RELEASES:
        folder = REPO / "docker" / release.image.split("/", 1)[1].split(":", 1)[0]
        assert not (folder / "image.env").exists(), folder


# main.py's lines around torch.cuda.set_device, as git show prints them (NVIDIA/DeepLearningExamples,
# PyTorch/Classification/ConvNets/main.py): the seed's commit 5cc03caa lines 306-311, the last commit 729963dd
# lines 367-376 and 584
SEED_MAIN = """    args.gpu = 0
    args.world_size = 1

    if args.distributed:
        args.gpu = args.local_rank % torch.cuda.device_count()
        torch.cuda.set_device(args.gpu)
"""
LAST_MAIN = (
    SEED_MAIN
    + """        dist.init_process_group(backend="nccl", init_method="env://")
        args.world_size = torch.distributed.get_world_size()

    affinity = set_affinity(args.gpu, mode=args.gpu_affinity)
        executor.distributed(args.gpu)
"""
)


@pytest.mark.parametrize(("source", "patched"), [(SEED_MAIN, True), (LAST_MAIN, False)], ids=["seed", "last"])
def test_ngc_pytorch_multi_node_edit_only_where_the_seed_needs_it(source, patched, tmp_path):
    text = (REPO / "docker" / "ngc-pytorch" / "Dockerfile").read_text()
    run = re.search(r"^RUN (if grep -q .*?fi)$", text, re.M | re.S).group(1).replace("\\\n", "")
    (tmp_path / "main.py").write_text(source)
    done = subprocess.run(["bash", "-o", "pipefail", "-c", run], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    after = (tmp_path / "main.py").read_text()
    edit = "        torch.cuda.set_device(args.gpu)\n        args.gpu = torch.cuda.device_count()\n"
    assert (edit in after) is patched
    assert after == source or patched


def test_oneflow_gpu_patch_applies_to_the_cpu_driver_unchanged(tmp_path):
    """docker/oneflow copies docker/oneflow-cpu's driver as it is and patches it for CUDA in the image: the patch
    applies to today's driver, moves it to the rank's GPU, lets --use_fp16 through as autocast, and compiles."""
    text = (REPO / "docker" / "oneflow" / "Dockerfile").read_text()
    assert "COPY docker/oneflow-cpu/of_cnn_train_val.py docker/oneflow/of_cnn_train_val.gpu.patch" in text
    driver = (REPO / "docker" / "oneflow-cpu" / "of_cnn_train_val.py").read_text()
    (tmp_path / "of_cnn_train_val.py").write_text(driver)
    patch = (REPO / "docker" / "oneflow" / "of_cnn_train_val.gpu.patch").open()
    done = subprocess.run(["patch", "-p1", "--forward"], stdin=patch, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    after = (tmp_path / "of_cnn_train_val.py").read_text()
    assert 'flow.device("cuda", flow.env.get_local_rank())' in after and 'flow.device("cpu")' not in after
    assert 'flow.autocast("cuda", enabled=bool(args.use_fp16))' in after and "not supported on CPU" not in after
    compile(after, "of_cnn_train_val.py", "exec")
