"""The speedup plots draw one line per topology family of each configuration: "1 node x N GPUs" (one node),
"N nodes x 1 GPU" (one GPU per node) and "N nodes x M GPUs" (M > 1 GPUs per node), 1n1g the start of the first
two, so two shapes on the same number of GPUs (1n2g and 2n1g) are never joined by a vertical line. Unreliable
points stay crossed out under one legend entry."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.lines import Line2D

from dlperf_core.measure.noise import UNRELIABLE_LEGEND
from dlperf_core.reporting.plots import ONE_GPU, ONE_NODE, plot_scaling, speedup_figure, topology_families

SMOKE = ((1, 1), (1, 2), (2, 1))  # the smoke suite's topologies
WIDE = ((1, 1), (1, 2), (1, 4), (2, 1), (4, 1), (2, 2), (4, 2), (2, 4))
PT = ("pytorch_reference", "resnet50_v1.5", "fp32", 8, "+args=1f0c9a2e")
NGC = ("ngc_pytorch", "resnet50_v1.5", "amp", 256, "+static_loss_scale=128+compile+args=2b7d0e11")
PT_LABEL = "pytorch_reference resnet50_v1.5 fp32 b8 (args=1f0c9a2e)"
NGC_LABEL = "ngc_pytorch resnet50_v1.5 amp b256 (static_loss_scale=128, compiled, args=2b7d0e11)"


def summary(configs: dict[tuple, tuple[tuple[int, int], ...]], flagged: frozenset[tuple] = frozenset()) -> pd.DataFrame:
    """A latest summary: per configuration and topology a speedup of 0.9 per device (1.0 at 1n1g), a flagged
    ``(configuration, topology)`` with an unreliable reason."""
    rows = []
    for (framework, model, precision, batch, variant), topologies in configs.items():
        for nodes, per_node in topologies:
            devices = nodes * per_node
            speedup = 1.0 if devices == 1 else 0.9 * devices - 0.05 * (nodes - 1)
            rows.append(
                {
                    "framework": framework,
                    "model": model,
                    "precision": precision,
                    "batch_size_per_device": batch,
                    "variant": variant,
                    "nodes": nodes,
                    "gpus_per_node": per_node,
                    "median_throughput": 100.0 * speedup,
                    "speedup": speedup,
                    "unreliable_reason": "CV 0.73 > 0.10"
                    if ((framework, model, precision, batch, variant), (nodes, per_node)) in flagged
                    else None,
                }
            )
    return pd.DataFrame(rows)


def topologies_of(frame: pd.DataFrame) -> list[str]:
    return [f"{n}n{g}g" for n, g in zip(frame["nodes"], frame["gpus_per_node"])]


def test_topology_families():
    cases = summary({PT: WIDE})
    cases["gpus"] = cases["nodes"] * cases["gpus_per_node"]
    families = {name: topologies_of(group) for name, group in topology_families(cases)}
    assert families == {
        ONE_NODE: ["1n1g", "1n2g", "1n4g"],
        ONE_GPU: ["1n1g", "2n1g", "4n1g"],
        "N nodes x 2 GPUs": ["1n2g", "2n2g", "4n2g"],
        "N nodes x 4 GPUs": ["1n4g", "2n4g"],
    }
    assert ONE_NODE == "1 node x N GPUs" and ONE_GPU == "N nodes x 1 GPU"


@pytest.mark.parametrize(
    ("topologies", "expected"),
    [
        (((1, 1), (1, 2), (1, 4)), {ONE_NODE: ["1n1g", "1n2g", "1n4g"]}),  # one node only: one line
        (((1, 1), (2, 1)), {ONE_GPU: ["1n1g", "2n1g"]}),  # nothing beyond 1n1g on one node: no such line
        (((1, 1),), {ONE_NODE: ["1n1g"]}),  # a lone 1n1g is still drawn
        (((1, 1), (2, 2)), {"N nodes x 2 GPUs": ["2n2g"]}),  # without 1n2g the family starts at 2n2g
    ],
)
def test_a_family_is_drawn_only_with_a_case_of_its_own(topologies, expected):
    cases = summary({PT: topologies})
    cases["gpus"] = cases["nodes"] * cases["gpus_per_node"]
    assert {name: topologies_of(group) for name, group in topology_families(cases)} == expected


def family_lines(ax) -> dict[str, Line2D]:
    """The plot's labelled lines through cases (not the ideal line, not the marker-only ones)."""
    return {
        line.get_label(): line
        for line in ax.get_lines()
        if not line.get_label().startswith("_") and line.get_label() != "ideal (linear)"
    }


def test_the_page_plot_has_one_line_per_family_and_configuration():
    flagged = frozenset({(PT, (2, 1)), (NGC, (1, 2))})
    frame = summary({PT: SMOKE, NGC: WIDE}, flagged)
    fig = speedup_figure(frame)
    assert fig is not None
    (ax,) = fig.axes
    lines = family_lines(ax)
    assert set(lines) == {
        f"{PT_LABEL}: {ONE_NODE}",
        f"{PT_LABEL}: {ONE_GPU}",
        f"{NGC_LABEL}: {ONE_NODE}",
        f"{NGC_LABEL}: {ONE_GPU}",
        f"{NGC_LABEL}: N nodes x 2 GPUs",
        f"{NGC_LABEL}: N nodes x 4 GPUs",
    }
    for label, line in lines.items():
        xs = list(line.get_xdata())
        assert xs == sorted(set(xs)), f"{label}: {xs} goes back or straight up (two shapes on one GPU count)"
    # the smoke suite's 1n2g and 2n1g, both on 2 GPUs, on two lines that start at 1n1g
    assert lines[f"{PT_LABEL}: {ONE_NODE}"].get_xydata().tolist() == [[1, 1.0], [2, 1.8]]
    assert lines[f"{PT_LABEL}: {ONE_GPU}"].get_xydata().tolist() == [[1, 1.0], [2, pytest.approx(1.75)]]
    # a configuration's lines share its colour; each family its own line style
    pt = [lines[f"{PT_LABEL}: {family}"] for family in (ONE_NODE, ONE_GPU)]
    assert pt[0].get_color() == pt[1].get_color() and pt[0].get_linestyle() != pt[1].get_linestyle()
    assert lines[f"{NGC_LABEL}: {ONE_NODE}"].get_color() != pt[0].get_color()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert set(lines) <= set(legend) and UNRELIABLE_LEGEND in legend and "ideal (linear)" in legend
    # the unreliable points are crossed out as before: one red x per flagged case, under one legend entry
    (crosses,) = [c for c in ax.collections if c.get_label() == UNRELIABLE_LEGEND]
    assert sorted(map(tuple, crosses.get_offsets().tolist())) == [(2.0, pytest.approx(1.75)), (2.0, 1.8)]


def test_the_reports_scaling_plot_draws_the_families_too(tmp_path, monkeypatch):
    """plot_scaling (the report's throughput and speedup panels) draws the same family lines in both panels."""
    import dlperf_core.reporting.plots as plots

    drawn = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.append(fig) or path)
    frame = summary({PT: SMOKE})
    assert plot_scaling(frame, "resnet50_v1.5 fp32 batch 8", tmp_path / "scaling.png") is not None
    (fig,) = drawn
    for ax in fig.axes:
        lines = family_lines(ax)
        family = {label for label in lines if "ideal" not in label}
        assert family == {f"pytorch_reference: {ONE_NODE}", f"pytorch_reference: {ONE_GPU}"}, ax.get_title()
        for label in family:
            xs = list(lines[label].get_xdata())
            assert xs == [1, 2], label
