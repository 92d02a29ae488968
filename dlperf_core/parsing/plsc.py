"""PaddlePaddle PLSC ArcFace: ``arcface_paddle`` (static and dynamic graph) and, for the DLPerf seed, the
older ``plsc/entry.py``. Verbatim lines::

    Training: 2021-09-28 11:06:32,942 - rank: 0
    Training: 2021-09-28 11:06:32,946 - batch_size: 128
    Training: 2021-09-28 11:06:32,947 - log_interval_step: 100
    Training: 2021-09-28 11:06:33,524 - world_size: 8
    Training: 2021-09-28 11:06:33,524 - total_batch_size: 1024
    Training: 2021-09-28 11:06:33,524 - total_steps: 126450
    Training: 2021-09-28 11:10:24,823 - loss 37.6789, lr: 0.200000, epoch: 0, step: 1000, eta: 4.72 hours, throughput: 9729.78 imgs/sec
    Training: 2021-09-28 11:12:23,558 - [lfw][2000]Accuracy-Flip: 0.97933+-0.00554
    Training: 2021-09-28 11:12:23,558 - test time: 12.9029
    Training: 2021-09-28 11:18:55,856 - Save model to MS1M_v3_arcface_static_0.1/FresResNet50/0.
    (newer)  ... step: 1000, eta: 4.72 hours, avg_reader_cost: 0.01 sec, avg_batch_cost: 0.10 sec, avg_samples: 1024.0, ips: 9729.78 images/sec
    (entry.py)  Pass:0 batch:50 lr:0.1 loss:45.3 qps:2607.10
    (PLSC 2.x engine, plsc.engine.Engine: logger "plsc", config printed first)
    [2026/11/23 01:35:11] plsc INFO:     world_size : 2
    [2026/11/23 01:35:11] plsc INFO:             batch_size : 8
    [2026/11/23 01:35:15] plsc INFO: [Train][Epoch 1/1][Iter: 3/6400]lr: 0.099875, MarginLoss: 41.83540, loss: 41.83540, batch_cost: 4.24047s, reader_cost: 0.00254, ips: 1.88658 images/sec, eta: 7:32:06
    [2026/11/23 01:36:03] plsc INFO: global_step(10) >= max_train_step(10), training stops early.

* ``step`` is the global step; a line every ``log_interval_step`` steps (100). ``throughput`` is GLOBAL over
  the last log interval: log_interval x batch_size x world_size / wall time since the previous line (from
  the start for the first line, so the first interval includes start-up). ``ips`` of the newer form covers
  ``avg_samples`` samples per step: it is scaled by total_batch_size / avg_samples (world_size when
  avg_samples is the per-card batch, 1 when it is already the total). entry.py's ``qps`` is global (global
  batch x batches / executor time since the previous line).
* PLSC 2.x engine lines (plsc 2.4, ``plsc/engine/recognition/train.py``): ``ips`` is GLOBAL (the per-card
  batch x world_size over the mean ``batch_cost`` of the iterations since the previous line: the engine resets
  its timers after every line and at iteration 5) and covers the interval since the previous line, like
  ``throughput``. The iteration is (epoch - 1) x iterations per epoch + Iter + 1 (Iter counts from 0 in
  each epoch). Their timestamps have whole seconds only, so the window uses the printed rates. world_size,
  batch_size (the first: the training sampler's) and max_train_step come from the printed config
  (``plsc INFO: <indent>key : value``); the engine's ``training stops early`` line after max_train_step
  marks a finished run, and a run without it that printed max_train_step stopped short of it is truncated.
* Excluded intervals: an interval whose two training lines have validation lines between them
  (``[target][step]XNorm/Accuracy...``, ``test time:``) or a checkpoint save (``Save model to``) timed
  evaluation or saving, not training (1/5 and 2/3 of the speed on the real logs): its record keeps its printed rate
  but the measurement drops its iterations and its time. The first interval is always the base of the
  window (never counted), whatever the warm-up.
* Our rule: the ms timestamps (on every line; whole seconds are too coarse for 10 s intervals) with the
  global batch (total_batch_size, else world_size x batch_size): each kept interval's samples over its
  timestamp span; the window is the sum of kept samples over the sum of kept spans (method "timestamps").
  Without such timestamps or a batch: the printed rates (iteration-weighted harmonic mean, method
  "printed_rates"), with the same intervals left out.
* reported_throughput: None. These logs print no summary figure, and a median of interval rates would be
  our own statistic, not the framework's.
* gpus = ``world_size`` (else PADDLE_TRAINERS_NUM / num_trainers / nranks); batch_size_per_device = ``batch_size`` (else total_batch_size / world_size).
* Truncation: the run must log up to the last multiple of log_interval_step within ``total_steps``; a log
  without those header lines is truncated only when its last line is cut.
* Several runs in one file: a new ``--------args----------`` block after training lines, or a step that
  goes back, starts a new run. mpirun prefixes: the lowest rank's lines are kept; a line repeating the
  step before it (entry.py prints one line per node into the seed's multi-node logs) is dropped.

Default window = the DLPerf seed (PLSC ArcFace, extract_paddle_logs.py): entry.py patched to exit at batch
150, "the first 50 iterations skipped, the remaining 100 averaged" (its script took the qps lines of batches
50..140, i.e. iterations 41..140, as a plain mean). Here: warm-up 50, measured to the end of the log, which
for a run stopped at 150 iterations is exactly iterations 51..150 (a fixed 100 would leave no window on
logs printed every 100 steps).

How the text is read:

* Training lines of arcface_paddle (behind an optional mpirun prefix, any head, then the line's first
  ``loss `` starts ``loss L, lr: .., epoch: E, step: S, eta: ...`` up to the first ``throughput: T
  imgs/sec`` or ``ips: I images/sec``; its timestamp is the first one in its first 80 characters) are read
  by one ``re.finditer`` pass of ``_TRAIN_LINE`` over the whole text, into columns (the timestamp of a head
  other than the usual ``Training: <stamp,mmm> - `` by ``_stamp``, line by line). That pass is first made
  with the usual head only (``_USUAL_LINE``, faster); only when a line it left out holds ``loss `` is it
  made again with every head.
* The rare lines (the engine's and entry.py's training lines, config, stop, header and trainers lines) lie
  between those: their words (``_RARE_WORDS``) and header lines (``_KV_ANYWHERE``) are looked for in that
  part of the text only (joined), and each line found is read by ``_rare_line``. The
  ``--------args----------`` marker is looked for everywhere.
* A validation / checkpoint line matters only as "one lies between these two training lines": between two
  training lines that are not neighbours, the first line holding one of their words is read.
* Runs are index ranges of the training lines, split by text position (argument blocks, steps going
  back); records are ``RecordColumns``; timestamps are converted per distinct minute, second and fraction
  (the usual seconds and milliseconds from tables), with the same floating-point operations as
  ``values.stamp_seconds``.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate, compress
from operator import lt, ne, sub
from typing import NamedTuple, TypeVar, cast

from dlperf_core.parsing.failures import conclude, stopped_short, truncation
from dlperf_core.parsing.records import LogFormat, ParsedRun, ParseOptions, RecordColumns
from dlperf_core.parsing.values import MPIRUN_PREFIX as _PREFIX
from dlperf_core.parsing.values import anchored_matches, find_literal, utc_minute
from dlperf_core.parsing.values import match_at as _at
from dlperf_core.parsing.values import positive_int as _int
from dlperf_core.parsing.values import to_float as _float
from dlperf_core.parsing.window import TIMESTAMPS

NAME = "paddle_plsc_arcface"
DEFAULT_WARMUP = 50  # DLPerf seed: skip 50 of 150 iterations
DEFAULT_MEASURED = None

_STAMP = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d):(\d\d)(?:[,.](\d{1,6}))?")  # minute, second, fraction
_TRAIN = re.compile(  # detect(): loss, epoch, step, throughput, ips
    r"loss ([^\s,]{1,64}), lr: [^\s,]{1,64}, epoch: (\d{1,9}), step: (\d{1,12}), eta: [^\n]*?"
    r"(?:throughput: ([^\s,]{1,64}) imgs/sec|ips: ([^\s,]{1,64}) images/sec)"
)


def _train_line(prefixed: bool, other: bool = True) -> re.Pattern[str]:
    """``_TRAIN_LINE``: in "\n" + text, from the "\n" before a training line to its end. Groups: (only
    ``prefixed``: for a text holding "<std", the only one where a line may have an mpirun prefix) the rank of
    that prefix and an empty one where the prefix ends; then the usual head's timestamp minute, second and
    fraction; the loss, epoch, step, throughput and ips of ``_TRAIN`` at the line's first "loss ". Without
    ``other``: lines of the usual head only (``_USUAL_LINE``; where no line it leaves out holds "loss ", both
    find the same lines).

    The usual head, ``Training: <stamp,mmm> - `` right before "loss ", is matched as such: its timestamp is
    the line's first (``_stamp`` reads the others'). Any other head: a line without "loss " fails at once
    (the lookahead: one scan to the line's end and back to its "l"s); the head is read in runs of characters
    that start no "loss ", trying it only where it may start, and so is the gap before throughput / ips,
    trying those where a "t" or an "i" is. Every other repetition is followed by a character it cannot take,
    so it never gives one back: possessive."""
    return re.compile(
        r"\n"
        + (r"(?:" + _PREFIX.pattern.replace("{0,40}", "{0,40}+") + r")?+()" if prefixed else "")
        + r"(?:Training: (?=[^\n]{23} - loss )(\d{4}-\d\d-\d\d \d\d:\d\d):(\d\d),(\d{3}) - "
        + (r"|(?=[^\n]*loss )[^\nl]*+(?:l(?!oss )[^\nl]*+)*+)" if other else ")")
        + r"loss ([^\s,]{1,64}+), lr: [^\s,]{1,64}+, epoch: (\d{1,9}+), step: (\d{1,12}+), eta: "
        + r"[^\nti]*+(?:[ti][^\nti]*+)*?(?:throughput: ([^\s,]{1,64}+) imgs/sec|ips: ([^\s,]{1,64}+) images/sec)"
        + r"[^\n]*+"
    )


_TRAIN_LINE, _TRAIN_LINE_PREFIXED = _train_line(False), _train_line(True)
_USUAL_LINE, _USUAL_LINE_PREFIXED = _train_line(False, other=False), _train_line(True, other=False)
_PREFIXED = (_TRAIN_LINE_PREFIXED, _USUAL_LINE_PREFIXED)
_LINE = 2  # their group where a line starts after its prefix


def _body(line: re.Match[str]) -> int:
    """Where a training line (its ``_TRAIN_LINE`` match in "\n" + text) starts after its mpirun prefix."""
    return line.start(_LINE) if line.re in _PREFIXED else line.start() + 1


_SAMPLES = re.compile(r"avg_samples: ([^\s,]{1,64})")
_ENGINE = re.compile(  # PLSC 2.x engine: epoch, epochs, iter, iters per epoch, middle, ips
    r"\[Train\]\[Epoch (\d{1,9})/\d{1,9}\]\[Iter: (\d{1,12})/(\d{1,12})\]([^\n]*?)\bips: ([^\s,]{1,64}) images/sec"
)
_ENGINE_LOSS = re.compile(r"(?:^|, )loss: ([^\s,]{1,64})")
_ENGINE_CONF = re.compile(r"plsc INFO: {1,80}([A-Za-z_]\w{0,60}) : ([^\s]{1,200})$")
_ENGINE_KEYS = ("world_size", "batch_size", "max_train_step")
_ENGINE_STOP = re.compile(r"global_step\((\d{1,12})\) >= max_train_step\(\d{1,12}\), training stops early")
_OLD = re.compile(r"Pass:\s?(\d{1,9}),? batch:\s?(\d{1,12})(?!\d)")
_OLD_LOSS = re.compile(r"\bloss:\s?([^\s,]{1,64})")
_QPS = re.compile(r"\bqps:\s?([^\s,]{1,64})")
_KV = re.compile(r" - ([A-Za-z_]\w{0,60}): ([^\s]{1,200})$")
_KV_ANYWHERE = re.compile(r" - [A-Za-z_]\w{0,60}: [^\s]{1,200}\r*$", re.M)  # on whole texts: a line _KV may read
_DETECT_TRIES = 1000  # lines holding a needle that detect() looks at
_TRAINERS = re.compile(
    r"\bPADDLE_TRAINERS_NUM\b[\s|=:'\"]{1,80}(\d{1,6})\b|\b(?:num_trainers|nranks)\b\s{0,4}[:=]\s{0,4}(\d{1,6})\b"
)
_TRAINERS_WORDS = ("TRAINERS_NUM", "trainers", "nranks")
# A validation line: r"\[[^\]\n]{1,80}\]\[\d{1,12}\](?:XNorm|Accuracy)|\btest time: " matches in it; its two
# branches apart, each led by a literal (searched much faster); "t(?<!\wt)est" is "\btest"
_VALID_SCORE = re.compile(r"\[[^\]\n]{1,80}\]\[\d{1,12}\](?:XNorm|Accuracy)")
_VALID_TIME = re.compile(r"t(?<!\wt)est time: ")
_ARGS = "--------args----------"
_SAVE = "Save model to"
_PAUSE_WORDS = re.compile(r"Save model to|XNorm|Accuracy|test time: ")  # in every validation / save line
# in every engine, stop, config, entry.py and trainers line: the lines outside _TRAIN_LINE's matches that may
# matter (with the lines _KV may read); each with a character of it that is rare in logs (None: none is), to
# find it by jumping between occurrences of that character
_RARE_WORDS = (
    ("[Train][Epoch ", "E"),
    ("training stops early", None),
    ("plsc INFO: ", "I"),
    ("qps:", "q"),
    ("TRAINERS_NUM", None),
    ("trainers", None),
    ("nranks", "k"),
)
_HEADER = re.compile(r" - total_batch_size: \d")
_JUMPS = 64  # occurrences of a rare character that _find checks before a plain search takes over
_CLOCK = {f"{h:02d}:{m:02d}": h * 3600 + m * 60 for h in range(24) for m in range(60)}  # seconds of "HH:MM"


def detect(text: str) -> bool:
    """Whether ``text`` holds an arcface_paddle ``total_batch_size`` header or training line, or an entry.py
    qps line (among the first lines holding those words)."""
    if " - total_batch_size: " in text and _HEADER.search(text) is not None:
        return True
    for needle, rx, rare in (("loss ", _TRAIN, None), ("Pass:", _OLD, "P")):
        for m, end in anchored_matches(text, needle, rx, _DETECT_TRIES, rare):
            if rx is _TRAIN or _QPS.search(text, m.end(), end) is not None:
                return True
    if "plsc INFO: " in text:  # the PLSC 2.x engine's logger (PaddleClas's engine prints "ppcls INFO:")
        return next(anchored_matches(text, "[Train][Epoch ", _ENGINE, _DETECT_TRIES, "E"), None) is not None
    return False


def _usable(x: float | None) -> bool:
    return x is not None and 0 < x < math.inf


# ------------------------------------------------------------------------------------------ rare lines
_Stamp = tuple[str | None, str | None, str | None]
"""A timestamp as printed: (minute, second, fraction), Nones for none."""

_TRAINING, _STOP, _PAUSE, _SETTING = range(4)  # what a rare line is


class _Rare(NamedTuple):
    """What a rare line says (``_rare_line``): ``kind`` and the values of that kind. A _TRAINING line is an
    engine or an entry.py line (``old``: its step is entry.py's batch, its epoch the pass); a _SETTING line
    a header key and value, or a trainer count."""

    kind: int
    step: int = 0
    epoch: int = 0
    stamp: _Stamp = (None, None, None)
    loss: float | None = None
    rate: float | None = None
    old: bool = False
    key: str | None = None
    value: str | None = None
    trainers: int | None = None


def _stamp(line: str) -> _Stamp:
    """(minute, second, fraction) of the first timestamp in the line's first 80 characters, else Nones."""
    m = _STAMP.search(line, 0, 80)
    return (m.group(1), m.group(2), m.group(3)) if m is not None else (None, None, None)


def _rare_line(line: str) -> _Rare | None:
    """What a line that is not an arcface_paddle training line says, by the rules in their order (``line``
    without its mpirun prefix and trailing "\r"; the args marker is looked for apart), else None."""
    if "[Train][Epoch " in line:
        m = _at(line, "[Train][Epoch ", _ENGINE)
        if m is not None:
            epoch, it, per_epoch, middle, ips = m.groups()
            lm = _ENGINE_LOSS.search(middle)
            return _Rare(
                _TRAINING,
                (int(epoch) - 1) * int(per_epoch) + int(it) + 1,
                int(epoch),
                _stamp(line),
                _float(lm.group(1)) if lm else None,
                _float(ips),
            )
    if "training stops early" in line and _ENGINE_STOP.search(line) is not None:
        return _Rare(_STOP)
    if "plsc INFO: " in line and " : " in line:
        m = _ENGINE_CONF.search(line)
        return _Rare(_SETTING, key=m.group(1), value=m.group(2)) if m and m.group(1) in _ENGINE_KEYS else None
    if "qps:" in line:
        m = _at(line, "Pass:", _OLD)
        q = _QPS.search(line, m.end()) if m is not None else None
        if m is not None and q is not None:
            lm = _OLD_LOSS.search(line, m.end(), q.start())
            return _Rare(
                _TRAINING,
                int(m.group(2)),
                int(m.group(1)),
                _stamp(line),
                _float(lm.group(1)) if lm else None,
                _float(q.group(1)),
                old=True,
            )
    if _SAVE in line or _VALID_SCORE.search(line) is not None or ("test time: " in line and _VALID_TIME.search(line)):
        return _Rare(_PAUSE)
    if ": " in line:
        m = _at(line, " - ", _KV)
        t = _TRAINERS.search(line) if any(w in line for w in _TRAINERS_WORDS) else None
        trainers = _int(t.group(1) or t.group(2)) if t is not None else None
        if m is not None or trainers:
            return _Rare(_SETTING, key=m.group(1) if m else None, value=m.group(2) if m else None, trainers=trainers)
    return None


def _line_at(text: str, start: int) -> tuple[int, int | None, str]:
    """(start of the next line, mpirun rank or None, the line without its prefix and trailing "\r") of the
    line that starts at ``start``."""
    end = text.find("\n", start)
    if end < 0:
        end = len(text)
    line = text[start:end].rstrip("\r")
    rank = None
    if "<std" in line:  # the prefix holds it
        pm = _PREFIX.match(line)
        if pm is not None:
            rank, line = int(pm.group(1)), line[pm.end() :]
    return end + 1, rank, line


def _line_start(text: str, i: int) -> int:
    return text.rfind("\n", 0, i) + 1


# ------------------------------------------------------------------------------------------ the text
@dataclass
class _Lines:
    """The training lines (arcface_paddle, PLSC 2.x engine, entry.py), in text order, as columns."""

    start: list[int] = field(default_factory=list)  # line start
    after: list[int] = field(default_factory=list)  # the next line's start
    rank: list[int | None] = field(default_factory=list)
    step: list[int] = field(default_factory=list)  # entry.py: its batch until _runs makes it global
    epoch: list[int] = field(default_factory=list)  # entry.py: the pass
    minute: Sequence[str | None] = field(default_factory=list)  # the timestamp as printed (_STAMP's groups)
    second: Sequence[str | None] = field(default_factory=list)
    fraction: Sequence[str | None] = field(default_factory=list)
    loss: list[float | None] = field(default_factory=list)
    rate: list[float | None] = field(default_factory=list)  # throughput / ips / qps as printed
    samples: list[float | None] = field(default_factory=list)  # avg_samples of the newer form
    old: list[bool] = field(default_factory=list)  # an entry.py line
    pause: list[int] = field(default_factory=list)  # gaps before it holding a validation / save (any rank)

    _COLUMNS = (
        "start",
        "after",
        "rank",
        "step",
        "epoch",
        "minute",
        "second",
        "fraction",
        "loss",
        "rate",
        "samples",
        "old",
    )

    def add(self, start: int, after: int, rank: int | None, line: _Rare) -> None:
        """One engine or entry.py line (``_rare_line``)."""
        minute, second, fraction = line.stamp
        values = (start, after, rank, line.step, line.epoch, minute, second, fraction, line.loss, line.rate, None)
        for name, value in zip(self._COLUMNS, (*values, line.old)):
            getattr(self, name).append(value)

    def extend(self, other: _Lines) -> None:
        """``other``'s lines too, all in text order."""
        if not other.start:
            return
        starts = [*self.start, *other.start]
        order = sorted(range(len(starts)), key=starts.__getitem__)
        for name in self._COLUMNS:
            column = [*getattr(self, name), *getattr(other, name)]
            setattr(self, name, list(map(column.__getitem__, order)))


@dataclass
class _Events:
    """The rare lines, by line start."""

    args: list[int] = field(default_factory=list)  # "--------args----------"
    stops: list[int] = field(default_factory=list)  # the engine's "training stops early"
    settings: list[tuple[int, str | None, str | None, int | None]] = field(default_factory=list)  # key, value, trainers
    pauses: list[int] = field(default_factory=list)  # validation / save lines among the lines read one by one


def _read(text: str) -> tuple[_Lines, _Events]:
    """The training lines and the rare lines of ``text`` (see the module docstring)."""
    prefixed = find_literal(text, "<std", "<") >= 0
    lines = _training_lines(text, _USUAL_LINE_PREFIXED if prefixed else _USUAL_LINE)  # the usual ones (faster)
    parts = _gaps([0, *lines.after], [*lines.start, len(text)])
    between = "".join([text[a:b] for a, b in parts])
    if "loss " in between:  # a line between may be a training line with another head: all of them
        lines = _training_lines(text, _TRAIN_LINE_PREFIXED if prefixed else _TRAIN_LINE)
        parts = _gaps([0, *lines.after], [*lines.start, len(text)])
        between = "".join([text[a:b] for a, b in parts])
    events = _Events()
    extra = _Lines()
    for start in sorted(_rare_line_starts(text, parts, between)):
        after, rank, line = _line_at(text, start)
        what = _rare_line(line)
        if what is None:
            continue
        if what.kind == _TRAINING:
            extra.add(start, after, rank, what)
        elif what.kind == _STOP:
            events.stops.append(start)
        elif what.kind == _PAUSE:
            events.pauses.append(start)
        else:
            events.settings.append((start, what.key, what.value, what.trainers))
    lines.extend(extra)
    for start in _line_starts(text, _ARGS):
        if _ARGS in _line_at(text, start)[2]:
            events.args.append(start)
    lines.pause = _pauses(text, lines, events.pauses)
    return lines, events


def _training_lines(text: str, rx: re.Pattern[str]) -> _Lines:
    """arcface_paddle's training lines that ``rx`` (``_TRAIN_LINE`` or ``_USUAL_LINE``, prefixed for a text
    holding "<std": only there may a line have an mpirun prefix) finds, as columns."""
    padded = "\n" + text  # the "\n" before a line is at the line's start in text
    found = list(rx.finditer(padded))
    prefixed = rx in _PREFIXED
    if not found:
        return _Lines()
    columns = list(zip(*map(re.Match.groups, found)))
    minute, second, fraction, loss, epoch, step, thr, ips = columns[-8:]
    if None in minute:  # some head is not the usual one: its line's first timestamp, read apart
        minute, second, fraction = _stamp_columns(padded, found, (minute, second, fraction))
    n = len(found)
    out = _Lines(
        start=list(map(re.Match.start, found)),
        after=list(map(re.Match.end, found)),
        rank=_ranks(columns[0]) if prefixed else [None] * n,
        step=list(map(int, step)),
        epoch=_ints(epoch),
        minute=minute,
        second=second,
        fraction=fraction,
        loss=list(map(_float, loss)),
        old=[False] * n,
    )
    if ips.count(None) == n:
        out.rate, out.samples = list(map(_float, thr)), [None] * n
    else:
        out.rate = [_float(t if t is not None else i) for t, i in zip(thr, ips)]
        out.samples = [_samples(padded, m) if i is not None else None for m, i in zip(found, ips)]
    return out


def _stamp_columns(
    padded: str, found: list[re.Match[str]], usual: tuple[tuple[str | None, ...], ...]
) -> list[tuple[str | None, ...]]:
    """The minute, second and fraction columns of the training lines (their ``_TRAIN_LINE`` matches in
    "\n" + text): the usual head's (``usual``), else ``_stamp`` of the line after its prefix."""
    stamps = [
        (m, s, f) if m is not None else _stamp(padded[_body(line) : line.end()]) for line, m, s, f in zip(found, *usual)
    ]
    return [tuple(column) for column in zip(*stamps)]


def _samples(padded: str, line: re.Match[str]) -> float | None:
    """avg_samples of a training line (its ``_TRAIN_LINE`` match in "\n" + text), after its prefix."""
    sm = _SAMPLES.search(padded, _body(line), line.end())
    return _float(sm.group(1)) if sm else None


def _gaps(ends: list[int], starts: list[int]) -> list[tuple[int, int]]:
    """The non-empty (ends[i], starts[i])."""
    return [(ends[i], starts[i]) for i in compress(range(len(ends)), map(lt, ends, starts))]


def _rare_line_starts(text: str, parts: list[tuple[int, int]], joined: str) -> set[int]:
    """The start of every line of ``parts`` (whole lines of ``text``, ``joined`` their text) that holds one of
    ``_RARE_WORDS`` or that ``_KV`` may read: the lines ``_rare_line`` must read there (all but validation /
    save lines, which ``_pauses`` reads)."""
    offsets = list(accumulate((b - a for a, b in parts), initial=0))
    hits = [m.start() for m in _KV_ANYWHERE.finditer(joined)]
    for words, rare in _RARE_WORDS:
        hits.extend(_line_starts(joined, words, rare))
    out = set()
    for j in hits:
        k = bisect_right(offsets, j) - 1
        out.add(_line_start(text, parts[k][0] + j - offsets[k]))
    return out


def _line_starts(text: str, words: str, rare: str | None = None) -> list[int]:
    """The start of every line that holds ``words`` (``rare``: see ``_find``)."""
    out = []
    i = _find(text, words, rare, 0)
    while i >= 0:
        out.append(_line_start(text, i))
        end = text.find("\n", i)
        if end < 0:
            break
        i = _find(text, words, rare, end)
    return out


def _find(text: str, words: str, rare: str | None, start: int) -> int:
    """``text.find(words, start)``; with ``rare`` (a character of ``words``) by jumping between its
    occurrences (a search for one character is much faster), as long as few of them start no ``words``."""
    if rare is None:
        return text.find(words, start)
    at = words.index(rare)
    i = text.find(rare, start + at)
    for _ in range(_JUMPS):
        if i < 0 or text.startswith(words, i - at):
            return i - at if i >= 0 else -1
        i = text.find(rare, i + 1)
    return text.find(words, i - at) if i >= 0 else -1


def _pauses(text: str, lines: _Lines, found: list[int]) -> list[int]:
    """For each training line, how many gaps before it hold a validation / checkpoint line (two lines have a
    pause between them when these differ): ``found`` are such lines already read; between two training
    lines that are not neighbours the first line holding a pause's words is read."""
    n = len(lines.start)
    marks = [0] * n
    for p in found:
        i = bisect_right(lines.start, p)
        if 0 < i < n:
            marks[i] = 1
    for i in compress(range(1, n), map(lt, lines.after, lines.start[1:])):
        if not marks[i] and _holds_pause(text, lines.after[i - 1], lines.start[i]):
            marks[i] = 1
    return list(accumulate(marks))


def _holds_pause(text: str, start: int, end: int) -> bool:
    """Whether the lines from ``start`` to ``end`` (whole lines, none of them a training line) hold a
    validation or checkpoint line: the first line (a validation usually starts right after training), then
    each line holding their words."""
    after, _, line = _line_at(text, start)
    if _is_pause(line):
        return True
    while after < end:
        m = _PAUSE_WORDS.search(text, after, end)
        if m is None:
            return False
        after, _, line = _line_at(text, _line_start(text, m.start()))
        if _is_pause(line):
            return True
    return False


def _is_pause(line: str) -> bool:
    what = _rare_line(line)
    return what is not None and what.kind == _PAUSE


def _ints(texts: Sequence[str]) -> list[int]:
    """``int`` of each text (few distinct values in many lines: each converted once)."""
    values = {x: int(x) for x in set(texts)}
    return list(map(values.__getitem__, texts))


def _ranks(texts: Sequence[str | None]) -> list[int | None]:
    """The rank of each mpirun prefix (None without one), each distinct one converted once."""
    values = {x: int(x) if x is not None else None for x in set(texts)}
    return list(map(values.__getitem__, texts))


def _minute_seconds(minute: str) -> float | None:
    """Unix seconds (UTC) of a ``2021-09-28 11:10`` minute, None when it is no real date (as ``datetime``)."""
    return utc_minute(int(minute[0:4]), int(minute[5:7]), int(minute[8:10]), int(minute[11:13]), int(minute[14:16]))


def _minutes_seconds(minutes: set[str | None]) -> dict[str | None, float | None]:
    """``_minute_seconds`` of each minute (None for None), a day's date converted once."""
    days: dict[str, float | None] = {}
    out: dict[str | None, float | None] = {}
    for minute in minutes:
        if minute is None:
            out[None] = None
            continue
        date = minute[:10]
        if date not in days:
            days[date] = _minute_seconds(date + " 00:00")
        day, clock = days[date], _CLOCK.get(minute[11:])
        out[minute] = day + clock if day is not None and clock is not None else _minute_seconds(minute)
    return out


def _times(
    minutes: Sequence[str | None], seconds: Sequence[str | None], fractions: Sequence[str | None]
) -> tuple[list[float | None], bool]:
    """Unix seconds (UTC) of each timestamp (None: none, or no real time) as ``values.stamp_seconds``: the
    whole second, then plus float("0." + fraction) (0.0 without one: the same float), each distinct minute,
    second and fraction converted once; and whether every line has one with sub-second digits."""
    bases = _minutes_seconds(set(minutes))
    if None not in bases.values() and _SECONDS.keys() >= set(seconds) and _FRACTIONS.keys() >= set(fractions):
        # every line has a real time, with a usual second and fraction
        real = cast("dict[str | None, float]", bases)
        times: list[float | None] = [
            real[m] + _SECONDS[s] + _FRACTIONS[f] for m, s, f in zip(minutes, seconds, fractions)
        ]
        return times, all(fractions)
    whole = {s: _second(s) for s in set(seconds)}
    part = {f: _fraction(f) for f in set(fractions)}
    times = [
        b + w + part[f] if (b := bases[m]) is not None and (w := whole[s]) is not None else None
        for m, s, f in zip(minutes, seconds, fractions)
    ]
    return times, None not in times and all(fractions)


def _second(text: str | None) -> int | None:
    """A timestamp's second (0 to 59), None for none."""
    return int(text) if text is not None and int(text) <= 59 else None


def _fraction(text: str | None) -> float:
    """A timestamp's fraction of a second, as ``float("0." + fraction)`` (0.0 for none)."""
    return float("0." + text) if text else 0.0


_SECONDS: dict[str | None, int] = {f"{i:02d}": i for i in range(60)}  # _second of the usual seconds
_FRACTIONS: dict[str | None, float] = {None: 0.0} | {f"{i:03d}": float(f"0.{i:03d}") for i in range(1000)}  # and ms


# ------------------------------------------------------------------------------------------ runs
@dataclass
class _Run:
    """One run: its part of the text, its training lines ``first`` .. ``stop`` - 1 and header values."""

    start: int
    end: int = 0
    first: int = 0
    stop: int = 0
    same_job: bool = False  # started by a step going back: keeps the header read so far
    header: dict[str, str] = field(default_factory=dict)
    trainers: int | None = None
    stopped: bool = False  # the PLSC 2.x engine's "training stops early" line (max_train_step reached)


def _runs(text: str, lines: _Lines, events: _Events) -> list[_Run]:
    """The runs: a new ``--------args----------`` block after training lines, or a step that goes back,
    starts one (the latter keeps the header read so far). Makes entry.py steps global."""
    starts, n = lines.start, len(lines.start)
    new_blocks: list[int] = []
    for a in events.args:
        if bisect_left(starts, a) > bisect_left(starts, new_blocks[-1] if new_blocks else 0):
            new_blocks.append(a)  # training lines since the run began
    if any(lines.old):
        _global_batches(lines, new_blocks)
    step, rank = lines.step, lines.rank
    went_back = []
    for i in compress(range(1, n), map(lt, step[1:], step)):
        if lines.old[i] or (rank[i] is not None and rank[i] != rank[i - 1]):
            continue
        if bisect_right(new_blocks, starts[i]) == bisect_right(new_blocks, starts[i - 1]):  # same run so far
            went_back.append(starts[i])
    bounds = sorted([(a, False) for a in new_blocks] + [(b, True) for b in went_back])
    runs = [_Run(0)]
    for pos, same_job in bounds:
        runs[-1].end = pos
        runs.append(_Run(pos, same_job=same_job))
    runs[-1].end = len(text)
    settings, stops = events.settings, events.stops  # in text order
    k = 0
    for previous, run in zip([None, *runs], runs):
        run.first, run.stop = bisect_left(starts, run.start), bisect_left(starts, run.end)
        if run.same_job and previous is not None:
            run.header, run.trainers = dict(previous.header), previous.trainers
        while k < len(settings) and settings[k][0] < run.end:
            _, key, value, trainers = settings[k]
            if key is not None and value is not None:  # (a key always comes with its value)
                run.header.setdefault(key, value)
            run.trainers = run.trainers or trainers
            k += 1
        run.stopped = bisect_left(stops, run.end) > bisect_left(stops, run.start)
    return runs


def _global_batches(lines: _Lines, new_blocks: list[int]) -> None:
    """entry.py lines: the batch counter restarts every pass; steps count on (a new run restarts them)."""
    offset, last_pass, last_batch = 0, -1, -1
    block = 0
    lines.step = list(lines.step)
    for i in compress(range(len(lines.old)), lines.old):
        b, p = lines.step[i], lines.epoch[i]
        here = bisect_right(new_blocks, lines.start[i])
        if here != block:
            block, offset, last_pass, last_batch = here, 0, -1, -1
        if p != last_pass:  # a new pass restarts the batch counter (lines of other nodes repeat batches)
            if last_batch >= 0:
                offset += last_batch + 1
            last_pass, last_batch = p, -1
        last_batch = max(last_batch, b)
        lines.step[i] = offset + b


def _kept(lines: _Lines, first: int, stop: int) -> range | list[int]:
    """The lowest rank's lines (and unprefixed ones) when several ranks printed; a line repeating the step
    of the line before it (another node's copy) is dropped."""
    kept: range | list[int] = range(first, stop)
    ranks = lines.rank[first:stop]
    named = {r for r in set(ranks) if r is not None}
    if len(named) > 1:
        low = min(named)
        kept = [i for i, r in zip(kept, ranks) if r is None or r == low]
    steps = _pick(lines.step, kept)
    if all(map(lt, steps, steps[1:])):
        return kept
    out: list[int] = []
    last = 0
    for i, s in zip(kept, steps):
        if not out or s > last:
            out.append(i)
            last = s
    return out


_T = TypeVar("_T")


def _pick(column: Sequence[_T], kept: range | list[int]) -> Sequence[_T]:
    return column[kept.start : kept.stop] if isinstance(kept, range) else [column[i] for i in kept]


def _parse_run(chunk: str, run: _Run, lines: _Lines, file: str, options: ParseOptions) -> ParsedRun:
    h = run.header
    world = _int(h.get("world_size")) or run.trainers
    batch = _int(h.get("batch_size"))
    total = _int(h.get("total_batch_size"))
    if batch is None and total and world and total % world == 0:
        batch = total // world
    global_batch = total or (world * batch if world and batch else None)
    kept = _kept(lines, run.first, run.stop)

    its, ranks, epochs, losses = (
        _pick(lines.step, kept),
        _pick(lines.rank, kept),
        _pick(lines.epoch, kept),
        _pick(lines.loss, kept),
    )
    times, precise = _times(_pick(lines.minute, kept), _pick(lines.second, kept), _pick(lines.fraction, kept))
    rates = _pick(lines.rate, kept)
    samples = _pick(lines.samples, kept)
    if samples.count(None) < len(samples):  # ips over avg_samples -> the whole job
        rates = [
            r * max(1, round(global_batch / s)) if r is not None and s and global_batch and _usable(s) else r
            for r, s in zip(rates, samples)
        ]
    stored = RecordColumns(its, times, rates, losses, ranks, epochs)

    by_time = global_batch is not None and bool(its) and precise
    measured = RecordColumns(
        its,
        [None] * len(its),
        _interval_rates(its, times, rates, _pick(lines.pause, kept), global_batch if by_time else None),
        losses,
        ranks,
        epochs,
    )

    progress: list[tuple[str, int, int]] = []
    steps, interval = _int(h.get("total_steps")), _int(h.get("log_interval_step"))
    if steps and interval and its:
        progress.append(("iterations", its[-1], steps - steps % interval))
    max_train_step = _int(h.get("max_train_step"))
    if max_train_step and its:
        progress.append(("iterations", its[-1], max_train_step))
    # A run stopped on purpose (the seed's entry.py exit at batch 150) is complete once it reached the
    # window the caller asked for, even though it never reached total_steps.
    planned = options.warmup + options.measured if options.measured is not None else None
    stopped_as_planned = planned is not None and bool(its) and its[-1] >= planned
    finished = stopped_as_planned or run.stopped
    why = truncation(chunk, finished=finished, progress=progress, fit=options.fit)
    # A failed run's reason is the same whichever records are given: they share iterations and losses.
    result = conclude(
        text=chunk,
        file=file,
        format=NAME,
        records=measured,
        options=options,
        reported=None,
        gpus=world,
        batch_size_per_device=batch,
        truncated=why,
        stopped_early=stopped_short(finished=finished, progress=progress),
    )
    if result.status == "ok" and by_time:
        result = replace(result, method=TIMESTAMPS)
    return replace(result, records=stored)


def _interval_rates(
    its: Sequence[int],
    times: Sequence[float | None],
    rates: Sequence[float | None],
    pauses: Sequence[int],
    global_batch: int | None,
) -> list[float | None]:
    """Each record's rate over the interval since the record before it (None for the first and for an
    interval holding a validation or a save): from the timestamps with ``global_batch`` (None for a span
    that is not positive), else the printed rate."""
    out: list[float | None] = [None]
    if global_batch is None:
        out += rates[1:]
    else:
        out += [
            global_batch * (b - a) / dt if dt > 0 else None
            for a, b, dt in zip(its, its[1:], map(sub, times[1:], times))
        ]
    if pauses and pauses[0] != pauses[-1]:  # (never decreasing)
        for i in compress(range(1, len(its)), map(ne, pauses[1:], pauses)):
            out[i] = None
    return out if its else []


def parse(text: str, file: str, options: ParseOptions) -> list[ParsedRun]:
    """The runs of a PLSC ArcFace log (see the module docstring)."""
    lines, events = _read(text)
    return [_parse_run(text[r.start : r.end], r, lines, file, options) for r in _runs(text, lines, events)]


FORMAT = LogFormat(NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=DEFAULT_MEASURED)
"""Registry entry of this format."""
