"""How a case's model differs from the full-size model, read from the flags its launch passes (for reports).

Each adapter reads the flags its own training program takes (:meth:`FrameworkAdapter.model_shape
<dlperf_core.frameworks.base.FrameworkAdapter.model_shape>`): ``--image-size 64 --width 16`` for dlperf's
reference workload, ``--image-shape 3,64,64`` for the MXNet driver, ``-o Model.class_num=100`` for PLSC's
config ... Pure: no framework is imported and nothing is run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

OVERRIDE_FLAGS = ("-o", "--override")  # PLSC's (and PaddleClas's) config overrides: -o Key.sub=value


@dataclass(frozen=True)
class ModelShape:
    """What differs from the full-size model; each field None where the case trains the full model's value.

    ``image_size`` is the input's side (its width when ``image_height`` is set: a non-square input);
    ``width_name`` says what ``width`` counts for the framework: ``width`` (every layer's channels scale with
    it, dlperf's ResNet-50), ``bottleneck width`` (only the bottlenecks' inner convolutions: MindCV's
    ``base_width``, flowvision's ``width_per_group``), ``embedding`` (ArcFace's feature size)."""

    width: int | None = None
    image_size: int | None = None
    num_classes: int | None = None
    image_height: int | None = None
    width_name: str = "width"

    def describe(self) -> str:
        """For people, e.g. ``width 16, 64x64 images, 10 classes`` (only what differs)."""
        parts = []
        if self.width is not None:
            parts.append(f"{self.width_name} {self.width}")
        if self.image_size is not None:
            parts.append(f"{self.image_size}x{self.image_height or self.image_size} images")
        if self.num_classes is not None:
            parts.append(f"{self.num_classes} classes")
        return ", ".join(parts)


@dataclass(frozen=True)
class FullSize:
    """A model's full size, against which a case's shape is told: width, input side, classes."""

    width: int | None
    image_size: int
    num_classes: int


def flag_values(args: Iterable[str], flags: Iterable[str]) -> dict[str, str]:
    """The value argparse gives each of ``flags`` in ``args`` (``--flag value`` or ``--flag=value``; the last
    occurrence wins, as argparse's ``store`` does). Flags that are absent are left out."""
    wanted, values = set(flags), {}
    items = list(args)
    i = 0
    while i < len(items):
        name, eq, inline = items[i].partition("=")
        if name in wanted:
            if eq:
                values[name] = inline
            elif i + 1 < len(items):
                values[name] = items[i + 1]
                i += 1
        i += 1
    return values


def overrides(args: Iterable[str]) -> dict[str, str]:
    """PLSC's ``-o Key.sub=value`` config overrides in ``args`` (also ``--override``, ``--override=..`` and
    ``-oKey=value``), key -> value, the last one of a key winning as PLSC's config applies them in order."""
    values: dict[str, str] = {}
    items = list(args)
    i = 0
    while i < len(items):
        arg, text = items[i], None
        if arg in OVERRIDE_FLAGS:
            text = items[i + 1] if i + 1 < len(items) else None
            i += 1
        elif arg.startswith("--override="):
            text = arg.partition("=")[2]
        elif arg.startswith("-o") and not arg.startswith("--"):
            text = arg[2:]
        if text and "=" in text:
            key, _, value = text.partition("=")
            values[key.strip()] = value.strip()
        i += 1
    return values


def as_int(text: str | None) -> int | None:
    """``text`` as a positive int, else None (the training program refuses such a value itself)."""
    return int(text) if text is not None and text.strip().isdigit() and int(text) > 0 else None


def shape_against(
    full: FullSize,
    *,
    width: int | None = None,
    image_size: int | None = None,
    image_height: int | None = None,
    num_classes: int | None = None,
    width_name: str = "width",
) -> ModelShape | None:
    """The :class:`ModelShape` of a model trained at ``width``, ``image_size`` (x ``image_height``: None for a
    square input) and ``num_classes`` (None each: the full model's value), told against ``full``: a field equal
    to the full model's is None, and the whole shape is None when nothing differs."""
    side = image_size if image_size is not None else full.image_size
    height = image_height if image_height is not None else side
    square = height == side
    same_image = square and side == full.image_size
    shape = ModelShape(
        width=width if width is not None and width != full.width else None,
        image_size=None if same_image else side,
        num_classes=num_classes if num_classes is not None and num_classes != full.num_classes else None,
        image_height=None if same_image or square else height,
        width_name=width_name,
    )
    return None if shape == ModelShape(width_name=width_name) else shape
