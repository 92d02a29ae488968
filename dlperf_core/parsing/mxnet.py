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

How the text is read (the rules above are those of one pass of ``_LINE`` over every line start; this
reading gives exactly its results without a Python loop over the lines):

* Speed lines of DeepLearningExamples' own shape (``[1,r]<std...>:`` or nothing, the ``2020-12-16
  08:02:43,201:INFO: `` head, the Speed line: _LINE's head ends there and holds that timestamp) are found by
  one ``re.finditer`` pass over the whole text (``_SPEED_LINE``) into columns.
* Every other line that may matter lies between those and holds the words of a Speed, argument or end
  line (``_LINE_WORDS``): they are looked for in that part of the text only (joined), and each line found
  is read with ``_LINE`` at its start. Argument and end lines relate to the Speed lines by text position.
* Runs are index ranges of the Speed lines; timestamps, rates and losses are converted only for the kept
  rank's lines; records are ``RecordColumns``.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate, compress, repeat
from operator import eq, lt
from typing import Any, cast

from dlperf_core.parsing.failures import conclude, stopped_short, truncation
from dlperf_core.parsing.records import LogFormat, ParsedRun, ParseOptions, RecordColumns
from dlperf_core.parsing.values import to_float as _float

NAME = "ngc_mxnet"
DEFAULT_WARMUP = 500  # one epoch of benchmark.py (benchmark_iters=500): DLPerf's 1 warm-up epoch

_PREFIX = r"(?:\[\d{1,9},(?P<rank>\d{1,9})\]<std(?:out|err)>:)?"
_SPEED = (
    r"Epoch\[(?P<epoch>\d{1,9})\] Batch \[(?:\d{1,9}-)?(?P<batch>\d{1,9})\][ \t]+"
    r"Speed: (?P<speed>[^\s]{1,64}) samples/sec(?P<rest>[^\n]*)"
)
_LINE = re.compile(
    r"^"
    + _PREFIX
    + r"(?P<head>[^\n]{0,120}?)(?:"
    + _SPEED
    + r"|(?P<args>Start with arguments Namespace\()(?P<argtext>[^\n]*)"
    r"|(?P<done>Experiment took: ))",
    re.M,
)
_DETECT = re.compile(
    r"Epoch\[\d{1,9}\] Batch \[(?:\d{1,9}-)?\d{1,9}\][ \t]+Speed: [^\s]{1,64} samples/sec"
    r"|INFO: Start with arguments Namespace\("
)
_DETECT_WORDS = ("Speed: ", "Start with arguments")  # one of them is in every _DETECT match; both start with "S"
_DETECT_JUMPS = 64
_STAMP_TEXT = r"(\d{4}-\d\d-\d\d \d\d:\d\d):(\d\d)(?:[,.](\d{1,6}))?"  # minute, second, fraction
_STAMP = re.compile(_STAMP_TEXT)
# A Speed line of DeepLearningExamples' shape, after the "\n" that ends the line before: its head is the
# timestamp and ":INFO: ", so _LINE's head ends there and its timestamp is this one. Groups: rank, minute,
# second, fraction, epoch, batch, speed, rest. The same pieces as _PREFIX, _STAMP and _SPEED, possessive
# (faster; no backtracking into them could lead to another match).
_SPEED_LINE = re.compile(
    r"\n(?:\[\d{1,9}+,(\d{1,9}+)\]<std(?:out|err)>:)?+(\d{4}-\d\d-\d\d \d\d:\d\d):(\d\d)(?:[,.](\d{1,6}+))?+:INFO: "
    r"Epoch\[(\d{1,9}+)\] Batch \[(?:\d{1,9}+-)?+(\d{1,9}+)\][ \t]++Speed: ([^\s]{1,64}+) samples/sec([^\n]*+)"
)
_LINE_WORDS = (" samples/sec", "Start with arguments Namespace(", "Experiment took: ")  # in every _LINE match
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


@dataclass
class _Reading:
    """What the text says, in text order: the Speed lines as columns (strings as printed; None where a line
    has no such part) and the argument / end lines as events ``(position, kind, rank, argument text)``."""

    start: list[int] = field(default_factory=list)  # line start
    rank: list[int | None] = field(default_factory=list)
    epoch: list[int] = field(default_factory=list)
    batch: list[int] = field(default_factory=list)
    minute: Sequence[str | None] = field(default_factory=list)  # the timestamp: "2020-12-16 08:02", "43", "201"
    second: Sequence[str | None] = field(default_factory=list)
    fraction: Sequence[str | None] = field(default_factory=list)
    speed: Sequence[str] = field(default_factory=list)
    rest: Sequence[str] = field(default_factory=list)  # the rest of the line after "samples/sec"
    events: list[tuple[int, str, int | None, str | None]] = field(default_factory=list)


def _read(text: str) -> _Reading:
    """The Speed lines and the argument / end lines of ``text`` (see the module docstring)."""
    found = list(_SPEED_LINE.finditer("\n" + text))  # a match starts at the "\n" before its line: its start in text
    starts = list(map(re.Match.start, found))
    rows = list(map(re.Match.groups, found))
    out = _Reading()
    others: list[tuple[int, tuple[Any, ...]]] = []  # Speed lines of another shape: (start, row)
    for start in _word_line_starts(text, _gaps([0, *map(re.Match.end, found)], [*starts, len(text)])):
        m = _LINE.match(text, start)
        if m is None:
            continue
        if m.group("epoch") is not None:
            st = _STAMP.search(m.group("head"))
            others.append(
                (
                    start,
                    (
                        m.group("rank"),
                        *(st.groups() if st else (None, None, None)),
                        m.group("epoch"),
                        m.group("batch"),
                        m.group("speed"),
                        m.group("rest"),
                    ),
                )
            )
        else:
            rank = int(m.group("rank")) if m.group("rank") is not None else None
            out.events.append(
                (start, _ARGS, rank, m.group("argtext")) if m.group("args") is not None else (start, _DONE, rank, None)
            )
    if others:
        merged = sorted([*zip(starts, rows), *others], key=lambda x: x[0])
        starts, rows = [x for x, _ in merged], [r for _, r in merged]
    out.start = starts
    _set_speed_columns(out, rows)
    return out


def _gaps(ends: list[int], starts: list[int]) -> list[tuple[int, int]]:
    """The non-empty (ends[i], starts[i])."""
    return [(ends[i], starts[i]) for i in compress(range(len(ends)), map(lt, ends, starts))]


def _word_line_starts(text: str, parts: list[tuple[int, int]]) -> list[int]:
    """The start of every line of ``parts`` (whole lines of ``text``) that holds the words of a Speed,
    argument or end line, in text order."""
    joined = "".join([text[a:b] for a, b in parts])
    offsets = list(accumulate((b - a for a, b in parts), initial=0))
    found = set()
    for words in _LINE_WORDS:
        for j in _line_starts(joined, words):
            k = bisect_right(offsets, j) - 1
            found.add(parts[k][0] + j - offsets[k])
    return sorted(found)


def _set_speed_columns(out: _Reading, rows: list[tuple[Any, ...]]) -> None:
    """Speed rows (rank as printed, minute, second, fraction, epoch, batch, speed, rest) into ``out``'s
    columns."""
    if not rows:
        return
    rank, out.minute, out.second, out.fraction, epoch, batch, out.speed, out.rest = zip(*rows)
    out.rank, out.epoch, out.batch = _ints(rank), _ints(epoch), _ints(batch)  # type: ignore[assignment]


def _ints(texts: Sequence[str | None]) -> list[int | None]:
    """``int`` of each text (None stays None); few distinct values in many lines: each converted once."""
    values = {x: int(x) if x is not None else None for x in set(texts)}
    return list(map(values.__getitem__, texts))


def _line_starts(text: str, words: str) -> list[int]:
    """The start of every line that holds ``words``."""
    out = []
    i = text.find(words)
    while i >= 0:
        out.append(text.rfind("\n", 0, i) + 1)
        end = text.find("\n", i)
        if end < 0:
            break
        i = text.find(words, end)
    return out


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
    """Unix seconds (read as UTC) of a ``2020-12-16 08:02`` minute, None when it is no real date."""
    if not minute.isascii():  # other decimal digits: as strptime reads them
        try:
            return datetime.strptime(minute, "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp()
        except ValueError:
            return None
    try:  # two ASCII digits per field: exactly what strptime accepts
        return datetime(
            int(minute[0:4]), int(minute[5:7]), int(minute[8:10]), int(minute[11:13]), int(minute[14:16]), tzinfo=UTC
        ).timestamp()
    except ValueError:
        return None


def _times(minutes: list[str | None], seconds: list[str | None], fractions: list[str | None]) -> list[float | None]:
    """Unix seconds of each timestamp (minute, second, fraction), None where a line has none or it is no
    real time (a second above 60 included)."""
    bases = {m: _minute_seconds(m) for m in set(minutes) if m is not None}
    if None in minutes or None in bases.values() or max(map(int, set(seconds)), default=0) > 60:  # type: ignore[arg-type]
        return [_time(bases.get(m) if m is not None else None, s, f) for m, s, f in zip(minutes, seconds, fractions)]
    # here every line has a minute and a second (int(None) would have raised) and every minute is a date
    known, stamped, whole = cast("dict[str, float]", bases), cast("list[str]", minutes), cast("list[str]", seconds)
    return [known[m] + int(s) + (int(f) / 10 ** len(f) if f else 0.0) for m, s, f in zip(stamped, whole, fractions)]


def _time(base: float | None, sec: str | None, frac: str | None) -> float | None:
    """Unix seconds of a timestamp whose minute is at ``base`` (None: no timestamp, or no real date)."""
    if base is None or sec is None or int(sec) > 60:
        return None
    return base + int(sec) + (int(frac) / 10 ** len(frac) if frac else 0.0)


def _floats(texts: list[str]) -> list[float | None]:
    """``to_float`` of each text."""
    try:
        return list(map(float, texts))
    except ValueError:
        return [_float(x) for x in texts]


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
    printed = set(ranks)
    printed.discard(None)
    named = cast("set[int]", printed)  # None discarded
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
        _times(
            [reading.minute[i] for i in lines], [reading.second[i] for i in lines], [reading.fraction[i] for i in lines]
        ),
        _floats([reading.speed[i] for i in lines]),
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
