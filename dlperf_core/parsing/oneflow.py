"""OneFlow-Benchmark ``Classification/cnns`` (``of_cnn_train_val.py``), as run by DLPerf's OneFlow scripts.
Verbatim lines (the argument block is ``config.print_args``; an mpirun prefix such as ``[1,0]<stdout>:`` may
precede any line)::

    Running resnet50: num_gpu_per_node = 8, num_nodes = 2.
    gpu_num_per_node = 8
    num_nodes = 2
    batch_size_per_device = 128
    loss_print_every_n_iter = 20
     200 iter per epoch...
    train: epoch 0, iter 20, loss: 7.087004, top_1: 0.000000, top_k: 0.000000, samples/s: 3988.891 1597933942.9863544
    train: epoch 0, iter 40, loss: 5.736447, top_1: 0.020313, top_k: 0.117578, samples/s: 385.628
    End time: 2020-08-20-22:33:12

* ``samples/s`` is GLOBAL (the metric counts the whole job's labels) over the last print interval
  (``loss_print_every_n_iter``, 20 in DLPerf); ``iter`` is the per-epoch step number (step + 1), so a line
  is N iterations after the previous one and records carry ``epoch * iters_per_epoch + iter``
  (iters_per_epoch from `` N iter per epoch...``, else ceil(num_examples / global batch), else the epoch's
  highest printed iter). ``validation:`` lines are not training.
* Newer versions append ``time.time()`` after samples/s; older ones do not. A record's ``time`` is that
  trailing timestamp only when the line HAS two numbers after ``samples/s:`` (DLPerf's later rule took the
  line's last field unconditionally, i.e. the rate itself on old logs). With timestamps and a global batch
  (gpus = num_nodes x gpu_num_per_node, from the arguments or the ``Running`` banner) the window is timed;
  otherwise the printed rates are used.
* reported_throughput = the seed report's method: the arithmetic mean of all ``train`` samples/s values but
  the first (whose interval includes start-up); None with fewer than two values or any non-positive one.
* Several runs in one file: a ``Running ...: num_gpu_per_node`` banner after training lines starts a new run.
  With mpirun prefixes only the lowest rank's lines are kept.
* Truncation: a run that printed neither ``End time:``/``Total time:`` nor its last planned train line
  (num_epochs x iters_per_epoch, at the print frequency) is truncated when it stops before that line or
  inside a line.
* Default window: the seed discards the first printed value (iterations 1..20) and averages the rest to the
  end: warm-up 20, measured to the last record. (DLPerf's later extract_cnn_result.py used iterations
  20..120 from timestamps: ``warmup=20, measured=100``.)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from dlperf_core.parsing.failures import conclude, stopped_short, truncation
from dlperf_core.parsing.records import LogFormat, ParsedRun, ParseOptions, RecordColumns
from dlperf_core.parsing.values import jump_tries, literal_starts, search_literal
from dlperf_core.parsing.values import to_float as _float

NAME = "oneflow_cnns"
DEFAULT_WARMUP = 20  # the seed discards the first printed interval (loss_print_every_n_iter=20)

_PFX = r"(?:[^\n]{0,60}?\[\d{1,9},\d{1,9}\]<std(?:out|err)>:)?"
_EVENT = re.compile(  # (?=^|[tR]): a match starts a line or with one of these, a cheap test of other text
    r"(?=^|[tR])(?:(?<![\w/])train: epoch (\d{1,9}), iter (\d{1,12}), (?:loss: ([^,\s]{1,40}), )?"
    r"top_1: [^,\s]{0,40}, top_k: [^,\s]{0,40}, samples/s: ([^\s]{1,40})(?:[ \t]+(\d{1,12}(?:\.\d{0,20})?))?"
    r"|^" + _PFX + r"(num_nodes|gpu_num_per_node|batch_size_per_device|loss_print_every_n_iter|num_epochs?"
    r"|num_examples) = ([^\r\n]{0,40})"
    r"|^" + _PFX + r"[ \t]{0,8}(\d{1,12}) iter per epoch"
    r"|Running [^\s:]{1,100}: num_gpu_per_node = (\d{1,9}), num_nodes = (\d{1,9})"
    r"|^" + _PFX + r"(?:End time|Total time):)",
    re.MULTILINE,
)
# Detection: a train line is tried only around its ", top_k: " (at most _TRAIN_REACH characters after the
# line's start), a banner only where "Running " starts; both literals are found with memchr jumps.
_TRAIN_DETECT = re.compile(
    r"(?<![\w/])train: epoch \d{1,9}, iter \d{1,12}, (?:loss: [^,\s]{1,40}, )?top_1: [^,\s]{0,40}, top_k: "
)
_TOP_K = ", top_k: "
_TRAIN_REACH = 138  # 13 + 9 + 7 + 12 + 2 + (6 + 40 + 2) + 7 + 40: the longest train match before its ", top_k: "
_BANNER_DETECT = re.compile(r"Running [^\s:]{1,100}: num_gpu_per_node = \d{1,9}, num_nodes = \d{1,9}")
_RANK = re.compile(r"\[\d{1,9},(\d{1,9})\]<std(?:out|err)>:\Z")


def detect(text: str) -> bool:
    """Whether ``text`` holds a ``train: epoch N, iter M, ...`` line or print_args' ``Running`` banner."""
    return search_literal(text, _BANNER_DETECT, "Running ", "R") is not None or _has_train_line(text)


def _has_train_line(text: str) -> bool:
    """Whether a train line ends at some ``, top_k: ``: the regex runs on the few characters before each
    (after ``jump_tries`` of them that end none, one plain search from there decides)."""
    tries = jump_tries(text)
    for n, at in enumerate(literal_starts(text, _TOP_K, "k")):
        start = max(0, at - _TRAIN_REACH)
        if n == tries:
            return text.find("train: epoch ", start) >= 0 and _TRAIN_DETECT.search(text, start) is not None
        if _TRAIN_DETECT.search(text, start, at + len(_TOP_K)) is not None:
            return True
    return False


def _count(value: str | None) -> int | None:
    """A positive integer, else None."""
    value = value.strip() if value is not None else None
    if not value or not value.isdigit() or len(value) > 12:
        return None
    return int(value) or None


@dataclass
class _Run:
    """One run's raw facts: train lines (rank, epoch, iter, loss, rate, time), arguments, markers."""

    start: int
    lines: list[tuple[int | None, int, int, float | None, float | None, float | None]] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)
    banner: tuple[int, int] | None = None  # (gpus per node, nodes)
    iters_per_epoch: int | None = None
    finished: bool = False


def _scan(text: str) -> list[_Run]:
    """One pass over the text; a banner after training lines starts a new run."""
    runs = [_Run(0)]
    size, prefixed = len(text), "<std" in text
    for m in _EVENT.finditer(text):
        epoch, it, loss, rate, stamp, key, value, per_epoch, b_gpus, b_nodes = m.groups()
        run = runs[-1]
        if it is not None:
            rank = None
            if prefixed:
                start = m.start()
                rm = _RANK.search(text, max(0, start - 40), start)
                rank = int(rm.group(1)) if rm else None
            if m.end() >= size:  # the text ends inside this line: its last number may be cut
                stamp, rate = (None, rate) if stamp is not None else (None, None)
            run.lines.append((rank, int(epoch), int(it), _float(loss), _float(rate), _float(stamp)))
        elif key is not None:
            run.args.setdefault(key, value)
        elif per_epoch is not None:
            run.iters_per_epoch = _count(per_epoch)
        elif b_gpus is not None:
            if run.lines:
                run = _Run(text.rfind("\n", 0, m.start()) + 1)
                runs.append(run)
            run.banner = (int(b_gpus), int(b_nodes))
        else:
            run.finished = True
    return runs


def _records(run: _Run, per_epoch: int | None) -> RecordColumns:
    """The lowest rank's train lines with global iteration numbers, as columns."""
    ranks = {r for r, *_ in run.lines if r is not None}
    keep = min(ranks) if ranks else None
    records: list[tuple[int, float | None, float | None, float | None, int | None, int]] = []
    offset, top, epoch_now = 0, 0, None
    for rank, epoch, it, loss, rate, stamp in run.lines:
        if keep is not None and rank is not None and rank != keep:
            continue
        if per_epoch:
            number = epoch * per_epoch + it
        else:  # counter restarts each epoch: the previous epoch ended at its highest printed iter
            if epoch != epoch_now:
                if records and it <= top:
                    offset += top
                epoch_now, top = epoch, it
            top = max(top, it)
            number = offset + it
        records.append((number, stamp, rate, loss, rank, epoch))
    if not records:
        return RecordColumns([], [], [], [])
    iteration, times, rates, losses, rank_column, epochs = map(list, zip(*records))
    return RecordColumns(iteration, times, rates, losses, rank_column if ranks else None, epochs)


def _reported(records: RecordColumns) -> float | None:
    """The seed's figure: mean of the printed samples/s values but the first."""
    rates = records.samples_per_sec
    if len(rates) < 2 or any(x is None or not (x > 0 and math.isfinite(x)) for x in rates):
        return None
    rest = rates[1:]
    return sum(rest) / len(rest)  # type: ignore[arg-type]


def _conclude(text: str, run: _Run, file: str, options: ParseOptions) -> ParsedRun:
    args = run.args
    per_node, nodes = _count(args.get("gpu_num_per_node")), _count(args.get("num_nodes"))
    if (per_node is None or nodes is None) and run.banner is not None:
        per_node, nodes = run.banner
    gpus = per_node * nodes if per_node and nodes else None
    batch = _count(args.get("batch_size_per_device"))
    per_epoch = run.iters_per_epoch
    examples = _count(args.get("num_examples"))
    if per_epoch is None and examples and gpus and batch:
        per_epoch = -(-examples // (gpus * batch))
    records = _records(run, per_epoch)

    progress: list[tuple[str, int, int]] = []
    epochs = _count(args.get("num_epochs")) or _count(args.get("num_epoch"))
    every = _count(args.get("loss_print_every_n_iter")) or 1
    finished = run.finished
    if epochs and per_epoch and records:
        last_print = (epochs - 1) * per_epoch + per_epoch // every * every
        reached = max(records.iteration)
        progress.append(("iterations", reached, last_print))
        finished = finished or reached >= last_print
    return conclude(
        text=text,
        file=file,
        format=NAME,
        records=records,
        options=options,
        reported=_reported(records),
        gpus=gpus,
        batch_size_per_device=batch,
        truncated=truncation(text, finished=finished, progress=progress, fit=options.fit),
        stopped_early=stopped_short(finished=finished, progress=progress),
    )


def parse(text: str, file: str, options: ParseOptions) -> list[ParsedRun]:
    """The runs of a OneFlow cnns log (see the module docstring)."""
    runs = _scan(text)
    out = []
    for i, run in enumerate(runs):
        end = runs[i + 1].start if i + 1 < len(runs) else len(text)
        out.append(_conclude(text[run.start : end] if len(runs) > 1 else text, run, file, options))
    return out


FORMAT = LogFormat(NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=None)
"""Registry entry of this format."""
