"""Accelerator names, normalised so that one chip matches however a source spells it: MLPerf system descriptions
("NVIDIA A100-SXM4-80GB (400W)", "A100-SXM4-40GB", "NVIDIA A100-PCIe-40GB(250W)"), nvidia-smi ("NVIDIA
A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe") and the other vendors' names ("TPU", "Graphcore
IPU GC200", "Habana Gaudi", "Ascend 910 Pro A").

The normalisation (what two names must share to be the same accelerator):

* **vendor**: the name's own (``nvidia``, ``graphcore``, ``habana``, ``google``, ``huawei``), else the maker of the
  model it names (A100, H100, V100, ... are NVIDIA's; TPU is Google's; Ascend is Huawei's);
* **model**: the chip, lower case, words joined by ``-`` (``a100``, ``h100``, ``tpu``, ``ipu-gc200``, ``gaudi``,
  ``ascend-910-pro-a``);
* **form factor**: ``sxm`` (SXM, SXM4, SXM5; an H100 that nvidia-smi calls "80GB HBM3" is the SXM5 board),
  ``pcie``, ``nvl``, or ``""`` where the name says none;
* **memory**: GB, from the name ("80GB", "80G") or, where it has none, the description's memory capacity;
  None where neither says.

Ignored: a power suffix ("(400W)", "(250W)"), case, spacing and hyphens between words, the product lines' brand words
("Tesla", "GeForce", "Quadro") and memory-type words ("HBM3"). "N/A", "none" or an
empty name is no accelerator (a CPU-only system): ``normalise`` returns None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NO_ACCELERATOR = {"", "n/a", "na", "none", "cpu", "-"}
_POWER = re.compile(r"\(?\s*\d+\s*w\s*\)?$")
_MEMORY = re.compile(r"(?<![a-z0-9])(\d+)\s*g(?:b|ib)?(?![a-z0-9])")
_FORM_FACTORS = (("sxm", re.compile(r"sxm\d?")), ("pcie", re.compile(r"pcie")), ("nvl", re.compile(r"nvl")))
_VENDORS = ("nvidia", "graphcore", "habana", "google", "huawei", "amd", "intel")
_MADE_BY = (
    (re.compile(r"^[abhklmptv]\d{2,3}[a-z]?$|^gh\d+$|^gb\d+$|^l40s?$|^rtx"), "nvidia"),
    (re.compile(r"^tpu"), "google"),
    (re.compile(r"^ascend"), "huawei"),
    (re.compile(r"^gaudi"), "habana"),
    (re.compile(r"^ipu"), "graphcore"),
    (re.compile(r"^mi\d+"), "amd"),
)
_NOISE_WORDS = {"hbm", "hbm2", "hbm2e", "hbm3", "hbm3e", "tensor", "core", "gpu", "tesla", "geforce", "quadro"}


@dataclass(frozen=True, order=True)
class Accelerator:
    """A normalised accelerator name (see the module docstring)."""

    vendor: str
    model: str
    form_factor: str
    memory_gb: int | None

    def __str__(self) -> str:
        parts = [self.vendor, self.model, self.form_factor, f"{self.memory_gb}gb" if self.memory_gb else ""]
        return " ".join(p for p in parts if p)


def normalise(name: str | None, memory: str | None = None) -> Accelerator | None:
    """``name`` (and, where the name states no memory, ``memory`` as a description gives it) normalised; None for no
    accelerator."""
    text = (name or "").strip().lower()
    if text in _NO_ACCELERATOR:
        return None
    text = _POWER.sub("", text).strip()
    memory_gb = _memory(text)
    if memory_gb is None and memory:
        memory_gb = _memory(memory.strip().lower())
    text = _MEMORY.sub(" ", text)
    hbm3 = "hbm3" in text
    words = [w for w in re.split(r"[\s\-_/]+", text) if w]
    vendor = next((w for w in words if w in _VENDORS), "")
    words = [w for w in words if w not in _VENDORS]
    form_factor = ""
    kept: list[str] = []
    for word in words:
        found = next((ff for ff, rx in _FORM_FACTORS if rx.fullmatch(word)), None)
        if found is not None:
            form_factor = form_factor or found
        elif word not in _NOISE_WORDS:
            kept.append(word)
    model = "-".join(kept)
    if not vendor:
        vendor = next((maker for rx, maker in _MADE_BY if rx.search(model)), "")
    if not form_factor and hbm3 and vendor == "nvidia" and model.startswith("h"):
        form_factor = "sxm"  # nvidia-smi names the H100/H200 SXM boards by their memory: "NVIDIA H100 80GB HBM3"
    return Accelerator(vendor, model, form_factor, memory_gb)


def _memory(text: str) -> int | None:
    found = _MEMORY.search(text)
    return int(found.group(1)) if found else None


def same_accelerator(a: str | None, b: str | None, a_memory: str | None = None, b_memory: str | None = None) -> bool:
    """Whether two names are the same accelerator after normalisation (two CPU-only names are not)."""
    left, right = normalise(a, a_memory), normalise(b, b_memory)
    return left is not None and left == right
