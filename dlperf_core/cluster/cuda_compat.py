"""Whether an image's CUDA runs on a node: its driver and its GPUs, judged from probed facts (pure, no I/O).

Preflight (:mod:`dlperf_core.cluster.preflight`) asks each nvidia node's ``nvidia-smi`` for every GPU's index, name,
driver version and compute capability, and the driver's CUDA version from its banner (``CUDA Version: 12.4``).
An image dlperf catalogues (:mod:`dlperf_core.frameworks.releases`) has a known CUDA version; it is refused,
before any GPU time is spent, when

- a GPU is of a generation its CUDA predates (Ampere, compute capability 8.0, needs CUDA 11.0; Ada 8.9 and
  Hopper 9.0 need CUDA 11.8), or
- the driver is older than the image's CUDA needs: the driver's own CUDA version (the banner) is lower, its
  version is below the release's minimum driver, and it is not on one of the driver branches the release notes
  allow through CUDA's forward compatibility (data center GPUs only).

An image the catalogue does not know (a suite's own ``image:``) is not judged.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from dlperf_core.frameworks.releases import Release, release_of_image

# the query preflight runs; nvidia-smi too old to know compute_cap fails it, and the fallback leaves it out
GPU_FACTS_QUERY = "index,name,driver_version,compute_cap"


@dataclass(frozen=True)
class GpuFacts:
    """One GPU as ``nvidia-smi --query-gpu=index,name,driver_version,compute_cap`` printed it."""

    index: str
    name: str
    driver_version: str
    compute_capability: tuple[int, int] | None  # None: this nvidia-smi does not report it


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def parse_gpu_facts(text: str) -> tuple[GpuFacts, ...]:
    """The GPUs of ``nvidia-smi --query-gpu=index,name,driver_version[,compute_cap] --format=csv,noheader``;
    lines that are not a GPU's (warnings, errors) are skipped."""
    out = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        cells = [c.strip() for c in row]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        cap = re.fullmatch(r"(\d+)\.(\d+)", cells[3]) if len(cells) > 3 else None
        out.append(GpuFacts(cells[0], cells[1], cells[2], (int(cap[1]), int(cap[2])) if cap else None))
    return tuple(out)


def parse_driver_cuda(text: str) -> str | None:
    """The driver's CUDA version from the ``nvidia-smi`` banner (``CUDA Version: 12.4``), else None."""
    found = re.search(r"CUDA Version:\s*([0-9.]+)", text)
    return found.group(1) if found else None


def driver_problem(release: Release, driver: str, driver_cuda: str | None) -> str | None:
    """Why ``driver`` (whose CUDA is ``driver_cuda``) cannot run ``release``'s CUDA, else None."""
    if driver_cuda is not None and _version(driver_cuda)[:2] >= release.cuda_version:
        return None
    if release.min_driver is not None and _version(driver) >= _version(release.min_driver):
        return None
    for branch, lowest in release.compat_drivers:
        if driver.split(".")[0] == branch and _version(driver) >= _version(lowest):
            return None  # CUDA's forward compatibility on a data center GPU, as the release notes allow
    if driver_cuda is None and release.min_driver is None:
        return None  # nothing known to judge by
    needs = f"driver {release.min_driver} or later" if release.min_driver else f"a driver for CUDA {release.cuda}"
    if release.compat_drivers:
        needs += " (data center GPUs: " + ", ".join(f"{low}+" for _, low in release.compat_drivers) + ")"
    return f"driver {driver} (CUDA {driver_cuda or 'unknown'}) is too old for its CUDA {release.cuda}: needs {needs}"


def image_problems(node: str, image: str, gpus: tuple[GpuFacts, ...], driver_cuda: str | None) -> list[str]:
    """Why ``image`` cannot run on ``node`` with ``gpus`` (each problem names node, GPU, image and versions);
    empty when it can, or when the image is not catalogued."""
    release = release_of_image(image)
    if release is None:
        return []
    problems = []
    what = f"{image} ({release.framework} release {release.name}, CUDA {release.cuda})"
    kinds: dict[tuple[str, tuple[int, int]], list[str]] = {}  # (name, compute capability) -> GPU indexes
    for gpu in gpus:
        if gpu.compute_capability is not None:
            kinds.setdefault((gpu.name, gpu.compute_capability), []).append(gpu.index)
    for (name, capability), indexes in kinds.items():
        if why := release.runs_on(capability):
            which = f"GPU {indexes[0]}" if len(indexes) == 1 else f"GPUs {','.join(indexes)}"
            problems.append(f"{node}: {which} {name} cannot run {what}: {why}")
    for driver in sorted({gpu.driver_version for gpu in gpus}):
        if why := driver_problem(release, driver, driver_cuda):
            problems.append(f"{node}: {what}: {why}")
    return problems
