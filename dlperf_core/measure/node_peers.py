"""The bad node named: each node's figure of a per-node sweep scored against its peers.

A **per-node sweep** is one configuration measured on every node of the inventory separately, 1 node x G GPUs
on each (a suite benchmark's ``per_node: true``): one case per node, pinned to it, whose key names the node
(``.../1n8g+node=gpu07+args=1f0c9a2e``, :func:`dlperf_core.model.pinned_node`); the key without that part is the
sweep's (:func:`dlperf_core.model.unpinned`). Each node's figure is the median of its case's ok repeats
(samples/s, higher is better).

The rule (:func:`score_sweeps`), per sweep, with N nodes measured:

* **N >= 3, against the peers**: a node's peers are the other N - 1 nodes of the sweep. Their median is the
  reference and their MAD the spread (floored at ``mad_floor_pct`` % of the median, as the regression detector
  floors it). ``change = figure / reference - 1``; ``robust z = (figure - reference) / (1.4826 x MAD)``. A node is
  **named slow** when it is at least ``slower_than`` below the reference (default 5 %) **and** its robust z is
  at most ``-z_threshold`` (3.5, Iglewicz and Hoaglin's outlier cut, the regression detector's). The node itself
  is left out of its reference, so a slow node neither drags the median it is judged by nor widens the spread
  that would hide it; with three nodes the two others decide.
* **N = 2, against its own history**: a median of two cannot say which node is slow (each is as far from it as
  the other), so each node is judged like the regression detector judges a night: against the medians of its
  own case's last ``window`` good nights (a scheduled run that finished, with ok repeats and none failed:
  :func:`dlperf_core.measure.regression.is_good_night`), by the same two thresholds. Fewer than ``min_nights``
  good nights: no verdict, and the score says so.
* **N = 1**: nothing to compare (the node's own series is the regression detector's).

Why both thresholds: the fraction says what matters to people (a node 5 % slower costs a multi-node job 5 %,
since the slowest rank sets the pace of every all-reduce), the robust z that the difference stands out of the
spread between the other nodes: on a cluster whose healthy nodes differ by several per cent among themselves a
5 % gap is no finding. Why 5 %: identical GPUs in healthy nodes agree within 1-2 % (clocks, thermals); a node
throttled by power or heat, a PCIe link trained down or a bad DIMM costs 10 % or more; 5 % is between them, and
well above the 0.1 % that two runs of one case differ on a quiet GPU (docs/benchmarks.md (f)). The threshold is
a deployment setting, ``DLPERF_SLOW_NODE_FRACTION`` (:meth:`NodePolicy.from_env`): CPU stand-in nodes on a
shared machine differ by more than GPUs do (docs/benchmarks.md (a)), and their tests set it higher. So is the robust
z, ``DLPERF_SLOW_NODE_Z``: the MAD of three or four peers is itself a noisy figure (a sweep of four stand-in nodes
whose three clean ones spread +-15 % put a node 68 % slower at z -3.3), and a small cluster may lower the z and
lean on the fraction.

Pure: figures and nights in, scores out. :mod:`dlperf_core.reporting` shows them (the report's "Nodes" section,
the results page's node x metric heat map) and ``dlperf_airflow.regression_step`` alerts the slow nodes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from dlperf_core.json_form import JsonForm
from dlperf_core.measure.regression import MAD_TO_SIGMA, NightlyRow, is_good_night, robust_baseline
from dlperf_core.model import ARGS_MARK, pinned_node, series_base, unpinned

SLOW_NODES_KEY = "dlperf_slow_nodes"
"""The regression notifiers' context key of the slow nodes a scheduled run named (their JSON form, a list:
:meth:`NodeScore.to_json`); ``dlperf_airflow.regression_step`` sets it, ``dlperf_airflow.notifiers`` reads it."""
SLOW_NODES_TEXT_KEY = "dlperf_slow_nodes_text"
"""The same findings as lines for people (:meth:`NodeScore.describe`), in the notifiers' context."""

FRACTION_ENV = "DLPERF_SLOW_NODE_FRACTION"
"""The environment variable that sets :attr:`NodePolicy.slower_than` for a deployment (e.g. ``0.05``)."""
Z_ENV = "DLPERF_SLOW_NODE_Z"
"""The environment variable that sets :attr:`NodePolicy.z_threshold` for a deployment (e.g. ``3.5``)."""


@dataclass(frozen=True)
class NodePolicy:
    """How a node's figure is judged (module docstring)."""

    slower_than: float = 0.05  # named when at least this fraction below its reference ...
    z_threshold: float = 3.5  # ... and at least this many robust standard deviations below it
    mad_floor_pct: float = 0.5  # the spread is at least this % of the reference
    window: int = 14  # two nodes: the good nights of its own history it is judged against
    min_nights: int = 5  # two nodes: fewer good nights than this, no verdict

    def __post_init__(self) -> None:
        if not 0 < self.slower_than < 1:
            raise ValueError(f"slower_than is a fraction between 0 and 1 (0.05: 5 %), not {self.slower_than}")
        if not self.z_threshold > 0 or self.mad_floor_pct < 0:  # not ... > 0: NaN is refused too
            raise ValueError("z_threshold must be > 0 and mad_floor_pct >= 0")
        if self.window < 1 or not 1 <= self.min_nights <= self.window:
            raise ValueError(f"need 1 <= min_nights <= window, got {self.min_nights} and {self.window}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NodePolicy:
        """The default policy with :data:`FRACTION_ENV` as ``slower_than`` and :data:`Z_ENV` as ``z_threshold``
        where they are set (``environ``, default ``os.environ``); a value that is no fraction between 0 and 1, or
        no positive number, is refused, naming the variable."""
        env = os.environ if environ is None else environ
        fraction = (env.get(FRACTION_ENV) or "").strip()
        z = (env.get(Z_ENV) or "").strip()
        policy = cls()
        try:
            if fraction:
                policy = replace(policy, slower_than=float(fraction))
        except ValueError:
            raise ValueError(
                f"{FRACTION_ENV}={fraction!r}: give a fraction between 0 and 1, e.g. 0.05 for 5 %"
            ) from None
        try:
            if z:
                policy = replace(policy, z_threshold=float(z))
        except ValueError:
            raise ValueError(f"{Z_ENV}={z!r}: give a positive number of robust standard deviations, e.g. 3.5") from None
        return policy

    def rule(self) -> str:
        """The rule in one line, for the report and the page."""
        return (
            f"a node is named slow when its figure is at least {self.slower_than:.0%} below its reference and "
            f"{self.z_threshold:g} robust standard deviations (1.4826 x MAD) below it; the reference is the median "
            "of the other nodes of the sweep (three nodes or more), or with two nodes the median of the node's own "
            f"last {self.window} good nights (at least {self.min_nights})"
        )


@dataclass(frozen=True)
class NodeFigure:
    """One node's figure of one sweep: the median samples/s of its case's ok repeats."""

    sweep: str  # the sweep's key: the case key without its +node= part
    node: str
    case_key: str
    value: float


Basis = Literal["peers", "history", "alone"]
"""What a node's figure was judged against: the other nodes, its own history, or nothing (a sweep of one node)."""


@dataclass(frozen=True)
class NodeScore(JsonForm):
    """The verdict on one node's figure of one sweep."""

    sweep: str
    node: str
    case_key: str
    value: float  # its figure (samples/s)
    basis: Basis
    reference: float | None = None  # the peers' median, or its own good nights' median; None: no verdict
    spread: float | None = None  # their MAD (floored)
    count: int = 0  # peers, or good nights, the reference is made of
    change: float | None = None  # value / reference - 1 (negative: slower)
    robust_z: float | None = None
    slow: bool = False
    note: str = ""  # why there is no verdict

    @property
    def label(self) -> str:
        """The sweep for people: ``pytorch_reference resnet50_v1.5 fp32 b32 1n8g`` (options without the
        fingerprint)."""
        return sweep_label(self.sweep)

    def describe(self) -> str:
        """One line for people (the alert, the task log, the report)."""
        if self.reference is None or self.change is None or self.robust_z is None:
            return f"node {self.node}, {self.label}: {self.value:.2f} samples/s; {self.note or 'no verdict'}"
        against = (
            f"the median of its {self.count} peers" if self.basis == "peers" else f"its own last {self.count} nights"
        )
        verdict = "slow node" if self.slow else "within its peers" if self.basis == "peers" else "within its history"
        return (
            f"{verdict}: node {self.node}, {self.label}: {self.value:.2f} samples/s, {abs(self.change):.1%} "
            f"{'slower' if self.change < 0 else 'faster'} than {against} ({self.reference:.2f}; robust z "
            f"{self.robust_z:+.1f})"
        )


@dataclass(frozen=True)
class NodeScores(JsonForm):
    """Every scored node of every sweep of a run, sweeps in order, nodes in the order measured."""

    scores: tuple[NodeScore, ...] = ()
    slower_than: float = NodePolicy.slower_than
    rule: str = field(default_factory=lambda: NodePolicy().rule())

    @property
    def slow(self) -> tuple[NodeScore, ...]:
        """The nodes named slow."""
        return tuple(s for s in self.scores if s.slow)

    @property
    def sweeps(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.sweep for s in self.scores))

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.node for s in self.scores))


def sweep_label(sweep: str) -> str:
    """A sweep's key for people: ``pytorch_reference/resnet50_v1.5/fp32/b32/1n8g+args=1f0c9a2e`` ->
    ``pytorch_reference resnet50_v1.5 fp32 b32 1n8g``; options stay (``... 1n8g +compile``)."""
    base = series_base(unpinned(sweep))
    head, plus, options = base.partition("+")
    return head.replace("/", " ") + (f" +{options}" if plus else "")


def node_figures(rows: Iterable[tuple[str, float | None]]) -> list[NodeFigure]:
    """The figures of the pinned cases among ``rows`` (case key, median samples/s of its ok repeats; None or NaN:
    none), in the rows' order; unpinned cases and cases without a figure are left out."""
    figures = []
    for key, value in rows:
        node = pinned_node(key)
        if node is None or value is None or not math.isfinite(value) or value <= 0 or ARGS_MARK not in key:
            continue
        figures.append(NodeFigure(unpinned(key), node, key, float(value)))
    return figures


def _verdict(value: float, past: Sequence[float], policy: NodePolicy) -> tuple[float, float, float, float, bool]:
    """(reference, spread, change, robust z, slow) of ``value`` against ``past``."""
    reference, spread = robust_baseline(list(past), policy.mad_floor_pct)
    change = value / reference - 1.0
    z = (value - reference) / (MAD_TO_SIGMA * spread) if spread > 0 else (-math.inf if change < 0 else 0.0)
    return reference, spread, change, z, change <= -policy.slower_than and z <= -policy.z_threshold


def score_peers(figures: Sequence[NodeFigure], policy: NodePolicy = NodePolicy()) -> list[NodeScore]:
    """Each node of one sweep (``figures``, three or more) against the other nodes' median and MAD."""
    scores = []
    for i, figure in enumerate(figures):
        peers = [f.value for j, f in enumerate(figures) if j != i]
        reference, spread, change, z, slow = _verdict(figure.value, peers, policy)
        scores.append(
            NodeScore(
                figure.sweep, figure.node, figure.case_key, figure.value, "peers", reference, spread, len(peers),
                change, z, slow,
            )
        )  # fmt: skip
    return scores


def score_history(figure: NodeFigure, nights: Sequence[float], policy: NodePolicy = NodePolicy()) -> NodeScore:
    """One node of a two-node sweep against its own good nights' medians (``nights``, oldest first; the last
    ``policy.window`` count)."""
    past = list(nights)[-policy.window :]
    if len(past) < policy.min_nights:
        note = (
            f"two nodes: judged against its own history, which has {len(past)} good night"
            f"{'' if len(past) == 1 else 's'} (a verdict needs {policy.min_nights})"
        )
        return NodeScore(
            figure.sweep, figure.node, figure.case_key, figure.value, "history", count=len(past), note=note
        )
    reference, spread, change, z, slow = _verdict(figure.value, past, policy)
    return NodeScore(
        figure.sweep, figure.node, figure.case_key, figure.value, "history", reference, spread, len(past), change, z,
        slow,
    )  # fmt: skip


def score_sweeps(
    figures: Iterable[NodeFigure],
    history: Mapping[str, Sequence[float]] | None = None,
    policy: NodePolicy = NodePolicy(),
) -> NodeScores:
    """Every sweep among ``figures`` scored by the module's rule: against the peers with three nodes or more,
    against each node's own ``history`` (good nights' medians by case key, oldest first) with two, nothing with
    one. A node measured twice in one sweep counts once (its first figure)."""
    history = history or {}
    by_sweep: dict[str, dict[str, NodeFigure]] = {}
    for figure in figures:
        by_sweep.setdefault(figure.sweep, {}).setdefault(figure.node, figure)
    scores: list[NodeScore] = []
    for sweep in by_sweep.values():
        measured = list(sweep.values())
        if len(measured) >= 3:
            scores += score_peers(measured, policy)
        elif len(measured) == 2:
            scores += [score_history(f, history.get(f.case_key, ()), policy) for f in measured]
        else:
            (only,) = measured
            note = "a sweep of one node: no peer to compare with"
            scores.append(NodeScore(only.sweep, only.node, only.case_key, only.value, "alone", note=note))
    return NodeScores(tuple(scores), policy.slower_than, policy.rule())


def good_night_medians(rows: Iterable[NightlyRow], case_key: str, run_id: str | None = None) -> list[float]:
    """The medians of ``case_key``'s good nights among ``rows`` (nightly history, any order; the run being judged,
    ``run_id``, left out), oldest first: a two-node sweep's history."""
    good = sorted((r for r in rows if is_good_night(r, case_key) and r.run_id != run_id), key=lambda r: r.night)
    return [float(r.median_throughput) for r in good if r.median_throughput is not None]
