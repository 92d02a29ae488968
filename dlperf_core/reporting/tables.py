"""Tables shaped like the seed reports: one per framework, model, precision and batch size per device.

    | node_num | gpu_num_per_node | batch_size_per_device | samples/s(pytorch_reference) | speedup | speedup_vs |
    | n | failed | cv(%) | unreliable |

``speedup_vs`` names the 1n1g the speedup is against (``this run``, or ``latest nightly <night> (<run>)``;
:mod:`dlperf_core.measure.noise`). ``cv(%)`` is the spread of the ok repeats (stdev / mean, in percent); ``unreliable`` says why a row is too noisy
to read (:mod:`dlperf_core.measure.noise`: ``CV 0.71 > 0.10``, ``speedup 4.40 > 2 devices``, ``single repeat``,
the oversubscription), empty when it is not.

Built as pandas frames from the ``case_summary`` view (one row per case of a run), then rendered as
markdown here or as HTML by :mod:`dlperf_core.reporting.html`.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dlperf_core.frameworks import get_adapter
from dlperf_core.measure.efficiency import throughput_unit
from dlperf_core.measure.noise import BASELINE_OF, UNRELIABLE_RULE, unreliable_reason
from dlperf_core.measure.origin import origin_words
from dlperf_core.model import ARGS_MARK, UNKNOWN_ARGS, fingerprint_of

GROUP_KEYS: tuple[str, ...] = ("framework", "model", "precision", "batch_size_per_device", "variant")
"""One seed table per distinct value of these summary columns."""

#: Columns added to a seed table only when some row has a figure (GPU runs): (summary column, header, scale)
GPU_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("gpu_memory_peak_mb", "gpu_mem(MiB)", 1.0),
    ("mfu", "MFU(%)", 100.0),
    ("energy_per_sample_j", "J/sample", 1.0),
)


def variant_label(variant: str | None, *, with_args: bool = False) -> str:
    """A variant (case key options suffix) for people: ``+static_loss_scale=128+compile+args=1f0c9a2e`` ->
    ``static_loss_scale=128, compiled``; '' for none. Tables leave the configuration fingerprint out (the
    :func:`identity_line` under them gives it); a plot, which has no such line, keeps it (``with_args``:
    ``static_loss_scale=128, compiled, args=1f0c9a2e``), so two configurations that differ only in their extra
    arguments or window never share a plot, a file name or a legend entry."""
    parts = [p for p in (variant or "").split("+") if p and (with_args or not p.startswith(ARGS_MARK))]
    return ", ".join("compiled" if p == "compile" else p for p in parts)


def identity_line(table: SeedTable, results: pd.DataFrame | None = None) -> str | None:
    """The line under a seed table naming its configuration: the fingerprint, and from the run's repeats (when
    given) the extra arguments and the measured window it covers, e.g. ``configuration args=1f0c9a2e: extra
    arguments --width 16 --image-size 64; warm-up 3 + measured 10 iterations``."""
    fingerprint = fingerprint_of(table.variant)
    if fingerprint is None:
        return None
    if fingerprint == UNKNOWN_ARGS:
        return f"configuration {ARGS_MARK}{UNKNOWN_ARGS}: stored before dlperf recorded extra arguments and windows"
    line = f"configuration {ARGS_MARK}{fingerprint}"
    configuration = _configuration_of(table, results)
    if configuration is None:
        return line
    args = configuration.get("extra_args") or []
    said = f"extra arguments {shlex.join(args)}" if args else "no extra arguments"
    window = f"warm-up {configuration.get('warmup_iterations')} + measured {configuration.get('measured_iterations')}"
    shape = shrunk_model(configuration)
    return f"{line}: {said}; {window} iterations" + (f"; model shrunk: {shape}" if shape else "")


def shrunk_model(configuration: Mapping[str, Any]) -> str | None:
    """How the configuration's model differs from the full-size one, as its framework's adapter reads its extra
    arguments (``width 16, 64x64 images, 10 classes``), or None (full size, or a framework dlperf does not know)."""
    try:
        adapter = get_adapter(str(configuration.get("framework")))
    except KeyError:
        return None
    shape = adapter.model_shape(str(configuration.get("model")), tuple(configuration.get("extra_args") or ()))
    return shape.describe() if shape is not None and shape.describe() else None


def _configuration_of(table: SeedTable, results: pd.DataFrame | None) -> dict[str, Any] | None:
    """The stored configuration of ``table``'s repeats (one configuration: the fingerprint says so), if any."""
    if results is None or results.empty or "configuration" not in results:
        return None
    mine = results[table_rows(table, results)]["configuration"].dropna()
    for value in mine:
        configuration: dict[str, Any] = json.loads(value) if isinstance(value, str) else dict(value)
        return configuration
    return None


def throughput_column(framework: str, unit: str = "samples/s") -> str:
    """The seeds' throughput header, e.g. ``samples/s(PyTorch)`` (``tokens/s(...)`` for a transformer)."""
    return f"{unit}({framework})"


CV_COLUMN = "cv(%)"
"""Header of a seed table's CV column: stdev / mean of the ok repeats, in percent."""
BASELINE_COLUMN = "speedup_vs"
"""Header of the seed table's column that names what the speedup is against (:func:`baseline_label`)."""

UNRELIABLE_COLUMN = "unreliable"
"""Header of a seed table's last column: why the row is unreliable (:mod:`dlperf_core.measure.noise`), '' when not."""
UNRELIABLE_MARK = "\u26a0"
"""The warning sign before an unreliable row's reason on HTML pages (the text tables keep to ASCII)."""


def seed_columns(framework: str) -> list[str]:
    """Columns of a seed table, in order: the seeds' five, then repeats counted and failed, the CV in percent
    and the unreliable flag (the GPU columns of a GPU run come before the flag)."""
    return [
        "node_num",
        "gpu_num_per_node",
        "batch_size_per_device",
        throughput_column(framework),
        "speedup",
        BASELINE_COLUMN,
        "n",
        "failed",
        CV_COLUMN,
        UNRELIABLE_COLUMN,
    ]


def _text(value: object) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) or pd.isna(value) else str(value)


def baseline_label(of: object, run_id: object = None, night: object = None) -> str:
    """What a speedup is against, in words (``case_summary.baseline_of``, ``baseline_run_id``,
    ``baseline_night``): ``this run`` (its own 1n1g), ``latest nightly 2026-11-28 (scheduled__...)`` (the run had
    no 1n1g), '' (no baseline)."""
    of_, run_, night_ = _text(of), _text(run_id), _text(night)
    if of_ is None:
        return ""
    if of_ == BASELINE_OF[0]:
        return of_
    return f"{of_} {night_[:10] if night_ else ''} ({run_})".replace("  ", " ")


def baseline_labels(summary: pd.DataFrame) -> list[str]:
    """:func:`baseline_label` of every row of a case summary ('' where the frame does not say: stored before
    migration 0012, or a frame made elsewhere)."""
    if "baseline_of" not in summary:
        return [""] * len(summary)
    return [
        baseline_label(o, r, n)
        for o, r, n in zip(summary["baseline_of"], summary.get("baseline_run_id"), summary.get("baseline_night"))
    ]


def unreliable_reasons(summary: pd.DataFrame) -> list[str | None]:
    """Per row of a case summary, why it is unreliable, or None: the view's ``unreliable_reason`` where the frame
    has it, else :func:`dlperf_core.measure.noise.unreliable_reason` of its ``cv``, ``speedup`` and device count."""
    if "unreliable_reason" in summary:
        return [None if pd.isna(r) or not r else str(r) for r in summary["unreliable_reason"]]
    missing = pd.Series([None] * len(summary), index=summary.index, dtype=object)
    cv = summary.get("cv", missing)
    speedup = summary.get("speedup", missing)
    devices = summary["nodes"] * summary["gpus_per_node"]
    return [unreliable_reason(c, s, d) for c, s, d in zip(cv, speedup, devices)]


@dataclass(frozen=True)
class SeedTable:
    """One seed-shaped table: the configuration it is about and its rows (one per topology)."""

    framework: str
    model: str
    precision: str
    batch_size_per_device: int
    frame: pd.DataFrame
    variant: str = ""

    @property
    def title(self) -> str:
        label = variant_label(self.variant)
        what = f"{self.framework} {self.model} {self.precision}" + (f" ({label})" if label else "")
        return f"{what} batch {self.batch_size_per_device} (median of repeats)"


def seed_table_frames(summary: pd.DataFrame) -> list[SeedTable]:
    """The case summary of one run as seed tables, topologies ordered by nodes, then GPUs per node.

    ``samples/s`` is the median of the ok repeats (NaN when every repeat failed), ``speedup`` the median
    over the median of the same configuration's 1 node x 1 GPU case, of the same run or else of the latest nightly
    run (NaN without one, or when oversubscribed), ``speedup_vs`` which (:func:`baseline_label`), ``cv(%)`` the stdev over
    the mean of the ok repeats in percent (NaN with fewer than two), ``unreliable`` why the row is too noisy to
    read ('' when it is not)."""
    if summary is None or summary.empty:
        return []
    summary = (
        summary.assign(variant=summary["variant"].fillna("")) if "variant" in summary else summary.assign(variant="")
    )
    tables = []
    for (framework, model, precision, batch, variant), group in summary.groupby(list(GROUP_KEYS), sort=True):
        group = group.sort_values(["nodes", "gpus_per_node"])
        frame = pd.DataFrame(
            {
                "node_num": group["nodes"].astype(int).to_numpy(),
                "gpu_num_per_node": group["gpus_per_node"].astype(int).to_numpy(),
                "batch_size_per_device": group["batch_size_per_device"].astype(int).to_numpy(),
                throughput_column(framework, throughput_unit(str(model))): group["median_throughput"]
                .astype(float)
                .to_numpy(),
                "speedup": group["speedup"].astype(float).to_numpy(),
                BASELINE_COLUMN: baseline_labels(group),
                "n": group["n"].astype(int).to_numpy(),
                "failed": group["n_failed"].astype(int).to_numpy(),
                CV_COLUMN: (group["cv"].astype(float) * 100).to_numpy() if "cv" in group else math.nan,
            }
        )
        for column, header, scale in GPU_COLUMNS:  # GPU figures, where there are any (never a column of "-")
            if column in group and group[column].notna().any():
                frame[header] = group[column].astype(float).to_numpy() * scale
        frame[UNRELIABLE_COLUMN] = [reason or "" for reason in unreliable_reasons(group)]
        tables.append(SeedTable(str(framework), str(model), str(precision), int(batch), frame, str(variant)))
    return tables


def _origin(value: object) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def case_origins(results: pd.DataFrame | None) -> dict[str, str | None]:
    """``{case_key: figure_origin}`` of a run's repeats (``results`` rows; None: unknown, stored before migration
    0009): who printed the lines each case's figure was read from."""
    if results is None or results.empty or "figure_origin" not in results:
        return {}
    out: dict[str, str | None] = {}
    for key, origin in zip(results["case_key"], results["figure_origin"]):
        if out.get(str(key)) is None:  # a known origin wins over an unknown one of the same case
            out[str(key)] = _origin(origin)
    return out


def table_rows(table: SeedTable, results: pd.DataFrame) -> pd.Series:
    """Which of ``results`` (rows of ``results``) are repeats of ``table``'s configuration."""
    variant = results["variant"].fillna("") if "variant" in results else pd.Series("", index=results.index)
    return (
        (results["framework"] == table.framework)
        & (results["model"] == table.model)
        & (results["precision"] == table.precision)
        & (results["batch_size_per_device"] == table.batch_size_per_device)
        & (variant == table.variant)
    )


def figure_line(table: SeedTable, results: pd.DataFrame | None) -> str:
    """The line under a seed table saying who printed its figures, from the run's repeats of its configuration,
    e.g. ``figure: the framework's own logger``."""
    if results is None or results.empty or "figure_origin" not in results:
        return origin_words([])
    mine = results[table_rows(table, results)]
    return origin_words([_origin(v) for v in mine.sort_values(["nodes", "gpus_per_node"])["figure_origin"]])


def table_note(table: SeedTable, results: pd.DataFrame | None) -> str:
    """What a report says under a seed table: its :func:`figure_line`, then its :func:`identity_line`."""
    return "\n\n".join(line for line in (figure_line(table, results), identity_line(table, results)) if line)


COLUMN_LABELS: dict[str, str] = {
    "case_key": "case",
    "median_throughput": "median samples/s",
    "baseline_median": "baseline median samples/s",
    "change_pct": "change (%)",
    "n": "repeats",
    "n_failed": "failed",
    "run_id": "DAG run",
    "dag_id": "DAG",
    "log_path": "log",
}
"""Headers for people of the query columns a page shows as they come (history, regressions, failed repeats)."""


def column_label(column: str) -> str:
    """A query column as a table header: :data:`COLUMN_LABELS`, else its words (``run_status`` -> ``run status``)."""
    return COLUMN_LABELS.get(column, column.replace("_", " "))


def format_cell(value: object, digits: int = 2, *, missing: str = "-", grouped: bool = False) -> str:
    """A table cell: floats to ``digits`` decimals (with thousands separators when ``grouped``), missing
    values (None, NaN) as ``missing``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if grouped else f"{value:.{digits}f}"
    return str(value)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A padded markdown table."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def frame_rows(frame: pd.DataFrame) -> list[list[str]]:
    """The rows of a seed table frame as formatted cells."""
    return [[format_cell(v.item() if hasattr(v, "item") else v) for v in row] for row in frame.itertuples(index=False)]


def table_markdown(table: SeedTable, note: str | None = None) -> str:
    """One seed table with its ``###`` heading (and ``note``, e.g. its :func:`figure_line`, under it)."""
    head = f"### {table.title}\n\n" + (f"{note}\n\n" if note else "")
    return head + markdown_table(list(table.frame.columns), frame_rows(table.frame))


def seed_tables(summary: pd.DataFrame) -> str:
    """Render a case summary (the ``case_summary`` view) as the seeds' markdown tables."""
    tables = seed_table_frames(summary)
    if not tables:
        return "(no results)"
    together = side_by_side(summary)
    flagged = any(t.frame[UNRELIABLE_COLUMN].astype(bool).any() for t in tables)
    rule = [f"{UNRELIABLE_RULE}."] if flagged else []
    return "\n\n".join(
        [*(table_markdown(t, identity_line(t)) for t in tables), *rule, *([together] if together else [])]
    )


def side_by_side_frame(summary: pd.DataFrame, precision: str) -> pd.DataFrame:
    """Every framework's median samples/s and speedup at each topology of one precision, side by side.

    One column pair per framework; where a framework ran several models, batch sizes or variants at this
    precision, each gets its own pair, labelled ``<framework> <model> b<batch>`` (and the variant)."""
    rows = summary[summary["precision"] == precision]
    rows = rows.assign(variant=rows["variant"].fillna("")) if "variant" in rows else rows.assign(variant="")
    keys = ["framework", "model", "batch_size_per_device", "variant"]
    configs = rows[keys].drop_duplicates()
    ambiguous = set(configs["framework"][configs["framework"].duplicated()])
    frame = rows[["nodes", "gpus_per_node"]].drop_duplicates().sort_values(["nodes", "gpus_per_node"])
    frame = frame.rename(columns={"nodes": "node_num", "gpus_per_node": "gpu_num_per_node"}).reset_index(drop=True)
    for config in configs.sort_values(keys).itertuples(index=False):
        label = str(config.framework)
        if label in ambiguous:
            label += f" {config.model} b{config.batch_size_per_device}"
            label += f" {variant_label(config.variant)}" if config.variant else ""
        mine = rows[
            (rows["framework"] == config.framework)
            & (rows["model"] == config.model)
            & (rows["batch_size_per_device"] == config.batch_size_per_device)
            & (rows["variant"] == config.variant)
        ]
        by_topology = {(int(r.nodes), int(r.gpus_per_node)): r for r in mine.itertuples(index=False)}
        cells = [by_topology.get((int(n), int(g))) for n, g in zip(frame["node_num"], frame["gpu_num_per_node"])]
        unit = throughput_unit(str(config.model))
        frame[throughput_column(label, unit)] = [
            float(c.median_throughput) if c is not None else math.nan for c in cells
        ]
        frame[f"speedup({label})"] = [float(c.speedup) if c is not None else math.nan for c in cells]
    return frame


def side_by_side(summary: pd.DataFrame) -> str:
    """The frameworks of a run side by side, one markdown table per precision ("" for a single framework)."""
    if summary is None or summary.empty or summary["framework"].nunique() < 2:
        return ""
    out = []
    for precision in sorted(summary["precision"].unique()):
        frame = side_by_side_frame(summary, precision)
        out.append(
            f"### Frameworks side by side, {precision} (median samples/s; speedup over each one's 1n1g)\n\n"
            + markdown_table(list(frame.columns), frame_rows(frame))
        )
    return "\n\n".join(out)


MAX_BATCH_TITLE = "Max batch size per device (largest that trained without running out of memory)"
MAX_BATCH_COLUMNS: tuple[str, ...] = (
    "framework",
    "model",
    "precision",
    "topology",
    "tried",
    "max_batch_size_per_device",
    "first_oom",
    "status",
)


def max_batch_frame(searches: pd.DataFrame) -> pd.DataFrame:
    """The ``max_batch_searches`` rows of a run as a table: what was tried and the largest batch that fit
    (the seeds' "以32为最小单位，最大batch size为128" as a row); ``first_oom`` is the batch that ran out of
    memory, ``status`` says how far the search got (dlperf_core.measure.maxbatch)."""
    if searches is None or searches.empty:
        return pd.DataFrame(columns=list(MAX_BATCH_COLUMNS))
    rows = []
    for r in searches.sort_values(["framework", "model", "precision", "nodes", "gpus_per_node"]).itertuples():
        tried = [p["batch"] for p in r.probes]
        rows.append(
            {
                "framework": r.framework,
                "model": r.model,
                "precision": r.precision,
                "topology": f"{r.nodes}n{r.gpus_per_node}g",
                "tried": f"{tried[0]}..{tried[-1]} step {r.step}"
                if len(tried) > 1
                else (str(tried[0]) if tried else "-"),
                "max_batch_size_per_device": None if pd.isna(r.max_batch) else int(r.max_batch),
                "first_oom": None if pd.isna(r.first_oom_batch) else int(r.first_oom_batch),
                "status": r.status if r.status != "failed" else f"failed: {r.reason}",
            }
        )
    return pd.DataFrame(rows, columns=list(MAX_BATCH_COLUMNS))


def max_batch_markdown(searches: pd.DataFrame) -> str:
    """:func:`max_batch_frame` as a markdown table (empty string when there was no search)."""
    frame = max_batch_frame(searches)
    if frame.empty:
        return ""
    cells = [[format_cell(v) for v in row] for row in frame.astype(object).itertuples(index=False)]
    return f"### {MAX_BATCH_TITLE}\n\n" + markdown_table(list(frame.columns), cells)


FABRIC_TITLE = "All-reduce bus bandwidth, GB/s (median of repeats; nccl-tests' busbw = algbw x 2(n-1)/n)"


def fabric_frame(fabric: pd.DataFrame | None) -> pd.DataFrame:
    """A run's ``fabric_summary`` as one table: a row per message size, a column per topology (busbw)."""
    if fabric is None or fabric.empty:
        return pd.DataFrame()
    fabric = fabric[fabric["busbw_gbs"].notna()]
    if fabric.empty:
        return pd.DataFrame()
    topologies = (
        fabric[["nodes", "gpus_per_node"]]
        .drop_duplicates()
        .sort_values(["nodes", "gpus_per_node"])
        .itertuples(index=False)
    )
    frame = pd.DataFrame({"size": sorted(fabric["size_bytes"].unique())})
    for topology in topologies:
        mine = fabric[(fabric["nodes"] == topology.nodes) & (fabric["gpus_per_node"] == topology.gpus_per_node)]
        by_size = dict(zip(mine["size_bytes"], mine["busbw_gbs"]))
        frame[f"{topology.nodes}n{topology.gpus_per_node}g"] = [float(by_size.get(s, math.nan)) for s in frame["size"]]
    frame["size"] = [_bytes(int(s)) for s in frame["size"]]
    return frame


MLPERF_TITLE = (
    "Beside MLPerf Training (imported systems of the same accelerator and nearest count; samples/s per "
    "accelerator, or per node for CPU-only; a system's figure is the median of its runs by dlperf's rule)"
)


def mlperf_markdown(frame: pd.DataFrame | None) -> str:
    """The run beside the imported MLPerf systems, with its heading ('' when there is nothing to compare)."""
    if frame is None or frame.empty:
        return ""
    return f"### {MLPERF_TITLE}\n\n" + markdown_table(list(frame.columns), frame_rows(frame))


def _bytes(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def fabric_markdown(fabric: pd.DataFrame | None) -> str:
    """The fabric table as markdown with its heading ('' when the run ran no fabric benchmark)."""
    frame = fabric_frame(fabric)
    if frame.empty:
        return ""
    return f"### {FABRIC_TITLE}\n\n" + markdown_table(list(frame.columns), frame_rows(frame))


GPU_HEALTH_TITLE = "GPU health (NVML, before each repeat; throttling in its measured window)"
GPU_HEALTH_COLUMNS: tuple[str, ...] = ("case_key", "repeat", "verdict", "findings", "throttled")


def _count(frame: pd.DataFrame, verdict: str) -> int:
    return int((frame["verdict"] == verdict).sum())


def gpu_health_line(health: pd.DataFrame | None) -> str | None:
    """One line on a run's GPU health snapshots (``gpu_health_snapshots`` with its results' keys:
    ``ResultStore.gpu_health``): how many repeats were checked and what came of it; None when none was."""
    if health is None or health.empty:
        return None
    throttled = int(health["throttled"].notna().sum())
    counts = ", ".join(
        f"{n} {word}"
        for n, word in (
            (_count(health, "ok"), "ok"),
            (_count(health, "flagged"), "flagged"),
            (_count(health, "refused"), "refused"),
            (_count(health, "no_gpus"), "without GPUs"),
            (throttled, "throttled"),
        )
        if n
    )
    return f"{len(health)} repeat(s) checked: {counts}"


def gpu_health_frame(health: pd.DataFrame | None) -> pd.DataFrame:
    """The repeats whose GPUs were flagged, refused or throttled, with the findings (an empty frame when none)."""
    if health is None or health.empty:
        return pd.DataFrame(columns=list(GPU_HEALTH_COLUMNS))
    shown = health[health["verdict"].isin(("flagged", "refused")) | health["throttled"].notna()]
    return shown[list(GPU_HEALTH_COLUMNS)].reset_index(drop=True)


def gpu_health_markdown(health: pd.DataFrame | None) -> str:
    """The GPU health section as markdown with its heading ('' when no repeat was checked)."""
    line = gpu_health_line(health)
    if line is None:
        return ""
    frame = gpu_health_frame(health)
    table = markdown_table(list(frame.columns), frame_rows(frame)) if len(frame) else "No finding."
    return f"### {GPU_HEALTH_TITLE}\n\n{line}\n\n{table}"
