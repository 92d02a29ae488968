"""How a run fails, as data (MLPerf-checker style), and the one place that turns parsed facts into a
``ParsedRun`` with status "ok" or "failed".

Failure reasons, checked in this order (the first that applies wins):
  * a text rule matches anywhere in the log: "out of memory" (CUDA or host);
  * no training record at all: "no training lines";
  * a NaN or inf loss: "loss is NaN/inf at iteration N";
  * the log stops early: "truncated log: ..." (decided by the format, see ``truncation``);
  * the window cannot be measured: "too few iterations for the window (got N, need M)" and the like.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from dlperf_core.parsing.records import IterationRecord, ParsedRun, ParseOptions, RecordColumns
from dlperf_core.parsing.values import find_literal
from dlperf_core.parsing.window import WindowResult, measure

OUT_OF_MEMORY = "out of memory"
NO_TRAINING_LINES = "no training lines"


@dataclass(frozen=True)
class TextRule:
    """A failure visible in the raw text: ``pattern`` matching anywhere means ``reason``.

    ``needle`` is a literal every match contains, looked for first in the UTF-8 bytes (a fast scan: memchr
    jumps between occurrences of its character ``rare``, one that is rare in logs, see
    ``values.find_literal``); the regex runs only when the needle is there.
    """

    needle: bytes
    pattern: re.Pattern[str]
    reason: str
    rare: bytes = b""  # a character of needle that is rare in logs (empty: its first)


def _rule(needle: str, rare: str, pattern: str, reason: str) -> TextRule:
    return TextRule(needle.encode(), re.compile(pattern), reason, rare.encode())


TEXT_RULES: tuple[TextRule, ...] = (
    # "CUDA out of memory", "CUDA error: out of memory", NCCL "Cuda failure 'out of memory'", ...
    _rule("out of memory", "y", r"out of memory", OUT_OF_MEMORY),
    _rule("Out of memory", "y", r"\bOut of memory\b", OUT_OF_MEMORY),
    _rule("_STATUS_ALLOC_FAILED", "U", r"CU(?:DNN|BLAS)_STATUS_ALLOC_FAILED", OUT_OF_MEMORY),
    _rule("OOM when allocating", "M", r"OOM when allocating", OUT_OF_MEMORY),  # TensorFlow
    _rule("MemoryError", "M", r"\bMemoryError\b", OUT_OF_MEMORY),  # Python host memory
    _rule("std::bad_alloc", "b", r"std::bad_alloc", OUT_OF_MEMORY),  # C++ host memory
    _rule("Cannot allocate memory", "C", r"Cannot allocate memory", OUT_OF_MEMORY),  # ENOMEM
)
"""Text failures, first match wins. Add a rule here to teach every format a new failure."""

_last_text_failure: tuple[str | None, str | None] = (None, None)
"""The last text ``text_failure`` read and its answer: parsers that check a chunk themselves and then pass
it to ``conclude`` get the second answer for free."""


def text_failure(text: str) -> str | None:
    """The reason of the first text rule that matches ``text``, else None."""
    global _last_text_failure
    last, reason = _last_text_failure
    if text is last:
        return reason
    reason = _first_text_rule(text)
    _last_text_failure = (text, reason)
    return reason


def _first_text_rule(text: str) -> str | None:
    data = text.encode("utf-8", "surrogatepass")  # bytes: memchr jumps whatever the text's characters
    for rule in TEXT_RULES:
        if find_literal(data, rule.needle, rule.rare) >= 0 and rule.pattern.search(text):
            return rule.reason
    return None


# The last words of a process that failed: argparse's usage error, else a Python exception's final line,
# optionally behind mpirun's --tag-output prefix. Checked on the tail of the log only.
_TAG = r"^(?:\[\d+,\d+\]<std(?:out|err)>:)?[ \t]*"
# argparse: "<prog>: error: unrecognized arguments: --x"; a prog may hold spaces ("generic-image-rec train script");
# dlperf's workloads: "train.py: error (rank 0): RuntimeError: ..."
_USAGE_ERROR = re.compile(_TAG + r"([^\s:][^:\n]{0,80}?: error(?: \(rank \d{1,9}\))?: \S.*?)[ \t]*$", re.MULTILINE)
_EXCEPTION = re.compile(_TAG + r"([A-Za-z_][\w.]*(?:Error|Exception)(?::[ \t]*\S.*?)?)[ \t]*$", re.MULTILINE)
# `python -m <module>` whose module (or a package on its path) cannot be imported: the interpreter's own line,
# "/usr/bin/python3: Error while finding module specification for 'torch.distributed.run' (ModuleNotFoundError:
# No module named 'torch')" or "/usr/bin/python3: No module named torch"
_RUN_MODULE = re.compile(
    _TAG + r"\S*python[\w.]*: (?:Error while finding module specification for '([\w.]+)' \((\w+Error: .*)\)"
    r"|(No module named \S.*?))[ \t]*$",
    re.MULTILINE,
)
ERROR_TAIL_CHARS = 65536
ERROR_LINE_MAX = 240


def error_line(text: str) -> str | None:
    """The error a failed process printed, else None: the last argparse usage error if there is one (the
    cause: a launcher's traceback about its failed child comes after it), else the last Python exception, else
    the interpreter's own line about a ``python -m`` module it could not import (``ModuleNotFoundError: No module
    named 'torch' (python -m torch.distributed.run)``).

    Used to name the cause of a non-zero exit: ``node0 exited with code 2; error: train.py: error:
    unrecognized arguments: --no-such-flag``."""
    tail = text[-ERROR_TAIL_CHARS:]
    for pattern in (_USAGE_ERROR, _EXCEPTION):
        found: re.Match[str] | None = None
        for match in pattern.finditer(tail):  # the last one
            found = match
        if found is not None:
            return _clipped(found.group(1).strip())
    found = None
    for match in _RUN_MODULE.finditer(tail):
        found = match
    if found is None:
        return None
    module, error, plain = found.groups()
    return _clipped(f"{error.strip()} (python -m {module})" if module else plain.strip())


def _clipped(line: str) -> str:
    return line if len(line) <= ERROR_LINE_MAX else line[: ERROR_LINE_MAX - 3] + "..."


def loss_failure(records: Sequence[IterationRecord]) -> str | None:
    """ "loss is NaN/inf at iteration N" for the first record whose loss is not finite, else None."""
    if isinstance(records, RecordColumns):
        isfinite = math.isfinite
        # the sum of the losses (those None or 0 left out) is finite unless one is NaN or inf, or it overflows:
        # then look one by one
        if isfinite(sum(filter(None, records.loss))):
            return None
        for i, loss in enumerate(records.loss):
            if loss is not None and not isfinite(loss):
                return f"loss is NaN/inf at iteration {records.iteration[i]}"
        return None
    for r in records:
        if r.loss is not None and not math.isfinite(r.loss):
            return f"loss is NaN/inf at iteration {r.iteration}"
    return None


def last_line_cut(text: str) -> bool:
    """Whether the log ends inside a line (no final newline after non-blank text)."""
    return bool(text) and not text.endswith("\n") and bool(text[text.rfind("\n") + 1 :].strip())


def truncation(
    text: str, *, finished: bool, progress: Sequence[tuple[str, int, int]] = (), fit: bool = False
) -> str | None:
    """ "truncated log: ..." when a run that never printed its end marker (``finished`` False) stopped
    early: its last line is cut, or some (unit, reached, expected) in ``progress`` has reached < expected.
    A finished run is never truncated. ``fit`` (a log from elsewhere, ``ParseOptions.fit``): a run its
    authors stopped before its planned end is not truncated (only a cut last line is, and ``parse_log``
    drops that line first)."""
    if finished:
        return None
    if last_line_cut(text):
        return "truncated log: last line cut"
    if fit:
        return None
    for unit, reached, expected in progress:
        if reached < expected:
            return f"truncated log: {reached} of {expected} {unit}"
    return None


def stopped_short(*, finished: bool, progress: Sequence[tuple[str, int, int]] = ()) -> bool:
    """Whether a run that never printed its end marker stopped before its planned end (some (unit, reached,
    expected) of ``progress`` has reached < expected): with ``ParseOptions.fit`` such a run is measured over
    what it has and its window is marked fitted; without it, it is truncated (see ``truncation``)."""
    return not finished and any(reached < expected for _, reached, expected in progress)


def conclude(
    *,
    text: str,
    file: str,
    format: str,
    records: Sequence[IterationRecord],
    options: ParseOptions,
    reported: float | None,
    gpus: int | None,
    batch_size_per_device: int | None,
    truncated: str | None = None,
    stopped_early: bool = False,
) -> ParsedRun:
    """The ParsedRun of one run: the failure checks above, then the measured window (``window.measure``).

    A failed run has status "failed", a reason, throughput None, no window and 0 iterations.
    ``stopped_early`` (``stopped_short``): with ``options.fit`` an ok run that stopped before its planned end
    is marked ``window_fitted``, as is one whose window had to be shortened.
    """
    global_batch = gpus * batch_size_per_device if gpus and batch_size_per_device else None
    if reported is not None and not (reported > 0 and math.isfinite(reported)):
        reported = None
    result: WindowResult | str = (
        text_failure(text)
        or (None if records else NO_TRAINING_LINES)
        or loss_failure(records)
        or truncated
        or measure(
            records, warmup=options.warmup, measured=options.measured, global_batch=global_batch, fit=options.fit
        )
    )
    w = None if isinstance(result, str) else result
    return ParsedRun(
        file=file,
        format=format,
        status="ok" if w is not None else "failed",
        reason=result if isinstance(result, str) else None,
        throughput=w.throughput if w is not None else None,
        reported_throughput=reported,
        iterations=w.iterations if w is not None else 0,
        gpus=gpus,
        batch_size_per_device=batch_size_per_device,
        window=w.window if w is not None else None,
        method=w.method if w is not None else None,
        records=records if isinstance(records, RecordColumns) else tuple(records),
        window_fitted=w is not None and (w.fitted or (options.fit and stopped_early)),
    )


def failed(file: str, format: str, reason: str) -> ParsedRun:
    """A failed ParsedRun that carries nothing but its reason."""
    return ParsedRun(
        file=file,
        format=format,
        status="failed",
        reason=reason,
        throughput=None,
        reported_throughput=None,
        iterations=0,
        gpus=None,
        batch_size_per_device=None,
        window=None,
        method=None,
    )
