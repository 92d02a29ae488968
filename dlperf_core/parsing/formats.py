"""The format registry, kept as data. Adding a format = one new module exposing a ``LogFormat`` and one
line in ``FORMATS``. Detection tries the formats in this order; the first whose ``detect`` says yes wins."""

from __future__ import annotations

from dlperf_core.parsing import dllogger
from dlperf_core.parsing.records import LogFormat

FORMATS: tuple[LogFormat, ...] = (
    dllogger.FORMAT,  # "ngc_pytorch_dllogger": NGC PyTorch DLLogger and dlperf's own workload
)

BY_NAME: dict[str, LogFormat] = {f.name: f for f in FORMATS}


def get_format(name: str) -> LogFormat:
    """The registered format called ``name``; ValueError names the known ones otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown log format {name!r}; known: {', '.join(sorted(BY_NAME))}") from None


def detect_format(text: str) -> str | None:
    """Name of the first registered format that recognises ``text``, else None."""
    for fmt in FORMATS:
        if fmt.detect(text):
            return fmt.name
    return None
