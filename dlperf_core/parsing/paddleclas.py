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

Reading (mechanics only; the rules above are the per-line ones): one ``re.split`` of the whole text by
``_LINE``, the usual train-step line ``<stamp> INFO: epoch:E   train step:S   loss: L top1: .. top5: .. lr: ..
elapse: Es ips: I images/sec`` (maybe behind an mpirun prefix), gives those lines' fields as columns and the
text between them. Only the lines between (a few hundred in a real log) are read one by one, by the per-line
rules (``_Reader``), which also read train-step lines of other layouts; ``_LINE`` takes a line only where those
rules would read exactly that step from it and nothing else (see its comment). Times are computed once per
distinct stamp, steps stay columns (``_Steps``), records are ``RecordColumns``, and an epoch's rates after its
first post-reset record are computed as one block (``_chained_rates``) when every record gets one, with the
same floating-point operations as record by record (``_rates_in_order``, used otherwise).
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
from dlperf_core.parsing.values import anchored_matches, stamp_seconds
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
_FAST = re.compile(  # the usual layout in one match, from "train step:": step, loss, elapse (decimals), ips
    r"train step:\s{0,20}(\d{1,12})\s{1,20}loss:\s{0,20}([^\s,]{1,64})"
    r"[^\n]{0,400}?\belapse: (\d{1,12}(?:\.(\d{1,12}))?)s ips:\s{0,20}([^\s,]{1,64}) images/sec"
)
_TRAIN = re.compile(r"train step:\s{0,20}(\d{1,12})(?!\d)([^\n]*?)\bips:\s{0,20}([^\s,]{1,64}) images/sec")
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

# The usual train-step line, whole: from the "\n" before it to its end (the fast route, see the module docstring).
# Where it matches, the per-line rules read the same step from the line, and nothing else:
# * its 19-character stamp is digits and "-/: T", so the line's first "train step:" is the one after "epoch:E"
#   (where _EPOCH finds E); the time is ``_stamp`` of the stamp (see ``_times_and_epochs``);
# * the fields are _FAST's, read with narrower classes (values: ASCII letters, digits, ".+-"; spaces for \s;
#   elapse with a fraction); between loss and elapse only the words "top1:", "top5:" and "lr:" end in a colon,
#   so " elapse: " is the first place where _FAST's lazy gap can end;
# * it holds no banner or launcher block (a new run): those have two words in a row with lowercase letters
#   ("is powered", "Configuration Arguments"), while here such words are the fixed ones and single values
#   between them (the stamp and the end of the line after "images/sec" have no lowercase letter).
# Each repetition is followed by a character it cannot take, so it never gives one back: possessive (``{m,n}+``)
# finds the same match, faster. Elapse is captured only by the variant ``_FastElapse`` uses.
_VALUE = r"[0-9A-Za-z.+\-]{1,64}+"
_ELAPSE_VALUE = r"[0-9]{1,12}+\.[0-9]{1,12}+"


def _line_regex(prefixed: bool, elapse: bool = False) -> re.Pattern[str]:
    """``_LINE``: groups head ("<stamp> INFO: epoch:E"), step, loss, ips. ``prefixed`` (for a text holding
    "<std"): behind an optional mpirun prefix, group 1 its rank; possessive, so taken wherever it matches, as
    the per-line rules strip it wherever it matches. ``elapse``: a group "elapse" too."""
    return re.compile(
        (r"\n(?:" + _PREFIX.pattern + r")?+" if prefixed else r"\n")
        + r"([-0-9 :/T]{19} INFO: epoch:[0-9]{1,9}+) {1,20}+"  # head
        + r"train step: {0,20}+([0-9]{1,12}+) {1,20}+loss: {0,20}+("
        + _VALUE
        + ")"  # step, loss
        + " top1: "
        + _VALUE
        + " top5: "
        + _VALUE
        + " lr: "
        + _VALUE
        + " elapse: "
        + ("(?P<elapse>" + _ELAPSE_VALUE + ")" if elapse else _ELAPSE_VALUE)
        + r"s ips: {0,20}+("
        + _VALUE
        + r") images/sec[^\na-z]*+(?![^\n])"  # ips; the line ends
    )


_LINE, _LINE_PREFIXED = _line_regex(False), _line_regex(True)  # (a prefix may hold a banner: see _split)
_LINE_WITH_ELAPSE, _LINE_PREFIXED_WITH_ELAPSE = _line_regex(False, elapse=True), _line_regex(True, elapse=True)


def detect(text: str) -> bool:
    """Whether ``text`` holds the PaddleClas banner, a PaddleClas train-step line or a PaddleCV
    ``[Pass p, train batch b]`` line (among the first lines holding those words)."""
    if _BANNER in text:
        return True
    return any(
        next(anchored_matches(text, needle, rx, _DETECT_TRIES), None) is not None
        for needle, rx in (("train step:", _TRAIN), ("[Pass ", _CV))
    )


def _stamp(line: str, cache: dict[str, float | None] | None = None) -> tuple[float | None, bool]:
    """Unix seconds (UTC) of a timestamp at the start of ``line`` and whether it has sub-second digits;
    ``cache`` remembers whole-second stamps by their text."""
    if cache is not None and line[:19] in cache:
        head = line[:19]
        if len(line) == 19 or not line[19].isdigit() and line[19] not in ",.":
            return cache[head], False
    m = _STAMP.match(line)
    if m is None:
        return None, False
    t, fractional = stamp_seconds(m)
    if cache is not None and t is not None and not fractional and m.end() == 19:
        cache[line[:19]] = t
    return t, fractional


def _times_and_epochs(heads: list[str]) -> tuple[list[float | None], list[str | None], set[str | None]]:
    """The time and the epoch (as printed) of each ``_LINE`` line from its head "<stamp> INFO: epoch:E", and
    the distinct epochs. The time is ``_stamp`` of the line, computed once per distinct head (the stamp is
    followed by a space): the stamp's minute (computed once per distinct minute) plus its seconds."""
    distinct = list(set(heads))
    minutes = list(map(_MINUTE, distinct))
    at_minute = {m: _stamp(m + "00")[0] for m in set(minutes)}  # "YYYY-MM-DD hh:mm:" at second 00
    try:  # exact: a whole-second stamp is an integer number of seconds
        time_of = dict(
            zip(distinct, map(add, map(at_minute.__getitem__, minutes), map(_SECONDS.get, map(_SECOND, distinct))))
        )
    except TypeError:  # (None + ...) a head whose stamp is no date, or whose seconds are not 00..59
        time_of = {h: _stamp(h)[0] for h in distinct}
    time = list(map(time_of.__getitem__, heads))
    epochs = set(map(_EPOCH_TEXT, distinct))
    if len(epochs) == 1:  # one epoch (the usual log)
        return time, [next(iter(epochs))] * len(heads), epochs
    return time, list(map(_EPOCH_TEXT, heads)), epochs


# a _LINE head "YYYY-MM-DD hh:mm:ss INFO: epoch:E": its minute, its seconds, its epoch
_MINUTE, _SECOND, _EPOCH_TEXT = itemgetter(slice(0, 17)), itemgetter(slice(17, 19)), itemgetter(slice(32, None))
_SECONDS = {f"{s:02d}": s for s in range(60)}  # as datetime takes them


def _floats(texts: list[str]) -> list[float | None]:
    """``to_float`` of each text."""
    try:
        return list(map(float, texts))
    except ValueError:
        return [_float(t) for t in texts]


@dataclass
class _Step:
    """One PaddleClas train-step line read by the per-line rules."""

    rank: int | None
    epoch: str | None
    step: int
    time: float | None
    loss: float | None
    ips: float | None
    elapse: str | None  # as printed: "0.280"


@dataclass
class _Steps:
    """PaddleClas train-step lines as columns, row i being line i (in text order)."""

    rank: list[int | None] | None  # None: no line has an mpirun rank
    epoch: list[str | None]  # as printed; None: the line names no epoch
    step: list[int]
    time: list[float | None]
    loss: list[float | None]
    ips: list[float | None]
    # elapse as printed (its value and decimals are read where needed, _per_card_batch), or for a _LINE line its
    # number (_FastElapse reads it)
    elapse: Sequence[str | int | None]

    def __len__(self) -> int:
        return len(self.step)

    @cached_property
    def epochs(self) -> set[str | None]:
        """The distinct epochs printed."""
        return set(self.epoch)

    def columns(self) -> list[Sequence[Any] | None]:
        """The columns, in field order."""
        return [self.rank, self.epoch, self.step, self.time, self.loss, self.ips, self.elapse]

    def rows(self, start: int, stop: int) -> _Steps:
        """Rows start..stop-1."""
        return _Steps(
            self.rank[start:stop] if self.rank is not None else None,
            self.epoch[start:stop],
            self.step[start:stop],
            self.time[start:stop],
            self.loss[start:stop],
            self.ips[start:stop],
            self.elapse[start:stop],
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
            _at_rows(self.elapse, keep),
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
    """What one run's lines say. Its ``_LINE`` lines are numbers first..last-1 of the text's."""

    start: int
    first: int
    end: int = 0
    last: int = 0
    # its other train-step lines, each with the number of the _LINE line after it
    slow: list[tuple[int, _Step]] = field(default_factory=list)
    passes: list[_Pass] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)  # top-level config keys
    train_batch: int | None = None  # TRAIN.batch_size (global)
    args: dict[str, str] = field(default_factory=dict)  # "name: value" argument lines
    trainers: int | None = None
    gloo: int | None = None
    local: int | None = None
    ends: int = 0  # END epoch ... train lines

    def trained(self, k: int) -> bool:
        """Whether it has training lines before _LINE line number ``k``."""
        return k > self.first or bool(self.slow or self.passes)


class _Reader:
    """The per-line rules, for the lines ``_LINE`` did not take: runs and what each says."""

    def __init__(self, text: str, prefixed: bool) -> None:
        self.text, self.prefixed = text, prefixed
        self.run = _Run(0, 0)
        self.runs = [self.run]
        self.section = ""
        self.stamps: dict[str, float | None] = {}
        self._ends: list[int] | None = None  # where each _LINE line ends: read once a new run needs it

    def gap(self, k: int, gap: str) -> None:
        """The lines of ``gap``, the text between _LINE lines k-1 and k (from the "\\n" ending line k-1)."""
        lines = gap.split("\n")
        at = 0  # where the line starts in the gap
        if k:
            assert not lines[0]  # a _LINE match ends its line: the gap starts with the "\n" after it
            del lines[0]
            at = 1
        for raw in lines:
            self.line(raw, k, at)
            at += len(raw) + 1

    def _offset(self, k: int, at: int) -> int:
        """The text offset of ``at`` in gap ``k``."""
        if not k:
            return at
        if self._ends is None:
            rx = _LINE_PREFIXED if self.prefixed else _LINE
            self._ends = [m.end() for m in rx.finditer(self.text)]
        return self._ends[k - 1] + at

    def line(self, raw: str, k: int, at: int) -> None:  # noqa: C901 - the per-line rules, in their order
        """One line (before _LINE line number ``k``, at ``at`` in its gap)."""
        run = self.run
        line = raw.rstrip("\r")
        rank = None
        if self.prefixed:
            pm = _PREFIX.match(line)
            if pm is not None:
                rank, line = int(pm.group(1)), line[pm.end() :]
        if (_BANNER in line or _LAUNCH in line) and run.trained(k):
            here = self._offset(k, at)
            run.end, run.last = here, k
            run = self.run = _Run(here, k)
            self.runs.append(run)
            self.section = ""
        i = line.find("train step:")
        if i >= 0:
            em = _EPOCH.search(line, max(0, i - 40), i)
            epoch = em.group(1) if em else None
            f = _FAST.match(line, i)
            if f is not None:
                step, loss, elapse, _, ips = f.groups()
                run.slow.append(
                    (k, _Step(rank, epoch, int(step), _stamp(line, self.stamps)[0], _float(loss), _float(ips), elapse))
                )
                return
            m = _TRAIN.match(line, i)
            if m is not None:
                step, mid, ips = m.groups()
                lm, em = _LOSS.search(mid), _ELAPSE.search(mid)
                run.slow.append(
                    (
                        k,
                        _Step(
                            rank,
                            epoch,
                            int(step),
                            _stamp(line)[0],
                            _float(lm.group(1)) if lm else None,
                            _float(ips),
                            em.group(1) if em else None,
                        ),
                    )
                )
                return
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


def _split(text: str) -> tuple[list[_Run], _Steps, _FastElapse]:
    """The runs, the text's ``_LINE`` lines (as columns) and their elapse: one split of the whole text, then the
    per-line rules on the lines between."""
    prefixed = "<std" in text
    rx = _LINE_PREFIXED if prefixed else _LINE
    parts: list[str | None] = rx.split(text)  # gap, the line's groups, gap, ..., gap
    width = rx.groups + 1
    gaps = cast("list[str]", parts[::width])  # (a gap is text, never None)
    between = list(compress(count(), gaps))  # the gaps holding lines
    if prefixed and any(
        text.count(marker) != sum(gaps[k].count(marker) for k in between) for marker in (_BANNER, _LAUNCH)
    ):  # a banner or launcher block in a _LINE line's prefix
        parts, gaps, between = [text], [text], [0]  # (never seen): every line is read by the rules
    columns = [parts[j::width] for j in range(1, width)]
    ranks = [int(r) if r is not None else None for r in columns.pop(0)] if prefixed else None
    heads, step, loss, ips = cast("list[list[str]]", columns)  # (these groups always take part: never None)
    time, epoch, epochs = _times_and_epochs(heads)
    fast = _Steps(
        ranks,
        epoch,
        list(map(int, step)),
        time,
        _floats(loss),
        _floats(ips),
        range(len(step)),
    )
    fast.epochs = epochs  # known already
    reader = _Reader(text, prefixed)
    for k in between:
        reader.gap(k, gaps[k])
    reader.run.end, reader.run.last = len(text), len(fast)
    return reader.runs, fast, _FastElapse(text, prefixed, len(fast))


class _FastElapse:
    """The printed elapse of ``_LINE`` line number k (not captured by the split: ``_per_card_batch`` alone needs
    it, and only for the last rows, if at all). The lines are found from the end of the text back: each "\\n"
    where ``_LINE`` matches starts one, as in the split."""

    def __init__(self, text: str, prefixed: bool, lines: int) -> None:
        self.text, self.rx = text, _LINE_PREFIXED_WITH_ELAPSE if prefixed else _LINE_WITH_ELAPSE
        self.found: dict[int, str] = {}
        self.below, self.pos = lines, len(text)  # lines below.. are found; the others lie before pos

    def __call__(self, k: int) -> str:
        while self.below > k:
            i = self.text.rfind("\n", 0, self.pos)
            if i < 0:
                raise LookupError(f"no _LINE line {k}")
            m = self.rx.match(self.text, i)
            if m is not None:
                self.below -= 1
                self.found[self.below] = m.group("elapse")
            self.pos = i
        return self.found[k]


def _run_steps(run: _Run, fast: _Steps) -> _Steps:
    """The run's train-step lines: its _LINE lines and, in their places, the others."""
    if not run.slow:
        return fast if (run.first, run.last) == (0, len(fast)) else fast.rows(run.first, run.last)
    # (only the rank column may be None: every line's rank is None then)
    columns = [c if c is not None else [None] * len(fast) for c in fast.columns()]
    out: list[list[Any]] = [[] for _ in columns]
    at = run.first
    for k, s in run.slow:
        for column, new, value in zip(columns, out, (s.rank, s.epoch, s.step, s.time, s.loss, s.ips, s.elapse)):
            if k > at:
                new.extend(column[at:k])
            new.append(value)
        at = k
    for column, new in zip(columns, out):
        new.extend(column[at : run.last])
    return _Steps(*out)


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


def _per_card_batch(steps: _Steps, fast_elapse: _FastElapse) -> tuple[float, float] | None:
    """(ips x elapse, its uncertainty) from the last post-reset step with both: the per-card batch."""
    for i in reversed(range(len(steps))):
        ips = steps.ips[i]
        if steps.step[i] < RESET_STEP or not ips:
            continue
        text = steps.elapse[i]
        if isinstance(text, int):
            text = fast_elapse(text)
        elapse = _float(text)
        if elapse and 0 < ips * elapse < math.inf:
            assert text is not None  # (a number was read from it)
            decimals = len(text) - text.index(".") - 1 if "." in text else 0
            return ips * elapse, ips * 0.5 * 10.0 ** -min(decimals, 12) + 1e-6
    return None


def _gpus(run: _Run, steps: _Steps, fast_elapse: _FastElapse, hint: int | None, file: str) -> int | None:
    """The trainer (GPU) count: what the log says first, then the hint, then the file name. A PaddleCV
    process may drive several listed GPUs itself, so its ``selected_gpus`` list is not a trainer count."""
    if run.trainers or run.gloo:
        return run.trainers or run.gloo
    if run.config.get("is_distributed") == "False":
        return 1
    est = _per_card_batch(steps, fast_elapse) if run.train_batch else None
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
    is the rated record before them (its n/ips ``u0`` > 0), ``ips`` theirs. None when some would get none.
    Every rate finite and positive means every record got one: a missing or zero ips raises, and the first ips
    not finite and positive, or running-average time that does not grow, gives a rate <= 0 or NaN."""
    try:
        if steps[-1] - steps[0] == len(ips):  # every step printed: each record is one step after the one before
            # u = (step - RESET_STEP + 1) / ips and rate = 1 / (u - u before), with the ints as floats: Python
            # divides an int by a float as that int's float, so the quotients are the same
            u = chain((u0,), map(truediv, count(float(steps[1] - RESET_STEP + 1)), ips))
            if gpus == 1:  # x * 1 is x
                rates = [1.0 / (v - w) for w, v in pairwise(u)]
            else:
                rates = [1.0 / (v - w) * gpus for w, v in pairwise(u)]
        else:
            u = chain((u0,), map(truediv, map(sub, steps[1:], repeat(RESET_STEP - 1)), ips))
            rates = [(b - a) / (v - w) * gpus for (a, b), (w, v) in zip(pairwise(steps), pairwise(u))]
    except (TypeError, ZeroDivisionError):
        return None
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
            if prev is not None and r.time is not None and prev.time is not None and r.time > prev.time:
                rate = global_batch * (r.iteration - prev.iteration) / (r.time - prev.time)  # type: ignore[operator]
        measured.append(IterationRecord(r.iteration, None, rate, r.loss, r.rank, r.epoch))
    return stored, measured, stamped


def _published(steps: _Steps, gpus: int | None) -> float | None:
    """The report's figure: mean ips of the train-step lines after the first 10 (100 for > 8 GPUs) x GPUs."""
    if not gpus:
        return None
    skip = PUBLISHED_SKIP_MULTINODE if gpus > 8 else PUBLISHED_SKIP
    values = steps.ips[skip:]
    try:
        total: float = sum(values)  # type: ignore[arg-type]  # a None raises TypeError: caught below
    except TypeError:  # a missing ips
        total = math.nan
    if not math.isfinite(total):  # some ips is missing or not finite: the finite ones
        finite = [x for x in values if x is not None and math.isfinite(x)]
        return sum(finite) / len(finite) * gpus if finite else None
    return total / len(values) * gpus if values else None


def _parse_run(
    chunk: str,
    run: _Run,
    all_steps: _Steps,
    fast_elapse: _FastElapse,
    file: str,
    options: ParseOptions,
    hint: int | None,
) -> ParsedRun:
    ranks = (set(all_steps.rank) if all_steps.rank is not None else set()) | {p.rank for p in run.passes}
    steps, passes = _keep_rank_steps(all_steps, ranks), _keep_rank(run.passes, ranks)
    gpus = _gpus(run, all_steps, fast_elapse, hint, file)
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
    # then the records handed to it do not matter)
    # measured without times: timed from the rates; a log whose lines give no rate has none
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
    runs, fast, fast_elapse = _split(text)
    return [
        _parse_run(text[r.start : r.end], r, _run_steps(r, fast), fast_elapse, file, options, gpus_hint) for r in runs
    ]


FORMAT = LogFormat(NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=DEFAULT_MEASURED)
"""Registry entry of this format."""
