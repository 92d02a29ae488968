"""The report's and the results page's "Nodes" section: a run's per-node sweeps scored node by node
(:mod:`dlperf_core.measure.node_peers`), as a table, a heat map (:func:`dlperf_core.reporting.plots.node_heatmap_figure`)
and a line per node named slow.

The cases of a per-node sweep (pinned to a node: ``...+node=<name>+args=...``) are shown here, not in the seed
tables and the scaling and history plots, where each node would be a configuration of its own
(:func:`without_sweeps`). Pure over the report's frames: no store here.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from dlperf_core.measure.node_peers import (
    NodePolicy,
    NodeScore,
    NodeScores,
    good_night_medians,
    node_figures,
    score_sweeps,
)
from dlperf_core.measure.regression import NightlyRow
from dlperf_core.model import pinned_node
from dlperf_core.reporting.tables import format_cell, markdown_table

NODES_TITLE = "Nodes: per-node sweeps"
"""The section's heading in the report and on the results page."""

NODE_COLUMNS: tuple[str, ...] = (
    "node",
    "sweep",
    "samples/s",
    "reference",
    "against",
    "change(%)",
    "robust z",
    "verdict",
)
"""The columns of the section's table (:func:`node_frame`)."""


def is_pinned(frame: pd.DataFrame) -> pd.Series:
    """Which rows of ``frame`` (with a ``case_key`` column) are cases of a per-node sweep."""
    if "case_key" not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame["case_key"].map(lambda key: isinstance(key, str) and pinned_node(key) is not None).astype(bool)


def without_sweeps(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without the cases of per-node sweeps (the seed tables and the scaling and history plots show the
    rest; the Nodes section shows these)."""
    if frame is None or frame.empty:
        return frame
    return frame[~is_pinned(frame)].reset_index(drop=True)


def nightly_rows(history: pd.DataFrame) -> list[NightlyRow]:
    """The pinned cases' rows of a ``nightly_history`` frame as the regression detector's typed rows."""
    if history is None or history.empty:
        return []
    rows = []
    for r in history[is_pinned(history)].itertuples(index=False):
        median = None if pd.isna(r.median_throughput) else float(r.median_throughput)
        rows.append(NightlyRow(r.case_key, r.night, r.run_id, median, int(r.n), int(r.n_failed), r.run_status))
    return rows


def scores_of(
    summary: pd.DataFrame, history: pd.DataFrame | None, run_id: str | None, policy: NodePolicy | None = None
) -> NodeScores:
    """The node scores of one run: its case summary's pinned cases (``median_throughput``) against their peers, or
    with two nodes against their own good nights in ``history`` (nightly history; run ``run_id`` left out), by
    ``policy`` (default: :class:`NodePolicy`'s)."""
    policy = policy or NodePolicy()
    if summary is None or summary.empty:
        return NodeScores(slower_than=policy.slower_than, rule=policy.rule())
    pinned = summary[is_pinned(summary)]
    figures = node_figures(
        (str(key), None if pd.isna(value) else float(value))
        for key, value in zip(pinned["case_key"], pinned["median_throughput"])
    )
    nights = nightly_rows(history) if history is not None else []
    past = {f.case_key: good_night_medians(nights, f.case_key, run_id) for f in figures}
    return score_sweeps(figures, past, policy)


def _against(score: NodeScore) -> str:
    if score.basis == "peers":
        return f"median of {score.count} peers"
    if score.basis == "history":
        return f"own last {score.count} nights"
    return "nothing"


def _verdict(score: NodeScore) -> str:
    if score.slow:
        return "SLOW"
    return "ok" if score.reference is not None else (score.note or "no verdict")


def node_frame(scores: NodeScores | Iterable[NodeScore]) -> pd.DataFrame:
    """One row per scored node and sweep (:data:`NODE_COLUMNS`), in the order scored."""
    listed = scores.scores if isinstance(scores, NodeScores) else tuple(scores)
    rows = [
        {
            "node": s.node,
            "sweep": s.label,
            "samples/s": s.value,
            "reference": s.reference,
            "against": _against(s),
            "change(%)": None if s.change is None else s.change * 100.0,
            "robust z": s.robust_z,
            "verdict": _verdict(s),
        }
        for s in listed
    ]
    return pd.DataFrame(rows, columns=list(NODE_COLUMNS))


def slow_lines(scores: NodeScores) -> list[str]:
    """A line per node named slow (:meth:`NodeScore.describe`); one line saying none was, when none was."""
    if not scores.scores:
        return []
    return [s.describe() for s in scores.slow] or [
        f"No node named slow: every node within {scores.slower_than:.0%} of its reference, or within the spread."
    ]


def nodes_markdown(scores: NodeScores) -> str:
    """The section as markdown (its heading, the rule, a line per node named slow, the table), '' when there is no
    per-node sweep: the report's (with the heat map under it) and what ``dlperf run`` prints."""
    if not scores.scores:
        return ""
    frame = node_frame(scores)
    rows = [[format_cell(v) for v in row] for row in frame.astype(object).itertuples(index=False)]
    parts = [f"## {NODES_TITLE}", "", f"Rule: {scores.rule}.", ""]
    parts += [f"- {line}" for line in slow_lines(scores)]
    return "\n".join([*parts, "", markdown_table(list(frame.columns), rows)])


def heat_map_frame(scores: NodeScores) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(change in %, figure, slow) as node x sweep frames (rows: nodes in the order measured; columns: sweep labels):
    what the heat map draws. A node a sweep did not measure, or one without a verdict, is NaN in the first."""
    nodes = list(scores.nodes)
    sweeps = list(dict.fromkeys(s.label for s in scores.scores))
    change = pd.DataFrame(float("nan"), index=nodes, columns=sweeps)
    value = change.copy()
    slow = pd.DataFrame(False, index=nodes, columns=sweeps)
    for s in scores.scores:
        value.loc[s.node, s.label] = s.value
        if s.change is not None:
            change.loc[s.node, s.label] = s.change * 100.0
        slow.loc[s.node, s.label] = s.slow
    return change, value, slow
