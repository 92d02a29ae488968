"""How well a run used its GPUs: model FLOPs per sample, the GPUs' dense peaks, MFU, energy per sample.

Pure arithmetic and data; no torch import (the counts are analytic and a test checks them against the
model's own layers).

* **FLOPs.** One multiply-accumulate is 2 FLOPs, the convention of the peak figures below (NVIDIA counts an
  FMA as two operations). ResNet-50 v1.5 at 224x224 does 4.09 G multiply-accumulates forward (the "4.1
  GFLOPs" usually quoted for ResNet-50 counts MACs), so 8.18 GFLOP forward; training is forward + backward
  (activation and weight gradients, each about the forward's cost): 3x the forward, 24.5 GFLOP per sample.
  Only convolutions and the classifier are counted (BatchNorm, ReLU, pooling and the residual adds are well
  under 1%), as MLPerf and the papers count them.
* **Peaks** are the dense (no sparsity) tensor-core figures of NVIDIA's datasheets, per GPU, for the
  precision a case trains in: ``fp32`` -> plain FP32 (TF32 off), ``tf32`` -> TF32 tensor cores, ``amp`` ->
  FP16/BF16 tensor cores (equal on every GPU listed; V100 has FP16 only).
* **MFU** (model FLOPs utilisation) = samples/s x training FLOPs per sample / (peak per GPU x GPUs).
* **Energy per sample** (J) = mean board power of the case's GPUs (W, summed over them) / samples/s.

A figure that cannot be known (a CPU node, a GPU missing from the table, a model without a count) is None,
never 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dlperf_core.workload.llm_config import SIZES as LLM_SIZES
from dlperf_core.workload.llm_config import flops_per_token

# ------------------------------------------------------------------------------------------ FLOPs
RESNET50_LAYERS: tuple[int, int, int, int] = (3, 4, 6, 3)
TRAINING_FLOPS_FACTOR = 3  # forward + backward (gradients of activations and of weights)


def _conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def resnet50_v15_forward_macs(image_size: int = 224, width: int = 64, num_classes: int = 1000) -> int:
    """Multiply-accumulates of one forward pass of ResNet-50 v1.5 (the stride on the 3x3 convolution) on one
    ``image_size`` x ``image_size`` RGB image: every convolution and the classifier."""
    size = _conv_out(image_size, 7, 2, 3)
    macs = 7 * 7 * 3 * width * size * size  # stem
    size = _conv_out(size, 3, 2, 1)  # max pool
    channels = width
    for stage, blocks in enumerate(RESNET50_LAYERS):
        planes = width * 2**stage
        out = planes * 4
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            after = _conv_out(size, 3, stride, 1)
            macs += channels * planes * size * size  # 1x1 reduce, at the input size
            macs += 9 * planes * planes * after * after  # 3x3, carries the stride (v1.5)
            macs += planes * out * after * after  # 1x1 expand
            if block == 0 and (stride != 1 or channels != out):
                macs += channels * out * after * after  # projection shortcut
            channels, size = out, after
    return macs + channels * num_classes  # classifier


def iresnet50_forward_macs(image_size: int = 112, embedding: int = 512, num_classes: int = 85742) -> int:
    """Multiply-accumulates of one forward pass of ArcFace's IResNet-50 (insightface ``iresnet50``: blocks
    (3, 4, 14, 3) of two 3x3 convolutions, the stride on the second; a 3x3 stem; the flattened last feature
    map, 7x7x512 at 112x112, -> 512 embedding) plus the ArcFace classifier over ``num_classes`` identities
    (the seed's MS1M: 85742). Both PLSC models are this network: PLSC 1.8's ``ResNet50`` and PLSC 2.4's ``IResNet50``
    (``arcface_resnet50`` on the GPU images, at the seed's size; ``arcface_iresnet50`` on the CPU image)."""
    size = image_size
    macs = 9 * 3 * 64 * size * size  # stem: 3x3 conv, stride 1
    channels = 64
    for stage, blocks in enumerate((3, 4, 14, 3)):
        planes = 64 * 2**stage
        for block in range(blocks):
            stride = 2 if block == 0 else 1
            after = _conv_out(size, 3, stride, 1)
            macs += 9 * channels * planes * size * size  # first 3x3, stride 1
            macs += 9 * planes * planes * after * after  # second 3x3, carries the stride
            if block == 0:
                macs += channels * planes * after * after  # projection shortcut (1x1, strided)
            channels, size = planes, after
    macs += channels * size * size * embedding  # flattened features -> embedding
    return macs + embedding * num_classes  # ArcFace logits


@dataclass(frozen=True)
class ModelSize:
    """What the FLOPs of a model depend on: input side, width, classes (defaults: the seeds' models)."""

    image_size: int
    width: int
    num_classes: int


STANDARD_SIZES: dict[str, ModelSize] = {
    "resnet50_v1.5": ModelSize(224, 64, 1000),
    "arcface_resnet50": ModelSize(112, 512, 85742),  # width: the embedding size
    # the size docker/paddle-cpu's config trains (the only image that trains this name): 32x32, 1000 classes
    "arcface_iresnet50": ModelSize(32, 512, 1000),
}
IRESNET_MODELS = frozenset({"arcface_resnet50", "arcface_iresnet50"})


def throughput_unit(model: str) -> str:
    """What a throughput of ``model`` counts: tokens/s for dlperf's transformers (a sample is a token),
    samples/s for the rest (images for the CNNs)."""
    return "tokens/s" if model.startswith("llm_") else "samples/s"


def training_flops_per_sample(model: str, size: ModelSize | None = None) -> float | None:
    """Training FLOPs of one sample (3 x forward, 2 FLOPs a MAC) of ``model`` at ``size`` (default: the
    standard size); None for a model without a count. For dlperf's transformers (``llm_<size>``) a sample
    is a token: 6N + 12 x layers x d_model x seq_len (``dlperf_core/workload/llm_config.py``)."""
    if model.startswith("llm_") and model[4:] in LLM_SIZES:
        return float(flops_per_token(LLM_SIZES[model[4:]]))
    size = size or STANDARD_SIZES.get(model)
    if size is None:
        return None
    if model == "resnet50_v1.5":
        macs = resnet50_v15_forward_macs(size.image_size, size.width, size.num_classes)
    elif model in IRESNET_MODELS:
        macs = iresnet50_forward_macs(size.image_size, size.width, size.num_classes)
    else:
        return None
    return float(2 * macs * TRAINING_FLOPS_FACTOR)


#: The flags by which the adapters' workloads shrink a model (dlperf's workload, MindSpore, MXNet, OneFlow,
#: PLSC's ``-o`` overrides), and the size field each sets. MindSpore's ``--base_width`` is MindCV's: it narrows
#: only the bottlenecks' inner convolutions, not the stem and the blocks' outputs that ``width`` also scales in
#: the count above, so a count of a case that sets it is too low.
SIZE_FLAGS: dict[str, str] = {
    "--image-size": "image_size",
    "--image_size": "image_size",
    "--image-shape": "image_size",
    "--width": "width",
    "--base_width": "width",
    "--num-classes": "num_classes",
    "--num_classes": "num_classes",
    "Model.class_num": "num_classes",
    "Model.input_image_width": "image_size",
    "Model.num_features": "width",
}


def model_size(model: str, extra_args: tuple[str, ...] = ()) -> ModelSize | None:
    """The size a case trains ``model`` at: the standard size, with what its ``extra_args`` change
    (``--image-size 64``, ``--width=16``, ``--image-shape 3,64,64``, ``-o Model.class_num=100`` ...)."""
    standard = STANDARD_SIZES.get(model)
    if standard is None:
        return None
    values = {"image_size": standard.image_size, "width": standard.width, "num_classes": standard.num_classes}
    args = list(extra_args)
    for i, arg in enumerate(args):
        flag, _, inline = arg.partition("=")
        if flag not in SIZE_FLAGS:
            continue
        text = inline if inline else (args[i + 1] if i + 1 < len(args) else "")
        text = text.split(",")[-1]  # --image-shape C,H,W: the side
        if text.isdigit() and int(text) > 0:
            values[SIZE_FLAGS[flag]] = int(text)
    return ModelSize(**values)


# ------------------------------------------------------------------------------------------ peaks
@dataclass(frozen=True)
class GpuPeak:
    """Dense peak TFLOP/s of one GPU per precision (None: the GPU has no such unit), and the source."""

    name: str
    fp32: float
    tf32: float | None
    fp16: float  # FP16 (and BF16 where it has it) tensor cores
    source: str

    def for_precision(self, precision: str) -> float | None:
        """TFLOP/s for a case precision: fp32 -> FP32, tf32 -> TF32 tensor cores, amp -> FP16/BF16."""
        return {"fp32": self.fp32, "tf32": self.tf32, "amp": self.fp16}.get(precision)


_H100_SXM = "NVIDIA H100 Tensor Core GPU datasheet (SXM5: FP32 67, TF32 494.7, BF16/FP16 989.4 dense)"
# (pattern over nvidia-smi's name, lower-cased; first match wins: more specific names first)
PEAKS: tuple[tuple[re.Pattern[str], GpuPeak], ...] = (
    (
        re.compile(r"h200"),
        GpuPeak(
            "H200",
            67.0,
            494.7,
            989.4,
            "NVIDIA H200 Tensor Core GPU datasheet (SXM: FP32 67, TF32 494.7, BF16/FP16 989.4 dense)",
        ),
    ),
    (
        re.compile(r"h100.*(pcie|\bpci\b)"),
        GpuPeak(
            "H100 PCIe", 51.0, 378.0, 756.0, "NVIDIA H100 datasheet (PCIe: FP32 51, TF32 378, BF16/FP16 756 dense)"
        ),
    ),
    (
        re.compile(r"h100.*nvl"),
        GpuPeak(
            "H100 NVL", 60.0, 417.5, 835.5, "NVIDIA H100 datasheet (NVL: FP32 60, TF32 417.5, BF16/FP16 835.5 dense)"
        ),
    ),
    (re.compile(r"h100"), GpuPeak("H100 SXM", 67.0, 494.7, 989.4, _H100_SXM)),  # "NVIDIA H100 80GB HBM3" is SXM5
    (
        re.compile(r"a100"),
        GpuPeak(
            "A100",
            19.5,
            156.0,
            312.0,
            "NVIDIA A100 Tensor Core GPU datasheet (FP32 19.5, TF32 156, BF16/FP16 312 dense)",
        ),
    ),
    (
        re.compile(r"v100.*pcie"),
        GpuPeak("V100 PCIe", 14.0, None, 112.0, "NVIDIA V100 datasheet (PCIe: FP32 14, FP16 tensor 112; no TF32/BF16)"),
    ),
    (
        re.compile(r"v100"),
        GpuPeak(
            "V100 SXM2", 15.7, None, 125.0, "NVIDIA V100 datasheet (SXM2: FP32 15.7, FP16 tensor 125; no TF32/BF16)"
        ),
    ),
)


def gpu_peak(gpu_model: str | None) -> GpuPeak | None:
    """The peak table's entry for an ``nvidia-smi`` GPU name (e.g. "NVIDIA H100 80GB HBM3"), else None."""
    if not gpu_model:
        return None
    name = gpu_model.lower()
    return next((peak for pattern, peak in PEAKS if pattern.search(name)), None)


def mfu(
    throughput: float | None, flops_per_sample: float | None, gpu_model: str | None, precision: str, gpus: int
) -> float | None:
    """Model FLOPs utilisation (0..1) of a run, or None when any part is unknown."""
    peak = gpu_peak(gpu_model)
    tflops = peak.for_precision(precision) if peak else None
    if not throughput or not flops_per_sample or not tflops or gpus < 1 or throughput <= 0:
        return None
    return throughput * flops_per_sample / (tflops * 1e12 * gpus)


def energy_per_sample(mean_power_w: float | None, throughput: float | None) -> float | None:
    """Joules per sample: the case's GPUs' mean board power (W, summed) over samples/s; None if unknown."""
    if not mean_power_w or not throughput or mean_power_w <= 0 or throughput <= 0:
        return None
    return mean_power_w / throughput
