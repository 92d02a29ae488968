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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from dlperf_core.parsing.failures import conclude, stopped_short, truncation
from dlperf_core.parsing.records import IterationRecord, LogFormat, ParsedRun, ParseOptions
from dlperf_core.parsing.values import to_float as _float

NAME = "ngc_mxnet"
DEFAULT_WARMUP = 500  # one epoch of benchmark.py (benchmark_iters=500): DLPerf's 1 warm-up epoch

_PREFIX = r"(?:\[\d{1,9},(?P<rank>\d{1,9})\]<std(?:out|err)>:)?"
_LINE = re.compile(
    r"^" + _PREFIX + r"(?P<head>[^\n]{0,120}?)(?:"
    r"Epoch\[(?P<epoch>\d{1,9})\] Batch \[(?:\d{1,9}-)?(?P<batch>\d{1,9})\][ \t]+"
    r"Speed: (?P<speed>[^\s]{1,64}) samples/sec(?P<rest>[^\n]*)"
    r"|(?P<args>Start with arguments Namespace\()(?P<argtext>[^\n]*)"
    r"|(?P<done>Experiment took: ))",
    re.M,
)
_DETECT = re.compile(
    r"Epoch\[\d{1,9}\] Batch \[(?:\d{1,9}-)?\d{1,9}\][ \t]+Speed: [^\s]{1,64} samples/sec"
    r"|INFO: Start with arguments Namespace\("
)
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d):(\d\d)(?:[,.](\d{1,6}))?")
_LOSS = re.compile(r"(?:^|\t)(?:[\w-]*loss|cross-entropy)=([^\s]{1,64})")
_INT_ARG = re.compile(r"\b(batch_size|begin_epoch|benchmark_iters|disp_batches|num_examples|num_epochs)=(\d{1,12})\b")
_GPUS_ARG = re.compile(r"\bgpus=(?:\[([^\]]{0,4000})\]|'([^']{0,4000})')")
_TABLE = re.compile(  # title, |-separated batch sizes, a rule, then rows "gpus | value | ..."
    r"^train\.total_ips[ \t]*\r?\n[ \t]*\|(?P<head>(?:[^\n|]*\|)+)[ \t]*\r?\n-+[ \t]*\r?\n"
    r"(?P<rows>(?:[ \t]*\d{1,9}[ \t]*\|(?:[^\n|]*\|)+[ \t]*\r?(?:\n|\Z))*)",
    re.M,
)
_TABLE_ROW = re.compile(r"[ \t]*(\d{1,9})[ \t]*\|((?:[^\n|]*\|)+)")

_Point = tuple[int, int, float | None, float | None, float | None]  # epoch, batch, time, rate, loss


def detect(text: str) -> bool:
    """Whether ``text`` holds an MXNet Speedometer line or a DeepLearningExamples MXNet argument line."""
    return ("Speed: " in text or "Start with arguments" in text) and _DETECT.search(text) is not None


@dataclass
class _Run:
    """One run's lines, per rank (None = no mpirun prefix)."""

    start: int
    args: str | None = None
    arg_ranks: set[int | None] = field(default_factory=set)
    points: dict[int | None, list[_Point]] = field(default_factory=dict)
    finished: bool = False


def _stamp(head: str, minutes: dict[str, float | None]) -> float | None:
    """Unix seconds (read as UTC) of the ``2020-12-16 08:02:43,201`` timestamp in ``head``, else None."""
    m = _STAMP.search(head)
    if m is None:
        return None
    minute_text, sec, frac = m.groups()
    if minute_text not in minutes:
        try:
            dt = datetime.strptime(minute_text, "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc)
            minutes[minute_text] = dt.timestamp()
        except ValueError:
            minutes[minute_text] = None
    minute = minutes[minute_text]
    if minute is None or int(sec) > 60:
        return None
    return minute + int(sec) + (int(frac) / 10 ** len(frac) if frac else 0.0)


def _split(text: str) -> list[_Run]:
    """One pass: every Speed / argument / end line, grouped into runs."""
    runs: list[_Run] = [_Run(0)]
    last: dict[int | None, tuple[int, int]] = {}  # rank -> last (epoch, batch) in the current run
    minutes: dict[str, float | None] = {}
    for m in _LINE.finditer(text):
        rank_s = m.group("rank")
        rank = int(rank_s) if rank_s is not None else None
        run = runs[-1]
        if m.group("epoch") is not None:
            epoch, batch = int(m.group("epoch")), int(m.group("batch"))
            if rank in last and (epoch, batch) <= last[rank]:  # the counter went back: a new run
                run = _Run(m.start())
                runs.append(run)
                last.clear()
            last[rank] = (epoch, batch)
            lm = _LOSS.search(m.group("rest"))
            point = (epoch, batch, _stamp(m.group("head"), minutes), _float(m.group("speed")),
                     _float(lm.group(1)) if lm else None)
            run.points.setdefault(rank, []).append(point)
        elif m.group("args") is not None:
            if run.points or run.finished or rank in run.arg_ranks:
                run = _Run(m.start())
                runs.append(run)
                last.clear()
            run.arg_ranks.add(rank)
            if run.args is None or rank == 0:
                run.args = m.group("argtext")
        else:
            run.finished = True
    return runs  # only the first can be empty, and then it is the only one


def _table(text: str) -> dict[tuple[int, int | None], float]:
    """benchmark.py's ``train.total_ips`` table: (gpus, batch per GPU) -> img/s; with a single column the
    value is also under (gpus, None), for runs whose batch is unknown."""
    out: dict[tuple[int, int | None], float] = {}
    for t in _TABLE.finditer(text):
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


def _args(text: str | None) -> tuple[dict[str, int], int | None]:
    """(integer arguments, number of GPUs listed) of a ``Namespace(...)`` argument line."""
    if text is None:
        return {}, None
    ints = {k: int(v) for k, v in _INT_ARG.findall(text)}
    g = _GPUS_ARG.search(text)
    listed = None
    if g is not None:
        items = [x for x in (g.group(1) if g.group(1) is not None else g.group(2)).split(",") if x.strip()]
        listed = len(items) or None
    return ints, listed


def _conclude(file: str, options: ParseOptions, run: _Run, chunk: str,
              table: dict[tuple[int, int | None], float]) -> ParsedRun:
    """The ParsedRun of one run; ``chunk`` is its part of the text (for the text failure rules)."""
    ints, listed = _args(run.args)
    ranks = [r for r in run.points if r is not None]
    keep = min(ranks) if ranks else None
    points = run.points.get(keep, []) if run.points else []
    printing = len(set(ranks) | {r for r in run.arg_ranks if r is not None})
    gpus = max(listed or 0, printing) or None
    total = ints.get("batch_size")
    per_device = total // gpus if total and gpus and total % gpus == 0 else None

    epoch_len = ints.get("benchmark_iters") or 0
    if not epoch_len and total and ints.get("num_examples"):
        epoch_len = ints["num_examples"] // total
    first = min((p[0] for p in points), default=0)
    epoch_len = max([epoch_len] + [p[1] + 1 for p in points])
    records = [
        IterationRecord((e - first) * epoch_len + b + 1, t, rate, loss, keep, e) for e, b, t, rate, loss in points
    ]

    progress: list[tuple[str, int, int]] = []
    if points and ints.get("num_epochs"):
        progress.append(("epochs", points[-1][0] - first + 1, ints["num_epochs"] - ints.get("begin_epoch", 0)))
    if points and ints.get("benchmark_iters"):  # the last Speed line of an epoch ends a display interval
        disp = ints.get("disp_batches") or 1
        last_shown = ints["benchmark_iters"] // disp * disp
        progress.append(("iterations of the last epoch", points[-1][1] + 1, last_shown))
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
    runs = _split(text)
    table = _table(text) if "train.total_ips" in text else {}
    ends = [r.start for r in runs[1:]] + [len(text)]
    return [
        _conclude(file, options, run, text[run.start : end], table) for run, end in zip(runs, ends)
    ]


FORMAT = LogFormat(NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=None)
"""Registry entry of this format."""
