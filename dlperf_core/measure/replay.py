"""A nightly series replayed through the regression rule: what ``dlperf regressions replay`` prints.

A team tries the detector on its own history: every night of every configuration is judged by
:func:`dlperf_core.measure.regression.judge_series`, the nightly task's own verdicts (:func:`~.regression.judge_night`
one night at a time, the open regression carried along, :func:`~.regression.describe_verdict` for the line), from

* a CSV file (:func:`read_csv`) with the header ``night,configuration,median,repeats,cv`` (:data:`CSV_COLUMNS`, any
  order, other columns ignored): ``night`` an ISO date (``2026-01-31``; an ISO date and time is read as its date),
  ``configuration`` any non-empty name (a case key), ``median`` the night's median throughput (a positive number;
  empty when ``repeats`` is 0), ``repeats`` its ok repeats (a whole number; 0: not a good night, not judged, as
  the nightly task skips a night without an ok repeat), ``cv`` their coefficient of variation as a fraction
  (``0.012``; may be empty, only shown); one row per configuration and night;
* or the results database's nightly history (:func:`from_nightly_rows`: the ``nightly_history`` rows the nightly task
  reads, good nights by :func:`~.regression.is_good_night`, environments compared as the nightly task compares them).

Pure: text or rows in, :class:`ReplayedSeries` and their text out; nothing is stored, nobody is alerted.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime

from dlperf_core.measure.regression import (
    Night,
    NightlyRow,
    Policy,
    Verdict,
    describe_verdict,
    is_good_night,
    judge_series,
)

CSV_COLUMNS: tuple[str, ...] = ("night", "configuration", "median", "repeats", "cv")
"""The columns a replayed CSV must have (module docstring)."""


class ReplayInputError(ValueError):
    """A series that cannot be replayed; the message names the file and the line."""


@dataclass(frozen=True)
class SeriesNight:
    """One night of one configuration, as read: from a CSV row or a ``nightly_history`` row."""

    configuration: str
    night: date
    run_id: str  # the run (a CSV row: its line)
    median: float | None
    repeats: int  # ok repeats
    cv: float | None = None
    good: bool = True  # a good night (module docstring); only good nights are judged
    why_not: str = ""  # a night that is not good: why
    environment: Mapping[str, object] | None = field(default=None, compare=False)


def _number(text: str, what: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ReplayInputError(f"{where}: {what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ReplayInputError(f"{where}: {what} {text!r} is not a finite number")
    return value


def _night(text: str, where: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).date()
    except ValueError:
        raise ReplayInputError(f"{where}: night {text!r} is not an ISO date (YYYY-MM-DD)") from None


def _row(values: Mapping[str, str], where: str, line: int) -> SeriesNight:
    configuration = values["configuration"].strip()
    if not configuration:
        raise ReplayInputError(f"{where}: configuration is empty")
    night = _night(values["night"].strip(), where)
    repeats_text = values["repeats"].strip()
    try:
        repeats = int(repeats_text)
    except ValueError:
        raise ReplayInputError(f"{where}: repeats {repeats_text!r} is not a whole number") from None
    if repeats < 0:
        raise ReplayInputError(f"{where}: repeats {repeats} is negative")
    median_text = values["median"].strip()
    median = None if not median_text and repeats == 0 else _number(median_text, "median", where)
    if median is not None and median <= 0:
        raise ReplayInputError(f"{where}: median {median_text!r} is not positive")
    cv_text = values["cv"].strip()
    cv = _number(cv_text, "cv", where) if cv_text else None
    if cv is not None and cv < 0:
        raise ReplayInputError(f"{where}: cv {cv_text!r} is negative")
    good = repeats > 0
    return SeriesNight(configuration, night, f"line {line}", median, repeats, cv, good, "" if good else "no ok repeat")


def read_csv(text: str, source: str = "<csv>") -> list[SeriesNight]:
    """The nights of a replay CSV (module docstring), in file order; :class:`ReplayInputError` naming ``source`` and
    the line for the first thing that cannot be read (nothing is returned half-read)."""
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise ReplayInputError(f"{source}: empty; the first line must be the header {','.join(CSV_COLUMNS)}") from None
    except csv.Error as exc:
        raise ReplayInputError(f"{source}:1: not CSV ({exc})") from None
    names = [name.strip() for name in header]
    missing = [c for c in CSV_COLUMNS if c not in names]
    if missing:
        raise ReplayInputError(
            f"{source}:1: the header lacks {', '.join(missing)} (it must name {','.join(CSV_COLUMNS)}; got "
            f"{','.join(names) or 'nothing'})"
        )
    index = {c: names.index(c) for c in CSV_COLUMNS}
    nights: list[SeriesNight] = []
    seen: dict[tuple[str, date], int] = {}
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise ReplayInputError(f"{source}:{reader.line_num}: not CSV ({exc})") from None
        line = reader.line_num
        if not any(f.strip() for f in fields):
            continue  # a blank line
        where = f"{source}:{line}"
        if len(fields) != len(names):
            raise ReplayInputError(f"{where}: {len(fields)} fields, the header has {len(names)}")
        night = _row({c: fields[i] for c, i in index.items()}, where, line)
        key = (night.configuration, night.night)
        if key in seen:
            raise ReplayInputError(
                f"{where}: {night.configuration} on {night.night.isoformat()} is on line {seen[key]} already"
            )
        seen[key] = line
        nights.append(night)
    return nights


def from_nightly_rows(
    rows: Iterable[NightlyRow], environments: Mapping[int, Mapping[str, object]] | None = None
) -> list[SeriesNight]:
    """The nights of ``nightly_history`` rows (``NightlyRow.from_history``), good or not as the nightly task tells
    them (:func:`~.regression.is_good_night`), with their environments' infrastructure fields (by id)."""
    environments = environments or {}
    out = []
    for row in rows:
        good = is_good_night(row, row.case_key) and row.median_throughput is not None
        if good:
            why = ""
        elif row.run_status == "running":
            why = "the run had not finished"
        elif row.n_failed:
            why = f"{row.n_failed} failed repeats"
        else:
            why = "no ok repeat"
        out.append(
            SeriesNight(
                row.case_key,
                row.night,
                row.run_id,
                row.median_throughput,
                row.n,
                None,
                good,
                why,
                environments.get(row.environment_id) if row.environment_id is not None else None,
            )
        )
    return out


@dataclass(frozen=True)
class ReplayedNight:
    night: SeriesNight
    verdict: Verdict | None  # None: not a good night, not judged


@dataclass(frozen=True)
class ReplayedSeries:
    """One configuration's nights in order, each with the verdict the nightly task would have given it."""

    configuration: str
    nights: tuple[ReplayedNight, ...]

    @property
    def counts(self) -> dict[str, int]:
        """Verdict kind (or ``not judged``) -> nights."""
        counts: dict[str, int] = {}
        for n in self.nights:
            kind = n.verdict.kind if n.verdict is not None else "not judged"
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    @property
    def alerts(self) -> tuple[Verdict, ...]:
        """The new regressions: what the nightly task would have stored and alerted."""
        return tuple(n.verdict for n in self.nights if n.verdict is not None and n.verdict.kind == "new")


def replay(nights: Iterable[SeriesNight], policy: Policy = Policy()) -> list[ReplayedSeries]:
    """Every configuration of ``nights`` (by name), its good nights judged in order by
    :func:`~.regression.judge_series` under ``policy``."""
    by_configuration: dict[str, list[SeriesNight]] = {}
    for night in nights:
        by_configuration.setdefault(night.configuration, []).append(night)
    out = []
    for configuration in sorted(by_configuration):
        ordered = sorted(by_configuration[configuration], key=lambda n: (n.night, n.run_id))
        good = [Night(n.night, n.run_id, n.median, n.environment) for n in ordered if n.good and n.median is not None]
        verdicts = iter(judge_series(good, policy))  # in the same order: judge_series sorts by night, stably
        out.append(
            ReplayedSeries(
                configuration,
                tuple(ReplayedNight(n, next(verdicts) if n.good and n.median is not None else None) for n in ordered),
            )
        )
    return out


QUIET_KINDS = frozenset({"insufficient_history", "steady", "continuing"})
"""Verdicts ``--brief`` leaves out."""

KIND_WIDTH = len("insufficient_history")


def format_replay(series: Sequence[ReplayedSeries], *, brief: bool = False) -> str:
    """The replay as text: per configuration a header line (nights, verdict counts), then one line per night: the
    night, its verdict and the nightly task's log line for it (``brief``: only nights judged suspected, new or
    recovered); at the end one line per alert and the totals."""
    lines: list[str] = []
    alerts: list[tuple[str, Verdict]] = []
    for s in series:
        counts = ", ".join(f"{kind} {n}" for kind, n in sorted(s.counts.items()))
        lines.append(f"{s.configuration}: {len(s.nights)} nights ({counts})")
        for n in s.nights:
            verdict = n.verdict
            night = n.night.night.isoformat()
            if verdict is None:
                if not brief:
                    lines.append(f"  {night} {'not judged':<{KIND_WIDTH}} {s.configuration}: {n.night.why_not}")
                continue
            if brief and verdict.kind in QUIET_KINDS:
                continue
            cv = f" [cv {n.night.cv:.3f}]" if n.night.cv is not None else ""
            lines.append(f"  {night} {verdict.kind:<{KIND_WIDTH}} {describe_verdict(s.configuration, verdict)}{cv}")
        alerts.extend((s.configuration, a) for a in s.alerts)
        lines.append("")
    lines.append(f"alerts (new regressions): {len(alerts)}")
    for configuration, a in alerts:
        first = f", first bad night {a.first_bad_night.isoformat()}" if a.first_bad_night is not None else ""
        change = f"{a.change_pct:+.2f}%" if a.change_pct is not None else "?"
        lines.append(f"  {configuration}: {a.direction} {change} on {a.night.isoformat()}{first}")
    judged = sum(1 for s in series for n in s.nights if n.verdict is not None)
    total = sum(len(s.nights) for s in series)
    lines.append(f"{len(series)} configurations, {total} nights, {judged} judged")
    return "\n".join(lines)
