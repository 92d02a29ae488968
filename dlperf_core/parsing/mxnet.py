"""NGC MXNet ResNet50 v1.5 (NVIDIA DeepLearningExamples, Horovod), as run by its ``benchmark.py``.
Verbatim lines (a TAB written \\t)::

    [1,0]<stderr>:2020-12-16 08:02:11,659:INFO: Start with arguments Namespace(amp=False, ..., batch_size=96, benchmark_iters=500, ..., gpus=[0], ..., num_epochs=3, ...)
    [1,0]<stderr>:2020-12-16 08:02:43,201:INFO: Epoch[0] Batch [40-59]\\tSpeed: 391.99921376862864 samples/sec\\tLR: 0.0033916\\t
    [1,0]<stderr>:2020-12-16 08:04:31,887:INFO: Starting epoch 1
    [1,0]<stderr>:2020-12-16 08:08:41,168:INFO: Experiment took: 389.46389174461365 sec
    train.total_ips
               |     96    |
    ------------------------
         1     |   387.07  |
         8     |   2998.1  |

* One file may hold SEVERAL runs (``benchmark.py -n 1,8``: 1 GPU, then 8 GPUs); one ParsedRun per run. A
  run starts at a ``Start with arguments`` line once the current run has trained, finished (``Experiment
  took``) or already printed that rank's arguments; a Speed line going back in (epoch, batch) for its rank
  also starts a run (logs without argument lines).
* A Speed line covers one display interval (``disp_batches``, 20 here): ``Batch [40-59]`` ends at batch
  index 59, i.e. global iteration ``epoch * epoch_len + 59 + 1``. epoch_len = ``benchmark_iters`` when the
  arguments give it, else ``num_examples // batch_size``, at least the longest epoch printed; epochs count
  from the first one printed.
* Every rank prints its own Speed line and its value is already GLOBAL (the arguments' ``batch_size`` is the
  job's total batch): only the lowest rank's lines are kept (a line that mpirun split with a second prefix
  is not read). gpus = the larger of the entries of ``gpus=[...]`` and the number of ranks that printed;
  batch_size_per_device = ``batch_size // gpus``. Timestamps are read as UTC (only differences matter).
* reported_throughput = the run's row of benchmark.py's final ``train.total_ips`` table (rows: GPU count,
  columns: batch size per GPU), which is global batch / mean batch latency (``train.latency_avg``).
* finished = an ``Experiment took`` line; otherwise a cut last line, fewer epochs than ``num_epochs``, or a
  last epoch that stops before its last display interval is truncation.
* Default window: DLPerf / benchmark.py skip one warm-up epoch; benchmark.py's epochs are
  ``benchmark_iters`` = 500 iterations, so the default warm-up is 500 iterations (a fixed number: a log with
  another epoch length needs an explicit warm-up to skip exactly one epoch), measured to the end.
* The DeepLearningExamples "amp" logs of this suite are pure fp16 runs (``amp=False, dtype='float16'``);
  nothing about precision is read here.

How the text is read: one ``re.finditer`` pass of ``_LINE`` over the whole text reads every line that
matters, in text order: after an optional mpirun prefix (its rank), the first Speed line, argument line or
end line that starts within 120 characters (the head, which holds the timestamp). Speed lines become
columns, argument and end lines events placed among them by text position; runs are index ranges of the
Speed lines; timestamps, rates and losses are converted only for the kept rank's lines; records are
``RecordColumns``.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, count, repeat
from operator import eq, is_, is_not
from typing import Any, cast

from dlperf_core.parsing.failures import conclude, stopped_short, truncation
from dlperf_core.parsing.records import LogFormat, ParsedRun, ParseOptions, RecordColumns
from dlperf_core.parsing.values import to_float as _float
from dlperf_core.parsing.values import utc_minute

NAME = "ngc_mxnet"
DEFAULT_WARMUP = 500  # one epoch of benchmark.py (benchmark_iters=500): DLPerf's 1 warm-up epoch

# In "\n" + text, from the "\n" before a line: the line as far as it matters. Groups: the rank of an mpirun
# prefix; the head (what comes before the line's first Speed / argument / end words that read, at most
# _MAX_HEAD characters: checked after); then a Speed line (epoch, batch, speed, the rest of the line), an
# argument line (the argument text) or an end line ("E"). The head takes the characters that start none of
# those words, then one "E" or "S" and those after it at a time, and the words are tried after each step:
# only where one may start. Every other repetition is followed by a character it cannot take, so it never
# gives one back: possessive.
_LINE = re.compile(
    r"\n(?:\[\d{1,9}+,(\d{1,9}+)\]<std(?:out|err)>:)?+"
    r"([^\nES]*+(?:[ES][^\nES]*+)*?)"
    r"(?:Epoch\[(\d{1,9}+)\] Batch \[(?:\d{1,9}+-)?+(\d{1,9}+)\][ \t]++Speed: ([^\s]{1,64}+) samples/sec([^\n]*+)"
    r"|Start with arguments Namespace\(([^\n]*+)"
    r"|(E)xperiment took: )"
)
_MAX_HEAD = 120  # a line whose words start further in (after the prefix) is not read
_DETECT = re.compile(
    r"Epoch\[\d{1,9}\] Batch \[(?:\d{1,9}-)?\d{1,9}\][ \t]+Speed: [^\s]{1,64} samples/sec"
    r"|INFO: Start with arguments Namespace\("
)
_DETECT_WORDS = ("Speed: ", "Start with arguments")  # one of them is in every _DETECT match; both start with "S"
_DETECT_JUMPS = 64
# In heads joined by "\n" (a head holds none): one head, with the groups of its first timestamp (minute,
# second, fraction; "" where it has none).
_HEAD_STAMP = re.compile(r"(?:[^\n]*?(\d{4}-\d\d-\d\d \d\d:\d\d):(\d\d)(?:[,.](\d{1,6}))?)?[^\n]*\n")
# In heads joined by "\n": a head that starts with the usual stamp "2020-12-16 08:02:43,201" (no digit after it),
# which is then its first timestamp (_HEAD_STAMP's groups)
_USUAL_HEAD = re.compile(r"^([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}):([0-9]{2}),([0-9]{3})(?!\d)[^\n]*+\n", re.M)
# A minute's fields as strptime's "%Y-%m-%d %H:%M" takes two digits each (other decimal digits where \d is)
_CLOCK = {f"{h:02d}:{m:02d}": h * 3600 + m * 60 for h in range(24) for m in range(60)}  # seconds of "HH:MM"
_SECONDS = {f"{i:02d}": i for i in range(100)}  # int() of two ASCII digits
_MILLISECONDS = {f"{i:03d}": i / 1000 for i in range(1000)}  # _fraction of three
_MINUTE_FIELDS = re.compile(r"(\d{4})-(1[0-2]|0[1-9])-(3[01]|[12]\d|0[1-9]) (2[0-3]|[01]\d):([0-5]\d)")
_LOSS = re.compile(r"(?:^|\t)(?:[\w-]*loss|cross-entropy)=([^\s]{1,64})")
_LOSS_WORDS = ("loss=", "cross-entropy=")  # in every _LOSS match
_INT_NAMES = ("batch_size", "begin_epoch", "benchmark_iters", "disp_batches", "num_examples", "num_epochs")
_INT_ARG = re.compile(r"\b(" + "|".join(_INT_NAMES) + r")=(\d{1,12})\b")
_GPUS_ARG = re.compile(r"\bgpus=(?:\[([^\]]{0,4000})\]|'([^']{0,4000})')")
_TABLE_TITLE = "train.total_ips"
_TABLE = re.compile(  # title, |-separated batch sizes, a rule, then rows "gpus | value | ..."
    r"^train\.total_ips[ \t]*\r?\n[ \t]*\|(?P<head>(?:[^\n|]*\|)+)[ \t]*\r?\n-+[ \t]*\r?\n"
    r"(?P<rows>(?:[ \t]*\d{1,9}[ \t]*\|(?:[^\n|]*\|)+[ \t]*\r?(?:\n|\Z))*)",
    re.M,
)
_TABLE_ROW = re.compile(r"[ \t]*(\d{1,9})[ \t]*\|((?:[^\n|]*\|)+)")

_ARGS, _DONE = "args", "done"


def detect(text: str) -> bool:
    """Whether ``text`` holds an MXNet Speedometer line or a DeepLearningExamples MXNet argument line."""
    return _holds_detect_words(text) and _DETECT.search(text) is not None


def _holds_detect_words(text: str) -> bool:
    """``"Speed: " in text or "Start with arguments" in text``, found by jumping between the "S"s (rare in
    other logs: one memchr crosses them) as long as few of them start neither."""
    i = text.find("S")
    for _ in range(_DETECT_JUMPS):
        if i < 0:
            return False
        if text.startswith(_DETECT_WORDS, i):
            return True
        i = text.find("S", i + 1)
    return i >= 0 and any(text.find(words, i) >= 0 for words in _DETECT_WORDS)


_Event = tuple[int, str, int | None, str | None]
"""An argument or end line: (its start in the text, ``_ARGS`` or ``_DONE``, its rank, the argument text)."""


@dataclass
class _Reading:
    """What the text says, in text order: the Speed lines as columns (what ``_LINE`` read from each, as printed;
    rank None where a line has no mpirun prefix) and the argument / end lines as events."""

    start: Sequence[int] = field(default_factory=list)  # line start
    rank: list[int | None] = field(default_factory=list)
    epoch: list[int] = field(default_factory=list)
    batch: list[int] = field(default_factory=list)
    head: Sequence[str] = field(default_factory=list)  # before "Epoch[", after the prefix: the timestamp
    speed: Sequence[str] = field(default_factory=list)
    rest: Sequence[str] = field(default_factory=list)  # the rest of the line, after "samples/sec"
    events: list[_Event] = field(default_factory=list)


def _read(text: str) -> _Reading:
    """Every line of ``text`` that ``_LINE`` reads (see the module docstring)."""
    found = list(_LINE.finditer("\n" + text))  # a match starts at the "\n" before its line: its start in text
    if not found:
        return _Reading()
    columns: list[Sequence[Any]] = [list(map(re.Match.start, found)), *zip(*map(re.Match.groups, found))]
    if max(map(len, columns[2])) > _MAX_HEAD:  # such lines are not read
        near = [len(h) <= _MAX_HEAD for h in columns[2]]
        columns = [list(compress(c, near)) for c in columns]
    start, rank, head, epoch, batch, speed, rest, argtext, _ = columns
    events: list[_Event] = [
        (start[i], _ARGS if argtext[i] is not None else _DONE, _rank(rank[i]), argtext[i])
        for i in compress(count(), map(is_, epoch, repeat(None)))
    ]
    if events:  # the Speed lines only
        speed_lines = list(map(is_not, epoch, repeat(None)))
        start, rank, head, epoch, batch, speed, rest = (list(compress(c, speed_lines)) for c in columns[:7])
    return _Reading(start, _ranks(rank), _ints(epoch), _ints(batch), head, speed, rest, events)


def _ints(texts: Iterable[str]) -> list[int]:
    """``int`` of each text; few distinct values in many lines: each converted once."""
    texts = list(texts)
    values = {x: int(x) for x in set(texts)}
    return list(map(values.__getitem__, texts))


def _rank(text: str | None) -> int | None:
    """The rank of an mpirun prefix, None without one."""
    return int(text) if text is not None else None


def _ranks(texts: Iterable[str | None]) -> list[int | None]:
    """``_rank`` of each text, each distinct one converted once."""
    texts = list(texts)
    values = {x: _rank(x) for x in set(texts)}
    return list(map(values.__getitem__, texts))


@dataclass
class _Run:
    """One run: its Speed lines ``first`` .. ``stop`` - 1 of the reading and its argument / end lines."""

    start: int  # text position
    first: int
    stop: int = 0
    args: str | None = None
    arg_ranks: set[int | None] = field(default_factory=set)
    finished: bool = False


def _split(reading: _Reading) -> list[_Run]:
    """The runs, in text order (the rules of the module docstring)."""
    runs = [_Run(0, 0)]
    last: dict[int | None, tuple[int, int]] = {}  # rank -> last (epoch, batch) in the current run
    keys = list(zip(reading.epoch, reading.batch))
    done = 0  # Speed lines read so far
    for pos, kind, rank, argtext in reading.events:
        upto = bisect_left(reading.start, pos)
        _add_speed_lines(runs, last, reading, keys, done, upto)
        done = upto
        run = runs[-1]
        if kind == _ARGS:
            if done > run.first or run.finished or rank in run.arg_ranks:
                run.stop = done
                run = _Run(pos, done)
                runs.append(run)
                last.clear()
            run.arg_ranks.add(rank)
            if run.args is None or rank == 0:
                run.args = argtext
        else:
            run.finished = True
    _add_speed_lines(runs, last, reading, keys, done, len(reading.start))
    runs[-1].stop = len(reading.start)
    return runs  # only the first can be empty, and then it is the only one


def _add_speed_lines(
    runs: list[_Run],
    last: dict[int | None, tuple[int, int]],
    reading: _Reading,
    keys: list[tuple[int, int]],
    first: int,
    stop: int,
) -> None:
    """Speed lines ``first`` .. ``stop`` - 1 into the runs: one going back in (epoch, batch) for its rank
    starts a run (``last``: each rank's last (epoch, batch) in the current run)."""
    ranks = reading.rank
    for i in range(first, stop):
        r, key = ranks[i], keys[i]
        before = last.get(r)
        if before is not None and key <= before:  # the counter went back: a new run
            runs[-1].stop = i
            runs.append(_Run(reading.start[i], i))
            last.clear()
        last[r] = key


def _table(text: str) -> dict[tuple[int, int | None], float]:
    """benchmark.py's ``train.total_ips`` table: (gpus, batch per GPU) -> img/s; with a single column the
    value is also under (gpus, None), for runs whose batch is unknown."""
    out: dict[tuple[int, int | None], float] = {}
    for t in _tables(text):
        sizes = [c.strip() for c in t.group("head").split("|")[:-1]]
        for line in t.group("rows").split("\n", 64)[:64]:  # a real table has a row per GPU count
            row = _TABLE_ROW.match(line)
            if row is None:
                continue
            cells = [c.strip() for c in row.group(2).split("|")[:-1]]
            gpus = int(row.group(1))
            for size, cell in zip(sizes, cells):
                value = _float(cell)
                if value is None:
                    continue
                out[(gpus, int(size) if size.isdigit() and len(size) < 10 else None)] = value
                if len(sizes) == 1:
                    out[(gpus, None)] = value
    return out


def _tables(text: str) -> list[re.Match[str]]:
    """``_TABLE.finditer(text)``, tried only where a line starts with the title."""
    out = []
    i = text.find(_TABLE_TITLE)
    while i >= 0:
        m = _TABLE.match(text, i) if i == 0 or text[i - 1] == "\n" else None
        if m is not None:
            out.append(m)
        i = text.find(_TABLE_TITLE, m.end() if m is not None else i + 1)
    return out


def _args(text: str | None) -> tuple[dict[str, int], int | None]:
    """(integer arguments, number of GPUs listed) of a ``Namespace(...)`` argument line."""
    if text is None:
        return {}, None
    ints = _int_args(text)
    g = _first_match(text, _GPUS_ARG, "gpus=")
    listed = None
    if g is not None:
        items = [x for x in (g.group(1) if g.group(1) is not None else g.group(2)).split(",") if x.strip()]
        listed = len(items) or None
    return ints, listed


def _int_args(text: str) -> dict[str, int]:
    """``{k: int(v) for k, v in _INT_ARG.findall(text)}`` (the last value of each name), tried only where a
    name is followed by "=" (no name starts another: a match there is that name's)."""
    out: dict[str, int] = {}
    for name in _INT_NAMES:
        i = text.find(name + "=")
        while i >= 0:
            m = _INT_ARG.match(text, i)
            if m is not None:
                out[name] = int(m.group(2))
            i = text.find(name + "=", i + 1)
    return out


def _first_match(text: str, rx: re.Pattern[str], words: str) -> re.Match[str] | None:
    """``rx.search(text)`` for an ``rx`` whose matches start with ``words``, tried only where they occur."""
    i = text.find(words)
    while i >= 0:
        m = rx.match(text, i)
        if m is not None:
            return m
        i = text.find(words, i + 1)
    return None


def _minute_seconds(minute: str) -> float | None:
    """Unix seconds (read as UTC) of a ``2020-12-16 08:02`` minute, None when it is no real date: as
    ``datetime.strptime(minute, "%Y-%m-%d %H:%M")`` reads it (``_MINUTE_FIELDS``)."""
    m = _MINUTE_FIELDS.fullmatch(minute)
    return utc_minute(*map(int, m.groups())) if m is not None else None


def _minutes_seconds(minutes: Iterable[str]) -> dict[str, float | None]:
    """``_minute_seconds`` of each minute (None for ""), a date read once: a usual clock ("00:00" to "23:59")
    adds its seconds to its date's (at 00:00; exact: whole seconds)."""
    days: dict[str, float | None] = {}
    out: dict[str, float | None] = {}
    for minute in minutes:
        clock = _CLOCK.get(minute[11:])
        if clock is None or minute[10:11] != " ":
            out[minute] = _minute_seconds(minute) if minute else None
            continue
        date = minute[:10]
        if date not in days:
            days[date] = _minute_seconds(date + " 00:00")
        day = days[date]
        out[minute] = day + clock if day is not None else None
    return out


def _stamps(heads: list[str]) -> list[tuple[str, str, str]]:
    """(minute, second, fraction) of the first timestamp in each head ("" for what it has not): one pass of
    ``_HEAD_STAMP`` over the heads joined, or (faster) of ``_USUAL_HEAD`` where it finds one in every head."""
    joined = "\n".join(heads) + "\n"
    usual = _USUAL_HEAD.findall(joined)
    return usual if len(usual) == len(heads) else _HEAD_STAMP.findall(joined)


def _times(stamps: list[tuple[str, str, str]]) -> list[float | None]:
    """Unix seconds of each timestamp (``_stamps``): its minute's, plus its second, plus its fraction (each
    distinct text converted once); None where a line has none or it is no real time (a second above 60)."""
    if not stamps:
        return []
    minute, second, fraction = zip(*stamps)
    minutes = _minutes_seconds(set(minute))
    seconds = {s: _SECONDS[s] if s in _SECONDS else int(s) for s in set(second) if s}  # (none without a minute)
    fractions = {f: _MILLISECONDS[f] if f in _MILLISECONDS else _fraction(f) for f in set(fraction)}
    if None not in minutes.values() and max(seconds.values()) <= 60:  # every line has a real time
        real = cast("dict[str, float]", minutes)
        return [real[m] + seconds[s] + fractions[f] for m, s, f in zip(minute, second, fraction)]
    return [
        base + seconds[s] + fractions[f] if (base := minutes[m]) is not None and seconds[s] <= 60 else None
        for m, s, f in zip(minute, second, fraction)
    ]


def _fraction(text: str) -> float:
    """A timestamp's fraction of a second, its digits over 10 ** their number (0.0 for none)."""
    return int(text) / 10 ** len(text) if text else 0.0


def _losses(rests: list[str]) -> list[float | None]:
    """The loss of each Speed line, from the rest of its line (a metric ``...loss=`` or ``cross-entropy=``)."""
    joined = "\n".join(rests)
    if not any(words in joined for words in _LOSS_WORDS):
        return [None] * len(rests)
    out: list[float | None] = []
    for rest in rests:
        m = _LOSS.search(rest)
        out.append(_float(m.group(1)) if m else None)
    return out


def _kept_lines(reading: _Reading, run: _Run) -> tuple[int | None, list[int], set[int]]:
    """(kept rank: the lowest that printed, its Speed lines, the ranks that printed Speed lines)."""
    ranks = reading.rank[run.first : run.stop]
    named = {r for r in set(ranks) if r is not None}
    keep = min(named) if named else None
    return keep, list(compress(range(run.first, run.stop), map(eq, ranks, repeat(keep)))), named


def _conclude(
    file: str,
    options: ParseOptions,
    run: _Run,
    chunk: str,
    reading: _Reading,
    table: dict[tuple[int, int | None], float],
) -> ParsedRun:
    """The ParsedRun of one run; ``chunk`` is its part of the text (for the text failure rules)."""
    ints, listed = _args(run.args)
    keep, lines, named = _kept_lines(reading, run)
    printing = len(named | {r for r in run.arg_ranks if r is not None})
    gpus = max(listed or 0, printing) or None
    total = ints.get("batch_size")
    per_device = total // gpus if total and gpus and total % gpus == 0 else None

    epochs = [reading.epoch[i] for i in lines]
    batches = [reading.batch[i] for i in lines]
    epoch_len = ints.get("benchmark_iters") or 0
    if not epoch_len and total and ints.get("num_examples"):
        epoch_len = ints["num_examples"] // total
    first = min(epochs, default=0)
    epoch_len = max([epoch_len] + [b + 1 for b in batches])
    records = RecordColumns(
        [(e - first) * epoch_len + b + 1 for e, b in zip(epochs, batches)],
        _times(_stamps([reading.head[i] for i in lines])),
        [_float(reading.speed[i]) for i in lines],
        _losses([reading.rest[i] for i in lines]),
        [keep] * len(lines) if keep is not None else None,
        epochs,
    )

    progress: list[tuple[str, int, int]] = []
    if lines and ints.get("num_epochs"):
        progress.append(("epochs", epochs[-1] - first + 1, ints["num_epochs"] - ints.get("begin_epoch", 0)))
    if lines and ints.get("benchmark_iters"):  # the last Speed line of an epoch ends a display interval
        disp = ints.get("disp_batches") or 1
        last_shown = ints["benchmark_iters"] // disp * disp
        progress.append(("iterations of the last epoch", batches[-1] + 1, last_shown))
    reported = table.get((gpus, per_device)) if gpus is not None else None  # per_device None: one column
    return conclude(
        text=chunk,
        file=file,
        format=NAME,
        records=records,
        options=options,
        reported=reported,
        gpus=gpus,
        batch_size_per_device=per_device,
        truncated=truncation(chunk, finished=run.finished, progress=progress, fit=options.fit),
        stopped_early=stopped_short(finished=run.finished, progress=progress),
    )


def parse(text: str, file: str, options: ParseOptions) -> list[ParsedRun]:
    """Every run of an NGC MXNet / benchmark.py log, in file order (see the module docstring)."""
    reading = _read(text)
    runs = _split(reading)
    table = _table(text)
    ends = [r.start for r in runs[1:]] + [len(text)]
    return [_conclude(file, options, run, text[run.start : end], reading, table) for run, end in zip(runs, ends)]


FORMAT = LogFormat(NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=None)
"""Registry entry of this format."""
