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
* Window when the caller gives none: dlperf's own workload prints ``warmup_iterations`` and ``iterations`` on
  its PARAMETER line, and that window is used (``configured_window``); otherwise DLPerf's warm-up of 5
  iterations, measured to the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from dlperf_core.parsing.failures import conclude, stopped_short, truncation
from dlperf_core.parsing.records import IterationRecord, LogFormat, ParsedRun, ParseOptions
from dlperf_core.parsing.values import positive_int as _count

NAME = "ngc_pytorch_dllogger"
DEFAULT_WARMUP = 5  # DLPerf's warm-up for this format

_LINE = re.compile(
    r"DLL (\d{4}-\d\d-\d\d \d\d:\d\d):(\d\d(?:\.\d{1,9})?) - "
    r"(?:(?:Epoch: (\d{1,9}) )?Iteration: (\d{1,9})(?![\d.])"
    r"(?:  train\.loss : (\S+)  train\.total_ips : (\S+) (?=\S))?"  # fast path: the usual layout, unit after
    r"|(Summary):|(PARAMETER))([^\n]*)"
)
_DETECT = re.compile(
    r"DLL \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})? - (?:PARAMETER|Summary:|(?:Epoch: \d{1,9} )?Iteration: \d)"
)
_PARAM = re.compile(r"(\S+) : (\S*)")
_RANK = re.compile(r"\[\d{1,9},(\d{1,9})\]<std(?:out|err)>:\Z")
_LOSS = "train.loss : "
_IPS = "train.total_ips : "


def detect(text: str) -> bool:
    """Whether ``text`` holds at least one DLLogger PARAMETER, Iteration or Summary line."""
    return "DLL " in text and _DETECT.search(text) is not None


def _minute_start(stamp: str) -> float | None:
    """Unix seconds of 'YYYY-MM-DD HH:MM' read as UTC; None if it is no real date and time."""
    try:
        return datetime.strptime(stamp, "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc).timestamp()
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

    records: list[IterationRecord] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    reported: float | None = None  # first Summary train.total_ips
    finished: bool = False  # a Summary line was seen
    epochs_seen: int = 0
    last_in_epoch: int = 0  # highest per-epoch iteration printed in the last epoch
    ranks: set[int] = field(default_factory=set)


def _scan(text: str, only_rank: int | None = None) -> _Scan:
    """One pass over every DLL line (only ``only_rank``'s Iteration and Summary lines when given)."""
    out = _Scan()
    records, minutes = out.records, {}  # minutes: 'YYYY-MM-DD HH:MM' -> unix seconds
    size, prefixed = len(text), "<std" in text
    offset, top, first, epoch_text = 0, 0, 0, "-"  # global numbering state; "-" matches no epoch
    for m in _LINE.finditer(text):
        stamp, sec, epoch, it, loss_s, ips_s, summary, param, rest = m.groups()
        rank = None
        if prefixed and param is None:
            start = m.start()
            rm = _RANK.search(text, max(0, start - 40), start)
            if rm:
                rank = int(rm.group(1))
                out.ranks.add(rank)
                if only_rank is not None and rank != only_rank:
                    continue
        if it is not None:
            if loss_s is not None:  # fast path; a bad number is None, as on the slow path
                try:
                    loss: float | None = float(loss_s)
                except ValueError:
                    loss = None
                try:
                    rate: float | None = float(ips_s)
                except ValueError:
                    rate = None
            elif "train." in rest:
                complete = m.end() < size  # a newline follows: the last value is not cut
                loss, rate = _number(rest, _LOSS, complete), _number(rest, _IPS, complete)
            else:  # validation or other non-training step
                continue
            i = int(it)
            if epoch != epoch_text:  # a new epoch; if the counter restarted, the previous one is over
                if records and i <= top:
                    offset += top + (1 if first == 0 else 0)
                epoch_text, first, top = epoch, i, i
                out.epochs_seen += 1
            elif i > top:
                top = i
            if stamp in minutes:
                minute = minutes[stamp]
            else:
                minute = minutes[stamp] = _minute_start(stamp)
            records.append(IterationRecord(
                offset + i,
                minute + float(sec) if minute is not None else None,
                rate,
                loss,
                rank,
                int(epoch) if epoch is not None else None,
            ))
        elif summary is not None:
            out.finished = True
            value = _number(rest, _IPS, m.end() < size)
            if value is not None and out.reported is None:
                out.reported = value
        elif param is not None:
            out.params.update(_PARAM.findall(rest))
    out.last_in_epoch = top
    return out


def configured_window(text: str) -> tuple[int | None, int | None] | None:
    """The window dlperf's own workload ran with, from its first PARAMETER line (``warmup_iterations``,
    ``iterations``); None for logs that do not say (DeepLearningExamples' logs have ``prof`` instead)."""
    i = text.find(" - PARAMETER ")
    if i < 0 or "warmup_iterations : " not in text:
        return None
    end = text.find("\n", i)
    params = dict(_PARAM.findall(text[i : end if end >= 0 else len(text)]))
    warmup, measured = params.get("warmup_iterations", ""), params.get("iterations", "")
    if not warmup.isdigit():
        return None
    return int(warmup), (int(measured) if measured.isdigit() and int(measured) > 0 else None)


def parse(text: str, file: str, options: ParseOptions) -> list[ParsedRun]:
    """The one run of a DLLogger log (see the module docstring)."""
    scan = _scan(text)
    if len(scan.ranks) > 1:  # several ranks logged: keep the lowest one's lines
        scan = _scan(text, only_rank=min(scan.ranks))
    records, params = scan.records, scan.params

    batch = _count(params.get("batch_size"))
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
        progress.append(("iterations", max(r.iteration for r in records), planned))

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


FORMAT = LogFormat(NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=None,
                   configured=configured_window)
"""Registry entry of this format."""
