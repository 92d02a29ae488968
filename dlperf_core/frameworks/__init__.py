"""Framework adapters, by name. Adding a framework = one module + one line here."""

from __future__ import annotations

from dlperf_core.frameworks.base import FrameworkAdapter, LaunchContext, NodeLaunch
from dlperf_core.frameworks.pytorch_reference import PytorchReference

ADAPTERS: dict[str, type[FrameworkAdapter]] = {
    PytorchReference.name: PytorchReference,
}


def get_adapter(name: str) -> FrameworkAdapter:
    """An adapter instance for a framework name (names are validated when the suite loads)."""
    try:
        return ADAPTERS[name]()
    except KeyError:
        raise KeyError(f"unknown framework {name!r}; known: {', '.join(sorted(ADAPTERS))}") from None


__all__ = ["ADAPTERS", "FrameworkAdapter", "LaunchContext", "NodeLaunch", "get_adapter"]
