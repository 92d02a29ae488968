"""Invariants every parsed run keeps, whatever the input: shared by the parser tests of every format."""

from __future__ import annotations

import json
import math
import os

import pytest
from hypothesis import HealthCheck, settings

from dlperf_core.parsing import LogFormat, ParsedRun, get_format, parse_log

EXAMPLES = int(os.environ.get("DLPERF_HYPOTHESIS_EXAMPLES", "150"))  # raise it for a deeper search
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""The hypothesis settings of the parser property tests."""


def check_run(run: ParsedRun, fmt: str | None = None) -> None:
    """An ok run has a finite positive throughput and a window; a failed one a reason and neither."""
    assert run.status in ("ok", "failed")
    if fmt is not None:
        assert run.format == fmt
    if run.status == "ok":
        assert run.reason is None
        assert run.throughput is not None and math.isfinite(run.throughput) and run.throughput > 0
        assert run.window is not None and run.window[0] <= run.window[1]
        assert run.method in ("timestamps", "printed_rates", "spans") and run.iterations > 0
    else:
        assert run.throughput is None and run.reason and run.window is None
        assert not run.reason.startswith("parser error"), run.reason
    if run.reported_throughput is not None:
        assert math.isfinite(run.reported_throughput) and run.reported_throughput > 0
    json.dumps(run.to_dict())


def check_all(text: str, **kw: object) -> list[ParsedRun]:
    """``parse_log`` (detection and the exception guard included), every run checked."""
    runs = parse_log(text, **kw)  # type: ignore[arg-type]
    assert runs
    for run in runs:
        check_run(run)
    return runs


def parse_with(
    fmt: LogFormat, text: str, warmup: int | None = None, measured: int | None = None, file: str = "<text>"
) -> list[ParsedRun]:
    """``text`` parsed as ``fmt`` (no detection), the window resolved by the core itself (``parse_log``: the
    window the log says it ran with, else the format's defaults), every run checked and of format ``fmt``.

    A parser exception, which ``parse_log`` turns into a failed run "parser error: <type>: <message>", fails
    here (``check_run``) with that message."""
    runs = parse_log(text, file=file, format=fmt.name, warmup=warmup, measured=measured)
    assert runs
    for run in runs:
        check_run(run, fmt.name)
    return runs


def parse_as(
    text: str, fmt: str, file: str = "<text>", warmup: int | None = None, measured: int | None = None
) -> list[ParsedRun]:
    """``parse_with`` for the registered format called ``fmt``, the file name before the window."""
    return parse_with(get_format(fmt), text, warmup, measured, file)


def print_table(capsys: pytest.CaptureFixture[str], header: str, rows: list[str]) -> None:
    """Prints a comparison table (a header line, then one line a row) past pytest's capture, so that it shows
    with or without -s."""
    with capsys.disabled():
        print("\n" + header)
        print("\n".join(rows))
