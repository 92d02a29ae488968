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


@dataclass
class _Step:
    """One PaddleClas train-step line."""

    rank: int | None
    epoch: str | None
    step: int
    time: float | None
    loss: float | None
    ips: float | None
    elapse: float | None
    elapse_decimals: int


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
    """What one run's lines say."""

    start: int
    end: int = 0
    steps: list[_Step] = field(default_factory=list)
    passes: list[_Pass] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)  # top-level config keys
    train_batch: int | None = None  # TRAIN.batch_size (global)
    args: dict[str, str] = field(default_factory=dict)  # "name: value" argument lines
    trainers: int | None = None
    gloo: int | None = None
    local: int | None = None
    ends: int = 0  # END epoch ... train lines

    def trained(self) -> bool:
        return bool(self.steps or self.passes)


def _split(text: str) -> list[_Run]:
    """One pass over the lines: runs and what each says."""
    runs = [_Run(0)]
    run = runs[0]
    section = ""
    stamps: dict[str, float | None] = {}
    prefixed = "<std" in text
    pos = 0
    for raw in text.split("\n"):
        here, pos = pos, pos + len(raw) + 1
        line = raw.rstrip("\r")
        rank = None
        if prefixed:
            pm = _PREFIX.match(line)
            if pm is not None:
                rank, line = int(pm.group(1)), line[pm.end():]
        if (_BANNER in line or _LAUNCH in line) and run.trained():
            run.end = here
            run = _Run(here)
            runs.append(run)
            section = ""
        i = line.find("train step:")
        if i >= 0:
            em = _EPOCH.search(line, max(0, i - 40), i)
            epoch = em.group(1) if em else None
            f = _FAST.match(line, i)
            if f is not None:
                step, loss, elapse, decimals, ips = f.groups()
                run.steps.append(_Step(rank, epoch, int(step), _stamp(line, stamps)[0], _float(loss), _float(ips),
                                       _float(elapse), len(decimals or "")))
                continue
            m = _TRAIN.match(line, i)
            if m is not None:
                step, mid, ips = m.groups()
                lm, em = _LOSS.search(mid), _ELAPSE.search(mid)
                run.steps.append(_Step(
                    rank, epoch, int(step), _stamp(line)[0],
                    _float(lm.group(1)) if lm else None, _float(ips),
                    _float(em.group(1)) if em else None, len(em.group(2) or "") if em else 0,
                ))
                continue
        if "[Pass " in line:
            m = _at(line, "[Pass ", _CV)
            if m is not None:
                t, precise = _stamp(line)
                run.passes.append(_Pass(rank, int(m.group(1)), int(m.group(2)), t, precise,
                                        _float(m.group(3)), _float(m.group(4))))
                continue
        if "END epoch" in line and _END.search(line):
            run.ends += 1
            continue
        if " : " in line and "INFO: " in line:
            m = _at(line, "INFO: ", _CONF)
            if m is not None:
                indent, key, value = m.groups()
                value = (value or "").strip()
                if not indent:
                    if value:
                        run.config.setdefault(key, value)
                    else:
                        section = key
                elif section == "TRAIN" and key == "batch_size" and len(indent) <= 4:
                    run.train_batch = run.train_batch or _int(value)
                continue
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
    run.end = len(text)
    return runs


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


def _per_card_batch(steps: list[_Step]) -> tuple[float, float] | None:
    """(ips x elapse, its uncertainty) from the last post-reset step with both: the per-card batch."""
    for s in reversed(steps):
        if s.step >= RESET_STEP and s.ips and s.elapse and 0 < s.ips * s.elapse < math.inf:
            return s.ips * s.elapse, s.ips * 0.5 * 10.0 ** -min(s.elapse_decimals, 12) + 1e-6
    return None


def _gpus(run: _Run, hint: int | None, file: str) -> int | None:
    """The trainer (GPU) count: what the log says first, then the hint, then the file name. A PaddleCV
    process may drive several listed GPUs itself, so its ``selected_gpus`` list is not a trainer count."""
    if run.trainers or run.gloo:
        return run.trainers or run.gloo
    if run.config.get("is_distributed") == "False":
        return 1
    est = _per_card_batch(run.steps)
    if run.train_batch and est is not None and est[0] > 0:
        near = round(run.train_batch / est[0])
        fits = [g for g in range(max(1, near - 1), near + 2)
                if run.train_batch % g == 0 and abs(run.train_batch / g - est[0]) <= est[1]]
        if len(fits) == 1:
            return fits[0]
    if run.local:
        return run.local
    listed = run.args.get("selected_gpus") or run.args.get("gpus")
    if run.steps and listed and all(p.strip().isdigit() for p in listed.split(",")):
        return len(listed.split(","))  # PaddleClas launcher: one process per listed GPU
    return hint if hint and hint > 0 else gpus_from_name(file)


def _keep_rank(items: list, ranks: set[int | None]) -> list:  # type: ignore[type-arg]
    """The lowest rank's items (and unprefixed ones) when several ranks printed."""
    numbered = {r for r in ranks if r is not None}
    if len(numbered) <= 1:
        return items
    low = min(numbered)
    return [x for x in items if x.rank in (low, None)]


def _step_records(steps: list[_Step], gpus: int | None, epoch_len: int | None) -> list[IterationRecord]:
    """Records with the global rate since the previous kept record, from the running averages."""
    out: list[IterationRecord] = []
    offset, epoch_text, first, last = 0, None, 0, -1
    prev: tuple[int, float, bool] | None = None  # (step, n/ips, after reset) of the last rated record
    for s in steps:
        changed = s.epoch is not None and epoch_text is not None and s.epoch != epoch_text
        if not out or changed or s.step <= last:  # a new epoch: the counter and the averages restart
            if out:
                offset += max(last + (1 if first == 0 else 0), epoch_len or 0)
            first, prev = min(s.step, 1), None
        epoch_text, last = s.epoch if s.epoch is not None else epoch_text, s.step
        rate = None
        if gpus and s.ips is not None and 0 < s.ips < math.inf:
            post = s.step >= RESET_STEP
            u = (s.step - RESET_STEP + 1 if post else s.step - first + 1) / s.ips
            if prev is None or (prev[2] != post and prev[0] != RESET_STEP - 1):
                card: float | None = s.ips  # the record's own running average (see the module docstring)
            elif prev[2] == post:
                du = u - prev[1]
                card = (s.step - prev[0]) / du if du > 0 else None
            else:  # prev is step 4: the post-reset average covers exactly the steps since it
                card = (s.step - prev[0]) / u
            if card is not None and math.isfinite(card) and card > 0:
                rate, prev = card * gpus, (s.step, u, post)
        epoch = int(s.epoch) if s.epoch is not None else None
        out.append(IterationRecord(offset + s.step, s.time, rate, s.loss, s.rank, epoch))
    return out


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


def _published(steps: list[_Step], gpus: int | None) -> float | None:
    """The report's figure: mean ips of the train-step lines after the first 10 (100 for > 8 GPUs) x GPUs."""
    if not gpus:
        return None
    skip = PUBLISHED_SKIP_MULTINODE if gpus > 8 else PUBLISHED_SKIP
    values = [s.ips for s in steps[skip:] if s.ips is not None and math.isfinite(s.ips)]
    return sum(values) / len(values) * gpus if values else None


def _parse_run(chunk: str, run: _Run, file: str, options: ParseOptions, hint: int | None) -> ParsedRun:
    ranks = {s.rank for s in run.steps} | {p.rank for p in run.passes}
    steps, passes = _keep_rank(run.steps, ranks), _keep_rank(run.passes, ranks)
    gpus = _gpus(run, hint, file)
    reason: str | None = None
    epochs = _int(run.config.get("epochs"))
    progress: list[tuple[str, int, int]] = []
    stamped = False
    if steps or not passes:  # PaddleClas
        batch = run.train_batch // gpus if run.train_batch and gpus and run.train_batch % gpus == 0 else None
        global_batch = batch * gpus if batch and gpus else None
        per_epoch = None
        total = _int(run.config.get("total_images"))
        if total and global_batch:
            per_epoch = total // global_batch
        print_interval = _int(run.config.get("print_interval"))
        stored = _step_records(steps, gpus, per_epoch if print_interval and print_interval > 1 else None)
        measured = [IterationRecord(r.iteration, None, r.samples_per_sec, r.loss, r.rank, r.epoch)
                    for r in stored if r.samples_per_sec is not None]
        reported = _published(steps, gpus)
        if steps and not gpus:
            reason = UNKNOWN_GPUS
        if steps:
            seen = len({s.epoch for s in steps})
            in_last = min(s.step for s in steps if s.epoch == steps[-1].epoch)
            last_count = steps[-1].step + (1 if in_last == 0 else 0)
            if epochs:
                progress.append(("epochs", seen, epochs))
            if per_epoch:
                progress.append(("iterations", last_count, per_epoch))
        finished = run.ends >= (epochs or len({s.epoch for s in steps}) or 1) if run.ends else False
    else:  # PaddleCV
        cv_batch = _int(run.args.get("batch_size"))  # per trainer process
        global_batch = cv_batch * (gpus or 1) if cv_batch else None
        batch = cv_batch if gpus else None
        stored, measured, stamped = _pass_records(passes, global_batch)
        reported, finished = None, False
        if not cv_batch:
            reason = UNKNOWN_BATCH
    why = truncation(chunk, finished=finished, progress=progress, fit=options.fit) or reason
    if why or not stored or loss_failure(stored) or text_failure(chunk):
        records = stored  # conclude fails on these before measuring anything
    else:  # measured without times: timed from the rates; a log whose lines give no rate has none
        records = measured or [replace(r, time=None) for r in stored]
    result = conclude(
        text=chunk, file=file, format=NAME, records=records, options=options, reported=reported,
        gpus=gpus, batch_size_per_device=batch, truncated=why,
        stopped_early=stopped_short(finished=finished, progress=progress),
    )
    if stamped and result.status == "ok":
        result = replace(result, method=TIMESTAMPS)
    return replace(result, records=tuple(stored))


def parse(text: str, file: str, options: ParseOptions, gpus_hint: int | None = None) -> list[ParsedRun]:
    """The runs of a PaddleClas / PaddleCV log (see the module docstring). ``gpus_hint`` is used only when
    the log does not say its GPU count."""
    runs = _split(text)
    return [_parse_run(text[r.start:r.end], r, file, options, gpus_hint) for r in runs]


FORMAT = LogFormat(NAME, detect, parse, default_warmup=DEFAULT_WARMUP, default_measured=DEFAULT_MEASURED)
"""Registry entry of this format."""
