"""MFU and energy: model FLOPs per sample (checked against the models' own layers), the GPU peak table, the
arithmetic on the H100 reference figures, and the one GPU sampler (memory + power) on nvidia-smi's output."""

from __future__ import annotations

import os
import stat
import time
from datetime import UTC, datetime

import pytest
import torch
from torch import nn

from dlperf_core.cluster.gpu_sampling import GpuSampler, GpuSamples, case_power_w, mean_power_w, parse_sample
from dlperf_core.cluster.inventory import Node
from dlperf_core.measure.efficiency import (
    ModelSize,
    energy_per_sample,
    gpu_peak,
    iresnet50_forward_macs,
    mfu,
    model_size,
    resnet50_v15_forward_macs,
    training_flops_per_sample,
)
from dlperf_core.measure.measurement import measure_case_run
from dlperf_core.model import Case, CaseJob, CaseOutcome, NodeLaunch, NodeOutcome
from dlperf_core.run.runtime.local import LocalRuntime
from dlperf_core.workload.resnet import resnet50


def counted_macs(model: nn.Module, image_size: int, channels: int = 3) -> int:
    """Multiply-accumulates of every Conv2d and Linear in one forward pass, counted by hooks."""
    total = 0

    def conv(m: nn.Conv2d, _inputs, out: torch.Tensor) -> None:
        nonlocal total
        kh, kw = m.kernel_size
        total += out.numel() * (m.in_channels // m.groups) * kh * kw  # batch of one

    def linear(m: nn.Linear, _inputs, out: torch.Tensor) -> None:
        nonlocal total
        total += out.numel() * m.in_features

    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            module.register_forward_hook(conv)
        elif isinstance(module, nn.Linear):
            module.register_forward_hook(linear)
    with torch.no_grad():
        model.eval()(torch.zeros(1, channels, image_size, image_size))
    return total


@pytest.mark.parametrize("image_size,width,classes", [(224, 64, 1000), (64, 16, 10), (96, 8, 7)])
def test_resnet50_flops_are_the_models_own_layers(image_size, width, classes):
    assert resnet50_v15_forward_macs(image_size, width, classes) == counted_macs(resnet50(width, classes), image_size)


def test_resnet50_flops_counted_by_torch_itself():
    """torch's own FLOP counter (FlopCounterMode: 2 FLOPs a multiply-accumulate, convolutions and matmuls) on
    one 224x224 forward of dlperf's full ResNet-50 v1.5 at batch 1 on CPU: 4.09 G MACs, the analytic count."""
    from torch.utils.flop_counter import FlopCounterMode

    model = resnet50().eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, 3, 224, 224))
    assert counter.get_total_flops() == 2 * resnet50_v15_forward_macs(224, 64, 1000)
    assert counter.get_total_flops() / 2 == pytest.approx(4.09e9, rel=0.001)


def test_resnet50_at_224_is_the_figure_everyone_quotes():
    """ "ResNet-50: 4.1 GFLOPs" counts multiply-accumulates: 4.09 G MACs = 8.18 GFLOP forward, x3 to train."""
    macs = resnet50_v15_forward_macs()
    assert macs == pytest.approx(4.09e9, rel=0.005)
    assert training_flops_per_sample("resnet50_v1.5") == 2 * 3 * macs
    assert training_flops_per_sample("bert") is None


class IBasicBlock(nn.Module):
    """insightface's IResNet block (BN/PReLU left out: they do not multiply-accumulate)."""

    def __init__(self, inplanes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, 1, 1, bias=False)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.down = nn.Conv2d(inplanes, planes, 1, stride, bias=False) if stride != 1 or inplanes != planes else None

    def forward(self, x):
        out = self.conv2(self.conv1(x))
        return out + (self.down(x) if self.down is not None else x)


@pytest.mark.parametrize("image_size", [112, 32])  # the seed's GPU input; docker/paddle-cpu's config
def test_iresnet50_arcface_flops_are_the_models_own_layers(image_size):
    layers, blocks, inplanes = [], (3, 4, 14, 3), 64
    for stage, n in enumerate(blocks):
        planes = 64 * 2**stage
        for b in range(n):
            layers.append(IBasicBlock(inplanes, planes, 2 if b == 0 else 1))
            inplanes = planes
    side = image_size // 16  # four stride-2 stages (PLSC: fc_scale = (input // 16) ** 2)
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, 1, 1, bias=False),
        *layers,
        nn.Flatten(),
        nn.Linear(512 * side * side, 512, bias=False),
        nn.Linear(512, 1000, bias=False),
    )
    assert iresnet50_forward_macs(image_size, 512, 1000) == counted_macs(model, image_size)


def test_both_plsc_names_count_as_the_iresnet50_they_train():
    """arcface_resnet50 (PLSC 1.8's ResNet50, GPU image: 112x112, the seed's 85742 classes) and
    arcface_iresnet50 (PLSC 2.4's IResNet50, CPU image: its config's 32x32 input and 1000 classes)."""
    assert training_flops_per_sample("arcface_resnet50") == 6 * iresnet50_forward_macs(112, 512, 85742)
    assert training_flops_per_sample("arcface_iresnet50") == 6 * iresnet50_forward_macs(32, 512, 1000)
    cpu_case = model_size("arcface_iresnet50", ("-o", "Model.class_num=100"))
    assert training_flops_per_sample("arcface_iresnet50", cpu_case) == 6 * iresnet50_forward_macs(32, 512, 100)


def test_model_size_follows_the_cases_shrinking_flags():
    assert model_size("resnet50_v1.5") == ModelSize(224, 64, 1000)
    assert model_size("resnet50_v1.5", ("--image-size", "64", "--width", "16", "--device", "cpu")) == ModelSize(
        64, 16, 1000
    )
    assert model_size("resnet50_v1.5", ("--image-shape", "3,64,64", "--num-classes", "10")) == ModelSize(64, 64, 10)
    assert model_size("resnet50_v1.5", ("--image_size=32", "--num_classes=10")) == ModelSize(32, 64, 10)
    assert model_size("arcface_iresnet50", ("-o", "Model.class_num=100")) == ModelSize(32, 512, 100)
    assert model_size("arcface_iresnet50", ("-o", "Model.input_image_width=64", "-o", "Model.num_features=128")) == (
        ModelSize(64, 128, 1000)
    )
    assert model_size("arcface_resnet50", ("--num_classes", "1000")) == ModelSize(112, 512, 1000)
    assert model_size("bert") is None


@pytest.mark.parametrize(
    "name,expected",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla V100-PCIE-32GB", "V100 PCIe"),
    ],
)
def test_peak_table_reads_nvidia_smi_names(name, expected):
    assert gpu_peak(name).name == expected


def test_peak_table_per_precision_and_unknowns():
    h100 = gpu_peak("NVIDIA H100 80GB HBM3")
    assert (h100.for_precision("fp32"), h100.for_precision("tf32"), h100.for_precision("amp")) == (67.0, 494.7, 989.4)
    assert gpu_peak("Tesla V100-SXM2-16GB").for_precision("tf32") is None  # V100 has no TF32
    assert gpu_peak("NVIDIA GeForce GTX 1080") is None and gpu_peak(None) is None and gpu_peak("") is None


def test_mfu_of_the_h100_reference_figures():
    """reallogs/h100_reference: bf16 AMP eager 3,892.5 img/s, compiled 5,120.5, TF32 2,380.0 on one H100 SXM."""
    flops = training_flops_per_sample("resnet50_v1.5")
    h100 = "NVIDIA H100 80GB HBM3"
    assert mfu(3892.5, flops, h100, "amp", 1) == pytest.approx(3892.5 * flops / 989.4e12)
    assert mfu(3892.5, flops, h100, "amp", 1) == pytest.approx(0.0965, abs=5e-4)
    assert mfu(5120.5, flops, h100, "amp", 1) == pytest.approx(0.1270, abs=5e-4)
    assert mfu(2380.0, flops, h100, "tf32", 1) == pytest.approx(0.1180, abs=5e-4)
    assert mfu(8 * 3892.5, flops, h100, "amp", 8) == pytest.approx(mfu(3892.5, flops, h100, "amp", 1))
    # unknown stays unknown: never a 0
    assert mfu(3892.5, flops, None, "amp", 1) is None  # a CPU node
    assert mfu(3892.5, None, h100, "amp", 1) is None
    assert mfu(None, flops, h100, "amp", 1) is None
    assert energy_per_sample(700.0, 3892.5) == pytest.approx(700.0 / 3892.5)
    assert energy_per_sample(None, 3892.5) is None and energy_per_sample(700.0, None) is None


# ---- the sampler, on nvidia-smi's own output
SMI = "0, 40123, 512.34\n1, 39001, 498.10\n"


def test_samples_read_memory_and_power_of_the_case_gpus():
    assert parse_sample(SMI)[1].power_w == pytest.approx(498.10)
    assert parse_sample("0, 1234, [N/A]\nNVIDIA-SMI has failed\n") == {0: parse_sample("0, 1234")[0]}
    samples = GpuSamples(gpus={0})
    assert samples.feed(SMI, at=100.0) and samples.feed("0, 50000, 600.0\n1, 1, 1.0\n", at=101.0)
    assert not samples.feed("garbage", at=102.0)
    assert samples.peak_mb == 50000 and samples.power == [(100.0, 512.34), (101.0, 600.0)]
    both = GpuSamples()
    both.feed(SMI, at=5.0)
    assert both.power == [(5.0, pytest.approx(512.34 + 498.10))]


def test_power_means_over_the_window_summed_over_nodes():
    node0 = [(0.0, 100.0), (1.0, 300.0), (2.0, 500.0), (3.0, 700.0)]
    node1 = [(0.5, 50.0), (2.5, 150.0)]
    assert mean_power_w(node0, 1.0, 2.0) == 400.0
    assert mean_power_w(node0) == 400.0 and mean_power_w([]) is None
    assert mean_power_w(node0, 1.2, 1.8) == 400.0  # no sample inside: the whole series
    assert case_power_w({"n0": node0, "n1": node1}, 2.0, 3.0) == pytest.approx(600.0 + 150.0)
    assert case_power_w({}) is None


def test_sampler_thread_feeds_until_told_or_until_the_query_ends():
    outputs = iter([SMI, SMI, None])
    samples = GpuSamples()
    sampler = GpuSampler(lambda: next(outputs), samples, period_s=0.01)
    deadline = time.time() + 5
    while samples.samples < 2 and time.time() < deadline:
        time.sleep(0.01)
    sampler.stop()
    assert samples.samples == 2 and samples.peak_mb == 40123


def test_local_runtime_samples_nvidia_nodes_with_the_same_sampler(tmp_path, monkeypatch):
    """No GPU here: a stand-in nvidia-smi on PATH prints what a real one prints (the thin layer that mocks
    what cannot exist on these machines); the runtime's own sampler and outcome are real."""
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    asked = tmp_path / "asked"
    fake.write_text(f"#!/bin/sh\necho \"$*\" >> {asked}\necho '0, 40123, 512.5'\necho '1, 99999, 999.0'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    node = Node(name="gpu0", gpus=1, accelerator="nvidia")
    job = CaseJob(
        "dlperf-test",
        (NodeLaunch(node=node, node_rank=0, argv=("sleep", "2.5")),),
        (),
        tmp_path,
        60,
        None,
        devices_per_node=1,
    )
    outcome = LocalRuntime().execute(job)
    assert outcome.failure is None
    assert outcome.gpu_memory_peak_mb == 40123  # GPU 1 is not the case's
    assert {line.split()[-1] for line in asked.read_text().splitlines()} == {"--id=0"}  # nvidia-smi asked for GPU 0
    assert outcome.gpu_power and {w for _, w in outcome.gpu_power["gpu0"]} == {512.5}
    assert CaseOutcome.from_json(outcome.to_json()).gpu_power == outcome.gpu_power  # through XCom and back
    cpu = CaseJob(
        "dlperf-test", (NodeLaunch(node=Node(name="c"), node_rank=0, argv=("true",)),), (), tmp_path, 60, None
    )
    assert LocalRuntime().execute(cpu).gpu_power is None  # CPU nodes: nothing sampled, no figure


def test_judge_stores_mfu_and_energy_over_the_measured_window(tmp_path):
    """A DLLogger log timed every second, power samples inside and outside the window: the energy is the
    window's mean power over the window's throughput; the MFU the model's FLOPs at the GPU's peak."""
    log = tmp_path / "node0.log"
    t0 = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC).timestamp()
    lines = ["DLL 2026-11-24 12:00:00.000000 - PARAMETER batch_size : 256  world_size : 1  print_freq : 1 "]
    for i in range(1, 31):
        stamp = datetime.fromtimestamp(t0 + i, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        lines.append(f"DLL {stamp} - Epoch: 0 Iteration: {i}  train.loss : 6.5  train.total_ips : 256.00 img/s")
    log.write_text("\n".join(lines) + "\n")
    case = Case("pytorch_reference", "resnet50_v1.5", "amp", 256, 1, 1, 10, 20)
    power = [(t0 + 2, 100.0), (t0 + 12, 690.0), (t0 + 20, 710.0), (t0 + 35, 100.0)]  # only 12 and 20 inside
    outcome = CaseOutcome(
        datetime.now(UTC), datetime.now(UTC), [NodeOutcome("gpu0", 0, 0, str(log))], None, 40123.0, {"gpu0": power}
    )
    verdict = measure_case_run(case, outcome, gpu_model="NVIDIA H100 80GB HBM3")
    assert verdict.status == "ok" and verdict.throughput == pytest.approx(256.0)
    assert verdict.gpu_power_mean_w == pytest.approx(700.0)
    assert verdict.energy_per_sample_j == pytest.approx(700.0 / 256.0)
    assert verdict.mfu == pytest.approx(256.0 * training_flops_per_sample("resnet50_v1.5") / 989.4e12)
    cpu = measure_case_run(case, CaseOutcome(outcome.started_at, outcome.finished_at, outcome.nodes, None))
    assert (cpu.mfu, cpu.energy_per_sample_j, cpu.gpu_power_mean_w) == (None, None, None)
