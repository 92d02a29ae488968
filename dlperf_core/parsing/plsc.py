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
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from dlperf_core.parsing.failures import conclude, loss_failure, stopped_short, text_failure, truncation
from dlperf_core.parsing.records import IterationRecord, LogFormat, ParsedRun, ParseOptions
from dlperf_core.parsing.window import TIMESTAMPS
from dlperf_core.parsing.values import MPIRUN_PREFIX as _PREFIX
from dlperf_core.parsing.values import anchored_matches, stamp_seconds
from dlperf_core.parsing.values import match_at as _at, positive_int as _int, to_float as _float

NAME = "paddle_plsc_arcface"
DEFAULT_WARMUP = 50  # DLPerf seed: skip 50 of 150 iterations
DEFAULT_MEASURED = None

_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{1,6}))?")
_TRAIN = re.compile(
    r"loss ([^\s,]{1,64}), lr: [^\s,]{1,64}, epoch: (\d{1,9}), step: (\d{1,12}), eta: [^\n]*?"
    r"(?:throughput: ([^\s,]{1,64}) imgs/sec|ips: ([^\s,]{1,64}) images/sec)"
)
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
_DETECT_TRIES = 1000  # lines holding a needle that detect() looks at
_TRAINERS = re.compile(
    r"\bPADDLE_TRAINERS_NUM\b[\s|=:'\"]{1,80}(\d{1,6})\b|\b(?:num_trainers|nranks)\b\s{0,4}[:=]\s{0,4}(\d{1,6})\b"
)
_VALID = re.compile(r"\[[^\]\n]{1,80}\]\[\d{1,12}\](?:XNorm|Accuracy)|\btest time: ")
_ARGS = "--------args----------"
_SAVE = "Save model to"
_HEADER = re.compile(r" - total_batch_size: \d")


def detect(text: str) -> bool:
    """Whether ``text`` holds an arcface_paddle ``total_batch_size`` header or training line, or an entry.py
    qps line (among the first lines holding those words)."""
    if " - total_batch_size: " in text and _HEADER.search(text) is not None:
        return True
    for needle, rx in (("loss ", _TRAIN), ("Pass:", _OLD)):
        for m, end in anchored_matches(text, needle, rx, _DETECT_TRIES):
            if rx is _TRAIN or _QPS.search(text, m.end(), end) is not None:
                return True
    if "plsc INFO: " in text:  # the PLSC 2.x engine's logger (PaddleClas's engine prints "ppcls INFO:")
        return next(anchored_matches(text, "[Train][Epoch ", _ENGINE, _DETECT_TRIES), None) is not None
    return False


def _usable(x: float | None) -> bool:
    return x is not None and 0 < x < math.inf


def _stamp(line: str) -> tuple[float | None, bool]:
    """Unix seconds (UTC) of the first timestamp in the line's first 80 characters (else None) and whether
    it has sub-second digits."""
    m = _STAMP.search(line, 0, 80)
    return stamp_seconds(m) if m is not None else (None, False)


@dataclass
class _Line:
    """One training line."""

    rank: int | None
    step: int
    epoch: int
    time: float | None
    precise: bool  # the timestamp has sub-second digits
    loss: float | None
    rate: float | None  # printed throughput / ips / qps as printed
    samples: float | None  # avg_samples of the newer form
    pauses: int  # validation / checkpoint-save lines seen so far in the file (any rank)


@dataclass
class _Run:
    """One run's lines and header values."""

    start: int
    end: int = 0
    lines: list[_Line] = field(default_factory=list)
    header: dict[str, str] = field(default_factory=dict)
    trainers: int | None = None
    stopped: bool = False  # the PLSC 2.x engine's "training stops early" line (max_train_step reached)


def _split(text: str) -> list[_Run]:
    """One pass over the lines: runs and what each says."""
    runs = [_Run(0)]
    run = runs[0]
    prefixed = "<std" in text
    pauses = 0
    pos = 0
    offset, last_pass, last_batch = 0, -1, -1  # entry.py: passes restart the batch counter
    for raw in text.split("\n"):
        here, pos = pos, pos + len(raw) + 1
        line = raw.rstrip("\r")
        rank = None
        if prefixed:
            pm = _PREFIX.match(line)
            if pm is not None:
                rank, line = int(pm.group(1)), line[pm.end():]
        if _ARGS in line and run.lines:
            run.end, run = here, _Run(here)
            runs.append(run)
            offset, last_pass, last_batch = 0, -1, -1
        if "step: " in line:
            m = _at(line, "loss ", _TRAIN)
            if m is not None:
                loss, epoch, step, thr, ips = m.groups()
                n = int(step)
                if run.lines and n < run.lines[-1].step and (rank is None or rank == run.lines[-1].rank):
                    run.end, run = here, _Run(here, header=dict(run.header), trainers=run.trainers)
                    runs.append(run)  # the step went back: another run (of the same job settings)
                sm = _SAMPLES.search(line) if ips is not None else None
                run.lines.append(_Line(rank, n, int(epoch), *_stamp(line), _float(loss), _float(thr or ips),
                                       _float(sm.group(1)) if sm else None, pauses))
                continue
        if "[Train][Epoch " in line:
            m = _at(line, "[Train][Epoch ", _ENGINE)
            if m is not None:
                epoch, it, per_epoch, middle, ips = m.groups()
                n = (int(epoch) - 1) * int(per_epoch) + int(it) + 1
                if run.lines and n < run.lines[-1].step and (rank is None or rank == run.lines[-1].rank):
                    run.end, run = here, _Run(here, header=dict(run.header), trainers=run.trainers)
                    runs.append(run)
                lm = _ENGINE_LOSS.search(middle)
                run.lines.append(_Line(rank, n, int(epoch), *_stamp(line), _float(lm.group(1)) if lm else None,
                                       _float(ips), None, pauses))
                continue
        if "training stops early" in line and _ENGINE_STOP.search(line) is not None:
            run.stopped = True
            continue
        if "plsc INFO: " in line and " : " in line:
            m = _ENGINE_CONF.search(line)
            if m is not None and m.group(1) in _ENGINE_KEYS:
                run.header.setdefault(m.group(1), m.group(2))
            continue
        if "qps:" in line:
            m = _at(line, "Pass:", _OLD)
            q = _QPS.search(line, m.end()) if m is not None else None
            if m is not None and q is not None:
                lm = _OLD_LOSS.search(line, m.end(), q.start())
                p, b = int(m.group(1)), int(m.group(2))
                if p != last_pass:  # a new pass restarts the batch counter (lines of other nodes repeat batches)
                    if last_batch >= 0:
                        offset += last_batch + 1
                    last_pass, last_batch = p, -1
                last_batch = max(last_batch, b)
                run.lines.append(_Line(rank, offset + b, p, *_stamp(line), _float(lm.group(1)) if lm else None,
                                       _float(q.group(1)), None, pauses))
                continue
        if _SAVE in line or _VALID.search(line) is not None:
            pauses += 1
            continue
        if ": " in line:
            m = _at(line, " - ", _KV)
            if m is not None:
                run.header.setdefault(m.group(1), m.group(2))
            if "TRAINERS_NUM" in line or "trainers" in line or "nranks" in line:
                t = _TRAINERS.search(line)
                if t is not None:
                    run.trainers = run.trainers or _int(t.group(1) or t.group(2))
    run.end = len(text)
    return runs


def _kept(lines: list[_Line]) -> list[_Line]:
    """The lowest rank's lines (and unprefixed ones) when several ranks printed; a line repeating the step
    of the line before it (another node's copy) is dropped."""
    ranks = {x.rank for x in lines if x.rank is not None}
    if len(ranks) > 1:
        low = min(ranks)
        lines = [x for x in lines if x.rank in (low, None)]
    out: list[_Line] = []
    for x in lines:
        if not out or x.step > out[-1].step:
            out.append(x)
    return out


def _parse_run(chunk: str, run: _Run, file: str, options: ParseOptions) -> ParsedRun:
    h = run.header
    world = _int(h.get("world_size")) or run.trainers
    batch = _int(h.get("batch_size"))
    total = _int(h.get("total_batch_size"))
    if batch is None and total and world and total % world == 0:
        batch = total // world
    global_batch = total or (world * batch if world and batch else None)
    lines = _kept(run.lines)

    stored: list[IterationRecord] = []
    for x in lines:
        rate = x.rate
        if rate is not None and x.samples and global_batch and _usable(x.samples):
            rate *= max(1, round(global_batch / x.samples))  # ips over avg_samples -> the whole job
        stored.append(IterationRecord(x.step, x.time, rate, x.loss, x.rank, x.epoch))

    by_time = global_batch is not None and bool(lines) and all(x.precise for x in lines)
    measured: list[IterationRecord] = []
    for i, (x, r) in enumerate(zip(lines, stored)):
        rate = None
        if i > 0 and x.pauses == lines[i - 1].pauses:  # no validation / save inside the interval
            prev = stored[i - 1]
            dt = r.time - prev.time if by_time else None  # type: ignore[operator]
            if dt is None:
                rate = r.samples_per_sec
            elif dt > 0:
                rate = global_batch * (r.iteration - prev.iteration) / dt  # type: ignore[operator]
        measured.append(IterationRecord(r.iteration, None, rate, r.loss, r.rank, r.epoch))

    progress: list[tuple[str, int, int]] = []
    steps, interval = _int(h.get("total_steps")), _int(h.get("log_interval_step"))
    if steps and interval and stored:
        progress.append(("iterations", stored[-1].iteration, steps - steps % interval))
    max_train_step = _int(h.get("max_train_step"))
    if max_train_step and stored:
        progress.append(("iterations", stored[-1].iteration, max_train_step))
    # A run stopped on purpose (the seed's entry.py exit at batch 150) is complete once it reached the
    # window the caller asked for, even though it never reached total_steps.
    planned = options.warmup + options.measured if options.measured is not None else None
    stopped_as_planned = planned is not None and bool(stored) and stored[-1].iteration >= planned
    finished = stopped_as_planned or run.stopped
    why = truncation(chunk, finished=finished, progress=progress, fit=options.fit)
    failing = why or not stored or loss_failure(stored) or text_failure(chunk)
    result = conclude(
        text=chunk, file=file, format=NAME, records=stored if failing else measured, options=options,
        reported=None, gpus=world, batch_size_per_device=batch, truncated=why,
        stopped_early=stopped_short(finished=finished, progress=progress),
    )
    if result.status == "ok" and by_time:
        result = replace(result, method=TIMESTAMPS)
    return replace(result, records=tuple(stored))


def parse(text: str, file: str, options: ParseOptions) -> list[ParsedRun]:
    """The runs of a PLSC ArcFace log (see the module docstring)."""
    return [_parse_run(text[r.start:r.end], r, file, options) for r in _split(text)]


FORMAT = LogFormat(NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=DEFAULT_MEASURED)
"""Registry entry of this format."""
