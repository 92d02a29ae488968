"""Regression detection: is tonight's median of a configuration outside its own run-to-run noise?

Method: **median and MAD** (the modified z-score of Iglewicz and Hoaglin). The baseline is the last
``window`` good nights of the same configuration (default 14); its centre is their median and its
spread the median absolute deviation scaled by 1.4826 (a standard deviation for normal noise).
Tonight's ``robust_z = (median_tonight - baseline_median) / (1.4826 * MAD)``; a change is flagged
when ``|robust_z| >= z_threshold`` (3.5, Iglewicz-Hoaglin's outlier cut) **and** the change is at
least ``min_change_pct`` (2 %) so that an almost noiseless history does not turn a 0.3 % wiggle into
an alert. The MAD is floored at ``mad_floor_pct`` of the median for the same reason.

Why this and not a mean/stdev test or change-point detection: nightly histories are short and carry
outliers (a node that was busy, a cold cache); the median and the MAD ignore up to half of the
nights being odd, where one bad night inflates a standard deviation enough to hide a real 5 % step.
Change-point methods (PELT, CUSUM) place a change well only once several nights after it exist, so
they would alert days late; here the verdict is due the morning after the run.

State across nights: a flagged night opens a regression. Later nights at the regressed level are the
*same* regression (``continuing``: no new row, no new alert); a night back within the noise of the
regression's baseline ``recovered`` it (closed); a further significant move away from the
regressed level is a new regression. A regression is marked ``environment_changed`` when tonight's
environment differs from the previous good night's in a field of
:data:`dlperf_core.environment.INFRASTRUCTURE_FIELDS` (driver, image digest, framework, CUDA,
cuDNN, NCCL, GPU model/count, power limit, clocks): an infrastructure change is then told apart
from a slowdown of the framework itself.

What a regression is put down to (``label``), from what else was measured that night:

* ``fabric``: the all-reduce probe of the same night and topology (``dlperf_core/workload/allreduce.py``)
  shows its bus bandwidth dropped beyond its own noise too (the same median/MAD rule on the probe's history,
  at its largest message size): the network or the collectives library, not the framework;
* ``framework``: the fabric is not to blame and the framework version or the image digest changed since the
  last good night;
* ``unexplained``: neither.

Pure: no database, no Airflow. :mod:`plugins.dlperf_airflow.regression_step` feeds it from the store.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Literal

from dlperf_core.environment import environment_changes

MAD_TO_SIGMA = 1.4826
"""MAD x this = standard deviation, for normally distributed noise."""

Kind = Literal["insufficient_history", "steady", "new", "continuing", "recovered"]
Label = Literal["fabric", "framework", "unexplained"]

FRAMEWORK_FIELDS: tuple[str, ...] = ("framework_version", "image_digest")
"""Environment fields whose change puts a regression down to the framework build."""


@dataclass(frozen=True)
class Policy:
    """How regressions are judged (see module docstring)."""

    window: int = 14  # good nights in the baseline
    min_nights: int = 5  # fewer good nights than this: no verdict
    z_threshold: float = 3.5
    min_change_pct: float = 2.0
    mad_floor_pct: float = 0.25  # the MAD is at least this % of the baseline median

    def __post_init__(self) -> None:
        if self.window < 1 or self.min_nights < 1 or self.min_nights > self.window:
            raise ValueError(f"need 1 <= min_nights <= window, got {self.min_nights} and {self.window}")
        if self.z_threshold <= 0 or self.min_change_pct < 0 or self.mad_floor_pct < 0:
            raise ValueError("z_threshold must be > 0, min_change_pct and mad_floor_pct >= 0")


@dataclass(frozen=True)
class Night:
    """One good night of one configuration: its median throughput and its environment."""

    night: date
    run_id: str
    median: float
    environment: dict | None = None  # Environment.infrastructure() or a row with those keys
    environment_id: int | None = None


@dataclass(frozen=True)
class OpenRegression:
    """A regression of this configuration that is still open."""

    id: int | None
    median_throughput: float  # the regressed level
    baseline_median: float
    baseline_mad: float
    direction: str


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

    @property
    def is_new_regression(self) -> bool:
        return self.kind == "new"

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "night": self.night.isoformat(),
            "run_id": self.run_id,
            "median_throughput": self.median_throughput,
            "baseline_median": self.baseline_median,
            "baseline_mad": self.baseline_mad,
            "baseline_nights": self.baseline_nights,
            "change_pct": self.change_pct,
            "robust_z": self.robust_z,
            "direction": self.direction,
            "environment_changed": self.environment_changed,
            "environment_changes": list(self.environment_changes),
            "open_regression_id": self.open_regression_id,
        }


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


def judge(
    history: list[Night],
    tonight: Night,
    policy: Policy = Policy(),
    open_regression: OpenRegression | None = None,
) -> Verdict:
    """Judge ``tonight`` against ``history`` (good nights before it, any order)."""
    past = sorted((n for n in history if n.run_id != tonight.run_id), key=lambda n: n.night)
    past = past[-policy.window :]
    base = Verdict(kind="insufficient_history", night=tonight.night, run_id=tonight.run_id,
                   median_throughput=tonight.median, baseline_nights=len(past))
    if len(past) < policy.min_nights:
        return base
    centre, mad = robust_baseline([n.median for n in past], policy.mad_floor_pct)
    z, pct = _scaled(tonight.median, centre, mad)
    changes = tuple(environment_changes(past[-1].environment, tonight.environment))
    verdict = replace(
        base, kind="steady", baseline_median=centre, baseline_mad=mad, change_pct=pct, robust_z=z,
        direction="slower" if tonight.median < centre else "faster",
        environment_changed=bool(changes), environment_changes=changes,
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


def judge_series(nights: list[Night], policy: Policy = Policy()) -> list[Verdict]:
    """Judge every night of one configuration in order, carrying the open regression along
    (what the nightly DAG does one night at a time). The baseline holds every earlier night."""
    ordered = sorted(nights, key=lambda n: n.night)
    verdicts: list[Verdict] = []
    open_: OpenRegression | None = None
    for i, tonight in enumerate(ordered):
        verdict = judge(ordered[:i], tonight, policy, open_)
        if verdict.kind == "new":
            assert verdict.baseline_median is not None and verdict.baseline_mad is not None
            open_ = OpenRegression(i, tonight.median, verdict.baseline_median, verdict.baseline_mad,
                                   verdict.direction or "slower")
        elif verdict.kind == "recovered":
            open_ = None
        verdicts.append(verdict)
    return verdicts


@dataclass(frozen=True)
class FabricNight:
    """One scheduled night's all-reduce probe of one topology: its bus bandwidth (GB/s) at the largest size."""

    night: date
    run_id: str
    busbw_gbs: float


def fabric_dropped(history: list[FabricNight], tonight: FabricNight | None, policy: Policy = Policy()) -> bool | None:
    """Whether tonight's bus bandwidth fell below the probe's own history beyond its noise (the rule of
    :func:`judge`); None when it cannot be told (no probe tonight, fewer than ``min_nights`` earlier ones)."""
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
