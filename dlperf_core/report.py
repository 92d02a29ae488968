"""Tables shaped like the seed reports: one per framework, model, precision and batch size.

    | node_num | gpu_num_per_node | batch_size_per_device | samples/s(pytorch_reference) | speedup |
"""

from __future__ import annotations

import math

import pandas as pd


def _fmt(value: object, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def seed_tables(summary: pd.DataFrame) -> str:
    """Render a case summary (the ``case_summary`` view) as the seeds' markdown tables."""
    if summary is None or summary.empty:
        return "(no results)"
    out = []
    keys = ["framework", "model", "precision", "batch_size_per_device"]
    for (framework, model, precision, batch), group in summary.groupby(keys, sort=False):
        group = group.sort_values(["nodes", "gpus_per_node"])
        header = ["node_num", "gpu_num_per_node", "batch_size_per_device", f"samples/s({framework})", "speedup", "n", "failed"]
        rows = [
            [
                str(int(r.nodes)),
                str(int(r.gpus_per_node)),
                str(int(r.batch_size_per_device)),
                _fmt(r.median_throughput),
                _fmt(r.speedup),
                str(int(r.n)),
                str(int(r.n_failed)),
            ]
            for r in group.itertuples()
        ]
        out.append(f"### {framework} {model} {precision} batch {batch} (median of repeats)\n\n" + markdown_table(header, rows))
    return "\n\n".join(out)
