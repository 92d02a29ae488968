"""MLPerf Training result logs: ``:::MLLOG {json}`` event lines, as ``mlperf_logging.mllog`` writes them and every
submitter of MLPerf Training hands in (one file per run, ``<submitter>/results/<system>/<benchmark>/result_<n>.txt``).
Verbatim lines::

    :::MLLOG {"namespace": "", "time_ms": 1621118646492, "event_type": "INTERVAL_START", "key": "run_start", "value": null, "metadata": {...}}
    :::MLLOG {"namespace": "", "time_ms": 1621118646731, "event_type": "INTERVAL_START", "key": "epoch_start", "value": null, "metadata": {..., "epoch_num": 1}}
    :::MLLOG {"namespace": "", "time_ms": 1621118726892, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"imgs_sec": 15982.4}, "metadata": {..., "step": 1}}
    I0518 22:11:05.384760 460224 mllog.py:168] :::MLLOG {"namespace": 12, ..., "key": "run_stop", "value": null, "metadata": {"status": "success"}}

* An event is the JSON object after ``:::MLLOG`` anywhere in a line (a launcher's or absl's prefix before it is
  allowed); lines without it (shell output between events) are not read. A line whose JSON does not decode is
  counted (``MlperfRun.malformed_lines``) and left out. One run per ``run_start``.
* Time to train = ``run_stop`` minus ``run_start`` (``time_ms``), as MLCommons' result summarizer takes it; the
  run converged when ``run_stop``'s ``metadata.status`` is ``success``. No ``run_stop``: the log is truncated.
* Throughput, dlperf's one rule: samples over the wall time of the steady spans. The spans are the epochs
  (``epoch_start``/``epoch_stop``, paired by ``metadata.epoch_num``) where the log has any, else the blocks
  (``block_start``/``block_stop``, paired by ``metadata.first_epoch_num``), as TPU, Habana, Intel and PCL logs
  have. A stop closes the span opened by the FIRST open start with its number; a later start with the same
  number before that stop (PCL's MindSpore logs one ``block_start`` per epoch, each with ``epoch_count`` 1 and the
  block's first epoch) adds its ``epoch_count`` to that span; a start that no stop closes is left out (and
  counted). A span's samples = its epochs x ``train_samples`` (the epoch size the log states). Steady = every
  span after the first ``warmup`` (default 1: the first span holds compilation and the input pipeline's start);
  evaluation between spans is not training time. ``measured``, when given, takes at most that many steady spans.
* The framework's own figure (``reported_throughput``): the mean of the ``throughput`` events (NVIDIA's per
  epoch figure; ``tracked_stats`` ``imgs_sec`` where it logs no ``throughput``) of the steady epochs, None where
  the log has none.
* ``global_batch_size`` and the benchmark's hyper-parameters (the optimizer's ``opt_``/``lars_``/``sgd_`` keys,
  ``model_bn_span``, ``gradient_accumulation_steps``, ...: every point-in-time event before ``run_start``
  except the submission and initialization events) are kept as logged; the accelerator count is not in the log
  (the submission's system description has it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dlperf_core.parsing.failures import failed
from dlperf_core.parsing.records import LogFormat, ParsedRun, ParseOptions

NAME = "mlperf_mllog"
DEFAULT_WARMUP = 1  # spans: the first epoch (or block) is warm-up
MARK = ":::MLLOG"
_EVENT = re.compile(r":::MLLOG[ \t]*+(\{[^\n]*)")
_KEY = re.compile(r'"key":[ \t]*"([^"\\]{1,200})"')
# Events read in full; any other key is read only before run_start (hyper-parameters) and skipped after it
_SPAN_KEYS = frozenset({"epoch_start", "epoch_stop", "block_start", "block_stop"})
_RUN_KEYS = frozenset({"run_start", "run_stop", "train_samples", "global_batch_size", "throughput", "tracked_stats"})
# Events never read: initialization and evaluation (NVIDIA logs a weights_initialization line per layer)
_NEVER_READ = frozenset(
    {"weights_initialization", "cache_clear", "init_start", "init_stop", "eval_start", "eval_stop", "eval_accuracy"}
)
_NOT_HYPERPARAMETERS = frozenset({"eval_samples", "train_samples", "seed"})
_SUBMISSION = "submission_"
_MAX_MS = 2**53  # time_ms beyond this (year 285,000) is no time a log was written
_MAX_INT = 2**53  # integers read as numbers (epochs, counts) up to what a float holds exactly

JsonValue = Any
"""A value as the log's JSON holds it."""


@dataclass(frozen=True)
class Span:
    """One training span: an epoch or a block of epochs, from its start to its stop event."""

    kind: Literal["epoch", "block"]
    first_epoch: float  # epoch_num / first_epoch_num as logged
    epochs: float  # 1 for an epoch; the epoch_count of its start(s) for a block
    start_ms: int
    stop_ms: int

    @property
    def seconds(self) -> float:
        return (self.stop_ms - self.start_ms) / 1000.0


@dataclass(frozen=True)
class MlperfRun:
    """What one MLLOG run says: its time to train, whether it converged, the spans dlperf measures, the log's own
    throughput figure, the batch and hyper-parameters. ``status`` "ok" when a throughput was measured, "failed"
    with ``reason`` otherwise (the time to train is kept whenever the log has both ends)."""

    file: str
    status: str
    reason: str | None
    time_to_train_s: float | None
    converged: bool | None  # None: no run_stop
    run_stop_status: str | None
    throughput: float | None
    reported_throughput: float | None
    span_kind: Literal["epoch", "block"] | None
    spans: tuple[Span, ...]  # every paired span, in order
    measured: tuple[Span, ...]  # the steady spans the throughput is over
    unclosed_starts: int  # starts that no stop closed (left out)
    train_samples: int | None
    global_batch_size: int | None
    hyperparameters: Mapping[str, JsonValue] = field(default_factory=dict)
    submission: Mapping[str, str] = field(default_factory=dict)  # org, platform, division, benchmark, status
    malformed_lines: int = 0

    @property
    def samples(self) -> float | None:
        """Samples in the measured spans."""
        if self.train_samples is None or not self.measured:
            return None
        return sum(s.epochs for s in self.measured) * self.train_samples


@dataclass
class _Event:
    time_ms: int
    key: str
    value: JsonValue
    metadata: Mapping[str, JsonValue]


def detect(text: str) -> bool:
    """Whether ``text`` holds an MLLOG event (before every other format: MLPerf logs also carry a framework's
    own lines, e.g. MXNet's Speedometer)."""
    at = text.find(MARK)
    return at >= 0 and _EVENT.match(text, at) is not None


def _events(text: str) -> tuple[list[_Event], int]:
    """The events of ``text`` in text order, without the hyper-parameters' noise after run_start; and how many
    event lines did not decode."""
    events: list[_Event] = []
    malformed = 0
    started = False
    for m in _EVENT.finditer(text):
        body = m.group(1)
        key = _KEY.search(body)
        if key is not None and (
            key.group(1) in _NEVER_READ
            or (started and key.group(1) not in _SPAN_KEYS and key.group(1) not in _RUN_KEYS)
        ):
            continue  # initialization, evaluation, and any other event after the start: not read
        event = _decode(body)
        if event is None:
            malformed += 1
            continue
        started = started or event.key == "run_start"
        events.append(event)
    return events, malformed


def _decode(body: str) -> _Event | None:
    """One event's JSON, None when it is no MLLOG event (bad JSON, no integer time_ms or no key)."""
    try:
        obj = json.loads(body)
    except ValueError:  # json.JSONDecodeError: the line is cut or not JSON
        return None
    if not isinstance(obj, dict):
        return None
    time_ms, key, metadata = obj.get("time_ms"), obj.get("key"), obj.get("metadata")
    if isinstance(time_ms, float) and time_ms.is_integer():
        time_ms = int(time_ms)
    if not isinstance(time_ms, int) or isinstance(time_ms, bool) or not isinstance(key, str):
        return None
    if not 0 <= time_ms < _MAX_MS:
        return None
    return _Event(time_ms, key, obj.get("value"), metadata if isinstance(metadata, dict) else {})


def _number(value: JsonValue) -> float | None:
    """A JSON number as a finite float (an integer JSON holds may be too large for one), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):
        return float(value) if abs(value) < _MAX_INT else None
    return value if math.isfinite(value) else None


def _count(value: JsonValue) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number.is_integer() and number > 0 else None


def _runs_of(events: list[_Event]) -> Iterator[list[_Event]]:
    """The events of each run: from one run_start to the next (the events before the first start belong to it)."""
    starts = [i for i, e in enumerate(events) if e.key == "run_start"]
    if not starts:
        yield events
        return
    bounds = [0, *starts[1:], len(events)]
    for lo, hi in zip(bounds, bounds[1:]):
        yield events[lo:hi]


def _spans(events: list[_Event], kind: Literal["epoch", "block"]) -> tuple[list[Span], int]:
    """The paired spans of one kind (the rule of the module docstring) and the starts no stop closed."""
    number_key = "epoch_num" if kind == "epoch" else "first_epoch_num"
    open_spans: dict[float, list[float]] = {}  # number -> [start_ms, epochs, starts]
    spans: list[Span] = []
    unclosed = 0
    for e in events:
        if e.key not in (f"{kind}_start", f"{kind}_stop"):
            continue
        number = _number(e.metadata.get(number_key))
        if number is None:
            unclosed += e.key.endswith("_start")
            continue
        if e.key.endswith("_start"):
            epochs = 1.0 if kind == "epoch" else (_number(e.metadata.get("epoch_count")) or 0.0)
            if number in open_spans:
                open_spans[number][1] += epochs
                open_spans[number][2] += 1
            else:
                open_spans[number] = [float(e.time_ms), epochs, 1]
        elif number in open_spans:
            start_ms, epochs, _ = open_spans.pop(number)
            spans.append(Span(kind, number, epochs, int(start_ms), e.time_ms))
    unclosed += int(sum(starts for _, _, starts in open_spans.values()))
    return spans, unclosed


def _reported(events: list[_Event], measured: tuple[Span, ...]) -> float | None:
    """The mean of the log's own throughput events inside the measured epochs (see the module docstring)."""
    if not measured or measured[0].kind != "epoch":
        return None
    inside = [(s.start_ms, s.stop_ms) for s in measured]

    def within(t: int) -> bool:  # a figure is logged at (or just after) its epoch's stop
        return any(lo < t <= hi + 1 for lo, hi in inside)

    figures = [_number(e.value) for e in events if e.key == "throughput" and within(e.time_ms)]
    if not figures:
        figures = [
            _number(e.value.get("imgs_sec"))
            for e in events
            if e.key == "tracked_stats" and isinstance(e.value, dict) and within(e.time_ms)
        ]
    kept = [f for f in figures if f is not None and f > 0]
    return sum(kept) / len(kept) if kept else None


def read_run(events: list[_Event], file: str, options: ParseOptions, malformed: int = 0) -> MlperfRun:
    """One run's reading (the events of ``_runs_of``)."""
    start = next((e for e in events if e.key == "run_start"), None)
    stop = next((e for e in events if e.key == "run_stop"), None)
    before = events[: events.index(start)] if start is not None else events
    hyperparameters: dict[str, JsonValue] = {}
    submission: dict[str, str] = {}
    for e in before:
        if e.key.startswith(_SUBMISSION):
            submission[e.key.removeprefix(_SUBMISSION)] = str(e.value)
        elif e.key not in _NOT_HYPERPARAMETERS and e.key not in _RUN_KEYS and e.key not in _SPAN_KEYS:
            hyperparameters.setdefault(e.key, e.value)
    batch = next((_count(e.value) for e in events if e.key == "global_batch_size"), None)
    if batch is not None:
        hyperparameters.setdefault("global_batch_size", batch)
    train_samples = next((_count(e.value) for e in events if e.key == "train_samples"), None)

    epochs, unclosed_epochs = _spans(events, "epoch")
    blocks, unclosed_blocks = _spans(events, "block")
    spans, unclosed, kind = (
        (epochs, unclosed_epochs, "epoch") if epochs else (blocks, unclosed_blocks, "block" if blocks else None)
    )
    steady = tuple(spans[options.warmup :])
    if options.measured is not None:
        steady = steady[: options.measured]

    stop_status = str(stop.metadata.get("status")) if stop is not None and "status" in stop.metadata else None
    time_to_train = (stop.time_ms - start.time_ms) / 1000.0 if start is not None and stop is not None else None
    reason = _failure(start, stop, spans, steady, train_samples, options)
    seconds = sum(s.seconds for s in steady)
    throughput = None
    if reason is None and train_samples is not None:
        throughput = sum(s.epochs for s in steady) * train_samples / seconds
        if not (math.isfinite(throughput) and throughput > 0):
            reason, throughput = f"the steady spans give no finite positive throughput ({throughput})", None
    return MlperfRun(
        file=file,
        status="ok" if throughput is not None else "failed",
        reason=reason,
        time_to_train_s=time_to_train,
        converged=(stop_status == "success") if stop is not None else None,
        run_stop_status=stop_status,
        throughput=throughput,
        reported_throughput=_reported(events, steady) if throughput is not None else None,
        span_kind=kind,  # type: ignore[arg-type]
        spans=tuple(spans),
        measured=steady,
        unclosed_starts=unclosed,
        train_samples=train_samples,
        global_batch_size=batch,
        hyperparameters=hyperparameters,
        submission=submission,
        malformed_lines=malformed,
    )


def _failure(
    start: _Event | None,
    stop: _Event | None,
    spans: list[Span],
    steady: tuple[Span, ...],
    train_samples: int | None,
    options: ParseOptions,
) -> str | None:
    """Why no throughput is measured, None when one is."""
    if start is None:
        return "no run_start event"
    if stop is None and not options.fit:
        return "truncated: the log ends before run_stop"
    if not spans:
        return "no usable span: no epoch_start/epoch_stop or block_start/block_stop pair"
    if not steady:
        return f"no steady span: {len(spans)} span(s), {options.warmup} skipped as warm-up"
    if train_samples is None:
        return "no train_samples event: the samples of a span are unknown"
    if sum(s.seconds for s in steady) <= 0 or sum(s.epochs for s in steady) <= 0:
        return "the steady spans have no duration or no epochs"
    return None


def read_runs(text: str, file: str = "<text>", options: ParseOptions | None = None) -> list[MlperfRun]:
    """Every run in an MLLOG ``text``."""
    options = options or ParseOptions(warmup=DEFAULT_WARMUP)
    events, malformed = _events(text)
    return [read_run(run, file, options, malformed) for run in _runs_of(events)]


def parse(text: str, file: str, options: ParseOptions) -> list[ParsedRun]:
    """The ``ParsedRun`` of each run (``read_runs``): window = the (first, last) epoch numbers measured,
    iterations = the epochs in them, method "spans"."""
    runs = read_runs(text, file, options)
    out: list[ParsedRun] = []
    for run in runs:
        if run.status != "ok":
            out.append(failed(file, NAME, run.reason or "no throughput"))
            continue
        first, last = run.measured[0], run.measured[-1]
        out.append(
            ParsedRun(
                file=file,
                format=NAME,
                status="ok",
                reason=None,
                throughput=run.throughput,
                reported_throughput=run.reported_throughput,
                iterations=max(1, round(sum(s.epochs for s in run.measured))),
                gpus=None,
                batch_size_per_device=None,
                window=(int(first.first_epoch), max(int(first.first_epoch), int(last.first_epoch + last.epochs - 1))),
                method="spans",
            )
        )
    return out


FORMAT = LogFormat(name=NAME, detect=detect, parse=parse, default_warmup=DEFAULT_WARMUP)
