"""TensorFlow 2 official ResNet (tensorflow/models ``official/``; the ``TimeHistory`` Keras callback of
``official/utils/misc/keras_utils.py``). Verbatim lines, absl-prefixed or bare, optionally behind an mpirun
prefix such as ``[1,0]<stderr>:``::

    I0115 10:13:05.543210 140234567890112 keras_utils.py:145] TimeHistory: 39.13 seconds, 327.08 examples/second between steps 100 and 200
    INFO:tensorflow:BenchmarkMetric: {'global step':200, 'time_taken': 39.130000,'examples_per_second': 327.080000}
    INFO:tensorflow:Using MirroredStrategy with devices ('/job:localhost/replica:0/task:0/device:GPU:0', '/job:localhost/replica:0/task:0/device:GPU:1')
    Epoch 1/1
    I0115 10:17:40.000000 140234567890112 classifier_trainer.py:455] Run stats:

* TF >= 2.2 prints ``TimeHistory: S seconds, R examples/second between steps A and B`` every ``log_steps``
  (100 by default); TF 2.0/2.1 printed ``BenchmarkMetric: {'global step':B, 'time_taken': S,
  'examples_per_second': R}`` instead; both are read. One record per line: iteration = the end step B
  (global, it does not restart per epoch), samples_per_sec = R, which is GLOBAL (the callback's batch size
  is the total batch; a BenchmarkMetric line covers the steps since the previous one), time None: the line
  has no date (an absl prefix has no year), so the window is measured from the printed rates
  (iteration-weighted harmonic mean = steps / printed seconds).
* loss: the last ``- loss: X`` (Keras), ``'train_loss': X`` (orbit) or ``'loss': X`` printed (by any rank)
  since the previous record, or the first NaN/inf one; a NaN/inf printed after the last record goes on the
  last record. So a NaN loss fails the run.
* mpirun prefixes (``[1,0]<stderr>:``): only the lowest rank's step lines are kept. Matches are not anchored
  at line starts (Keras progress bars end in ``\r``, not a newline, and absl lines run into them): a line's
  rank is that of the last prefix before it on its line.
* gpus: ``MultiWorkerMirroredStrategy ... num_workers = W, local_devices = (...)`` gives W x local
  devices, else ``Using MirroredStrategy with devices (...)``, else the distinct GPUs of ``Created
  TensorFlow device (...device:GPU:N ...)`` lines. The global batch is not printed, but every line gives
  it as R x S / (B - A): batch_size_per_device = that (summed over the lines, within 1 % of a whole
  number) / gpus when it divides evenly, else None.
* reported_throughput = the arithmetic mean of the printed rates after the first line (our choice: the
  framework prints no overall figure; the first window holds graph building and start-up).
* Default window: warm-up 100 iterations = the first TimeHistory window (log_steps 100), measured to the
  end. DLPerf's script (extract_tensorflow_logs_time.py) also skipped the first 100 steps, then timed steps
  100..600 from the absl timestamps of the 1st and 6th TimeHistory lines; the sum of the printed windows
  differs from that only by the few milliseconds between one window's end and the next one's start.
* finished = a ``Run stats:`` line; otherwise a cut last line, or ``Epoch k/N`` with k < N, is truncation.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from dlperf_core.parsing.failures import conclude, stopped_short, truncation
from dlperf_core.parsing.records import LogFormat, ParsedRun, ParseOptions, RecordColumns
from dlperf_core.parsing.values import search_literal
from dlperf_core.parsing.values import to_float as _float

NAME = "tf2_official_resnet"
DEFAULT_WARMUP = 100  # the first TimeHistory window (log_steps=100); DLPerf skipped these 100 steps too

_NUM = r"([^\s,}]{1,64})"
_LINE = re.compile(  # not anchored: Keras progress bars (\r, no newline) run into the absl lines
    r"(?=[TB'ERMUC-])(?:"  # the first letters of the branches below: a fast skip over other text
    r"TimeHistory: " + _NUM + r" seconds, " + _NUM + r" examples/second between steps (\d{1,12}) and (\d{1,12})"
    r"|BenchmarkMetric: \{'global step': ?(\d{1,12}), 'time_taken': ?"
    + _NUM
    + r", ?'examples_per_second': ?"
    + _NUM
    + r"\}"
    r"|(?:- loss|'train_loss'|'loss'): " + _NUM + r"|(?<!\S)Epoch (\d{1,9})/(\d{1,9})[ \t]*\r?$"
    r"|(Run stats:)"
    r"|(MultiWorkerMirroredStrategy with cluster_spec = )"  # the rest of these two lines: _MULTI, _DEVICES
    r"|(Using MirroredStrategy with devices \()"
    r"|Created TensorFlow device \([^\s)]{0,200}device:GPU:(\d{1,6}))",
    re.M,
)
_MULTI = re.compile(r"[^\n]{0,4000}?num_workers = (\d{1,6}), local_devices = \(([^)\n]{0,4000})\)")
_DEVICES = re.compile(r"([^)\n]{0,4000})\)")
_RANK = re.compile(r"\[\d{1,9},(\d{1,9})\]<std(?:out|err)>:")
_RANK_REACH = 4096  # how far back on its line a match looks for its mpirun prefix
_TIME_HISTORY = re.compile(r"TimeHistory: [^\s,]{1,64} seconds, [^\s,]{1,64} examples/second between steps \d")
_BENCHMARK_METRIC = re.compile(r"BenchmarkMetric: \{'global step': ?\d")

_Line = tuple[int | None, int, int, float | None, float | None]  # rank, start step, end step, seconds, rate


def detect(text: str) -> bool:
    """Whether ``text`` holds a TimeHistory or a TF 2.0/2.1 ``BenchmarkMetric`` step line (each tried only
    where its first words start: memchr jumps between the rare H's and B's)."""
    return (
        search_literal(text, _TIME_HISTORY, "TimeHistory: ", "H") is not None
        or search_literal(text, _BENCHMARK_METRIC, "BenchmarkMetric: ", "B") is not None
    )


def _devices(listing: str) -> int:
    """Number of quoted device names in a ``('/job:.../device:GPU:0', ...)`` listing."""
    return sum(1 for x in listing.split(",") if x.strip().strip("'\""))


class _Ranks:
    """The rank of the last mpirun prefix before a position on its line; a line is read once, left to
    right (a line not seen before is read from at most _RANK_REACH characters back)."""

    def __init__(self, text: str) -> None:
        self.text, self.upto = text, -1  # read up to
        self.rank: int | None = None  # last rank found

    def at(self, pos: int) -> int | None:
        text = self.text
        if 0 <= self.upto <= pos and text.find("\n", self.upto, pos) < 0:
            begin = self.upto  # still on the line read last time
        else:
            lo = max(0, pos - _RANK_REACH)
            begin, self.rank = text.rfind("\n", lo, pos) + 1 or lo, None
        for r in _RANK.finditer(text, begin, pos):
            self.rank = int(r.group(1))
        self.upto = pos
        return self.rank


def _line_end(text: str, pos: int) -> int:
    """End of the line at ``pos``, at most ``pos`` + 8002 (about what _MULTI/_DEVICES can read)."""
    end = text.find("\n", pos, pos + 8002)
    return end if end >= 0 else pos + 8002


@dataclass
class _Scan:
    """What one pass over the text found."""

    events: list[_Line | float | None] = field(default_factory=list)  # step lines and losses, in order
    finished: bool = False
    epoch: tuple[int, int] | None = None  # last "Epoch k/N"
    workers: int | None = None
    multi_local: int | None = None
    mirrored: int | None = None
    created: set[int] = field(default_factory=set)


def _scan(text: str) -> _Scan:
    out = _Scan()
    ranks = _Ranks(text) if "<std" in text else None
    last_end: dict[int | None, int] = {}  # rank -> end step of its last line (BenchmarkMetric has no start)
    multi_upto = devices_upto = -1  # text read for those lines so far: each position is read once
    for m in _LINE.finditer(text):
        g = m.groups()
        if g[3] is not None or g[4] is not None:  # TimeHistory / BenchmarkMetric
            rank = ranks.at(m.start()) if ranks is not None else None
            if g[3] is not None:
                a, b, secs, rate = int(g[2]), int(g[3]), _float(g[0]), _float(g[1])
            else:
                b, secs, rate = int(g[4]), _float(g[5]), _float(g[6])
                a = last_end.get(rank, 0)
            last_end[rank] = b
            out.events.append((rank, a, b, secs, rate))
        elif g[7] is not None:
            out.events.append(_float(g[7]))
        elif g[8] is not None:
            out.epoch = (int(g[8]), int(g[9]))
        elif g[10] is not None:
            out.finished = True
        elif g[11] is not None:  # the first complete line counts
            if out.workers is None and m.start() >= multi_upto:
                mm = _MULTI.match(text, m.end())
                multi_upto = mm.end() if mm else _line_end(text, m.end())
                if mm is not None:
                    out.workers, out.multi_local = int(mm.group(1)), _devices(mm.group(2))
        elif g[12] is not None:
            if out.mirrored is None and m.start() >= devices_upto:
                dm = _DEVICES.match(text, m.end())
                devices_upto = dm.end() if dm else _line_end(text, m.end())
                if dm is not None:
                    out.mirrored = _devices(dm.group(1)) or None
        elif g[13] is not None:
            out.created.add(int(g[13]))
    return out


def _records(events: list[_Line | float | None]) -> tuple[list[_Line], RecordColumns]:
    """The lowest rank's step lines (by end step) and their records, as columns. A record's loss is the last
    loss printed (by any rank) since the previous record, or the first NaN/inf one; a NaN/inf loss after the
    last record goes on the last record."""
    ranks = [e[0] for e in events if isinstance(e, tuple) and e[0] is not None]
    keep = min(ranks) if ranks else None
    lines: list[_Line] = []
    losses: list[float | None] = []
    pending: float | None = None
    for e in events:
        if isinstance(e, tuple):
            if e[0] == keep:
                lines.append(e)
                losses.append(pending)
                pending = None
        elif e is not None and (pending is None or math.isfinite(pending)):
            pending = e
    if lines and pending is not None and not math.isfinite(pending):
        losses[-1] = pending
    order = sorted(range(len(lines)), key=lambda i: lines[i][2])
    lines = [lines[i] for i in order]
    n = len(lines)
    records = RecordColumns(
        [line[2] for line in lines],
        [None] * n,
        [line[4] for line in lines],
        [losses[i] for i in order],
        [keep] * n if keep is not None else None,
    )
    return lines, records


def _global_batch(lines: list[_Line]) -> int | None:
    """The total batch, rate x seconds / steps summed over the TimeHistory lines, if near a whole number."""
    samples, steps = 0.0, 0
    for _, a, b, secs, rate in lines:
        line_samples = secs * rate if secs is not None and rate is not None and secs > 0 and rate > 0 else math.nan
        if a >= 0 and b > a and math.isfinite(line_samples):
            samples, steps = samples + line_samples, steps + b - a
    if steps <= 0 or not math.isfinite(samples) or samples / steps > 1e9:
        return None
    est = samples / steps
    whole = round(est)
    return whole if whole >= 1 and abs(est - whole) <= 0.01 * est else None


def parse(text: str, file: str, options: ParseOptions) -> list[ParsedRun]:
    """The one run of a TF2 official ResNet log (see the module docstring)."""
    scan = _scan(text)
    lines, records = _records(scan.events)

    if scan.workers and scan.multi_local:
        gpus: int | None = scan.workers * scan.multi_local
    else:
        gpus = scan.mirrored or (len(scan.created) or None)
    total = _global_batch(lines)
    per_device = total // gpus if total and gpus and total % gpus == 0 else None

    rates = [r for _, _, _, _, r in lines[1:] if r is not None and r > 0 and math.isfinite(r)]
    reported = sum(r / len(rates) for r in rates) if rates else None  # no overflow on 1e308
    progress = [("epochs", scan.epoch[0], scan.epoch[1])] if scan.epoch else []
    return [
        conclude(
            text=text,
            file=file,
            format=NAME,
            records=records,
            options=options,
            reported=reported,
            gpus=gpus,
            batch_size_per_device=per_device,
            truncated=truncation(text, finished=scan.finished, progress=progress, fit=options.fit),
            stopped_early=stopped_short(finished=scan.finished, progress=progress),
        )
    ]


FORMAT = LogFormat(NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=None)
"""Registry entry of this format."""
