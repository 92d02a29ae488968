"""Accelerator names normalised (dlperf_core.cluster.accelerators): every name in the MLPerf Training v1.0 system
descriptions, and names as nvidia-smi prints them."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from dlperf_core.cluster.accelerators import Accelerator, normalise, same_accelerator
from helpers import SHARED

V1 = SHARED / "mlperf" / "training_v1.0"

A100_SXM_80 = Accelerator("nvidia", "a100", "sxm", 80)
A100_SXM_40 = Accelerator("nvidia", "a100", "sxm", 40)
A100_PCIE_40 = Accelerator("nvidia", "a100", "pcie", 40)


@pytest.mark.skipif(not V1.is_dir(), reason=f"no MLPerf results at {V1}")
def test_every_accelerator_name_of_the_v1_descriptions_normalises_to_its_chip():
    found: Counter[Accelerator | None] = Counter()
    for path in sorted(V1.glob("*/systems/*.json")):
        desc = json.loads(path.read_text())
        found[normalise(desc.get("accelerator_model_name"), desc.get("accelerator_memory_capacity"))] += 1
    assert found == {
        A100_SXM_80: 12,  # "NVIDIA A100-SXM4-80GB (400W)", "NVIDIA A100-SXM-80GB (500W)", "A100-SXM4-80GB", ...
        A100_SXM_40: 4,  # "NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB (400W)"
        A100_PCIE_40: 7,  # "NVIDIA A100-PCIE-40GB (250W)", "NVIDIA A100-PCIe-40GB(250W)", ...
        Accelerator("google", "tpu", "", 32): 4,
        Accelerator("graphcore", "ipu-gc200", "", 32): 2,
        Accelerator("habana", "gaudi", "", 32): 1,
        Accelerator("huawei", "ascend-910-pro-a", "", 32): 2,
        None: 3,  # Intel's Xeon systems: "N/A", no accelerator
    }


@pytest.mark.parametrize(
    ("smi", "expected"),
    [
        ("NVIDIA A100-SXM4-80GB", A100_SXM_80),
        ("NVIDIA A100-SXM4-40GB", A100_SXM_40),
        ("NVIDIA A100-PCIE-40GB", A100_PCIE_40),
        ("NVIDIA H100 80GB HBM3", Accelerator("nvidia", "h100", "sxm", 80)),  # the SXM5 board
        ("NVIDIA H100 PCIe", Accelerator("nvidia", "h100", "pcie", None)),
        ("NVIDIA H100 NVL", Accelerator("nvidia", "h100", "nvl", None)),
        ("Tesla V100-SXM2-32GB", Accelerator("nvidia", "v100", "sxm", 32)),
        ("NVIDIA GeForce RTX 4090", Accelerator("nvidia", "rtx-4090", "", None)),
    ],
)
def test_nvidia_smi_names(smi: str, expected: Accelerator) -> None:
    assert normalise(smi) == expected


def test_power_suffixes_spacing_and_case_are_ignored_but_form_factor_and_memory_are_not():
    assert same_accelerator("NVIDIA A100-SXM4-80GB (400W)", "nvidia a100-sxm4-80gb")
    assert same_accelerator("NVIDIA A100-PCIe-40GB(250W)", "NVIDIA A100-PCIE-40GB (250W)")
    assert same_accelerator("NVIDIA A100-SXM-80GB (500W)", "NVIDIA A100-SXM4-80GB")
    assert not same_accelerator("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB")  # memory
    assert not same_accelerator("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB")  # form factor
    assert not same_accelerator("N/A", "N/A")  # CPU-only systems are compared per node, not as a chip
    assert normalise("") is None and normalise(None) is None and normalise(" none ") is None
    assert str(A100_SXM_80) == "nvidia a100 sxm 80gb"
