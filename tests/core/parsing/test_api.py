"""Tests of the parsing API (dlperf_core.parsing.api: parse_log, parse_file) and what it returns: an unknown
format, ``ParsedRun.to_dict``, the registry seen through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlperf_core.parsing import FORMATS, LogFormat, detect_format, dllogger, get_format, parse_file, parse_log
from parsing_checks import check_all
from parsing_logs import synthetic

FMT = dllogger.NAME


def test_unknown_format() -> None:
    (run,) = check_all("epoch: 1 step: 10, loss is 6.906126\n")
    assert (run.format, run.status, run.reason) == ("unknown", "failed", "unrecognised log format")
    assert detect_format("hello") is None
    with pytest.raises(ValueError, match="unknown log format"):
        parse_log("x", format="no_such_format")


# ------------------------------------------------------------------------------------ API
def test_to_dict_and_registry(tmp_path: Path) -> None:
    (run,) = parse_log(synthetic(20), file="a.log")
    d = run.to_dict()
    assert "records" not in d and d["window"] == [6, 20] and d["file"] == "a.log"
    assert json.loads(json.dumps(d)) == d
    assert set(d) == {
        "file",
        "format",
        "status",
        "reason",
        "throughput",
        "reported_throughput",
        "iterations",
        "gpus",
        "batch_size_per_device",
        "window",
        "method",
        "window_fitted",
    }
    assert FMT in [f.name for f in FORMATS] and isinstance(get_format(FMT), LogFormat)
    assert get_format(FMT).default_warmup == 5 and get_format(FMT).default_measured is None
    path = tmp_path / "log.txt"
    path.write_bytes(synthetic(20).encode() + b"\xff\xfe garbage \x00\n")
    (run,) = parse_file(path)
    assert run.status == "ok" and run.file == str(path)
