"""PaddlePaddle ResNet50 logs: PaddleClas static graph (``tools/static/train.py``, DALI) and the older
PaddleCV ``image_classification/train.py``. Verbatim lines (a TAB written \\t)::

    gpus: 0,1,2,3,4,5,6,7
        |                     PADDLE_TRAINERS_NUM                        8                      |
    2020-12-16 18:48:42 INFO:     batch_size : 1024
    2020-12-16 18:48:42 INFO: is_distributed : True
    worker_key:_worker, size: {'_worker': 8}
    2020-12-16 18:57:37 INFO: epoch:0   train step:20   loss:  7.9820 top1: 0.0000 top5: 0.0104 lr: 0.100000 elapse: 0.280s ips: 343.06149 images/sec.
    2020-12-16 18:16:19 INFO: END epoch:0   train loss:  5.3231 top1: 0.0800 top5: 0.2005  elapse_sum: 3351.772s ips: 382.10713 images/sec.
    [Pass 0, train batch 10] \\tloss 6.9, acc1 0.0, acc5 0.0, lr 0.1, elapse 0.36 sec

PaddleClas ``train step`` lines (also the later ``batch_cost: ... s`` variant):

* ``ips`` is PER CARD (per trainer process) and a RUNNING AVERAGE: ``batch / batch_time.avg``, where
  ``batch_time`` averages the step times since the epoch started, reset once at step 5 ("ignore the warm-up
  iters"). At step k >= 5 the average covers n_k = k - 4 steps, before that the k + 1 steps from 0.
  ``elapse`` is that average (ms precision), timestamps have a 1 s resolution.
* The time of the steps between two printed steps j < k follows from the running averages at both ends:
  T_k = n_k * batch / ips_k is the time of the n_k steps averaged at k, so the window (j, k] took
  T_k - T_j = batch * (n_k / ips_k - n_j / ips_j) and its per-card rate is (k - j) / (n_k/ips_k - n_j/ips_j)
  (the batch cancels). With ips printed to 5 decimals this is exact to ~1e-4 even for one step, unlike
  the 1 s timestamps. Each record's ``samples_per_sec`` is that rate since the record before it, times the
  trainer count (GLOBAL). Across the reset at step 5: exact when step 4 is printed (the post-reset
  average at k covers exactly 5..k), otherwise, like for the first record of an epoch, the record's own
  running average is used (exact with print_interval 1, an approximation inside the warm-up otherwise).
* Our rule: the window is timed from these rates (``window.measure`` on records without times: method
  "printed_rates"); the sum telescopes, so the window's time is batch * (n_last/ips_last - n_base/ips_base).
  The stored records keep the 1 s timestamps. Beware: ``batch_time`` stops at the metric update and restarts
  after logging, so the host time spent logging and stepping the LR is outside it; on the real logs the
  timestamps over the whole run give 0.06-0.7 % lower rates than the running averages (1 and 8 GPUs).
* GPU count (= trainer processes, one card each) from the log only: ``PADDLE_TRAINERS_NUM`` (launcher's
  env table or env prints), ``trainers_num``/``nranks``, Gloo's ``size: {'..._worker': N}``; then
  ``is_distributed : False`` (one process: 1); then the config's global TRAIN ``batch_size`` divided by the
  per-card batch ips x elapse; then ``Local start N processes`` / the launcher's ``gpus:``/``selected_gpus``
  list (one node only). Only when the log says nothing: the caller's ``gpus_hint``, else the file name
  (DLPerf's ``{nodes}n{gpus}g`` folder or a ``gpu{N}`` token). Unknown: a failed run (ips is per card).
* The config's TRAIN ``batch_size`` is the GLOBAL batch; batch_size_per_device = it // gpus.
* reported_throughput reproduces the published figure of these logs (wanghuancoder/PerformanceReport): the
  mean of the ``ips`` of the train-step lines after skipping the first 10 lines (100 for multi-node runs,
  more than 8 GPUs: the report's 32-GPU rule), times the GPU count. (The framework's own ``END epoch`` ips
  is the per-card average of the whole epoch since step 5.)
* Truncation: an ``END epoch ... train`` line per planned epoch (``epochs``) marks a finished run; else the
  run must reach every planned epoch and floor(total_images / global batch) steps in its last epoch (the
  32-GPU logs end without END line after their last step).
* Several runs in one file: a PaddleClas banner or a launcher ``Configuration Arguments`` block after
  training lines starts a new run. Epochs: the step counter restarts; records carry a running iteration
  number. mpirun ``[1,r]<stdout>:`` prefixes: the lowest rank's lines are kept.

PaddleCV ``[Pass p, train batch b]`` lines: ``elapse`` is the time of that ONE batch (the executor run, data
loading excluded); the record's rate is global batch / elapse, global batch = the arguments' ``batch_size``
(per trainer process, "on all the devices" of that process) x the trainer count. The trainer count comes from
the same explicit evidence (PADDLE_TRAINERS_NUM, trainers_num, nranks, Gloo, Local start), the hint or the
file name, else 1 with gpus unknown (a ``selected_gpus`` list may be one process's devices). A pass's length
is taken as its last printed batch + 1. With sub-second timestamps on every line, the window is timed by
them instead (each interval's samples over its timestamp span; method "timestamps").

Default window: DLPerf's Paddle ResNet50 scripts (extract_paddle_logs.py) skipped ``train batch 0`` and
averaged lines 20..119, i.e. batches 21..120: warm-up 20, measured 100.

How a train-step line is read: behind an optional mpirun prefix, its head (up to its first ``train step:``)
holds the timestamp at its start and the epoch ``epoch:E`` right before ``train step:`` (within 40
characters); then the step, and either ``loss: L`` right after it and the first ``elapse: Es ips: I
images/sec`` at most 400 characters later, or else the first ``ips: I images/sec``, with the first ``loss:``
and ``elapse:`` / ``batch_cost:`` before it. (The usual layout, ``<stamp> INFO: epoch:E   train step:S   loss: L top1: ..
top5: .. lr: .. elapse: Es ips: I images/sec``, reads the same; ``_LINE`` matches it as such first, faster.)

Reading: one ``re.split`` of the whole text by ``_LINE`` reads every train-step line into columns (times and
epochs once per distinct head) and gives the text between them; the split is first made with the usual
layout only (``_USUAL``, faster), and again with every layout only when a line it left out holds ``train
step:``. The elapse is read only where it is needed (``_Elapses``). Only the lines between (a few hundred in
a real log) are read one by one (``_Reader``): banners and launcher blocks, PaddleCV lines, END lines, the
config, arguments and trainer counts. Records are ``RecordColumns``, and an epoch's rates after its first
post-reset record are computed as one block (``_chained_rates``) when every record gets one, with the same
floating-point operations as record by record (``_rates_in_order``, used otherwise).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import chain, compress, count, pairwise, repeat
from operator import add, itemgetter, le, lt, ne, sub, truediv
from typing import Any, TypeVar, cast

from dlperf_core.parsing.failures import conclude, loss_failure, stopped_short, truncation
from dlperf_core.parsing.records import IterationRecord, LogFormat, ParsedRun, ParseOptions, RecordColumns
from dlperf_core.parsing.values import MPIRUN_PREFIX as _PREFIX
from dlperf_core.parsing.values import anchored_matches, find_literal, stamp_seconds
from dlperf_core.parsing.values import match_at as _at
from dlperf_core.parsing.values import positive_int as _int
from dlperf_core.parsing.values import to_float as _float
from dlperf_core.parsing.window import TIMESTAMPS

NAME = "paddleclas"
DEFAULT_WARMUP = 20  # DLPerf: batches 21..120
DEFAULT_MEASURED = 100
RESET_STEP = 5  # PaddleClas resets batch_time at step 5
PUBLISHED_SKIP = 10  # the report's skipped train-step lines ...
PUBLISHED_SKIP_MULTINODE = 100  # ... and for its 32-GPU (multi-node) runs
UNKNOWN_GPUS = "GPU count unknown: the log's ips is per card"
UNKNOWN_BATCH = "batch size unknown: elapse alone gives no throughput"

_STAMP = re.compile(r"\[?(\d{4})[-/](\d\d)[-/](\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{1,6}))?")
_TRAIN = re.compile(r"train step:\s{0,20}(\d{1,12})(?!\d)([^\n]*?)\bips:\s{0,20}([^\s,]{1,64}) images/sec")  # detect()
_EPOCH = re.compile(r"epoch:\s{0,20}(\d{1,9})\s{1,20}$")
_LOSS = re.compile(r"\bloss:\s{0,20}([^\s,]{1,64})")
_ELAPSE = re.compile(r"\b(?:elapse|batch_cost):\s{0,20}(\d{1,12}(?:\.(\d{1,12}))?)")
_END = re.compile(r"END epoch:\s{0,20}\d{1,9}\s{1,20}train\b")
_CV = re.compile(
    r"\[Pass (\d{1,9}), train batch (\d{1,12})\],?\s{0,20}loss ([^\s,]{1,64}),[^\n]*?\belapse ([^\s,]{1,64}) sec"
)
_CONF = re.compile(r"INFO: ( {0,40})([A-Za-z_]\w{0,60}) :(?: ([^\n]{0,200}))?$")
_ARG = re.compile(r"([A-Za-z_]\w{0,60}): ([^\s]{1,200})")
_TRAINERS = re.compile(
    r"\bPADDLE_TRAINERS_NUM\b[\s|=:'\"]{1,80}(\d{1,6})\b"
    r"|\b(?:trainers?_num|num_trainers|nranks)\b\s{0,4}[:=]\s{0,4}(\d{1,6})\b"
)
_GLOO = re.compile(r"size: \{'[^'\n]{0,300}_worker': (\d{1,6})\}")
_LOCAL = re.compile(r"Local start (\d{1,6}) processes")
_DETECT_TRIES = 1000  # lines holding "train step:" / "[Pass " that detect() looks at
_BANNER = "PaddleClas is powered by PaddlePaddle"
_LAUNCH = "-----------  Configuration Arguments -----------"
_NAME_HINTS = (re.compile(r"(?<![\d.])(\d{1,3})n(\d{1,3})g(?![a-z])"), re.compile(r"gpu(\d{1,4})(?!\d)"))

_VALUE = r"[0-9A-Za-z.+\-]{1,64}+"  # a value of the usual layout
_DECIMAL = r"[0-9]{1,30}+\.[0-9]{1,30}+"  # its loss and ips (float reads them)
_WS = r"[^\S\n]"  # a space within the line


def _other_layout(groups: bool) -> str:
    """A train-step line of any layout, from its start (after an mpirun prefix) to its end (see the module
    docstring); ``groups``: head, step, loss and elapse (or instead the text where they are looked for) and
    ips. The head is crossed in runs of characters that start no "train step:", trying it only where it may
    start."""
    g = "(" if groups else "(?:"
    return (
        g
        + r"[^\nt]*+(?:t(?!rain step:)[^\nt]*+)*+)train step:"
        + (_WS + "{0,20}+" + g + r"\d{1,12}+)(?!\d)(?:" + _WS + "{1,20}+loss:" + _WS + "{0,20}+" + g)
        + (r"[^\s,]{1,64}+)[^\n]{0,400}?\belapse: " + g + r"\d{1,12}+(?:\.\d{1,12}+)?+)s |" + g + r"[^\n]*?))")
        + (r"\bips:" + _WS + "{0,20}+" + g + r"[^\s,]{1,64}+) images/sec[^\n]*+")
    )


_OTHER = re.compile(_other_layout(groups=True))


def _line_regex(prefixed: bool, elapse: bool = False, other: bool = True) -> re.Pattern[str]:
    """``_LINE``: in "\n" + text, a train-step line from the "\n" before it to its end. Groups: the rank of an
    mpirun prefix (only ``prefixed``: for a text holding "<std", the only one where a line may have one); the
    usual layout's head ("<stamp> INFO: epoch:E"), step, loss, (only ``elapse``: the elapse, group "elapse")
    and ips; else (only ``other``) the line after its prefix (``_OTHER`` reads it). Without ``other``: the
    usual layout only (``_USUAL``; where no line it leaves out holds "train step:", both find the same lines).

    The usual layout reads the same as ``_OTHER``. Its head is a 19-character timestamp, " INFO: " and
    "epoch:E" then spaces: no "t", no "train step:" in it; its values are words of ASCII letters, digits and
    ".+-" (its loss and ips: decimals) between single spaces, and between its loss and its elapse only the
    words "top1:", "top5:" and "lr:" end in a colon, so its " elapse: " is the first place where the other
    rule's gap (at most 400 characters) can end. Every other repetition is followed by a character it cannot
    take, so it never gives one back: possessive."""
    return re.compile(
        r"\n"
        + (r"(?:" + _PREFIX.pattern.replace("{0,40}", "{0,40}+") + r")?+" if prefixed else "")
        + r"(?:([-0-9 :/T]{19} INFO: epoch:[0-9]{1,9}+) {1,20}+train step: {0,20}+([0-9]{1,12}+)"
        + (r" {1,20}+loss: {0,20}+(" + _DECIMAL + ") top1: " + _VALUE + " top5: " + _VALUE + " lr: " + _VALUE)
        + (r" elapse: " + ("(?P<elapse>" if elapse else "(?:") + r"[0-9]{1,12}+\.[0-9]{1,12}+)s ips: {0,20}+(")
        + (_DECIMAL + r") images/sec[^\n]*+")
        + ("|(" + _other_layout(groups=False) + ")" if other else "")
        + ")"
    )


_LINE, _LINE_PREFIXED = _line_regex(False), _line_regex(True)
_LINE_ELAPSE, _LINE_PREFIXED_ELAPSE = _line_regex(False, elapse=True), _line_regex(True, elapse=True)
_USUAL, _USUAL_PREFIXED = _line_regex(False, other=False), _line_regex(True, other=False)


def detect(text: str) -> bool:
    """Whether ``text`` holds the PaddleClas banner, a PaddleClas train-step line or a PaddleCV
    ``[Pass p, train batch b]`` line (among the first lines holding those words)."""
    if find_literal(text, _BANNER, "C") >= 0:
        return True
    return any(
        next(anchored_matches(text, needle, rx, _DETECT_TRIES, rare), None) is not None
        for needle, rx, rare in (("train step:", _TRAIN, None), ("[Pass ", _CV, "P"))
    )


def _stamp(line: str) -> tuple[float | None, bool]:
    """Unix seconds (UTC) of a timestamp at the start of ``line`` and whether it has sub-second digits."""
    m = _STAMP.match(line)
    return stamp_seconds(m) if m is not None else (None, False)


def _usual_heads(heads: list[str]) -> tuple[list[float | None], list[str | None]]:
    """The time and the epoch of each usual-layout line from its head "<stamp> INFO: epoch:E", each distinct
    head read once: ``_stamp`` of its 19-character stamp is the time of its minute at second 00 (each
    distinct minute read once) plus its second."""
    distinct = list(set(heads))
    minutes = list(map(_MINUTE, distinct))
    bases = {m: _stamp(m + "00")[0] for m in set(minutes)}
    base = list(map(bases.__getitem__, minutes))
    second = list(map(_SECONDS.get, map(_SECOND, distinct)))
    if None in base or None in second:  # some minute is no date, or some second is not 00..59
        times = [b + s if b is not None and s is not None else None for b, s in zip(base, second)]
    else:
        times = list(map(add, base, second))
    epochs: set[str | None] = set(map(_EPOCH_TEXT, distinct))
    epoch = [next(iter(epochs))] * len(heads) if len(epochs) == 1 else list(map(_EPOCH_TEXT, heads))
    return list(map(dict(zip(distinct, times)).__getitem__, heads)), epoch


# a usual head "YYYY-MM-DD hh:mm:ss INFO: epoch:E": its minute, its second, its epoch
_MINUTE, _SECOND, _EPOCH_TEXT = itemgetter(slice(0, 17)), itemgetter(slice(17, 19)), itemgetter(slice(32, None))
_SECONDS = {f"{s:02d}": s for s in range(60)}  # the seconds datetime takes


def _epoch(head: str) -> str | None:
    """The epoch printed right before "train step:" (the end of ``head``), within 40 characters."""
    m = _EPOCH.search(head, max(0, len(head) - 40))
    return m.group(1) if m is not None else None


@dataclass
class _Steps:
    """PaddleClas train-step lines as columns, row i being line i (in text order)."""

    rank: list[int | None] | None  # None: no line has an mpirun rank
    epoch: list[str | None]  # as printed; None: the line names no epoch
    step: list[int]
    time: list[float | None]
    loss: list[float | None]
    ips: list[float | None]
    line: Sequence[int]  # the train-step line's number in the text (``_Elapses`` reads its elapse)

    def __len__(self) -> int:
        return len(self.step)

    @cached_property
    def epochs(self) -> set[str | None]:
        """The distinct epochs printed."""
        return set(self.epoch)

    def rows(self, start: int, stop: int) -> _Steps:
        """Rows start..stop-1."""
        return _Steps(
            self.rank[start:stop] if self.rank is not None else None,
            self.epoch[start:stop],
            self.step[start:stop],
            self.time[start:stop],
            self.loss[start:stop],
            self.ips[start:stop],
            self.line[start:stop],
        )

    def pick(self, keep: list[int]) -> _Steps:
        """The rows numbered in ``keep``."""
        return _Steps(
            _at_rows(self.rank, keep) if self.rank is not None else None,
            _at_rows(self.epoch, keep),
            _at_rows(self.step, keep),
            _at_rows(self.time, keep),
            _at_rows(self.loss, keep),
            _at_rows(self.ips, keep),
            _at_rows(self.line, keep),
        )


_T = TypeVar("_T")


def _at_rows(column: Sequence[_T], keep: list[int]) -> list[_T]:
    """The values of ``column`` at the rows numbered in ``keep``."""
    return [column[i] for i in keep]


@dataclass
class _Pass:
    """One PaddleCV ``[Pass p, train batch b]`` line."""

    rank: int | None
    epoch: int
    batch: int
    time: float | None
    precise: bool  # the timestamp has sub-second digits
    loss: float | None
    elapse: float | None


@dataclass
class _Run:
    """What one run's lines say. Its train-step lines are numbers first..last-1 of the text's."""

    start: int
    first: int
    end: int = 0
    last: int = 0
    passes: list[_Pass] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)  # top-level config keys
    train_batch: int | None = None  # TRAIN.batch_size (global)
    args: dict[str, str] = field(default_factory=dict)  # "name: value" argument lines
    trainers: int | None = None
    gloo: int | None = None
    local: int | None = None
    ends: int = 0  # END epoch ... train lines

    def trained(self, k: int) -> bool:
        """Whether it has training lines before train-step line number ``k``."""
        return k > self.first or bool(self.passes)


class _Reader:
    """The lines between the train-step lines, one by one: runs and what each says."""

    def __init__(self, text: str, prefixed: bool) -> None:
        self.text, self.prefixed = text, prefixed
        self.run = _Run(0, 0)
        self.runs = [self.run]
        self.section = ""
        self._ends: list[int] | None = None  # where each train-step line ends: read once a new run needs it

    def gap(self, k: int, gap: str) -> None:
        """The lines of ``gap``, the text before train-step line k (in "\\n" + text, from the "\\n" ending the
        line before)."""
        at = 1  # where the line starts in the gap
        for raw in gap.split("\n")[1:]:
            self.line(raw, k, at)
            at += len(raw) + 1

    def offset(self, k: int, at: int) -> int:
        """The text offset of ``at`` in gap ``k``."""
        if not k:
            return at - 1
        if self._ends is None:
            rx = _LINE_PREFIXED if self.prefixed else _LINE
            self._ends = [m.end() for m in rx.finditer("\n" + self.text)]
        return self._ends[k - 1] + at - 1

    def new_run(self, k: int, here: int) -> None:
        """A banner or launcher block at text offset ``here``, before train-step line ``k``: a new run once
        the current one has trained."""
        if self.run.trained(k):
            self.run.end, self.run.last = here, k
            self.run = _Run(here, k)
            self.runs.append(self.run)
            self.section = ""

    def line(self, raw: str, k: int, at: int) -> None:  # noqa: C901 - the per-line rules, in their order
        """One line (before train-step line number ``k``, at ``at`` in its gap)."""
        line = raw.rstrip("\r")
        rank = None
        if self.prefixed:
            pm = _PREFIX.match(line)
            if pm is not None:
                rank, line = int(pm.group(1)), line[pm.end() :]
        if _BANNER in line or _LAUNCH in line:
            self.new_run(k, self.offset(k, at))
        run = self.run
        if "[Pass " in line:
            m = _at(line, "[Pass ", _CV)
            if m is not None:
                t, precise = _stamp(line)
                run.passes.append(
                    _Pass(rank, int(m.group(1)), int(m.group(2)), t, precise, _float(m.group(3)), _float(m.group(4)))
                )
                return
        if "END epoch" in line and _END.search(line):
            run.ends += 1
            return
        if " : " in line and "INFO: " in line:
            m = _at(line, "INFO: ", _CONF)
            if m is not None:
                indent, key, value = m.groups()
                value = (value or "").strip()
                if not indent:
                    if value:
                        run.config.setdefault(key, value)
                    else:
                        self.section = key
                elif self.section == "TRAIN" and key == "batch_size" and len(indent) <= 4:
                    run.train_batch = run.train_batch or _int(value)
                return
        if ": " in line:
            m = _ARG.fullmatch(line.strip()) if len(line) < 300 else None
            if m is not None:
                run.args.setdefault(m.group(1), m.group(2))
        if "TRAINERS_NUM" in line or "rainer" in line or "nranks" in line:
            m = _TRAINERS.search(line)
            if m is not None:
                run.trainers = run.trainers or _int(m.group(1) or m.group(2))
        if "_worker': " in line:
            m = _GLOO.search(line)
            if m is not None:
                run.gloo = run.gloo or _int(m.group(1))
        if "Local start" in line:
            m = _LOCAL.search(line)
            if m is not None:
                run.local = run.local or _int(m.group(1))


def _split(text: str) -> tuple[list[_Run], _Steps, _Elapses]:
    """The runs, the text's train-step lines (as columns) and their elapse: one split of the whole text by
    ``_LINE``, then the per-line rules on the lines between."""
    prefixed = find_literal(text, "<std", "<") >= 0
    padded = "\n" + text
    rx = _USUAL_PREFIXED if prefixed else _USUAL  # the usual layout first (faster)
    parts = rx.split(padded)  # gap, the line's groups, gap, ..., gap
    between = "".join(parts[:: rx.groups + 1])
    if "train step:" in between:  # a line between may be a train-step line of another layout: all of them
        rx = _LINE_PREFIXED if prefixed else _LINE
        parts = rx.split(padded)
        between = "".join(parts[:: rx.groups + 1])
    width = rx.groups + 1
    gaps: list[str] = parts[::width]  # (a gap is text, never None)
    columns: list[list[Any]] = [parts[j::width] for j in range(1, width)]
    rank = columns.pop(0) if prefixed else None
    steps, other_elapse = _steps(columns[:4], columns[4] if len(columns) > 4 else None)
    if rank is not None:
        steps.rank = _ranks(rank)
    reader = _Reader(text, prefixed)
    marked = _marked(text, rx, between)
    for k in sorted(marked.union(compress(count(), gaps))) if marked else compress(count(), gaps):
        reader.gap(k, gaps[k])
        if k in marked:
            reader.new_run(k, reader.offset(k, len(gaps[k]) + 1))
    reader.run.end, reader.run.last = len(text), len(steps)
    return reader.runs, steps, _Elapses(padded, prefixed, len(steps), other_elapse)


def _steps(usual: list[list[Any]], other: list[str | None] | None) -> tuple[_Steps, dict[int, str | None]]:
    """The train-step lines' columns from ``_LINE``'s groups: the usual layout's (head, step, loss, ips), else
    the line (``other``, None for none: ``_OTHER`` reads it); and the elapse of the lines of another layout,
    by line number."""
    head, step, loss, ips = usual
    n = len(step)
    if other is None or other.count(None) == n:  # every line of the usual layout
        time, epoch = _usual_heads(head)
        return _Steps(
            None, epoch, list(map(int, step)), time, list(map(float, loss)), list(map(float, ips)), range(n)
        ), {}
    time, epoch = _usual_heads([h if h is not None else "" for h in head])  # (the others' below)
    elapse: dict[int, str | None] = {}
    for i in compress(count(), other):
        o_head, step[i], loss[i], elapse[i], ips[i] = _other_values(str(other[i]))
        time[i], epoch[i] = _stamp(o_head)[0], _epoch(o_head)
    steps = _Steps(None, epoch, list(map(int, step)), time, list(map(_float, loss)), list(map(_float, ips)), range(n))
    return steps, elapse


class _Elapses:
    """The elapse (as printed) of train-step line number k: a line of another layout's as ``_OTHER`` read it; a
    usual line's is read only when asked (``_per_card_batch`` alone needs it, for the last lines, if at all),
    by matching ``_LINE`` with that group at each "\n" from the end of the text back (where the split found
    the lines)."""

    def __init__(self, padded: str, prefixed: bool, lines: int, other: dict[int, str | None]) -> None:
        self.padded, self.rx = padded, _LINE_PREFIXED_ELAPSE if prefixed else _LINE_ELAPSE
        self.found = other  # line number -> elapse
        self.below, self.pos = lines, len(padded)  # lines below.. are read; the others lie before pos

    def __call__(self, k: int) -> str | None:
        while self.below > k:
            i = self.padded.rfind("\n", 0, self.pos)
            if i < 0:  # (the split found more lines: never)
                raise LookupError(f"no train-step line {k}")
            m = self.rx.match(self.padded, i)
            if m is not None:
                self.below -= 1
                self.found.setdefault(self.below, m.group("elapse"))
            self.pos = i
        return self.found[k]


def _other_values(line: str) -> tuple[str, str, str | None, str | None, str]:
    """(head, step, loss, elapse, ips) of a train-step line of another layout (``_OTHER``): loss and elapse
    read where they are looked for (``_LOSS``, ``_ELAPSE``) when not right after the step."""
    m = _OTHER.match(line)
    assert m is not None  # (_LINE took the line as _OTHER's)
    head, step, loss, elapse, mid, ips = m.groups()
    if mid is not None:
        lm, em = _LOSS.search(mid), _ELAPSE.search(mid)
        loss, elapse = lm.group(1) if lm else None, em.group(1) if em else None
    return head, step, loss, elapse, ips


def _ranks(texts: list[str | None]) -> list[int | None]:
    """The rank of each mpirun prefix (None without one), each distinct one converted once."""
    values = {x: int(x) if x is not None else None for x in set(texts)}
    return list(map(values.__getitem__, texts))


def _marked(text: str, rx: re.Pattern[str], between: str) -> set[int]:
    """The train-step lines (numbers, as ``rx`` finds them) that hold a banner or a launcher block after their
    mpirun prefix (never seen: looked for only when the text holds more of them than the text ``between``
    them)."""
    if all(_count(text, words) == between.count(words) for words in (_BANNER, _LAUNCH)):
        return set()
    out = set()
    for k, m in enumerate(rx.finditer("\n" + text)):
        line = m.group()[1:]
        pm = _PREFIX.match(line) if rx is _LINE_PREFIXED else None
        if pm is not None:
            line = line[pm.end() :]
        if _BANNER in line or _LAUNCH in line:
            out.add(k)
    return out


def _count(text: str, words: str) -> int:
    """``text.count(words)`` for a banner or launcher block (their "C" is rare in logs: ``find_literal``)."""
    n, at = 0, find_literal(text, words, "C")
    while at >= 0:
        n, at = n + 1, find_literal(text, words, "C", at + len(words))
    return n


def _run_steps(run: _Run, steps: _Steps) -> _Steps:
    """The run's train-step lines."""
    return steps if (run.first, run.last) == (0, len(steps)) else steps.rows(run.first, run.last)


def gpus_from_name(file: str) -> int | None:
    """The GPU count a file name suggests (``.../4n8g/...`` -> 32, ``paddle_gpu8_...`` -> 8), else None.
    Used only when the log itself says nothing."""
    for rx in _NAME_HINTS:
        m = rx.search(file)
        if m is not None:
            n = 1
            for g in m.groups():
                n *= int(g)
            return n or None
    return None


def _per_card_batch(steps: _Steps, elapses: _Elapses) -> tuple[float, float] | None:
    """(ips x elapse, its uncertainty) from the last post-reset step with both: the per-card batch."""
    for i in reversed(range(len(steps))):
        ips = steps.ips[i]
        if steps.step[i] < RESET_STEP or not ips:
            continue
        text = elapses(steps.line[i])
        if text is None:
            continue
        elapse = _float(text)
        if elapse and 0 < ips * elapse < math.inf:
            decimals = len(text) - text.index(".") - 1 if "." in text else 0
            return ips * elapse, ips * 0.5 * 10.0 ** -min(decimals, 12) + 1e-6
    return None


def _gpus(run: _Run, steps: _Steps, elapses: _Elapses, hint: int | None, file: str) -> int | None:
    """The trainer (GPU) count: what the log says first, then the hint, then the file name. A PaddleCV
    process may drive several listed GPUs itself, so its ``selected_gpus`` list is not a trainer count."""
    if run.trainers or run.gloo:
        return run.trainers or run.gloo
    if run.config.get("is_distributed") == "False":
        return 1
    est = _per_card_batch(steps, elapses) if run.train_batch else None
    if run.train_batch and est is not None and est[0] > 0:
        near = round(run.train_batch / est[0])
        fits = [
            g
            for g in range(max(1, near - 1), near + 2)
            if run.train_batch % g == 0 and abs(run.train_batch / g - est[0]) <= est[1]
        ]
        if len(fits) == 1:
            return fits[0]
    if run.local:
        return run.local
    listed = run.args.get("selected_gpus") or run.args.get("gpus")
    if len(steps) and listed and all(p.strip().isdigit() for p in listed.split(",")):
        return len(listed.split(","))  # PaddleClas launcher: one process per listed GPU
    return hint if hint and hint > 0 else gpus_from_name(file)


def _keep_rank(items: list[_Pass], ranks: set[int | None]) -> list[_Pass]:
    """The lowest rank's items (and unprefixed ones) when several ranks printed."""
    numbered = {r for r in ranks if r is not None}
    if len(numbered) <= 1:
        return items
    low = min(numbered)
    return [x for x in items if x.rank in (low, None)]


def _keep_rank_steps(steps: _Steps, ranks: set[int | None]) -> _Steps:
    """``_keep_rank`` of train-step rows."""
    numbered = {r for r in ranks if r is not None}
    if len(numbered) <= 1 or steps.rank is None:
        return steps
    low = min(numbered)
    return steps.pick([i for i, r in enumerate(steps.rank) if r in (low, None)])


def _epoch_starts(steps: _Steps) -> list[int]:
    """The rows where an epoch starts (the step counter and the averages restart): the first row, a row whose
    epoch differs from the last one printed, a row whose step is not above the one before."""
    step, epoch = steps.step, steps.epoch
    if not step:
        return []
    if None in steps.epochs:  # the last printed epoch is not always the row before's
        starts, printed = [], None
        for i, (e, s) in enumerate(zip(epoch, step)):
            if not i or (e is not None and printed is not None and e != printed) or s <= step[i - 1]:
                starts.append(i)
            printed = e if e is not None else printed
        return starts
    restarts = set() if all(map(lt, step, step[1:])) else set(compress(count(1), map(le, step[1:], step)))
    if len(steps.epochs) > 1:
        restarts.update(compress(count(1), map(ne, epoch[1:], epoch)))
    return [0, *sorted(restarts)]


def _rates_in_order(
    steps: list[int], ips: list[float | None], first: int, gpus: int, prev: tuple[int, float, bool] | None
) -> tuple[list[float | None], tuple[int, float, bool] | None]:
    """The global rate of each record of one epoch since the last rated one, record by record: (rates, the
    last rated record's (step, n/ips, after reset)). ``first``: the epoch's first step, at most 1."""
    out: list[float | None] = []
    for step, x in zip(steps, ips):
        rate = None
        if x is not None and 0 < x < math.inf:
            post = step >= RESET_STEP
            u = (step - RESET_STEP + 1 if post else step - first + 1) / x
            if prev is None or (prev[2] != post and prev[0] != RESET_STEP - 1):
                card: float | None = x  # the record's own running average (see the module docstring)
            elif prev[2] == post:
                du = u - prev[1]
                card = (step - prev[0]) / du if du > 0 else None
            else:  # prev is step 4: the post-reset average covers exactly the steps since it
                card = (step - prev[0]) / u
            if card is not None and math.isfinite(card) and card > 0:
                rate, prev = card * gpus, (step, u, post)
        out.append(rate)
    return out, prev


def _chained_rates(steps: list[int], ips: list[float | None], u0: float, gpus: int) -> list[float] | None:
    """``_rates_in_order`` of post-reset records that all get a rate, each since the one before: ``steps[0]``
    is the rated record before them (its n/ips ``u0`` > 0), ``ips`` theirs. None when some would get none:
    a missing or zero ips; else every rate finite and positive means every record got one (the first ips
    not finite and positive gives a rate <= 0 or NaN, and so does running-average time that does not grow:
    NaN where it stays the same)."""
    if not all(ips):  # a missing or zero ips
        return None
    if steps[-1] - steps[0] == len(ips):  # every step printed: each record is one step after the one before
        # u = (step - RESET_STEP + 1) / ips and rate = 1 / (u - u before), with the ints as floats: Python
        # divides an int by a float as that int's float, so the quotients are the same
        u = chain((u0,), map(truediv, count(float(steps[1] - RESET_STEP + 1)), ips))
        if gpus == 1:  # x * 1 is x
            rates = [1.0 / (v - w) if v != w else math.nan for w, v in pairwise(u)]
        else:
            rates = [1.0 / (v - w) * gpus if v != w else math.nan for w, v in pairwise(u)]
    else:
        u = chain((u0,), map(truediv, map(sub, steps[1:], repeat(RESET_STEP - 1)), ips))
        rates = [
            (b - a) / (v - w) * gpus if v != w else math.nan for (a, b), (w, v) in zip(pairwise(steps), pairwise(u))
        ]
    if not (math.isfinite(sum(rates)) and min(rates) > 0):
        return None
    return rates


def _epoch_rates(
    steps: list[int], ips: list[float | None], first: int, gpus: int | None
) -> tuple[list[float | None], bool]:
    """The global rates of one epoch's records (in order up to its first post-reset record, then chained) and
    whether every record has one."""
    if not gpus:
        return [None] * len(steps), not steps
    k = bisect_left(steps, RESET_STEP) + 1  # the steps of an epoch rise
    rates, prev = _rates_in_order(steps[:k], ips[:k], first, gpus, None)
    complete = None not in rates
    if k < len(steps):
        chained: Sequence[float | None] | None = None
        if prev is not None and prev[0] == steps[k - 1]:  # the chain goes on from the record before
            chained = _chained_rates(steps[k - 1 :], ips[k:], prev[1], gpus)
        if chained is None:
            chained = _rates_in_order(steps[k:], ips[k:], first, gpus, prev)[0]
            complete = complete and None not in chained
        rates += chained
    return rates, complete


def _step_records(
    steps: _Steps, starts: list[int], gpus: int | None, epoch_len: int | None
) -> tuple[RecordColumns, bool]:
    """Records with the global rate since the previous kept record, from the running averages; and whether
    every record has a rate. ``starts``: ``_epoch_starts``."""
    step, ips = steps.step, steps.ips
    if len(starts) == 1:  # one epoch
        iteration = step
        rates, complete = _epoch_rates(step, ips, min(step[0], 1), gpus)
    else:
        iteration, rates, complete = [], [], True
        offset, first = 0, 0
        for a, b in zip(starts, [*starts[1:], len(step)]):
            if a:  # a new epoch: the counter and the averages restart
                offset += max(step[a - 1] + (1 if first == 0 else 0), epoch_len or 0)
            first = min(step[a], 1)
            iteration += map(add, step[a:b], repeat(offset))
            part, part_complete = _epoch_rates(step[a:b], ips[a:b], first, gpus)
            rates += part
            complete = complete and part_complete
    numbers = {e: int(e) if e is not None else None for e in steps.epochs}
    epochs = [numbers.popitem()[1]] * len(step) if len(numbers) == 1 else list(map(numbers.__getitem__, steps.epoch))
    return RecordColumns(iteration, steps.time, rates, steps.loss, steps.rank, epochs), complete


def _rated(records: RecordColumns, all_rated: bool) -> RecordColumns:
    """The records that have a rate (``all_rated``: all of them), without times (measured from the rates)."""
    rates = records.samples_per_sec
    if all_rated:
        return RecordColumns(records.iteration, [None] * len(rates), rates, records.loss, records.rank, records.epoch)
    keep = [i for i, r in enumerate(rates) if r is not None]

    return RecordColumns(
        _at_rows(records.iteration, keep),
        [None] * len(keep),
        _at_rows(rates, keep),
        _at_rows(records.loss, keep),
        _at_rows(records.rank, keep) if records.rank is not None else None,
        _at_rows(records.epoch, keep) if records.epoch is not None else None,
    )


def _untimed(records: list[IterationRecord] | RecordColumns) -> RecordColumns:
    """The records without times."""
    cols = RecordColumns.of(records)
    return RecordColumns(cols.iteration, [None] * len(cols), cols.samples_per_sec, cols.loss, cols.rank, cols.epoch)


def _pass_records(
    passes: list[_Pass], global_batch: int | None
) -> tuple[list[IterationRecord], list[IterationRecord], bool]:
    """(stored, measured, timed by stamps) records of PaddleCV lines: rate = global batch / elapse of that
    batch; with sub-second timestamps on every line the measured rates come from them instead."""
    stored: list[IterationRecord] = []
    offset, epoch, first, last = 0, -1, 0, -1
    for p in passes:
        if p.epoch != epoch or p.batch <= last:
            if stored:
                offset += last + (1 if first == 0 else 0)
            epoch, first = p.epoch, min(p.batch, 1)
        last = p.batch
        rate = None
        if global_batch and p.elapse is not None and 0 < p.elapse < math.inf:
            rate = global_batch / p.elapse
        stored.append(IterationRecord(offset + p.batch, p.time, rate, p.loss, p.rank, p.epoch))
    stamped = bool(global_batch) and bool(passes) and all(p.precise for p in passes)
    measured: list[IterationRecord] = []
    for i, r in enumerate(stored):
        rate = r.samples_per_sec
        if stamped:
            prev = stored[i - 1] if i else None
            rate = None
            if (
                global_batch
                and prev is not None
                and r.time is not None
                and prev.time is not None
                and r.time > prev.time
            ):
                rate = global_batch * (r.iteration - prev.iteration) / (r.time - prev.time)
        measured.append(IterationRecord(r.iteration, None, rate, r.loss, r.rank, r.epoch))
    return stored, measured, stamped


def _published(steps: _Steps, gpus: int | None) -> float | None:
    """The report's figure: mean ips of the train-step lines after the first 10 (100 for > 8 GPUs) x GPUs."""
    if not gpus:
        return None
    skip = PUBLISHED_SKIP_MULTINODE if gpus > 8 else PUBLISHED_SKIP
    values = steps.ips[skip:]
    total = sum(cast("list[float]", values)) if all(values) or None not in values else math.nan
    if not math.isfinite(total):  # some ips is missing or not finite: the finite ones
        finite = [x for x in values if x is not None and math.isfinite(x)]
        return sum(finite) / len(finite) * gpus if finite else None
    return total / len(values) * gpus if values else None


def _parse_run(
    chunk: str,
    run: _Run,
    all_steps: _Steps,
    elapses: _Elapses,
    file: str,
    options: ParseOptions,
    hint: int | None,
) -> ParsedRun:
    ranks = (set(all_steps.rank) if all_steps.rank is not None else set()) | {p.rank for p in run.passes}
    steps, passes = _keep_rank_steps(all_steps, ranks), _keep_rank(run.passes, ranks)
    gpus = _gpus(run, all_steps, elapses, hint, file)
    reason: str | None = None
    epochs = _int(run.config.get("epochs"))
    progress: list[tuple[str, int, int]] = []
    stamped = False
    stored: list[IterationRecord] | RecordColumns
    measured: list[IterationRecord] | RecordColumns
    if len(steps) or not passes:  # PaddleClas
        batch = run.train_batch // gpus if run.train_batch and gpus and run.train_batch % gpus == 0 else None
        global_batch = batch * gpus if batch and gpus else None
        per_epoch = None
        total = _int(run.config.get("total_images"))
        if total and global_batch:
            per_epoch = total // global_batch
        print_interval = _int(run.config.get("print_interval"))
        starts = _epoch_starts(steps)
        stored, all_rated = _step_records(
            steps, starts, gpus, per_epoch if print_interval and print_interval > 1 else None
        )
        measured = _rated(stored, all_rated)
        reported = _published(steps, gpus)
        if len(steps) and not gpus:
            reason = UNKNOWN_GPUS
        if len(steps):
            seen = len(steps.epochs)
            last_epoch = steps.epoch[-1]
            if seen == 1:  # one epoch: the least step (the first when the steps rise)
                in_last = steps.step[0] if len(starts) == 1 else min(steps.step)
            else:
                in_last = min(s for s, e in zip(steps.step, steps.epoch) if e == last_epoch)
            last_count = steps.step[-1] + (1 if in_last == 0 else 0)
            if epochs:
                progress.append(("epochs", seen, epochs))
            if per_epoch:
                progress.append(("iterations", last_count, per_epoch))
        finished = run.ends >= (epochs or len(steps.epochs) or 1) if run.ends else False
    else:  # PaddleCV
        cv_batch = _int(run.args.get("batch_size"))  # per trainer process
        global_batch = cv_batch * (gpus or 1) if cv_batch else None
        batch = cv_batch if gpus else None
        stored, measured, stamped = _pass_records(passes, global_batch)
        reported, finished = None, False
        if not cv_batch:
            reason = UNKNOWN_BATCH
    why = truncation(chunk, finished=finished, progress=progress, fit=options.fit) or reason
    # conclude fails on these before measuring anything (a text failure too: it is conclude's first check, and
    # then the records handed to it do not matter); else the measured records, without times: timed from the
    # rates (a log whose lines give no rate has none)
    records = stored if why or not stored or loss_failure(stored) else measured or _untimed(stored)
    result = conclude(
        text=chunk,
        file=file,
        format=NAME,
        records=records,
        options=options,
        reported=reported,
        gpus=gpus,
        batch_size_per_device=batch,
        truncated=why,
        stopped_early=stopped_short(finished=finished, progress=progress),
    )
    if stamped and result.status == "ok":
        result = replace(result, method=TIMESTAMPS)
    return replace(result, records=RecordColumns.of(stored))


def parse(text: str, file: str, options: ParseOptions, gpus_hint: int | None = None) -> list[ParsedRun]:
    """The runs of a PaddleClas / PaddleCV log (see the module docstring). ``gpus_hint`` is used only when
    the log does not say its GPU count."""
    runs, steps, elapses = _split(text)
    return [_parse_run(text[r.start : r.end], r, _run_steps(r, steps), elapses, file, options, gpus_hint) for r in runs]


FORMAT = LogFormat(NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=DEFAULT_MEASURED)
"""Registry entry of this format."""
