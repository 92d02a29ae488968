"""ResNet-50 v1.5, written by hand (torch only, no torchvision).

v1.5 differs from the original v1 (He et al. 2015) in where a down-sampling bottleneck puts its stride:
on the 3x3 convolution rather than on the first 1x1 convolution (as in torchvision and the NVIDIA NGC
reference). ``width=64, num_classes=1000`` is the real model: 25,557,032 parameters.
"""

from __future__ import annotations

import torch
from torch import nn

#: Blocks per stage for ResNet-50.
LAYERS: tuple[int, int, int, int] = (3, 4, 6, 3)


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (carries the stride: v1.5) -> 1x1 expand, plus the shortcut."""

    expansion: int = 4

    def __init__(self, in_channels: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        out_channels = planes * self.expansion
        self.conv1 = nn.Conv2d(in_channels, planes, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out_channels, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        result: torch.Tensor = self.relu(out + identity)  # modules' calls are untyped (Any)
        return result


class ResNet50(nn.Module):
    """ResNet-50 v1.5.

    Args:
        width: base width (channels of the stem and of the first stage's bottlenecks); 64 is the real model.
        num_classes: size of the classifier output.
        zero_init_residual: start each block's last BatchNorm gamma at 0, so every block begins as identity.
    """

    def __init__(self, width: int = 64, num_classes: int = 1000, zero_init_residual: bool = False) -> None:
        super().__init__()
        if width < 1 or num_classes < 1:
            raise ValueError(f"width and num_classes must be >= 1 (got {width}, {num_classes})")
        # Stem: 7x7/2 conv, BN, ReLU, 3x3/2 max-pool.
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        # Four stages; all but the first halve the spatial size in their first block.
        self._in_channels = width
        self.layer1 = self._make_stage(width, LAYERS[0], stride=1)
        self.layer2 = self._make_stage(width * 2, LAYERS[1], stride=2)
        self.layer3 = self._make_stage(width * 4, LAYERS[2], stride=2)
        self.layer4 = self._make_stage(width * 8, LAYERS[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width * 8 * Bottleneck.expansion, num_classes)
        self._init_weights(zero_init_residual)

    def _make_stage(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
        out_channels = planes * Bottleneck.expansion
        downsample: nn.Module | None = None
        if stride != 1 or self._in_channels != out_channels:
            # Projection shortcut: strided 1x1 conv + BN.
            downsample = nn.Sequential(
                nn.Conv2d(self._in_channels, out_channels, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )
        layers = [Bottleneck(self._in_channels, planes, stride, downsample)]
        self._in_channels = out_channels
        layers += [Bottleneck(out_channels, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def _init_weights(self, zero_init_residual: bool) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck):
                    nn.init.zeros_(m.bn3.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        logits: torch.Tensor = self.fc(torch.flatten(self.avgpool(x), 1))
        return logits


def resnet50(width: int = 64, num_classes: int = 1000, zero_init_residual: bool = False) -> ResNet50:
    """Build ResNet-50 v1.5 (``width=64, num_classes=1000`` is the standard model)."""
    return ResNet50(width=width, num_classes=num_classes, zero_init_residual=zero_init_residual)


def num_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (BN running statistics are buffers, not counted)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
