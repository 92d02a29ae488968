"""The framework releases dlperf knows: each one's image, the sources it builds from, its CUDA and its limits.

A GPU adapter trains in the image of one release, chosen with the adapter option ``release`` (a suite's
``options: {release: "20.03"}``); without it, the adapter's default release. The seeds' releases stay
selectable by name, and ``suites/seeds.yaml`` names them. Pure data: no I/O. The facts of each release
(CUDA, minimum driver, GPU generations) carry their source, or say ``unverified`` where none was read;
docs/frameworks.md shows them as a table, and preflight (:mod:`dlperf_core.cluster.cuda_compat`) refuses an image
whose CUDA is too old for a node's driver or GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

# The first CUDA release that builds code for a compute capability (major, minor): the GPUs of that generation
# and later cannot run an image whose CUDA is older. Sources: Ampere sm_80 needs CUDA 11.0
# (github.com/BVLC/caffe/pull/7020: "Ampere architecture (CUDA 11 / sm_80, sm_86)"); Ada sm_89 and Hopper sm_90
# appeared first in CUDA 11.8 (github.com/k2-fsa/k2 commit 99f5979: "compute capability 90 appeared first in
# CUDA 11.8"; gitlab.com/gromacs/gromacs merge request 3180: "Ada (89) and Hopper (90) support now exists in
# CUDA 11.8").
FIRST_CUDA_FOR_CAPABILITY: tuple[tuple[tuple[int, int], tuple[int, int], str], ...] = (
    ((9, 0), (11, 8), "Hopper"),
    ((8, 9), (11, 8), "Ada"),
    ((8, 0), (11, 0), "Ampere"),
)


@dataclass(frozen=True)
class Release:
    """One release of a framework's GPU image."""

    framework: str
    name: str  # what a suite's ``release:`` option says
    image: str  # the tag dlperf builds (docker/<recipe>/)
    base_image: str  # the Dockerfile's BASE_IMAGE
    source_repo: str  # where the training script comes from (owner/name)
    source_commit: str  # the commit the Dockerfile checks out (40 hex digits)
    cuda: str  # the CUDA the image is built on, "major.minor"
    min_driver: str | None  # the NVIDIA driver it requires (None: not known, see ``sources``)
    # driver branches the release notes allow on data center GPUs through CUDA's forward compatibility:
    # (branch, the lowest version of that branch), e.g. ("535", "535.86")
    compat_drivers: tuple[tuple[str, str], ...] = ()
    generations: str = ""  # the GPU generations it runs on, in words
    seed: bool = False  # the release a seed benchmark ran
    sources: str = ""  # where each fact above comes from (or "unverified")
    notes: str = ""  # what else differs (flags, patches)

    @property
    def cuda_version(self) -> tuple[int, int]:
        major, minor = self.cuda.split(".")[:2]
        return int(major), int(minor)

    def runs_on(self, capability: tuple[int, int]) -> str | None:
        """Why this release's CUDA cannot run on a GPU of ``capability`` (major, minor), else None."""
        for first_capability, first_cuda, generation in FIRST_CUDA_FOR_CAPABILITY:
            if capability >= first_capability and self.cuda_version < first_cuda:
                need = ".".join(map(str, first_cuda))
                return f"CUDA {self.cuda} predates {generation} (compute capability {capability[0]}.{capability[1]} needs CUDA {need} or later)"
        return None


# the GPUs a CUDA 10 seed image is known to run on: the seeds' own (their reports: Tesla V100)
SEED_GPUS = "Volta, as the seed ran (V100); not Ampere, not Hopper (CUDA 10)"
DLE = "NVIDIA/DeepLearningExamples"
DLE_LAST = "729963dd47e7c8bd462ad10bfac7a7b0b604e6dd"  # DeepLearningExamples' last commit (2024-04-04)
# mindspore-ai/models: the last commit to change official/cv/ResNet in the newest snapshot reachable here (master,
# 2023-06-29; branch r2.3 was not reachable); its train.py and model_utils/config.py are r2.0's unchanged
MODELS_RESNET_LAST = "d70060f39cb000bdcfe7f581199e74e66fb80617"

RELEASES: tuple[Release, ...] = (
    Release(
        framework="ngc_pytorch",
        name="20.03",
        image="dlperf/ngc-pytorch:20.03",
        base_image="nvcr.io/nvidia/pytorch:20.03-py3",
        source_repo=DLE,
        source_commit="5cc03caa153faab7a2c3b1b5b5d63663f06ce1b4",
        cuda="10.2",
        min_driver="440.33.01",
        generations="Pascal, Volta, Turing (not Ampere, not Hopper)",
        seed=True,
        sources=(
            "seed 002's report: the NGC 20.03 container has CUDA 10.2.89; the minimum driver and GPUs are those of"
            " the 20.02 release notes (docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel_20-02.html:"
            " CUDA 10.2.89, driver 440.33.01, compute capability 6.0 and higher), unverified for 20.03 itself"
        ),
        notes="seed 002; the Dockerfile's sed patch sets args.gpu after torch.cuda.set_device (the seed's edit)",
    ),
    Release(
        framework="ngc_pytorch",
        name="25.12",
        image="dlperf/ngc-pytorch:25.12",
        base_image="nvcr.io/nvidia/pytorch:25.12-py3",
        source_repo=DLE,
        source_commit=DLE_LAST,
        cuda="13.1",
        min_driver=None,
        generations="Ampere, Hopper (the release notes' GPU list was not read: unverified)",
        sources=(
            "docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel-25-12.html: based on CUDA 13.1.0,"
            " PyTorch 2.10.0a0; its minimum driver is not stated there (it points to the CUDA compatibility"
            " documentation): unverified"
        ),
        notes=(
            "ConvNets at DLE's last commit (ConvNets last changed 2023-03): --dynamic-loss-scale and -c (model"
            " config) are gone, AMP always scales dynamically (GradScaler), the synthetic backend is spelled"
            " 'synthetic', main.py sets args.gpu itself (no sed patch)"
        ),
    ),
    Release(
        framework="ngc_mxnet",
        name="19.07",
        image="dlperf/ngc-mxnet:19.07",
        base_image="nvcr.io/nvidia/mxnet:19.07-py3",
        source_repo=DLE,
        source_commit="99b1c898cead5603c945721162270c2fe077b4a2",
        cuda="10.1",
        min_driver=None,
        generations=SEED_GPUS,
        seed=True,
        sources=(
            "seed 001's report: nvcr.io/nvidia/mxnet:19.07-py3 with MXNet 1.5.0, CUDA 10.1, cuDNN 7.6.1 (on V100,"
            " host driver 450.80.02); minimum driver unverified (the 19.07 release notes were not read)"
        ),
        notes="seed 001",
    ),
    Release(
        framework="ngc_mxnet",
        name="24.06",
        image="dlperf/ngc-mxnet:24.06",
        base_image="nvcr.io/nvidia/mxnet:24.06-py3",
        source_repo=DLE,
        source_commit="99b1c898cead5603c945721162270c2fe077b4a2",
        cuda="12.4",
        min_driver="545",
        compat_drivers=(("470", "470.57"), ("525", "525.85"), ("535", "535.86"), ("545", "545.23")),
        generations="Pascal, Volta, Turing, Ampere, Hopper (compute capability 6.0 and later)",
        sources=(
            "docs.nvidia.com/deeplearning/frameworks/mxnet-release-notes/rel-24-06.html: MXNet 1.9.1, CUDA"
            " 12.4.1, driver 545 or later (data center GPUs: 470.57+, 525.85+, 535.86+, 545.23+), compute"
            " capability 6.0 and later, intended for H100 and A100"
        ),
        notes=(
            "RN50v1.5 at the seed's DLE commit, whose fit.py prints the Speed lines the ngc_mxnet parser reads"
            " (at DLE's last commit its training loop logs through DLLogger instead); that this 2019 code runs on"
            " MXNet 1.9.1 and the image's DALI is unverified"
        ),
    ),
    Release(
        framework="mindspore",
        name="1.1.0",
        image="dlperf/mindspore:1.1.0",
        base_image="mindspore/mindspore-gpu:1.1.0",
        source_repo="mindspore (gitee.com/mindspore/mindspore)",
        source_commit="e13c045ced043de5998f5f77acc0ebe7da4eed5c",
        cuda="10.1",
        min_driver=None,
        generations=SEED_GPUS,
        seed=True,
        sources="seed 000's report: the container's CUDA 10.1.243 (on V100); minimum driver unverified",
        notes="seed 000; the 1.1 model zoo's train.py with the seed's train.py.patch",
    ),
    Release(
        framework="mindspore",
        name="2.0.0",
        image="dlperf/mindspore:2.0.0",
        base_image="nvidia/cuda:11.1.1-cudnn8-runtime-ubuntu20.04",
        source_repo="mindspore-ai/models",
        source_commit="27da157627e1baefe7ce82af6df699569bcaedf7",
        cuda="11.1",
        min_driver="450.80.02",
        generations="Volta, Turing, Ampere; not Ada, not Hopper (CUDA 11.1 predates them; not measured)",
        sources=(
            "github.com/mindspore-lab/mindediting tutorials/document.md: MindSpore's GPU install script for"
            " 2.0.0-alpha installs 'Python 3.7 and CUDA 11.1', whose minimum driver is 450.80.02;"
            " cnblogs.com/dechinphy/p/mindspore-2-4.html: MindSpore's releases after 2.3 have no GPU backend;"
            " PyPI's mindspore-gpu ends at 1.10.0 (2023-03); mindspore-ai/models branch r2.0 last changed"
            " official/cv/ResNet/train.py in 27da1576 (2023-06-29); PyPI's mindspore==2.0.0 wheel (cp39"
            " manylinux1, read here) carries GPU plugins for CUDA 10.1, 11.1 and 11.6 (lib/plugin/"
            "libmindspore_gpu.so.10.1, .11.1 and .11.6; .11.6 names libcudart.so.11.0, libcudnn.so.8 and libcublas.so.11; the"
            " CUDA 11 kernels' PTX targets sm_60 and sm_86). The base image's tag was not read: unverified"
        ),
        notes=(
            "the model zoo's ResNet train.py at r2.0 with train-r2.0.py.patch and dlperf's config (the seed's"
            " settings as config keys); kept selectable beside 2.3.1, the last GPU release"
        ),
    ),
    Release(
        framework="mindspore",
        name="2.3.1",
        image="dlperf/mindspore:2.3.1",
        base_image="nvidia/cuda:11.6.2-cudnn8-runtime-ubuntu20.04",
        source_repo="mindspore-ai/models",
        source_commit=MODELS_RESNET_LAST,
        cuda="11.6",
        min_driver="510.39.01",
        generations=(
            "Volta, Turing, Ampere; not Ada, not Hopper (CUDA 11.6 predates them, and MindSpore built no CUDA 12"
            " GPU backend: its releases after 2.3 have none; not measured)"
        ),
        sources=(
            "mindspore-ai/mindspore RELEASE.md: 'MindSpore 2.3.1 Release Notes' (2.3.1 the last of 2.3);"
            " cnblogs.com/dechinphy/p/mindspore-2-4.html: the releases after 2.3 carry no GPU backend;"
            " mindspore-ai/mindspore scripts/install/ubuntu-gpu-pip.sh at 90e3d516 (its 2.x GPU installer, wheels"
            " under MindSpore/unified/): CUDA 11.6 its default (10.1, 11.1, 11.6 its choices), minimum driver"
            " 510.39.01 for 11.6, cuDNN 8.5.0.96; mindspore-ai/models: d70060f3 (2023-06-29, master) is the last"
            " change to official/cv/ResNet in the newest snapshot reachable here (2023-07-17), and its train.py and"
            " src/model_utils/config.py are r2.0's (27da1576) unchanged. Unverified: that PyPI's mindspore==2.3.1"
            " wheel carries the GPU plugin for CUDA 11.6 as 2.0.0's does (this machine's PyPI mirror has no 2.3.1),"
            " the base image's tag, and that this train.py runs on 2.3.1 (the model zoo's r2.3 branch was not"
            " reachable)"
        ),
        notes=(
            "MindSpore's last GPU release (the default): the same recipe as 2.0.0 (the model zoo's ResNet train.py"
            " with train-r2.0.py.patch and dlperf's config) on MindSpore 2.3.1 and CUDA 11.6; does not run on"
            " Hopper: preflight refuses it there"
        ),
    ),
    Release(
        framework="oneflow",
        name="0.1.8",
        image="dlperf/oneflow:0.1.8",
        base_image="nvidia/cuda:10.2-cudnn7-runtime-ubuntu18.04",
        source_repo="Oneflow-Inc/OneFlow-Benchmark",
        source_commit="892f87e6",
        cuda="10.2",
        min_driver=None,
        generations=SEED_GPUS,
        seed=True,
        sources=(
            "the wheel oneflow_cu102==0.1.8 and the base image's tag (CUDA 10.2); seed 003's report: CUDA 10.2,"
            " driver 440.33.01 on V100; minimum driver unverified"
        ),
        notes="seed 003; OneFlow-Benchmark's own of_cnn_train_val.py (OneFlow's legacy API), one per node",
    ),
    Release(
        framework="oneflow",
        name="1.0.0",
        image="dlperf/oneflow:1.0.0",
        base_image="nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04",
        source_repo="Oneflow-Inc/oneflow",
        source_commit="2491c5bc1a8e035ad602daf88e680d522da67f95",
        cuda="12.2",
        min_driver=None,
        generations="Ampere, Ada, Hopper by its CUDA 12.2 (not measured: unverified)",
        sources=(
            "Oneflow-Inc/oneflow at tag v1.0.0 (commit 2491c5bc, 2024-03-11): .github/workflows/release.yml builds"
            " the platforms cu122, cu121, cu118 and cpu (added by a5041b87, 'Add cu12 release'); README.md: CUDA"
            " runtime statically linked into OneFlow, stable builds installed with pip --find-links"
            " https://release.oneflow.info oneflow==<version>+<platform> (its example: 0.9.0+cu118), Python"
            " 3.7-3.10, driver >= 450.80.02 for cu118 only; PyPI's newest oneflow is 0.9.0. The wheel"
            " oneflow==1.0.0+cu122 on that index, its minimum driver and the base image's tag were not read:"
            " unverified"
        ),
        notes=(
            "dlperf's driver (docker/oneflow-cpu/of_cnn_train_val.py, copied unchanged, patched for CUDA at build:"
            " docker/oneflow/of_cnn_train_val.gpu.patch) with flowvision 0.2.2's ResNet-50 on synthetic data, under"
            " oneflow.distributed.launch; OneFlow-Benchmark's script needs the legacy API (OneFlow 0.1.8);"
            " --use_fp16 is flow.autocast without loss scaling"
        ),
    ),
    Release(
        framework="paddle_plsc",
        name="1.8.5",
        image="dlperf/paddle-plsc:1.8.5",
        base_image="paddlepaddle/paddle:1.8.5-gpu-cuda10.0-cudnn7",
        source_repo="PaddlePaddle/PLSC",
        source_commit="9bba9c90f542a5e1d8e6d461fcd1f6af40da0918",
        cuda="10.0",
        min_driver=None,
        generations=SEED_GPUS,
        seed=True,
        sources="the base image's tag (CUDA 10.0, cuDNN 7); seed 004 ran on V100; minimum driver unverified",
        notes="seed 004; PLSC 1.8's Entry API (static graph, paddle.fluid) with the seed's stop patch",
    ),
    Release(
        framework="paddle_plsc",
        name="3.2.0",
        image="dlperf/paddle-plsc:3.2.0",
        base_image="python:3.11-slim-bookworm",
        source_repo="PaddlePaddle/PLSC",
        source_commit="a86d924406dc6cf7fdb858e3d75a16b355b1b0f3",
        cuda="12.6",
        min_driver=None,
        generations="Ampere, Ada, Hopper by its CUDA 12.6 (not measured: unverified)",
        sources=(
            "github.com/PaddlePaddle/FastDeploy/pull/4414 (docs/get_started/installation/nvidia_gpu.md): python -m"
            " pip install paddlepaddle-gpu==3.2.0 -i https://www.paddlepaddle.org.cn/packages/stable/cu126/;"
            " paddlepaddle.org.cn/documentation/docs/zh/install/index_cn.html: the wheels install CUDA and cuDNN"
            " themselves, Python 3.8-3.12; PLSC's tag v2.4.0 is commit a86d9244 (2023-01-17). Its minimum driver,"
            " the GPUs Paddle lists for cu126 and the base image's tag were not read: unverified"
        ),
        notes=(
            "PLSC 2.4's engine (IResNet-50 + ArcFace MarginLoss at the seed's size, model arcface_resnet50) under Paddle 3's launcher,"
            " with the CPU image's PLSC train.py and PaddlePaddle 3 shim (docker/paddle-cpu/train.py, copied"
            " unchanged) and docker/paddle-plsc/configs/ (112x112, synthetic faces). PLSC's README at v2.4.0: 'PLSC"
            " v2.4 adapts to PaddlePaddle v2.4, and there may be API mismatches in higher versions' (the CUDA it"
            " targets was not read): that it trains on PaddlePaddle 3 on GPUs is unverified, not measured (on CPU it"
            " does, with the shim)"
        ),
    ),
)

DEFAULT_RELEASE: dict[str, str] = {
    "ngc_pytorch": "25.12",
    "ngc_mxnet": "24.06",
    "mindspore": "2.3.1",
    "oneflow": "1.0.0",
    "paddle_plsc": "3.2.0",
}


def releases_of(framework: str) -> tuple[Release, ...]:
    """The releases of ``framework``, oldest first (empty for a framework without a release catalog)."""
    return tuple(r for r in RELEASES if r.framework == framework)


def release_named(framework: str, name: str) -> Release:
    """The release ``name`` of ``framework`` (names are checked when a suite loads: a KeyError is a bug)."""
    for release in releases_of(framework):
        if release.name == name:
            return release
    known = ", ".join(r.name for r in releases_of(framework)) or "none"
    raise KeyError(f"{framework} has no release {name!r} (known: {known})")


def release_names(framework: str) -> tuple[str, ...]:
    """The names a suite's ``release`` option may take for ``framework`` (its adapter's option choices)."""
    return tuple(r.name for r in releases_of(framework))


def default_release(framework: str) -> Release:
    return release_named(framework, DEFAULT_RELEASE[framework])


def release_of_image(image: str) -> Release | None:
    """The release whose image is ``image`` (None: an image dlperf does not catalogue, e.g. a suite's own)."""
    return next((r for r in RELEASES if r.image == image), None)
