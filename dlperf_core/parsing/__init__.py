"""Training-log parsing: pure functions from log text to ``ParsedRun`` (throughput by one rule).

Public API: ``parse_log``, ``parse_file``, ``detect_format``, the records ``IterationRecord`` and
``ParsedRun`` (records as a tuple or as ``RecordColumns``), the rule ``measure`` / ``WindowResult``, and the format registry ``FORMATS``/``LogFormat``.
Stdlib only; no Airflow import.
"""

from dlperf_core.parsing.api import parse_file, parse_log
from dlperf_core.parsing.formats import FORMATS, detect_format, get_format
from dlperf_core.parsing.records import IterationRecord, LogFormat, ParsedRun, ParseOptions, RecordColumns
from dlperf_core.parsing.window import WindowResult, measure

__all__ = [
    "FORMATS",
    "IterationRecord",
    "LogFormat",
    "ParseOptions",
    "ParsedRun",
    "RecordColumns",
    "WindowResult",
    "detect_format",
    "get_format",
    "measure",
    "parse_file",
    "parse_log",
]
