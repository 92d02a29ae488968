"""The NGC PyTorch DLLogger format (NVIDIA DeepLearningExamples image classification; dlperf's own
workload prints the same lines). Verbatim lines, optionally behind an mpirun prefix such as
``Fri Apr  9 16:50:03 2021[1,0]<stdout>:`` or ``[1,0]<stdout>:``::

    DLL 2020-12-16 11:33:58.199136 - PARAMETER data : /imagenet  batch_size : 128  print_freq : 1  prof : 100  world_size : 1
    DLL 2020-12-16 11:34:01.884827 - Epoch: 0 Iteration: 1  train.loss : 6.98774  train.total_ips : 34.97 img/s
    DLL 2020-12-16 11:34:17.306199 - Summary: train.loss : 7.38279  train.total_ips : 828.65 img/s

* ``train.total_ips`` is GLOBAL (all ranks); newer versions print ``images/s``. Only rank 0 logs; if
  several ranks do (mpirun prefixes), the lowest rank's lines are kept.
* The iteration counter restarts every epoch; records carry a running global iteration number
  (epoch length taken as the last iteration printed in that epoch).
* The first ``Summary`` value of ``train.total_ips`` is the framework's figure (``reported_throughput``);
  a Summary line marks the run finished. One run per file.
* gpus = ``world_size`` (1 when the PARAMETER line lacks it), batch_size_per_device = ``batch_size``.
* dlperf's transformer workload (``train_llm.py``) prints the same lines with ``train.total_tps : N tokens/s``
  (global tokens per second) and ``seq_len`` on its PARAMETER line: a sample is then a token, and
  batch_size_per_device = ``batch_size`` x ``seq_len`` (tokens per device per step), so the throughput is
  tokens/s by the same rule.
* Window when the caller gives none: dlperf's own workload prints ``warmup_iterations`` and ``iterations`` on
  its PARAMETER line, and that window is used (``configured_window``); otherwise DLPerf's warm-up of 5
  iterations, measured to the end.

Mechanics: one ``findall`` over the complete lines gives every DLL line's groups (an mpirun tag right before
``DLL`` is one of them), one loop over those rows numbers the records and appends each as a tuple, and the
tuples are turned into ``RecordColumns`` at the end (no ``IterationRecord`` is built while parsing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from dlperf_core.parsing.failures import conclude, stopped_short, truncation
from dlperf_core.parsing.records import LogFormat, ParsedRun, ParseOptions, RecordColumns
from dlperf_core.parsing.values import find_literal, search_literal
from dlperf_core.parsing.values import positive_int as _count

NAME = "ngc_pytorch_dllogger"
DEFAULT_WARMUP = 5  # DLPerf's warm-up for this format

# One DLL line. Optional parts are written "(?:...|)" (the same choices in the same order as "(?:...)?",
# which the regex engine runs through its slower general repeat).
_BODY = (
    r"DLL (\d{4}-\d\d-\d\d \d\d:\d\d):(\d\d(?:\.\d{1,9}|)) - "
    r"(?:(?:Epoch: (\d{1,9}) |)Iteration: (\d{1,9})(?![\d.])"
    r"(?:  train\.loss : (\S+)  train\.total_ips : (\S+) (?=\S)|)"  # fast path: the usual layout, unit after
    r"|(Summary):|(PARAMETER))([^\n]*)"
)
# Group 1 is the line's mpirun rank: always empty in a log without tags (_LINE keeps the literal prefix
# "DLL " that the regex engine scans for); with tags (_TAGGED_LINE) the rank of a tag right before "DLL".
# In an ASCII text \d can only match 0-9, and a range test is cheaper than the Unicode digit test.
_LINE = re.compile(r"()" + _BODY)
_ASCII_LINE = re.compile(r"()" + _BODY.replace(r"[\d.]", "[0-9.]").replace(r"\d", "[0-9]"))
_TAGGED_LINE = re.compile(r"(?:\[\d{1,9},(\d{1,9})\]<std(?:out|err)>:)?" + _BODY)
_DETECT = re.compile(
    r"DLL \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})? - (?:PARAMETER|Summary:|(?:Epoch: \d{1,9} )?Iteration: \d)"
)
_PARAM = re.compile(r"(\S+) : (\S*)")
_LOSS = "train.loss : "
_IPS = "train.total_ips : "
_TPS = "train.total_tps : "  # tokens/s: dlperf's transformer workload


def detect(text: str) -> bool:
    """Whether ``text`` holds at least one DLLogger PARAMETER, Iteration or Summary line (tried only where
    ``DLL `` starts: memchr jumps between the upper-case D's)."""
    return search_literal(text, _DETECT, "DLL ", "D") is not None


def _minute_start(stamp: str) -> float | None:
    """Unix seconds of 'YYYY-MM-DD HH:MM' read as UTC; None if it is no real date and time. With ASCII digits
    in these fixed places ``datetime`` accepts exactly the dates ``strptime`` does, 3 x faster; ``strptime``
    is kept for other digits (it refuses them in months, days, hours and minutes, ``int`` does not)."""
    try:
        if stamp.isascii():
            return datetime(
                int(stamp[:4]), int(stamp[5:7]), int(stamp[8:10]), int(stamp[11:13]), int(stamp[14:16]), tzinfo=UTC
            ).timestamp()
        return datetime.strptime(stamp, "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _number(rest: str, key: str, line_complete: bool) -> float | None:
    """The number after ``key`` in ``rest``; a value ending the text (no newline after) may be cut: None."""
    k = rest.find(key)
    if k < 0:
        return None
    k += len(key)
    e = rest.find(" ", k)
    if e < 0 and not line_complete:
        return None
    try:
        return float(rest[k:] if e < 0 else rest[k:e])
    except ValueError:
        return None


@dataclass
class _Scan:
    """What one pass over the text found."""

    records: RecordColumns
    params: dict[str, str]
    reported: float | None  # first Summary train.total_ips
    finished: bool  # a Summary line was seen
    epochs_seen: int
    last_in_epoch: int  # highest per-epoch iteration printed in the last epoch
    ranks: set[int]


_Row = tuple[str, str, str, str, str, str, str, str, str, str]
"""The groups of one DLL line match, "" for a group that took no part: rank, minute, seconds, epoch,
iteration, loss, ips (the last two on the fast path), "Summary", "PARAMETER", the rest of the line."""


def _rows(text: str) -> tuple[list[_Row], _Row | None]:
    """Every DLL line's groups in text order (one ``findall`` over the complete lines), and the row of a
    last line that has no newline after it (its last value may be cut), if it holds one."""
    rx = _TAGGED_LINE if find_literal(text, "<std", "<") >= 0 else _ASCII_LINE if text.isascii() else _LINE
    complete = text.rfind("\n") + 1  # a match never spans lines: the complete ones end here
    rows: list[_Row] = rx.findall(text, 0, complete)
    cut: _Row | None = None
    if complete < len(text):
        m = rx.search(text, complete)
        if m is not None:
            cut = cast(_Row, m.groups(""))  # the line regexes have the row's ten groups
            rows.append(cut)
    return rows, cut


def _scan(rows: list[_Row], cut: _Row | None, only_rank: int | None = None) -> _Scan:
    """The records and facts of every row (only ``only_rank``'s Iteration and Summary lines when given).
    Each record is one tuple appended in the loop; the tuples become ``RecordColumns`` at the end."""
    records: list[tuple[int, float | None, float | None, float | None, int | None, int | None]] = []
    add = records.append
    params: dict[str, str] = {}
    ranks: set[int] = set()
    reported, finished, epochs_seen = None, False, 0
    minutes: dict[str, float | None] = {}  # 'YYYY-MM-DD HH:MM' -> unix seconds
    stamp_now, minute = "", None  # the last line's minute (consecutive lines mostly share it)
    offset, top, first, epoch_now, epoch = 0, 0, 0, "-", None  # global numbering state; "-" is no epoch
    for row in rows:
        tag, stamp, sec, epoch_text, it, loss_s, ips_s, summary, param, rest = row
        if param:
            params.update(_PARAM.findall(rest))
            continue
        rank = None
        if tag:
            rank = int(tag)
            ranks.add(rank)
            if only_rank is not None and rank != only_rank:
                continue
        if it:
            if loss_s:  # fast path; a bad number is None, as on the slow path
                try:
                    loss: float | None = float(loss_s)
                except ValueError:
                    loss = None
                try:
                    rate: float | None = float(ips_s)
                except ValueError:
                    rate = None
            elif "train." in rest:
                complete = row is not cut  # a newline follows: the last value is not cut
                loss, rate = _number(rest, _LOSS, complete), _number(rest, _IPS, complete)
                if rate is None and _TPS in rest:
                    rate = _number(rest, _TPS, complete)
            else:  # validation or other non-training step
                continue
            i = int(it)
            if epoch_text != epoch_now:  # a new epoch; if the counter restarted, the previous one is over
                if records and i <= top:
                    offset += top + (1 if first == 0 else 0)
                epoch_now, first, top = epoch_text, i, i
                epoch = int(epoch_text) if epoch_text else None
                epochs_seen += 1
            elif i > top:
                top = i
            if stamp != stamp_now:
                stamp_now = stamp
                minute = minutes[stamp] if stamp in minutes else minutes.setdefault(stamp, _minute_start(stamp))
            add((offset + i, minute + float(sec) if minute is not None else None, rate, loss, rank, epoch))
        elif summary:
            finished = True
            value = _number(rest, _IPS, row is not cut)
            if value is None and _TPS in rest:
                value = _number(rest, _TPS, row is not cut)
            if value is not None and reported is None:
                reported = value
    iteration, times, rates, losses, rank_column, epochs = (
        map(list, zip(*records)) if records else ([] for _ in range(6))
    )
    columns = RecordColumns(iteration, times, rates, losses, rank_column if ranks else None, epochs)
    return _Scan(columns, params, reported, finished, epochs_seen, top, ranks)


def configured_window(text: str) -> tuple[int | None, int | None] | None:
    """The window dlperf's own workload ran with, from its first PARAMETER line (``warmup_iterations``,
    ``iterations``); None for logs that do not say (DeepLearningExamples' logs have ``prof`` instead)."""
    i = text.find(" - PARAMETER ")
    if i < 0:
        return None
    end = text.find("\n", i)
    line = text[i : end if end >= 0 else len(text)]
    if "warmup_iterations : " not in line:  # (a "warmup_iterations" key is always written so)
        return None
    params = dict(_PARAM.findall(line))
    warmup, measured = params.get("warmup_iterations", ""), params.get("iterations", "")
    if not warmup.isdigit():
        return None
    return int(warmup), (int(measured) if measured.isdigit() and int(measured) > 0 else None)


def parse(text: str, file: str, options: ParseOptions) -> list[ParsedRun]:
    """The one run of a DLLogger log (see the module docstring)."""
    rows, cut = _rows(text)
    scan = _scan(rows, cut)
    if len(scan.ranks) > 1:  # several ranks logged: keep the lowest one's lines
        scan = _scan(rows, cut, only_rank=min(scan.ranks))
    records, params = scan.records, scan.params

    batch = _count(params.get("batch_size"))
    seq_len = _count(params.get("seq_len"))
    if batch and seq_len:  # a transformer's log: samples are tokens
        batch *= seq_len
    gpus = (_count(params.get("world_size")) or (1 if "world_size" not in params else None)) if params else None
    progress: list[tuple[str, int, int]] = []
    print_freq = _count(params.get("print_freq")) or 1
    epochs = _count(params.get("run_epochs")) or _count(params.get("epochs"))
    if epochs:
        progress.append(("epochs", scan.epochs_seen, epochs))
    prof = _count(params.get("prof"))
    if prof and records:  # DeepLearningExamples --prof N: N-1 iterations per epoch
        progress.append(("iterations", scan.last_in_epoch, prof - print_freq))
    planned = _count(params.get("iterations"))
    if planned and records:  # dlperf's workload: warmup_iterations + iterations
        planned += _count(params.get("warmup_iterations")) or 0
        progress.append(("iterations", max(records.iteration), planned))

    return [
        conclude(
            text=text,
            file=file,
            format=NAME,
            records=records,
            options=options,
            reported=scan.reported,
            gpus=gpus,
            batch_size_per_device=batch,
            truncated=truncation(text, finished=scan.finished, progress=progress, fit=options.fit),
            stopped_early=stopped_short(finished=scan.finished, progress=progress),
        )
    ]


FORMAT = LogFormat(
    NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=None, configured=configured_window
)
"""Registry entry of this format."""
