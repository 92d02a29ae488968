"""MindSpore model_zoo ResNet (LossMonitor + TimeMonitor callbacks), as run by DLPerf's MindSpore scripts
(``train.py`` patched to print its arguments; ``mpirun ... python train.py ... 2>&1 | tee LOG``).
Verbatim lines, possibly behind an mpirun prefix such as ``[1,3]<stdout>:``::

    [WARNING] ME(27314:140405006829376,MainProcess):2021-01-19-14:50:08.575.226 [train.py:57]
    args_opt: Namespace(batch_size=128, data_sink_steps=10, ..., device_num=8, ..., run_distribute=True, train_steps=200)
    node1:27314:27401 [0] NCCL INFO comm 0x7f5f1c0a3f60 rank 0 nranks 16 cudaDev 0 busId 1a000 - Init COMPLETE
    epoch: 1 step: 10, loss is 6.906126
    epoch time: 571750.162 ms, per step time: 114.259 ms

* TimeMonitor prints once per sink "epoch" (``data_sink_steps`` N: one line covers N iterations; LossMonitor
  prints ``step: N`` for it). Older versions print no ``ms``, 2.x prints ``Train epoch time``; any number of
  decimals, any case. One record per epoch: ``iteration`` = cumulative steps, ``samples_per_sec`` =
  batch x devices x steps / epoch time (= batch x devices / per-step time, unrounded), ``time`` None: the
  lines carry no timestamp, and the printed epoch times ARE exact wall times, so the printed-rate rule
  (sum of samples / sum of epoch times) is the exact "samples over wall time" of the window.
* ALL ranks' lines are interleaved in one file. With mpirun prefixes only the lowest rank that printed
  epoch times is kept. A line may run on into another rank's tagged line (``loss is 2.47[1,1]<stdout>:Train
  epoch time: ...``: Python's unbuffered print() writes text and newline apart, MindSpore 2.x on CPU). Without prefixes the lines cannot be told apart: every epoch-time line is given the
  epoch of the latest loss line (a rank cannot print epoch e+1 before every rank finished epoch e, training
  being synchronous), and an epoch's time is the mean over the ranks that printed it (DLPerf's sum over all
  lines / lines, without its double counting). A log without loss lines is read as one rank's.
* Devices (the multiplier; the first that applies):
  1. NCCL ``nranks N`` (every rank's NCCL init line when NCCL_DEBUG=INFO, DLPerf's setting);
  2. ``run_distribute=False`` in the arguments: 1 (a single, non-distributed process);
  3. the ranks seen, if more than one: distinct mpirun prefix ranks, else the number of lines printed for
     one epoch (the most common count) or of ``args_opt`` lines (each process prints one) — so an all-ranks
     log of 8 ranks gives 8, and a rank-0-only log gives 1 and goes on to the next rules;
  4. the caller's file path in DLPerf's layout ``.../{nodes}n{gpus}g/...`` (nodes x gpus): the
     ParseOptions-free way for a caller to state the device count of a rank-0-only log;
  5. ``run_distribute=True`` and ``device_num=D``: D (model_zoo's meaning, all devices; NB DLPerf's script
     passes the per-node count, so a multi-node rank-0-only DLPerf log needs rule 1 or 4);
  else the run fails with "device count unknown" rather than report a wrong global figure.
* batch_size_per_device = ``batch_size`` from ``args_opt``, else ``_b{N}_`` in the file name (DLPerf's
  ``rn50_b128_fp32_1.log``); else the run fails with "batch size unknown".
* ``train_steps`` (>0) with ``data_sink_steps`` give the planned iterations: a log that stops before them
  is truncated. NaN/inf losses (printed, or MindSpore's "Invalid loss, terminating training") fail the run;
  so does MindSpore's "memory isn't enough" (out of memory).
* reported_throughput None: MindSpore prints no throughput figure.
* Default window = DLPerf's (``--warmup_batches=100 --train_batches=200``): skip 100 iterations, measure the
  next 100. DLPerf's rule summed the epoch times of epochs whose last step was past 100 up to step 200.
One run per file.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace

from dlperf_core.parsing.failures import OUT_OF_MEMORY, conclude, stopped_short, truncation
from dlperf_core.parsing.records import LogFormat, ParsedRun, ParseOptions, RecordColumns
from dlperf_core.parsing.values import jump_tries, literal_matches
from dlperf_core.parsing.values import positive_int as _count
from dlperf_core.parsing.values import to_float as _float

NAME = "mindspore_model_zoo"
DEFAULT_WARMUP = 100  # DLPerf --warmup_batches=100
DEFAULT_MEASURED = 100  # DLPerf --train_batches=200: iterations 101..200
DEVICES_UNKNOWN = "device count unknown"
BATCH_UNKNOWN = "batch size unknown"

_NUM = r"(\d{1,15}(?:\.\d{0,30})?(?:[eE][-+]?\d{1,3})?)"
_EVENT = re.compile(  # (?=[ean]): a match starts with one of these (any case), a cheap test of other text
    r"(?=[ean])(?:epoch:[ \t]{0,8}(\d{1,9})[ \t]{1,8}step:[ \t]{0,8}(\d{1,12})"
    # the loss text ends at the line's end or at an mpirun tag: an unbuffered print() writes its text and its
    # newline apart, so ``--tag-output`` may put another rank's line right after the value
    r"(?:,[ \t]{0,8}loss is[ \t]{0,8}((?:(?!\[\d{1,9},\d{1,9}\]<std)[^\r\n]){0,300})|\.[ \t]{0,8}(Invalid loss))"
    r"|epoch time:[ \t]{0,8}"
    + _NUM
    + r"[ \t]{0,8}(?:ms)?[ \t]{0,8},[ \t]{0,8}per step time:[ \t]{0,8}"
    + _NUM
    + r"([ \t]{0,8}ms)?"
    r"|args_opt:[ \t]{0,8}Namespace\(([^\r\n]{0,20000})"
    r"|NCCL INFO comm [^\s]{1,40} rank \d{1,9} nranks (\d{1,9}))",
    re.IGNORECASE,
)
# Detection, case-insensitive. A TimeMonitor line is tried only around the tail after its comma (``, per step
# time:``), which starts at most _TIME_HEAD_REACH characters into it; DLPerf's arguments line only where a
# ``namespace(`` follows ``args_opt:``. Comma and bracket are caseless characters that memchr finds fast.
_TIME_LINE = re.compile(
    r"epoch time:[ \t]{0,8}\d{1,15}(?:\.\d{0,30})?[ \t]{0,8}(?:ms)?[ \t]{0,8},[ \t]{0,8}per step time:", re.IGNORECASE
)
_TIME_TAIL = re.compile(r",[ \t]{0,8}per step time:", re.IGNORECASE)
_TIME_HEAD_REACH = 83  # 11 + 8 + 15 + 31 + 8 + 2 + 8
_TIME_WORDS = "per step time:"  # in every TimeMonitor line, lower-cased
_TIME_WORDS_REACH = _TIME_HEAD_REACH + 9  # and at most this far into it: the comma and 8 blanks more
_LOWER_COMMAS = 32  # commas in 4 KB at the middle of an ASCII text from which detect() lower-cases the text
_ARGS_LINE = re.compile(r"args_opt:[ \t]{0,8}Namespace\([^\r\n]{0,20000}data_sink_steps=", re.IGNORECASE)
_ARGS_BRACKET = re.compile(r"\((?<=namespace\()", re.IGNORECASE)
_ARGS_HEAD = re.compile(r"args_opt:[ \t]{0,8}namespace\Z", re.IGNORECASE)  # ends right before the bracket
_ARGS_HEAD_REACH = 26  # 9 + 8 + 9
_ARGS_SINK = re.compile(r"[^\r\n]{0,20000}data_sink_steps=", re.IGNORECASE)  # starts right after it
_KV = re.compile(r"(\w{1,60})=('[^']{0,2000}'|\"[^\"]{0,2000}\"|[^,()\s]{0,100})")
# the tag right before a match, or before 2.x's ``Train epoch time`` (TimeMonitor's mode word)
_RANK = re.compile(r"\[\d{1,9},(\d{1,9})\]<std(?:out|err)>:[ \t]{0,4}(?:train[ \t]{1,4})?\Z", re.IGNORECASE)
_LOSS_VALUE = re.compile(r"[-+]?(?:nan|inf(?:inity)?|\d{1,40}(?:\.\d{0,40})?(?:e[-+]?\d{1,4})?)", re.IGNORECASE)
_OOM = re.compile(r"memory isn't enough|memory not enough", re.IGNORECASE)
_CASE = re.compile(r"(?:^|[/\\])(\d{1,4})n(\d{1,4})g(?=[/\\])")
_FILE_BATCH = re.compile(r"_b(\d{1,7})_[^/\\]*\Z")


def detect(text: str) -> bool:
    """Whether ``text`` holds a TimeMonitor line or DLPerf's ``args_opt: Namespace(... data_sink_steps=...``
    (in any case)."""
    return _has_time_line(text) or _has_args_line(text)


def _has_time_line(text: str) -> bool:
    """Whether a TimeMonitor line holds some ``, per step time:`` (after ``jump_tries`` that are in none,
    one plain search from there decides). An ASCII text with many commas (trying the regex at each costs more
    than lower-casing the text) is read lower-cased."""
    middle = len(text) // 2
    if text.isascii() and text.count(",", middle, middle + 4096) >= _LOWER_COMMAS:
        return _has_time_words(text.lower())
    tries = jump_tries(text)
    for n, tail in enumerate(literal_matches(text, _TIME_TAIL, ",")):
        start = max(0, tail.start() - _TIME_HEAD_REACH)
        if n == tries:
            return _TIME_LINE.search(text, start) is not None
        if _TIME_LINE.search(text, start, tail.end()) is not None:
            return True
    return False


def _has_time_words(low: str) -> bool:
    """``_has_time_line`` of an ASCII text lower-cased (a case-insensitive pattern reads it as it reads the
    text): a TimeMonitor line is tried only where its ``per step time:`` is, which a plain search finds fast
    (after ``jump_tries`` that are in none, one plain search from there decides)."""
    tries = jump_tries(low)
    at = low.find(_TIME_WORDS)
    while at >= 0:
        start = max(0, at - _TIME_WORDS_REACH)
        if not tries:
            return _TIME_LINE.search(low, start) is not None
        if _TIME_LINE.search(low, start, at + len(_TIME_WORDS)) is not None:
            return True
        tries -= 1
        at = low.find(_TIME_WORDS, at + 1)
    return False


def _has_args_line(text: str) -> bool:
    """Whether DLPerf's arguments line holds some ``namespace(`` (after ``jump_tries`` that are in none, one
    plain search from there decides)."""
    tries = jump_tries(text)
    for n, bracket in enumerate(literal_matches(text, _ARGS_BRACKET, "(")):
        at = bracket.start()
        start = max(0, at - _ARGS_HEAD_REACH)
        if n == tries:
            return _ARGS_LINE.search(text, start) is not None
        if _ARGS_HEAD.search(text, start, at) is not None and _ARGS_SINK.match(text, at + 1) is not None:
            return True
    return False


def _loss(raw: str) -> float | None:
    """The loss in LossMonitor's ``loss is ...`` text: ``6.906126``, ``[6.906126]``, ``nan`` or a Tensor's
    ``value= 6.90613``."""
    k = raw.find("value=")
    m = _LOSS_VALUE.search(raw, k + 6 if k >= 0 else 0)
    return _float(m.group(0)) if m else None


_Event = tuple[int | None, int, int, float | None, float | None]
"""(rank, kind, epoch, x, y): kind 0 = loss line (x step, y loss), 1 = epoch time (x epoch ms, y per-step ms)."""


@dataclass
class _Epoch:
    """One sink epoch of the kept lines: its epoch-time lines, highest printed step and loss."""

    times: list[tuple[float, float | None]] = field(default_factory=list)  # (epoch ms, per-step ms)
    step: int = 0
    loss: float | None = None
    bad_loss: float | None = None  # first non-finite loss of the epoch


@dataclass
class _Scan:
    """What one pass over the text found."""

    events: list[_Event] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)
    args_lines: int = 0
    nranks: int = 0
    ranks: set[int] = field(default_factory=set)
    time_ranks: set[int] = field(default_factory=set)


def _scan(text: str) -> _Scan:
    """Every loss, invalid-loss, epoch-time, args and NCCL line, in text order."""
    out = _Scan()
    size, prefixed = len(text), "<std" in text
    for m in _EVENT.finditer(text):
        epoch, step, loss_text, invalid, epoch_ms, step_ms, unit, args, nranks = m.groups()
        if nranks is not None:
            out.nranks = max(out.nranks, int(nranks))
            continue
        rank = None
        if prefixed:
            start = m.start()
            rm = _RANK.search(text, max(0, start - 48), start)
            if rm:
                rank = int(rm.group(1))
                out.ranks.add(rank)
        if args is not None:
            out.args_lines += 1
            if not out.args:
                out.args = dict(_KV.findall(args))
        elif epoch is not None:
            loss = math.nan if invalid is not None else _loss(loss_text or "")
            out.events.append((rank, 0, int(epoch), float(int(step)), loss))
        else:
            ms = _float(epoch_ms)
            # a per-step time that ends the text without a unit may be cut: not used
            per_step = _float(step_ms) if unit is not None or m.end() < size else None
            if ms is not None:
                out.events.append((rank, 1, 0, ms, per_step))
                if rank is not None:
                    out.time_ranks.add(rank)
    return out


def _epochs(events: list[_Event], keep: int | None) -> dict[int, _Epoch]:
    """The kept lines grouped by epoch: an epoch-time line belongs to the latest loss line's epoch (a log
    with no loss line before it numbers its epoch-time lines 1, 2, ...)."""
    epochs: dict[int, _Epoch] = {}
    current, sequential = None, 0
    for rank, kind, epoch, x, y in events:
        if keep is not None and rank is not None and rank != keep:
            continue
        if kind == 0:
            current = epoch
            e = epochs.setdefault(epoch, _Epoch())
            e.step = max(e.step, int(x or 0))
            if y is not None and not math.isfinite(y):
                if e.bad_loss is None:
                    e.bad_loss = y
            elif y is not None:
                e.loss = y
        else:
            if current is None:
                sequential += 1
                key = sequential
            else:
                key = current
            epochs.setdefault(key, _Epoch()).times.append((x or 0.0, y))
    return epochs


def _steps(e: _Epoch) -> int | None:
    """Iterations of one epoch: the printed step count when it agrees with epoch time / per-step time, else
    that ratio, else the printed step count."""
    ms = [t for t, _ in e.times]
    per = [p for _, p in e.times if p is not None and p > 0]
    ratio = (sum(ms) / len(ms)) / (sum(per) / len(per)) if ms and per else None
    if ratio is not None and not math.isfinite(ratio):
        ratio = None
    if e.step > 0 and (ratio is None or abs(ratio - e.step) <= 0.5 + 0.01 * e.step):
        return e.step
    if ratio is not None and 0.5 <= ratio < 1e12:
        return round(ratio)
    return e.step or None


def _records(epochs: dict[int, _Epoch], global_batch: int | None, rank: int | None) -> RecordColumns:
    """One record per epoch with epoch times (and one per epoch with only a NaN/inf loss), as columns."""
    iteration: list[int] = []
    rates: list[float | None] = []
    losses: list[float | None] = []
    numbers: list[int] = []
    cum, prev = 0, None
    for number in sorted(epochs):
        e = epochs[number]
        if not e.times and e.bad_loss is None:
            continue
        steps = _steps(e)
        if steps is None:
            continue
        cum += steps * (number - prev if prev is not None and number > prev else 1)
        prev = number
        rate = None
        if e.times:
            ms = sum(t for t, _ in e.times) / len(e.times)
            if global_batch and ms > 0:
                rate = global_batch * steps * 1000.0 / ms
        iteration.append(cum)
        rates.append(rate)
        losses.append(e.bad_loss if e.bad_loss is not None else e.loss)
        numbers.append(number)
    n = len(iteration)
    return RecordColumns(iteration, [None] * n, rates, losses, [rank] * n if rank is not None else None, numbers)


def _most_common(values: list[int]) -> int:
    """The most common value (the larger on a tie), 0 for none."""
    if not values:
        return 0
    counts = Counter(values)
    return max(counts, key=lambda v: (counts[v], v))


def _devices(scan: _Scan, lines_per_epoch: int, file: str) -> int | None:
    """The device count by the rules of the module docstring."""
    if scan.nranks > 0:
        return scan.nranks
    distributed = scan.args.get("run_distribute")
    if distributed == "False":
        return 1
    seen = max(len(scan.ranks), lines_per_epoch if not scan.ranks else 0, scan.args_lines)
    if seen > 1:
        return seen
    case = _CASE.search(file.replace("\\", "/"))
    if case and int(case.group(1)) > 0 and int(case.group(2)) > 0:
        return int(case.group(1)) * int(case.group(2))
    if distributed == "True":
        return _count(scan.args.get("device_num"))
    return None


def parse(text: str, file: str, options: ParseOptions) -> list[ParsedRun]:
    """The one run of a MindSpore model_zoo log (see the module docstring)."""
    scan = _scan(text)
    keep = min(scan.time_ranks) if scan.time_ranks else (min(scan.ranks) if scan.ranks else None)
    epochs = _epochs(scan.events, keep)
    lines_per_epoch = _most_common([len(e.times) for e in epochs.values() if e.times])

    gpus = _devices(scan, lines_per_epoch, file)
    batch = _count(scan.args.get("batch_size"))
    if batch is None:
        named = _FILE_BATCH.search(file)
        batch = _count(named.group(1)) if named else None
    records = _records(epochs, gpus * batch if gpus and batch else None, keep)

    progress: list[tuple[str, int, int]] = []
    planned = _count(scan.args.get("train_steps"))  # -1 (all steps) is no plan
    sink = _count(scan.args.get("data_sink_steps"))
    if planned and sink:
        planned = planned // sink * sink
    reached = max(records.iteration, default=0)
    if planned:
        progress.append(("iterations", reached, planned))
    finished = reached >= planned if planned else False
    reason = truncation(text, finished=finished, progress=progress, fit=options.fit)
    if reason is None and records:
        reason = BATCH_UNKNOWN if batch is None else DEVICES_UNKNOWN if gpus is None else None

    run = conclude(
        text=text,
        file=file,
        format=NAME,
        records=records,
        options=options,
        reported=None,
        gpus=gpus,
        batch_size_per_device=batch,
        truncated=reason,
        stopped_early=stopped_short(finished=finished, progress=progress),
    )
    if run.reason != OUT_OF_MEMORY and ("nough" in text or "NOUGH" in text) and _OOM.search(text):
        run = replace(
            run, status="failed", reason=OUT_OF_MEMORY, throughput=None, iterations=0, window=None, method=None
        )
    return [run]


FORMAT = LogFormat(NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=DEFAULT_MEASURED)
"""Registry entry of this format."""
