"""Entry points: text or file in, ``ParsedRun`` list out. ``parse_log`` never raises on any text."""

from __future__ import annotations

from os import PathLike
from pathlib import Path

from dlperf_core.parsing.failures import failed, last_line_cut
from dlperf_core.parsing.formats import detect_format, get_format
from dlperf_core.parsing.records import LogFormat, ParsedRun, ParseOptions

UNKNOWN_FORMAT = "unknown"
UNRECOGNISED = "unrecognised log format"


def parse_log(
    text: str,
    *,
    file: str = "<text>",
    format: str | None = None,
    warmup: int | None = None,
    measured: int | None = None,
    fit: bool = False,
) -> list[ParsedRun]:
    """The runs in one log's ``text`` (bytes are decoded as UTF-8, bad bytes replaced).

    ``format`` None auto-detects (no match: one failed run, format "unknown", reason "unrecognised log
    format"); an unregistered ``format`` name is a caller error (ValueError), as is a negative ``warmup``
    or a ``measured`` below 1. Window: when neither ``warmup`` nor ``measured`` is given, the one the log
    says it ran with (dlperf's workload prints ``warmup_iterations`` and ``iterations``), else the format's
    own (DLLogger: warm-up 5, measured to the end); when either is given, the other defaults to the format's
    warm-up and to "up to the last record" respectively. Whatever the text, this returns runs and never
    raises: a parser bug becomes a failed run whose reason starts with "parser error".

    ``fit``: the window policy for logs dlperf did not launch (see ``ParseOptions.fit``): a run stopped
    early is measured over the iterations it has, a cut last line is left out, and each run says whether
    its window was shortened (``window_fitted``). Without it a short or stopped log is a failed run.
    """
    fmt: LogFormat | None = get_format(format) if format is not None else None
    if warmup is not None and warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if measured is not None and measured < 1:
        raise ValueError(f"measured must be >= 1 or None, got {measured}")
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if fit and last_line_cut(text):  # the complete lines only: a line cut off is no complete iteration
        text = text[: text.rfind("\n") + 1]
    try:
        if fmt is None:
            detected = detect_format(text)
            if detected is None:
                return [failed(file, UNKNOWN_FORMAT, UNRECOGNISED)]
            fmt = get_format(detected)
        if warmup is None and measured is None and fmt.configured is not None:
            warmup, measured = fmt.configured(text) or (None, None)  # the log's own window, where it says one
        options = ParseOptions(
            warmup=warmup if warmup is not None else fmt.default_warmup,
            measured=measured if warmup is not None or measured is not None else fmt.default_measured,
            fit=fit,
        )
        return fmt.parse(text, file, options)
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises on any text"
        name = fmt.name if fmt is not None else UNKNOWN_FORMAT
        return [failed(file, name, f"parser error: {type(exc).__name__}: {exc}")]


def parse_file(
    path: str | PathLike[str],
    *,
    format: str | None = None,
    warmup: int | None = None,
    measured: int | None = None,
    fit: bool = False,
) -> list[ParsedRun]:
    """``parse_log`` of a file's bytes decoded as UTF-8 (bad bytes replaced); ``file`` is ``str(path)``.
    Reading errors (missing file, permissions) raise OSError."""
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    return parse_log(text, file=str(path), format=format, warmup=warmup, measured=measured, fit=fit)


__all__ = ["detect_format", "parse_file", "parse_log"]
