"""The report as one self-contained HTML page: the run, the seed tables, failed repeats, the plots
(embedded as base64 PNG, so the page can be moved or mailed on its own) and the run's regressions."""

from __future__ import annotations

import base64
from html import escape

import pandas as pd

from dlperf_core.measure.noise import UNRELIABLE_RULE
from dlperf_core.reporting.data import ReportData
from dlperf_core.reporting.markdown import PLOT_SECTIONS, no_history_note, run_lines, run_regressions
from dlperf_core.reporting.nodes import NODES_TITLE, node_frame, slow_lines, without_sweeps
from dlperf_core.reporting.plots import Plot
from dlperf_core.reporting.tables import (
    FABRIC_TITLE,
    GPU_HEALTH_TITLE,
    MAX_BATCH_TITLE,
    MLPERF_TITLE,
    UNRELIABLE_COLUMN,
    UNRELIABLE_MARK,
    SeedTable,
    column_label,
    fabric_frame,
    figure_line,
    format_cell,
    frame_rows,
    gpu_health_frame,
    gpu_health_line,
    identity_line,
    max_batch_frame,
    seed_table_frames,
)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2rem auto;
       max-width: 1280px; padding: 0 1rem; color: #222; line-height: 1.4; }
h1 { font-size: 1.6rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2rem; }
h3 { font-size: 1.05rem; margin-bottom: .4rem; }
table { border-collapse: collapse; margin: .3rem 0 1rem; font-size: .92rem; }
th, td { border: 1px solid #ccc; padding: .25rem .6rem; }
p, dd, figcaption { overflow-wrap: anywhere; }
div.table { max-width: 100%; overflow-x: auto; } td.wrap { overflow-wrap: anywhere; min-width: 8rem; }
th { background: #f3f5f7; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
dl.run { display: grid; grid-template-columns: max-content auto; gap: .15rem 1rem; }
dl.run dt { font-weight: 600; } dl.run dd { margin: 0; }
.status-success { color: #1e8449; font-weight: 600; } .status-failed { color: #c0392b; font-weight: 600; }
.status-running { color: #b7950b; font-weight: 600; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .9rem; color: #555; } p.note { color: #555; font-style: italic; }
li.slow-node { color: #c0392b; font-weight: 600; }
"""


LONG_WORD = 24
"""A cell with a word longer than this (a case key, a log path, a run id) may break anywhere, so that its table
fits the page rather than widening it."""


def html_table(header: list[str], rows: list[list[str]]) -> str:
    """A table in a box that scrolls sideways when the table is wider than the page; cells that read as numbers
    are right-aligned, cells with a long word wrap inside it."""

    def cell(value: str) -> str:
        numeric = value.replace(".", "", 1).replace("-", "", 1).replace("+", "", 1).isdigit()
        if numeric:
            return f'<td class="num">{escape(value)}</td>'
        long_word = max(map(len, value.split()), default=0) > LONG_WORD
        return f'<td class="wrap">{escape(value)}</td>' if long_word else f"<td>{escape(value)}</td>"

    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "\n".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    return f'<div class="table"><table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table></div>'


def frame_html(frame: pd.DataFrame, labels: bool = False) -> str:
    """``frame`` as a table; with ``labels`` its query columns under headers for people (:func:`column_label`)."""
    rows = [[format_cell(v) for v in row] for row in frame.astype(object).itertuples(index=False)]
    return html_table([column_label(str(c)) if labels else str(c) for c in frame.columns], rows)


def seed_table_html(table: SeedTable) -> str:
    """One seed table; the reason of an unreliable row behind a warning sign."""
    rows = frame_rows(table.frame)
    columns = list(table.frame.columns)
    if UNRELIABLE_COLUMN in columns:
        at = columns.index(UNRELIABLE_COLUMN)
        for row in rows:
            row[at] = f"{UNRELIABLE_MARK} {row[at]}" if row[at] else ""
    return html_table(columns, rows)


def image_html(plot: Plot) -> str:
    encoded = base64.b64encode(plot.path.read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{escape(plot.title)}" src="data:image/png;base64,{encoded}">'
        f"<figcaption>{escape(plot.title)} ({escape(plot.path.name)})</figcaption></figure>"
    )


def nodes_html(data: ReportData, plots: list[Plot]) -> list[str]:
    """The Nodes section (:mod:`dlperf_core.reporting.nodes`): the rule, a line per node named slow, the table and
    the heat map; nothing when the run has no per-node sweep."""
    scores = data.nodes
    if not scores.scores:
        return []
    body = [f'<h2 id="nodes">{escape(NODES_TITLE)}</h2>', f'<p class="note">Rule: {escape(scores.rule)}.</p>']
    css = ' class="slow-node"' if scores.slow else ""
    body += ["<ul>" + "".join(f"<li{css}>{escape(line)}</li>" for line in slow_lines(scores)) + "</ul>"]
    body.append(frame_html(node_frame(scores)))
    body += [image_html(p) for p in plots if p.kind == "nodes"]
    return body


def render_html(data: ReportData, plots: list[Plot]) -> str:
    """The HTML page of one run's report."""
    run = data.run
    title = f"dlperf report: {run.suite} ({run.run_id})"
    body = [f"<h1>{escape(title)}</h1>", '<dl class="run">']
    for label, value in run_lines(data):
        css = f' class="status-{escape(value)}"' if label == "status" else ""
        body.append(f"<dt>{escape(label)}</dt><dd{css}>{escape(value)}</dd>")
    body.append("</dl>")
    failed = data.failed_repeats
    if len(failed):
        body += ["<h2>Failed repeats</h2>", frame_html(failed, labels=True)]
    body.append("<h2>Results</h2>")
    body.append(
        "<p>samples/s: median of the repeats that succeeded; speedup: that median over the median of "
        "1 node x 1 GPU of the same framework, model, precision and batch, in this run or, where it has none, in "
        "the latest nightly run (speedup_vs says which); "
        "n: repeats measured; failed: repeats that failed (left out, never counted as 0); "
        "cv(%): stdev / mean of the ok repeats, in percent.</p>"
    )
    body.append(f'<p class="note">{escape(UNRELIABLE_MARK)} {escape(UNRELIABLE_RULE)}.</p>')
    tables = seed_table_frames(without_sweeps(data.summary))  # a per-node sweep's cases: the Nodes section
    if not tables and not data.nodes.scores:
        body.append('<p class="note">No results stored for this run.</p>')
    for table in tables:
        figure = f'<p class="figure">{escape(figure_line(table, data.results))}</p>'
        identity = identity_line(table, data.results)
        configuration = f'<p class="configuration">{escape(identity)}</p>' if identity else ""
        body += [f"<h3>{escape(table.title)}</h3>", figure, configuration, seed_table_html(table)]
    body += nodes_html(data, plots)
    searched = max_batch_frame(data.max_batch)
    if len(searched):
        body += [f"<h3>{escape(MAX_BATCH_TITLE)}</h3>", frame_html(searched)]
    fabric = fabric_frame(data.fabric)
    if len(fabric):
        body += [f"<h3>{escape(FABRIC_TITLE)}</h3>", html_table(list(fabric.columns), frame_rows(fabric))]
    if len(data.mlperf):
        body += [f"<h3>{escape(MLPERF_TITLE)}</h3>", html_table(list(data.mlperf.columns), frame_rows(data.mlperf))]
    if (health := gpu_health_line(data.gpu_health)) is not None:
        flagged = gpu_health_frame(data.gpu_health)
        body += [f"<h3>{escape(GPU_HEALTH_TITLE)}</h3>", f'<p class="note">{escape(health)}</p>']
        body.append(html_table(list(flagged.columns), frame_rows(flagged)) if len(flagged) else "<p>No finding.</p>")
    for kind, heading in PLOT_SECTIONS:
        shown = [p for p in plots if p.kind == kind]
        if shown or kind == "history":
            body.append(f"<h2>{escape(heading)}</h2>")
        if kind == "history" and (note := no_history_note(data)):
            body.append(f'<p class="note">{escape(note)}</p>')
        body += [image_html(p) for p in shown]
    regressions = run_regressions(data)
    body.append("<h2>Regressions found at this run</h2>")
    body.append(frame_html(regressions, labels=True) if len(regressions) else "<p>None.</p>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
