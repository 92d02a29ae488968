"""The report's plots as PNG files, drawn with matplotlib's object API (Agg canvas, no pyplot state).

One function per plot; each takes the frames it shows and the file to write, and returns a
:class:`Plot` (or None when there is nothing to draw):

* :func:`plot_scaling`: throughput and speedup against GPU count, with the ideal (linear) line;
* :func:`plot_framework_comparison`: throughput of every framework at each topology, min-max of repeats;
* :func:`plot_history`: nightly median throughput per configuration, regressions marked;
* :func:`speedup_figure` / :func:`speedup_png`: speedup of every configuration of a summary in one panel
  (the results page's plot, served as PNG bytes rather than written to a file).
* :func:`node_heatmap_figure` / :func:`plot_node_heatmap` / :func:`node_heatmap_png`: the per-node sweeps of a
  run as a node x metric heat map, each cell a node's figure against its reference, the slow nodes outlined.

In the scaling and speedup panels each configuration has one line per topology family (:func:`topology_families`:
1 node x N GPUs, N nodes x 1 GPU, N nodes x M GPUs), so 1n2g and 2n1g, both on 2 GPUs, are never joined; an
unreliable case (:mod:`dlperf_core.measure.noise`: CV above the threshold, or a speedup above its device count) is crossed
out with a red ``x``, under one legend entry.
"""

from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: the figures are only ever written to files

import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from dlperf_core.measure.node_peers import NodeScores  # noqa: E402
from dlperf_core.measure.noise import UNRELIABLE_LEGEND  # noqa: E402
from dlperf_core.reporting.nodes import heat_map_frame  # noqa: E402
from dlperf_core.reporting.tables import GROUP_KEYS, unreliable_reasons, variant_label  # noqa: E402

DPI = 110
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
SLOWER, FASTER = "#c0392b", "#1e8449"
UNRELIABLE = "#d62728"


@dataclass(frozen=True)
class Plot:
    """One written PNG: what kind of plot, its title (for captions) and its file."""

    kind: str
    title: str
    path: Path


def topology(nodes: int, gpus_per_node: int) -> str:
    return f"{int(nodes)}n{int(gpus_per_node)}g"


def png_bytes(fig: Figure) -> bytes:
    """``fig`` as PNG bytes (same resolution as the report's files)."""
    out = io.BytesIO()
    fig.savefig(out, dpi=DPI, format="png")
    return out.getvalue()


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    fig.savefig(partial, dpi=DPI, format="png")
    partial.replace(path)
    return path


def _ok_cases(summary: pd.DataFrame) -> pd.DataFrame:
    """Cases with a measured median, with total GPU count, topology label and whether the case is unreliable."""
    cases = summary[summary["median_throughput"].notna()].copy()
    cases["gpus"] = (cases["nodes"] * cases["gpus_per_node"]).astype(int)
    cases["topology"] = [topology(n, g) for n, g in zip(cases["nodes"], cases["gpus_per_node"])]
    cases["flagged"] = [reason is not None for reason in unreliable_reasons(cases)]
    return cases.sort_values(["gpus", "nodes"])


def _mark_unreliable(ax: Axes, cases: pd.DataFrame, y: str) -> None:
    """A red ``x`` over each unreliable case of ``cases`` (at ``y``), with one legend entry for them all."""
    flagged = cases[cases["flagged"] & cases[y].notna()]
    if len(flagged):
        ax.scatter(
            flagged["gpus"],
            flagged[y],
            marker="x",
            s=110,
            linewidths=2.2,
            color=UNRELIABLE,
            zorder=4,
            label=UNRELIABLE_LEGEND,
        )


def _gpu_axis(ax: Axes, cases: pd.DataFrame) -> None:
    """GPU counts on x, each tick also naming the topologies measured there (``2`` / ``1n2g 2n1g``)."""
    ticks = sorted(set(cases["gpus"]))
    names = {g: " ".join(dict.fromkeys(cases[cases["gpus"] == g]["topology"])) for g in ticks}
    ax.set_xticks(ticks, [f"{g}\n{names[g]}" for g in ticks], fontsize=8)
    ax.set_xlabel("GPUs (topology: nodes n, GPUs per node g; squares: several nodes)")
    ax.grid(True, alpha=0.3)


ONE_NODE, ONE_GPU = "1 node x N GPUs", "N nodes x 1 GPU"
"""The two topology families every configuration may have; 1n1g is the start of both."""
FAMILY_STYLES = {ONE_NODE: "-", ONE_GPU: "-."}
"""Line style per family (the ideal line is dashed); any other family (N nodes x M GPUs) is dotted."""


def topology_families(group: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The cases of one configuration (``nodes``, ``gpus_per_node`` and ``gpus`` columns) by topology family, each
    ordered by GPU count: "1 node x N GPUs" (one node), "N nodes x 1 GPU" (one GPU per node), and per M > 1 "N nodes
    x M GPUs" (M GPUs per node, from 1 node up). A case can be in two families: 1n1g starts the first two, 1nMg the
    last ones. A family with nothing but such a start is left out (a lone 1n1g is still the one-node family)."""
    nodes, per_node = group["nodes"], group["gpus_per_node"]
    families: list[tuple[str, pd.Series]] = []
    if ((nodes == 1) & (group["gpus"] > 1)).any() or not (nodes > 1).any():
        families.append((ONE_NODE, nodes == 1))
    if ((nodes > 1) & (per_node == 1)).any():
        families.append((ONE_GPU, per_node == 1))
    for m in sorted({int(g) for g in per_node[(nodes > 1) & (per_node > 1)]}):
        families.append((f"N nodes x {m} GPUs", per_node == m))
    return [(name, group[mine].sort_values(["gpus", "nodes"])) for name, mine in families if mine.any()]


def _points(ax: Axes, group: pd.DataFrame, y: str, color: str, label: str) -> None:
    """One configuration's lines, one per topology family (:func:`topology_families`, each its own line style and
    legend entry ``label: family``), never a line from one shape to another; circles on one node, squares on
    several."""
    for family, cases in topology_families(group):
        style = FAMILY_STYLES.get(family, ":")
        ax.plot(cases["gpus"], cases[y], style, color=color, label=f"{label}: {family}")
    one = group["nodes"] == 1
    ax.plot(group[one]["gpus"], group[one][y], "o", color=color)
    ax.plot(group[~one]["gpus"], group[~one][y], "s", color=color)


def _speedup_axes(ax: Axes, cases: pd.DataFrame) -> None:
    """The ideal (linear) speedup line, the GPU axis and the speedup labels of a speedup panel."""
    top = int(cases["gpus"].max())
    ax.plot([1, top], [1, top], "--", color="grey", label="ideal (linear)")
    ax.set_ylabel("speedup vs 1n1g")
    ax.set_ylim(bottom=0)
    _gpu_axis(ax, cases)


def plot_scaling(summary: pd.DataFrame, title: str, path: Path) -> Plot | None:
    """Two panels for one model, precision and batch: samples/s and speedup against GPU count, per framework
    one line per topology family (:func:`topology_families`), and the ideal linear scaling from the framework's
    1n1g median (dashed). None when no case has a figure."""
    cases = _ok_cases(summary)
    if cases.empty:
        return None
    fig = Figure(figsize=(12, 5), layout="constrained")
    left, right = fig.subplots(1, 2)
    top = int(cases["gpus"].max())
    for color, (framework, group) in zip(COLORS * 4, cases.groupby("framework", sort=True)):
        _points(left, group, "median_throughput", color, str(framework))
        base = group[(group["nodes"] == 1) & (group["gpus_per_node"] == 1)]["median_throughput"]
        if len(base):
            left.plot(
                [1, top], [base.iloc[0], base.iloc[0] * top], "--", color=color, alpha=0.6, label=f"{framework} ideal"
            )
        with_speedup = group[group["speedup"].notna()]
        if len(with_speedup):
            _points(right, with_speedup, "speedup", color, str(framework))
    _mark_unreliable(left, cases, "median_throughput")
    _mark_unreliable(right, cases, "speedup")
    left.set_ylabel("samples/s (median of repeats)")
    left.set_title("Throughput")
    left.set_ylim(bottom=0)
    _gpu_axis(left, cases)
    _speedup_axes(right, cases)
    right.set_title("Speedup")
    for ax in (left, right):
        ax.legend(fontsize=8, loc="best")
    fig.suptitle(title)
    return Plot("scaling", title, _save(fig, path))


def plot_framework_comparison(summary: pd.DataFrame, title: str, path: Path) -> Plot | None:
    """Grouped bars for one model, precision and batch: samples/s of each framework at each topology,
    with the min-max range of the repeats as error bars. None when no case has a figure."""
    cases = _ok_cases(summary)
    if cases.empty:
        return None
    topologies = list(dict.fromkeys(cases["topology"]))
    frameworks = sorted(cases["framework"].unique())
    width = 0.8 / len(frameworks)
    fig = Figure(figsize=(max(7, 1.4 * len(topologies) * max(1, len(frameworks) / 2)), 5), layout="constrained")
    ax = fig.subplots()
    for i, (color, framework) in enumerate(zip(COLORS * 4, frameworks)):
        group = cases[cases["framework"] == framework].set_index("topology")
        xs, ys, lo, hi = [], [], [], []
        for x, topo in enumerate(topologies):
            if topo in group.index:
                row = group.loc[topo]
                xs.append(x + (i - (len(frameworks) - 1) / 2) * width)
                ys.append(row["median_throughput"])
                lo.append(row["median_throughput"] - row["min_throughput"])
                hi.append(row["max_throughput"] - row["median_throughput"])
        bars = ax.bar(xs, ys, width * 0.95, yerr=[lo, hi], capsize=3, color=color, label=str(framework))
        ax.bar_label(bars, labels=[f"{y:.1f}" for y in ys], fontsize=8, padding=2)
    ax.set_xticks(range(len(topologies)), topologies)
    ax.set_xlabel("topology (nodes n, GPUs per node g)")
    ax.set_ylabel("samples/s (median of repeats; bars: min-max)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title)
    return Plot("frameworks", title, _save(fig, path))


def _night_labels(values: pd.Series) -> pd.Series:
    """Nights (dates or timestamps) as ``YYYY-MM-DD`` labels."""
    return pd.to_datetime(values.astype(str)).dt.strftime("%Y-%m-%d")


def plot_history(history: pd.DataFrame, regressions: pd.DataFrame | None, title: str, path: Path) -> Plot | None:
    """One panel per topology of one framework, model, precision and batch: the median throughput of
    each scheduled night, with regressions marked (slower: red down-triangle, faster: green up-triangle,
    labelled with the change) and environment changes as dotted vertical lines. None without history."""
    if history is None or history.empty:
        return None
    nights = history.copy()
    nights["night"] = _night_labels(nights["night"])
    order = sorted(set(nights["night"]))  # one x position per night, evenly spaced
    position = {night: x for x, night in enumerate(order)}
    nights["topology"] = [topology(n, g) for n, g in zip(nights["nodes"], nights["gpus_per_node"])]
    nights = nights.sort_values(["nodes", "gpus_per_node", "night"])
    topologies = list(dict.fromkeys(nights["topology"]))
    columns = 1 if len(topologies) == 1 else 2
    rows = -(-len(topologies) // columns)
    fig = Figure(figsize=(6.5 * columns, 3.2 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    marks = regressions if regressions is not None else pd.DataFrame()
    if not marks.empty:
        marks = marks.copy()
        marks["night"] = _night_labels(marks["night"])
        marks = marks[marks["night"].isin(position)]
        marks["topology"] = [topology(n, g) for n, g in zip(marks["nodes"], marks["gpus_per_node"])]
    for ax, topo in zip(axes, topologies):
        line = nights[nights["topology"] == topo]
        ax.plot(line["night"].map(position), line["median_throughput"], "o-", color=COLORS[0], label="median samples/s")
        if "environment_id" in line.columns:
            env = [None if pd.isna(v) else v for v in line["environment_id"].astype(object)]
            for k in range(1, len(env)):
                if env[k] != env[k - 1]:
                    ax.axvline(position[line["night"].iloc[k]] - 0.5, color="grey", linestyle=":", alpha=0.8)
        if not marks.empty:
            for direction, marker, color in (("slower", "v", SLOWER), ("faster", "^", FASTER)):
                hit = marks[(marks["topology"] == topo) & (marks["direction"] == direction)]
                if len(hit):
                    ax.scatter(
                        hit["night"].map(position),
                        hit["median_throughput"],
                        marker=marker,
                        s=120,
                        color=color,
                        zorder=3,
                        label=f"regression ({direction})",
                    )
                    for r in hit.itertuples():
                        ax.annotate(
                            f"{r.change_pct:+.1f}%",
                            (position[r.night], r.median_throughput),
                            textcoords="offset points",
                            xytext=(6, 6),
                            fontsize=8,
                            color=color,
                        )
        centre = float(line["median_throughput"].median())
        low, high = ax.get_ylim()  # at least +-10 % around the median: run-to-run noise stays flat
        ax.set_ylim(min(low, centre * 0.9), max(high, centre * 1.1))
        ax.set_title(topo)
        ax.set_ylabel("samples/s")
        ax.grid(True, alpha=0.3)
        step = max(1, -(-len(order) // 12))  # at most about 12 labels
        ax.set_xticks(range(0, len(order), step), order[::step], rotation=30, fontsize=8)
        ax.set_xlim(-0.5, len(order) - 0.5)
        ax.legend(fontsize=7, loc="lower left")
    for ax in axes[len(topologies) :]:
        ax.set_visible(False)
    fig.suptitle(f"{title}: nightly history (dotted line: environment changed)")
    return Plot("history", title, _save(fig, path))


def has_speedup(summary: pd.DataFrame) -> bool:
    """Whether ``summary`` has a speedup to plot: a case on more than one device with a speedup."""
    if summary is None or summary.empty or not {"speedup", "nodes", "gpus_per_node"} <= set(summary.columns):
        return False
    devices = summary["nodes"].fillna(0) * summary["gpus_per_node"].fillna(0)
    return bool((summary["speedup"].notna() & (devices > 1)).any())


def speedup_figure(summary: pd.DataFrame) -> Figure | None:
    """Speedup against GPU count of every configuration in ``summary`` (one colour per framework, model,
    precision, batch and variant; per configuration one line and legend entry per topology family), with the ideal
    (linear) line and the unreliable cases crossed out. None when no case on more than one device has a speedup."""
    if not has_speedup(summary):
        return None
    cases = _ok_cases(summary[summary["speedup"].notna()])
    cases["variant"] = cases["variant"].fillna("") if "variant" in cases else ""
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.subplots()
    groups = cases.groupby(list(GROUP_KEYS), sort=True)
    for color, ((framework, model, precision, batch, variant), group) in zip(COLORS * 8, groups):
        label = variant_label(variant, with_args=True)
        _points(
            ax, group, "speedup", color, f"{framework} {model} {precision} b{batch}" + (f" ({label})" if label else "")
        )
    _mark_unreliable(ax, cases, "speedup")
    _speedup_axes(ax, cases)
    ax.legend(fontsize=7, loc="best")
    return fig


def speedup_png(summary: pd.DataFrame) -> bytes | None:
    """:func:`speedup_figure` as PNG bytes (None when there is nothing to plot)."""
    fig = speedup_figure(summary)
    return None if fig is None else png_bytes(fig)


def node_heatmap_figure(scores: NodeScores) -> Figure | None:
    """The per-node sweeps of ``scores`` as a heat map: a row per node, a column per metric (a sweep's samples/s),
    each cell coloured by how far the node's figure is from its reference (the other nodes' median; with two nodes
    its own history's), red slower, green faster, grey without a verdict; the figure and the change written in
    it, and the nodes named slow outlined. None when there is no per-node sweep."""
    if not scores.scores:
        return None
    change, value, slow = heat_map_frame(scores)
    rows, cols = change.shape
    known = change.abs().max().max()
    limit = max(2 * scores.slower_than * 100.0, 0.0 if pd.isna(known) else float(known), 1.0)
    fig = Figure(figsize=(min(3.0 + 2.2 * cols, 16.0), min(1.6 + 0.45 * rows, 14.0)), layout="constrained")
    ax = fig.subplots()
    cmap = matplotlib.colormaps["RdYlGn"].copy()
    cmap.set_bad("#d9d9d9")
    image = ax.imshow(change.to_numpy(dtype=float), cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
    for i in range(rows):
        for j in range(cols):
            figure, pct = value.iat[i, j], change.iat[i, j]
            if pd.isna(figure):
                continue
            text = f"{figure:,.1f}" + ("" if pd.isna(pct) else f"\n{pct:+.1f}%") + ("\nSLOW" if slow.iat[i, j] else "")
            ax.text(j, i, text, ha="center", va="center", fontsize=7, fontweight="bold" if slow.iat[i, j] else None)
            if slow.iat[i, j]:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2.5))
    ax.set_xticks(range(cols), [textwrap.fill(str(c), 22) for c in change.columns], fontsize=7)
    ax.set_yticks(range(rows), [str(n) for n in change.index], fontsize=8)
    ax.set_xlabel("metric: samples/s of a per-node sweep (each node 1 node x G GPUs)")
    ax.set_ylabel("node")
    bar = fig.colorbar(image, ax=ax, shrink=0.9)
    bar.set_label("% against its reference", fontsize=8)
    named = len(scores.slow)
    ax.set_title(
        f"Nodes against the other nodes' median (two nodes: their own nights): {named} named slow "
        f"(threshold {scores.slower_than:.0%})",
        fontsize=9,
    )
    return fig


def plot_node_heatmap(scores: NodeScores, path: Path) -> Plot | None:
    """:func:`node_heatmap_figure` written to ``path`` (None when there is no per-node sweep)."""
    fig = node_heatmap_figure(scores)
    if fig is None:
        return None
    return Plot("nodes", "Nodes: each node's figure against its reference", _save(fig, path))


def node_heatmap_png(scores: NodeScores) -> bytes | None:
    """:func:`node_heatmap_figure` as PNG bytes (the results page's), None when there is no per-node sweep."""
    fig = node_heatmap_figure(scores)
    return None if fig is None else png_bytes(fig)
