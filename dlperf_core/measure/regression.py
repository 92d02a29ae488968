"""Regression detection: is tonight's median of a configuration outside its own run-to-run noise?

Method: **median and MAD** (the modified z-score of Iglewicz and Hoaglin). The baseline is the last
``window`` good nights of the same configuration (default 14); its centre is their median and its
spread the median absolute deviation scaled by 1.4826 (a standard deviation for normal noise).
Tonight's ``robust_z = (median_tonight - baseline_median) / (1.4826 * MAD)``; a change is flagged
when ``|robust_z| >= z_threshold`` (3.5, Iglewicz-Hoaglin's outlier cut) **and** the change is at
least ``min_change_pct`` (2 %) so that an almost noiseless history does not turn a 0.3 % wiggle into
an alert. The MAD is floored at ``mad_floor_pct`` of the median for the same reason.

Why this and not a mean/stdev test: nightly histories are short and carry outliers (a node that was busy, a
cold cache); the median and the MAD ignore up to half of the nights being odd, where one bad night inflates a
standard deviation enough to hide a real 5 % step.

**Confirmed by change points** (``Policy.confirm_nights``, default 2). On its own the rule alerts the morning after
any night outside the noise, and a single odd night is one: on generated series at 1 % night-to-night CV it raised
about 120 false alerts per 100 series-months (``bench/detection_quality.py``, docs/benchmarks.md (j)). So a night
the rule flags is only ``suspected`` (logged, nothing opened, nobody alerted) until change points confirm it
(:func:`confirm`): E-Divisive means with a t-test (:mod:`dlperf_core.measure.change_points`, dlperf's own
implementation of Apache Otava's method, checked against Otava on the bench's series) over the last
``change_window`` good nights and tonight find a level change at least ``confirm_nights`` nights old, and each of
the last ``confirm_nights`` nights is itself ``confirm_z`` standard deviations off the nights before the change. Then
the verdict is ``new`` and names the change point's night as its ``first_bad_night``. On the same series this caught
96 % of 5 % drops within 3 nights with 0.3 false alerts per 100 series-months; the price is that no alert comes the
morning after the first bad night, and that at 2 % CV a 5 % drop is caught within 3 nights only about one time in
five (the figures and the trade-off: docs/benchmarks.md (j)). ``Policy(confirm_nights=1)`` is the rule alone.

State across nights: a ``new`` verdict (flagged, and confirmed) opens a regression. Later nights at the regressed
level are the *same* regression (``continuing``: no new row, no new alert); a night back within the noise of the
regression's baseline ``recovered`` it (closed); a further significant move away from the
regressed level is a new regression. A regression is marked ``environment_changed`` when tonight's
environment differs from the previous good night's (a confirmed one: from the last night before its change point)
in a field of
:data:`dlperf_core.cluster.environment.INFRASTRUCTURE_FIELDS` (driver, image digest, framework, CUDA,
cuDNN, NCCL, GPU model/count, power limit, clocks): an infrastructure change is then told apart
from a slowdown of the framework itself.

What a regression is put down to (``label``), from what else was measured that night:

* ``fabric``: the fabric benchmark (all-reduce bus bandwidth) of the same night and topology
  (``dlperf_core/workload/allreduce.py``) shows its bus bandwidth dropped beyond its own noise too (the same
  median/MAD rule on the fabric benchmark's history,
  at its largest message size): the network or the collectives library, not the framework;
* ``framework``: the fabric is not to blame and the framework version or the image digest changed since the
  last good night;
* ``unexplained``: neither.

What a run's verdicts do (:func:`decide_run`): a *good night* of a configuration is a scheduled run,
finished, where it had at least one ok repeat and no failed one (:func:`is_good_night`); the baseline is the
last ``window`` of them (the change points read the last ``change_window``). A ``suspected`` verdict does
nothing. On a scheduled run a ``new`` verdict **opens** a regression (with its label), a
``continuing`` one **touches** the open regression (``last_seen_run_id``) and a ``recovered`` one **closes** it
("recovered in run ..."). A manual run is judged the same way but decides nothing: it is not part of the
nightly series. An open regression that tonight's own run opened (the same run judged again) is not carried.

Pure: no database, no Airflow. :mod:`plugins.dlperf_airflow.regression_step` feeds it from the store (the store's
typed rows, :mod:`dlperf_core.storage.rows`, each turned into this module's types by their ``from_*``
constructors), stores the decisions and sends the alerts (:class:`RegressionAlert`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import TYPE_CHECKING, ClassVar, Literal

from dlperf_core.cluster.environment import environment_changes
from dlperf_core.json_form import JsonForm
from dlperf_core.measure.change_points import change_points
from dlperf_core.model import series_base

if TYPE_CHECKING:  # only for annotations: the core does not load the database code
    from dlperf_core.storage.rows import (
        CaseSummaryRow,
        Configuration,
        FabricHistoryRow,
        FabricSummaryRow,
        HistoryRow,
        RegressionRow,
    )

MAD_TO_SIGMA = 1.4826
"""MAD x this = standard deviation, for normally distributed noise."""

Kind = Literal["insufficient_history", "steady", "suspected", "new", "continuing", "recovered"]
Label = Literal["fabric", "framework", "unexplained"]

FRAMEWORK_FIELDS: tuple[str, ...] = ("framework_version", "image_digest")
"""Environment fields whose change puts a regression down to the framework build."""

CONFIRM_NIGHTS = 2
"""The default :attr:`Policy.confirm_nights` (module docstring, "Confirmed by change points")."""


@dataclass(frozen=True)
class Policy:
    """How regressions are judged (see module docstring)."""

    window: int = 14  # good nights in the baseline
    min_nights: int = 5  # fewer good nights than this: no verdict
    z_threshold: float = 3.5
    min_change_pct: float = 2.0
    mad_floor_pct: float = 0.25  # the MAD is at least this % of the baseline median
    confirm_nights: int = CONFIRM_NIGHTS  # nights at a new level before it is "new" (1: the rule alone)
    change_window: int = 30  # good nights before tonight that the change points are looked for in
    change_pvalue: float = 0.001  # a change point's t-test p-value must be at most this
    confirm_z: float = 3.0  # each night since the change point this many standard deviations off the nights before

    def __post_init__(self) -> None:
        if self.window < 1 or self.min_nights < 1 or self.min_nights > self.window:
            raise ValueError(f"need 1 <= min_nights <= window, got {self.min_nights} and {self.window}")
        if self.z_threshold <= 0 or self.min_change_pct < 0 or self.mad_floor_pct < 0:
            raise ValueError("z_threshold must be > 0, min_change_pct and mad_floor_pct >= 0")
        if self.confirm_nights < 1 or self.change_window < 2 or not 0 < self.change_pvalue < 1 or self.confirm_z < 0:
            raise ValueError("need confirm_nights >= 1, change_window >= 2, 0 < change_pvalue < 1 and confirm_z >= 0")

    @property
    def confirms(self) -> bool:
        """Whether a flagged night needs the change points' confirmation (``confirm_nights`` above 1)."""
        return self.confirm_nights > 1

    @property
    def history_nights(self) -> int:
        """How many good nights before tonight a verdict reads: the baseline's, and the change points' window."""
        return max(self.window, self.change_window) if self.confirms else self.window


@dataclass(frozen=True)
class Night:
    """One good night of one configuration: its median throughput and its environment."""

    night: date
    run_id: str
    median: float
    environment: Mapping[str, object] | None = None  # Environment.infrastructure() or a row with those keys
    environment_id: int | None = None


@dataclass(frozen=True)
class OpenRegression:
    """A regression of this configuration that is still open."""

    id: int | None
    median_throughput: float  # the regressed level
    baseline_median: float
    baseline_mad: float
    direction: str
    run_id: str | None = None  # the run that opened it
    night: date | None = None  # the night it was opened

    @classmethod
    def from_stored(cls, row: RegressionRow) -> OpenRegression:
        """From a row of the ``regressions`` table (``ResultStore.open_regression``)."""
        return cls(
            row.id, row.median_throughput, row.baseline_median, row.baseline_mad, row.direction, row.run_id, row.night
        )


@dataclass(frozen=True)
class Verdict:
    """The judgement of one night of one configuration."""

    kind: Kind
    night: date
    run_id: str
    median_throughput: float
    baseline_median: float | None = None
    baseline_mad: float | None = None
    baseline_nights: int = 0
    change_pct: float | None = None
    robust_z: float | None = None
    direction: str | None = None  # "slower" | "faster"
    environment_changed: bool = False
    environment_changes: tuple[str, ...] = field(default=())
    open_regression_id: int | None = None  # the open regression this night continues or recovers
    first_bad_night: date | None = (
        None  # confirmed by change points: the change point's night, the first at the new level
    )

    @property
    def is_new_regression(self) -> bool:
        return self.kind == "new"


def robust_baseline(values: list[float], floor_pct: float) -> tuple[float, float]:
    """(median, MAD) of ``values``, the MAD floored at ``floor_pct`` % of the median."""
    centre = statistics.median(values)
    mad = statistics.median(abs(v - centre) for v in values)
    return centre, max(mad, abs(centre) * floor_pct / 100.0)


def _scaled(value: float, centre: float, mad: float) -> tuple[float, float]:
    """(robust z, change in % of centre) of ``value`` against a baseline."""
    return (value - centre) / (MAD_TO_SIGMA * mad), (value / centre - 1.0) * 100.0


def _significant(z: float, pct: float, policy: Policy) -> bool:
    return abs(z) >= policy.z_threshold and abs(pct) >= policy.min_change_pct


def judge_night(
    history: list[Night],
    tonight: Night,
    policy: Policy = Policy(),
    open_regression: OpenRegression | None = None,
) -> Verdict:
    """Judge ``tonight`` against ``history`` (good nights before it, any order): the median/MAD rule
    (:func:`rule_verdict`), then, when ``policy`` asks for it, change points (:func:`confirm`) decide a ``new``
    verdict, and a ``steady`` one while no regression is open (the rule may not flag the night that confirms)."""
    past = sorted((n for n in history if n.run_id != tonight.run_id), key=lambda n: n.night)
    verdict = rule_verdict(past, tonight, policy, open_regression)
    if not policy.confirms or not (verdict.kind == "new" or (verdict.kind == "steady" and open_regression is None)):
        return verdict
    since = open_regression.night if open_regression is not None else None
    return confirm(verdict, past[-policy.change_window :], tonight, policy, since)


def rule_verdict(
    history: list[Night],
    tonight: Night,
    policy: Policy = Policy(),
    open_regression: OpenRegression | None = None,
) -> Verdict:
    """The median/MAD rule alone (module docstring): ``tonight`` against the last ``policy.window`` nights of
    ``history`` (good nights before it, any order), carrying ``open_regression``."""
    past = sorted((n for n in history if n.run_id != tonight.run_id), key=lambda n: n.night)
    past = past[-policy.window :]
    base = Verdict(
        kind="insufficient_history",
        night=tonight.night,
        run_id=tonight.run_id,
        median_throughput=tonight.median,
        baseline_nights=len(past),
    )
    if len(past) < policy.min_nights:
        return base
    centre, mad = robust_baseline([n.median for n in past], policy.mad_floor_pct)
    z, pct = _scaled(tonight.median, centre, mad)
    changes = tuple(environment_changes(past[-1].environment, tonight.environment))
    verdict = replace(
        base,
        kind="steady",
        baseline_median=centre,
        baseline_mad=mad,
        change_pct=pct,
        robust_z=z,
        direction="slower" if tonight.median < centre else "faster",
        environment_changed=bool(changes),
        environment_changes=changes,
    )
    if open_regression is not None:
        open_ = open_regression
        z_base, pct_base = _scaled(tonight.median, open_.baseline_median, open_.baseline_mad)
        if not _significant(z_base, pct_base, policy):
            return replace(verdict, kind="recovered", open_regression_id=open_.id)
        z_level, pct_level = _scaled(tonight.median, open_.median_throughput, open_.baseline_mad)
        if not _significant(z_level, pct_level, policy):
            return replace(verdict, kind="continuing", open_regression_id=open_.id)
    return replace(verdict, kind="new") if _significant(z, pct, policy) else verdict


def confirm(
    verdict: Verdict, history: Sequence[Night], tonight: Night, policy: Policy = Policy(), since: date | None = None
) -> Verdict:
    """The rule's ``new`` or ``steady`` ``verdict`` of ``tonight``, decided by change points (module docstring,
    "Confirmed by change points"): ``new``, with its ``first_bad_night``, when they confirm a change; else
    ``suspected`` for a night the rule flagged (nothing is opened or alerted), else ``steady``.

    Confirmed when all of these hold, over ``history`` (the good nights before tonight, oldest first) and tonight:

    * tonight is at least ``policy.min_change_pct`` off the rule's baseline median;
    * the last change point (:func:`dlperf_core.measure.change_points.change_points`: p-value at most
      ``policy.change_pvalue``, a change over ``policy.min_change_pct``) is at least ``policy.confirm_nights``
      nights old, tonight counting as one, and later than the oldest night of the rule's baseline (and than
      ``since``, the night an open regression was opened: a further move must be a change of its own);
    * each of the last ``policy.confirm_nights`` nights (tonight's included) is at least ``policy.confirm_z``
      standard deviations and ``policy.min_change_pct`` away from the mean of the nights before the change point (at
      least ``policy.min_nights`` of them; the deviation floored at ``policy.mad_floor_pct`` of the mean), in the
      change's direction: one odd night next to an ordinary one confirms nothing.

    A confirmed verdict's environment changes are those from the last night before the change point to tonight (an
    upgrade on the first bad night is named the night the change is confirmed)."""
    unconfirmed = replace(verdict, kind="suspected") if verdict.kind == "new" else verdict
    if verdict.change_pct is None or abs(verdict.change_pct) < policy.min_change_pct:
        return unconfirmed
    nights = [*history, tonight]
    points = change_points(
        [n.median for n in nights], max_pvalue=policy.change_pvalue, min_magnitude=policy.min_change_pct / 100.0
    )
    if not points:
        return unconfirmed
    first = points[-1].index
    if not len(nights) - policy.window <= first <= len(nights) - policy.confirm_nights or first < policy.min_nights:
        return unconfirmed
    if since is not None and nights[first].night <= since:
        return unconfirmed
    slower = points[-1].mean_after < points[-1].mean_before
    before = [n.median for n in nights[:first]]
    centre = statistics.fmean(before)
    sigma = max(statistics.stdev(before), abs(centre) * policy.mad_floor_pct / 100.0)
    for night in nights[-policy.confirm_nights :]:
        z, pct = (night.median - centre) / sigma, (night.median / centre - 1.0) * 100.0
        if (z < 0) != slower or abs(z) < policy.confirm_z or abs(pct) < policy.min_change_pct:
            return unconfirmed
    changes = tuple(environment_changes(nights[first - 1].environment, tonight.environment))
    return replace(
        verdict,
        kind="new",
        direction="slower" if slower else "faster",
        first_bad_night=nights[first].night,
        environment_changed=bool(changes),
        environment_changes=changes,
    )


def judge_series(nights: list[Night], policy: Policy = Policy()) -> list[Verdict]:
    """Judge every night of one configuration in order, carrying the open regression along
    (what the nightly DAG does one night at a time). The baseline holds every earlier night."""
    ordered = sorted(nights, key=lambda n: n.night)
    verdicts: list[Verdict] = []
    open_: OpenRegression | None = None
    for i, tonight in enumerate(ordered):
        verdict = judge_night(ordered[:i], tonight, policy, open_)
        if verdict.kind == "new":
            assert verdict.baseline_median is not None and verdict.baseline_mad is not None
            open_ = OpenRegression(
                i,
                tonight.median,
                verdict.baseline_median,
                verdict.baseline_mad,
                verdict.direction or "slower",
                tonight.run_id,
                tonight.night,
            )
        elif verdict.kind == "recovered":
            open_ = None
        verdicts.append(verdict)
    return verdicts


@dataclass(frozen=True)
class FabricNight:
    """One scheduled night's fabric benchmark of one topology: its bus bandwidth (GB/s) at the largest size."""

    night: date
    run_id: str
    busbw_gbs: float


def fabric_dropped(history: list[FabricNight], tonight: FabricNight | None, policy: Policy = Policy()) -> bool | None:
    """Whether tonight's bus bandwidth fell below the fabric benchmark's own history beyond its noise (the rule of
    :func:`judge_night`); None when it cannot be told (no fabric benchmark tonight, fewer than ``min_nights``
    earlier ones)."""
    if tonight is None:
        return None
    past = sorted((n for n in history if n.run_id != tonight.run_id), key=lambda n: n.night)[-policy.window :]
    if len(past) < policy.min_nights:
        return None
    centre, mad = robust_baseline([n.busbw_gbs for n in past], policy.mad_floor_pct)
    z, pct = _scaled(tonight.busbw_gbs, centre, mad)
    return tonight.busbw_gbs < centre and _significant(z, pct, policy)


def label_regression(verdict: Verdict, fabric: bool | None) -> Label:
    """What a new regression is put down to: ``fabric`` when the fabric dropped too (``fabric_dropped``),
    else ``framework`` when the framework version or image digest changed, else ``unexplained``."""
    if fabric:
        return "fabric"
    if any(change.split(":", 1)[0] in FRAMEWORK_FIELDS for change in verdict.environment_changes):
        return "framework"
    return "unexplained"


def describe_verdict(case_key: str, verdict: Verdict) -> str:
    """One line for the task log: what ``verdict`` says about ``case_key``."""
    if verdict.kind == "insufficient_history":
        return f"{case_key}: {verdict.baseline_nights} good nights so far, no verdict yet"
    env = f"; environment changed: {'; '.join(verdict.environment_changes)}" if verdict.environment_changed else ""
    first = f"; first bad night {verdict.first_bad_night.isoformat()}" if verdict.first_bad_night is not None else ""
    unconfirmed = "; not confirmed by change points (yet)" if verdict.kind == "suspected" else ""
    return (
        f"{case_key}: {verdict.kind}, median {verdict.median_throughput:.2f} vs {verdict.baseline_median:.2f} "
        f"({verdict.change_pct:+.2f}%, robust z {verdict.robust_z:+.2f}, {verdict.baseline_nights} nights)"
        f"{first}{unconfirmed}{env}"
    )


@dataclass(frozen=True, kw_only=True)
class RegressionAlert(JsonForm):
    """A stored new regression as the notifiers get it (:meth:`Decision.alert`): the columns of its
    ``regressions`` row that say what regressed, by how much and why. Its JSON form (:meth:`to_json`: the same
    names, the night as ISO text) is what a notifier's context carries (``dlperf_airflow.notifiers``); and, when
    change points confirmed it, its ``first_bad_night`` (``regressions.first_bad_night`` since migration 0014; the row's
    ``night`` is the night it was found)."""

    __version__: ClassVar[int] = 2  # 2: first_bad_night (a version 1 form reads as one without it)

    id: int | None  # the regressions row; None when it was not stored
    dag_id: str
    run_id: str  # the run it was found in
    case_key: str
    framework: str
    model: str
    precision: str
    batch_size_per_device: int
    variant: str
    nodes: int
    gpus_per_node: int
    night: date
    median_throughput: float  # tonight's, the regressed level
    baseline_median: float
    baseline_mad: float
    baseline_nights: int
    change_pct: float
    robust_z: float
    direction: str  # "slower" | "faster"
    environment_changed: bool
    environment_changes: str | None  # "; "-separated, as the regressions row keeps them; None: none
    environment_id: int | None = None
    label: Label | None = None  # what it is put down to
    first_bad_night: date | None = None  # the change point's night when change points confirmed it

    def describe(self) -> str:
        """One line for people: :func:`describe_regression`."""
        return describe_regression(self)


def describe_regression(regression: RegressionAlert) -> str:
    """One line per new regression, for people (the log notifier, the notifiers' text)."""
    where = "an environment change" if regression.environment_changed else "no environment change"
    changes = f" ({regression.environment_changes})" if regression.environment_changes else ""
    first = regression.first_bad_night
    since = f", first bad night {first.isoformat()}" if first is not None and first != regression.night else ""
    return (
        f"{regression.case_key}: {regression.direction} by {abs(regression.change_pct):.1f}% "
        f"on {regression.night.isoformat()}{since} (median {regression.median_throughput:.2f} vs baseline "
        f"{regression.baseline_median:.2f} over {regression.baseline_nights} nights, "
        f"robust z {regression.robust_z:+.1f}); {where}{changes}; run {regression.run_id}"
    )


# --------------------------------------------------------------------------- what one run decides


@dataclass(frozen=True)
class CaseResult:
    """One case of the run being judged (a ``case_summary`` row): its configuration and tonight's median."""

    case_key: str
    configuration: Configuration  # the configuration columns: framework, model, ..., nodes, gpus_per_node
    median_throughput: float | None
    n: int  # ok repeats; a case without one is not judged
    environment_id: int | None = None

    @classmethod
    def from_summary(cls, row: CaseSummaryRow) -> CaseResult:
        """From a ``case_summary`` row of the run (``ResultStore.summary_rows``)."""
        return cls(row.case_key, row.configuration, row.median_throughput, row.n, row.environment_id)

    @property
    def topology(self) -> tuple[int, int]:
        """(nodes, gpus_per_node)."""
        return self.configuration.topology


@dataclass(frozen=True)
class NightlyRow:
    """One scheduled run of one configuration (a ``nightly_history`` row), good night or not."""

    case_key: str
    night: date
    run_id: str
    median_throughput: float | None
    n: int  # ok repeats
    n_failed: int
    run_status: str  # benchmark_runs.status: running, success, failed
    environment_id: int | None = None
    throttled: bool = False  # a GPU was throttled while measured (dlperf_core.cluster.clock_events): no baseline

    @classmethod
    def from_history(cls, row: HistoryRow) -> NightlyRow:
        """From a ``nightly_history`` row (``ResultStore.history_rows``)."""
        return cls(
            row.case_key,
            row.night,
            row.run_id,
            row.median_throughput,
            row.n,
            row.n_failed,
            row.run_status,
            row.environment_id,
            row.throttled,
        )


def is_good_night(row: NightlyRow, case_key: str) -> bool:
    """A good night of ``case_key``: (a scheduled run, as every ``nightly_history`` row) finished, with at least
    one ok repeat of the case and no failed one, and not throttled (its GPUs' clocks held down: the figure says how
    hot the node was, not how fast the framework is)."""
    return (
        row.case_key == case_key
        and row.n > 0
        and row.n_failed == 0
        and row.run_status != "running"
        and not row.throttled
    )


def good_nights(
    rows: Iterable[NightlyRow], case_key: str, policy: Policy = Policy(), since: date | None = None
) -> list[NightlyRow]:
    """What ``case_key`` is judged on: its last ``policy.history_nights`` good nights of ``rows`` (oldest first;
    the baseline is the last ``policy.window`` of them); with ``since`` (a regression accepted as the new normal
    from that night), only the nights from then on."""
    good = [row for row in rows if is_good_night(row, case_key) and (since is None or row.night >= since)]
    return good[-policy.history_nights :]


def environment_ids(
    cases: Iterable[CaseResult], history: Mapping[str, Sequence[NightlyRow]], policy: Policy = Policy()
) -> set[int]:
    """The environments :func:`decide_run` compares: of the judged cases tonight and of their baseline nights."""
    ids: set[int] = set()
    for case in cases:
        if case.n <= 0:
            continue
        ids |= {
            r.environment_id
            for r in good_nights(history.get(case.case_key, ()), case.case_key, policy)
            if r.environment_id is not None
        }
        if case.environment_id is not None:
            ids.add(case.environment_id)
    return ids


@dataclass(frozen=True)
class FabricFigure:
    """One message size of one fabric benchmark in one run (a ``fabric_summary`` or ``fabric_history`` row)."""

    nodes: int
    gpus_per_node: int
    size_bytes: int
    busbw_gbs: float | None
    run_id: str
    night: date | None = None  # fabric_history rows
    run_status: str | None = None  # fabric_history rows

    @classmethod
    def from_summary(cls, row: FabricSummaryRow) -> FabricFigure:
        """From a ``fabric_summary`` row: tonight's fabric benchmark (``ResultStore.fabric_summary_rows``)."""
        return cls(row.nodes, row.gpus_per_node, row.size_bytes, row.busbw_gbs, row.run_id)

    @classmethod
    def from_history(cls, row: FabricHistoryRow) -> FabricFigure:
        """From a ``fabric_history`` row: an earlier night's fabric benchmark (``ResultStore.fabric_history_rows``)."""
        return cls(row.nodes, row.gpus_per_node, row.size_bytes, row.busbw_gbs, row.run_id, row.night, row.run_status)


def fabric_dropped_tonight(
    tonight: Iterable[FabricFigure],
    history: Iterable[FabricFigure],
    topology: tuple[int, int],
    night: date,
    run_id: str,
    policy: Policy = Policy(),
) -> bool | None:
    """Whether run ``run_id``'s fabric benchmark of ``topology`` (nodes, gpus per node) dropped against its own
    nightly history, at the largest message size measured tonight (:func:`fabric_dropped`); None when there is
    no fabric benchmark of it tonight or too little history. ``history``: earlier scheduled runs; running ones are left out."""
    here = [f for f in tonight if (f.nodes, f.gpus_per_node) == topology and f.busbw_gbs is not None]
    if not here:
        return None
    size = max(f.size_bytes for f in here)
    past = [
        FabricNight(f.night, f.run_id, f.busbw_gbs)  # type: ignore[arg-type]
        for f in history
        if (f.nodes, f.gpus_per_node) == topology
        and f.size_bytes == size
        and f.busbw_gbs is not None
        and f.run_status != "running"
    ]
    now = next(f.busbw_gbs for f in here if f.size_bytes == size)
    return fabric_dropped(past, FabricNight(night, run_id, now), policy)  # type: ignore[arg-type]


Action = Literal["open", "touch", "close"]


@dataclass(frozen=True)
class Decision:
    """What one case of a run comes to: its verdict, and on a scheduled run what it does to the regressions."""

    case_key: str
    configuration: Configuration
    verdict: Verdict
    environment_id: int | None = None
    label: Label | None = None  # a new regression only: what it is put down to
    action: Action | None = None  # open a regression, touch or close the open one; None: nothing to store

    @property
    def closed_reason(self) -> str | None:
        return f"recovered in run {self.verdict.run_id}" if self.action == "close" else None

    def describe(self) -> str:
        """The task log's line: the verdict, and a new regression's label in brackets."""
        line = describe_verdict(self.case_key, self.verdict)
        return line + (f" [{self.label}]" if self.label is not None else "")

    def alert(self, dag_id: str, regression_id: int | None) -> RegressionAlert:
        """This new regression, stored as ``regression_id``, as the notifiers get it (ValueError for a verdict that
        is no new regression: it has nothing to alert)."""
        verdict, config = self.verdict, self.configuration
        if (
            verdict.kind != "new"
            or verdict.baseline_median is None
            or verdict.baseline_mad is None
            or verdict.change_pct is None
            or verdict.robust_z is None
            or verdict.direction is None
        ):
            raise ValueError(f"{self.case_key}: a {verdict.kind} verdict is no new regression to alert")
        return RegressionAlert(
            id=regression_id,
            dag_id=dag_id,
            run_id=verdict.run_id,
            case_key=self.case_key,
            framework=config.framework,
            model=config.model,
            precision=config.precision,
            batch_size_per_device=config.batch_size_per_device,
            variant=config.variant,
            nodes=config.nodes,
            gpus_per_node=config.gpus_per_node,
            night=verdict.night,
            median_throughput=verdict.median_throughput,
            baseline_median=verdict.baseline_median,
            baseline_mad=verdict.baseline_mad,
            baseline_nights=verdict.baseline_nights,
            change_pct=verdict.change_pct,
            robust_z=verdict.robust_z,
            direction=verdict.direction,
            environment_changed=verdict.environment_changed,
            environment_changes="; ".join(verdict.environment_changes) or None,
            environment_id=self.environment_id,
            label=self.label,
            first_bad_night=verdict.first_bad_night,
        )


@dataclass(frozen=True)
class HistoryRestart:
    """A case whose own series is too short to judge while the same configuration, as its readable fields and
    options say it, has good nights under another fingerprint: its extra arguments or window changed, or those
    nights were stored before dlperf recorded them (``+args=unknown``, migration 0010). The nights are not
    mixed (they measured something else, or something not known); this says so instead of starting over
    silently."""

    case_key: str
    own_nights: int  # good nights of case_key before this run
    earlier: tuple[tuple[str, int, date], ...]  # per other series: its case key, good nights, last good night

    def describe(self, policy: Policy = Policy()) -> str:
        """One line for the task log and the step's result."""
        others = "; ".join(f"{key}: {n} good nights, last {last.isoformat()}" for key, n, last in self.earlier)
        return (
            f"{self.case_key}: history restarts ({self.own_nights} good nights of its own, a verdict needs "
            f"{policy.min_nights}); the same configuration has earlier nights under another fingerprint (other "
            f"extra arguments or window, or +args=unknown: stored before they were recorded), not mixed in: {others}"
        )


def history_restart(case_key: str, rows: Iterable[NightlyRow], policy: Policy = Policy()) -> HistoryRestart | None:
    """The :class:`HistoryRestart` of ``case_key`` from nightly ``rows`` of its configuration in any variant, or
    None: when its own good nights already allow a verdict, or no other fingerprint of it has good nights."""
    rows = list(rows)
    own = sum(is_good_night(r, case_key) for r in rows)
    if own >= policy.min_nights:
        return None
    base = series_base(case_key)
    others = sorted({r.case_key for r in rows if r.case_key != case_key and series_base(r.case_key) == base})
    earlier = []
    for other in others:
        nights = [r for r in rows if is_good_night(r, other)]
        if nights:
            earlier.append((other, len(nights), max(r.night for r in nights)))
    return HistoryRestart(case_key, own, tuple(earlier)) if earlier else None


@dataclass(frozen=True)
class RunDecisions:
    """Every judged case of one run, in the order of the run's summary; ``restarts``: the judged cases whose
    history restarts (:class:`HistoryRestart`)."""

    run_id: str
    trigger: str
    decisions: tuple[Decision, ...]
    restarts: tuple[HistoryRestart, ...] = ()

    @property
    def scheduled(self) -> bool:
        """Only a scheduled (nightly) run opens, touches or closes regressions and alerts."""
        return self.trigger == "scheduled"

    @property
    def counts(self) -> dict[str, int]:
        """Verdict kind -> how many cases got it."""
        counts: dict[str, int] = {}
        for decision in self.decisions:
            counts[decision.verdict.kind] = counts.get(decision.verdict.kind, 0) + 1
        return counts

    @property
    def new(self) -> tuple[Decision, ...]:
        """The cases judged a new regression (stored only on a scheduled run)."""
        return tuple(d for d in self.decisions if d.verdict.kind == "new")

    def result(self, notified: int) -> DetectionReport:
        """What the ``detect_regressions`` task returns: the new regressions are those stored (and given to the
        notifiers) on a scheduled run, the new verdicts on a manual run (nothing is stored)."""
        return DetectionReport(
            trigger=self.trigger,
            stored=self.scheduled,
            judged=len(self.decisions),
            verdicts=dict(self.counts),
            new_regressions=tuple(NewRegression(d.case_key, d.describe(), d.label) for d in self.new),
            notifiers_called=notified,
            history_restarts=tuple(restart.describe() for restart in self.restarts),
        )


@dataclass(frozen=True)
class NewRegression:
    """A case judged a new regression tonight: its key, the task log's line, and what it is put down to."""

    case_key: str
    description: str
    label: Label | None


@dataclass(frozen=True)
class DetectionReport(JsonForm):
    """What the ``detect_regressions`` task returns (its XCom): counts per verdict kind and the new regressions
    (stored, and alerted, only on a scheduled run)."""

    trigger: str
    stored: bool
    judged: int
    verdicts: dict[str, int]
    new_regressions: tuple[NewRegression, ...]
    notifiers_called: int
    history_restarts: tuple[str, ...] = ()


FabricEvidence = Callable[[int, int], bool | None] | Mapping[tuple[int, int], bool | None] | None
"""Whether the fabric of a topology (nodes, gpus per node) dropped tonight (:func:`fabric_dropped_tonight`):
a function (called only for the topologies of new regressions) or a mapping (a missing topology: unknown)."""


def decide_run(
    *,
    run_id: str,
    trigger: str,
    night: date,
    cases: Iterable[CaseResult],
    history: Mapping[str, Sequence[NightlyRow]],
    open_regressions: Mapping[str, OpenRegression] | None = None,
    environments: Mapping[int, Mapping[str, object]] | None = None,
    fabric: FabricEvidence = None,
    policy: Policy = Policy(),
    baseline_starts: Mapping[str, date] | None = None,
) -> RunDecisions:
    """Judge every case of run ``run_id`` (started on ``night``; ``trigger`` scheduled or manual) that has an ok
    repeat against its good nights (``history``: nightly rows by case key, good or not; rows of the same
    configuration under other fingerprints may be among them: they are never judged against, only reported
    as a :class:`HistoryRestart`), carrying the case's
    open regression (``open_regressions`` by case key), and decide what each verdict does (module docstring).
    ``environments``: infrastructure fields by environment id; ``fabric``: see :data:`FabricEvidence`;
    ``baseline_starts``: by case key, the night its configuration's baseline starts on (a regression of it accepted
    as the new normal): the good nights before it are not judged against."""
    environments = environments or {}
    baseline_starts = baseline_starts or {}
    open_regressions = open_regressions or {}
    judged: list[tuple[CaseResult, Verdict]] = []
    for case in cases:
        if case.n <= 0:
            continue
        past = [
            Night(
                row.night,
                row.run_id,
                float(row.median_throughput),  # type: ignore[arg-type]
                environments.get(row.environment_id) if row.environment_id is not None else None,
                row.environment_id,
            )
            for row in good_nights(
                history.get(case.case_key, ()), case.case_key, policy, baseline_starts.get(case.case_key)
            )
        ]
        tonight = Night(
            night,
            run_id,
            float(case.median_throughput),  # type: ignore[arg-type]
            environments.get(case.environment_id) if case.environment_id is not None else None,
            case.environment_id,
        )
        open_ = open_regressions.get(case.case_key)
        if open_ is not None and open_.run_id == run_id:
            open_ = None  # this very run opened it: the run is being judged again
        judged.append((case, judge_night(past, tonight, policy, open_)))

    def fabric_of(topology: tuple[int, int]) -> bool | None:
        if fabric is None:
            return None
        if callable(fabric):
            return fabric(*topology)
        return fabric.get(topology)

    labels = {
        case.case_key: label_regression(verdict, fabric_of(case.topology))
        for case, verdict in judged
        if verdict.kind == "new"
    }
    scheduled = trigger == "scheduled"
    decisions = []
    for case, verdict in judged:
        action: Action | None = None
        if scheduled:
            if verdict.kind == "new":
                action = "open"
            elif verdict.kind == "continuing" and verdict.open_regression_id is not None:
                action = "touch"
            elif verdict.kind == "recovered" and verdict.open_regression_id is not None:
                action = "close"
        decisions.append(
            Decision(case.case_key, case.configuration, verdict, case.environment_id, labels.get(case.case_key), action)
        )
    restarts = (history_restart(case.case_key, history.get(case.case_key, ()), policy) for case, _ in judged)
    return RunDecisions(run_id, trigger, tuple(decisions), tuple(r for r in restarts if r is not None))
