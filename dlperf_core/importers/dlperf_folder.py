"""DLPerf-style result folders: ``{nodes}n{gpus}g/{model}_b{batch}_{precision}_{repeat}.log``.

Reads such a folder (as the original DLPerf scripts wrote them), parses every log with the format
detected, and builds the DLPerf result JSON (per model and case: average_speed, median_speed, speedup,
batch_size_per_device, rounded to 2 decimals), without the original scripts' pitfalls:

* a failed repeat is left out of the median and mean (it was entered as 0);
* a case whose model, precision and batch have no 1n1g result has speedup None (it silently became 1.0);
* precision is part of the key, so two precisions in one folder do not collide (``fp16`` and ``amp`` name
  the same mixed-precision runs and are merged);
* node and GPU counts of any size are read (10n8g broke the original regex).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

_CASE_DIR = re.compile(r"^(\d+)n(\d+)g$")
_LOG_NAME = re.compile(r"^(?P<model>.+?)_b(?P<batch>\d+)_(?P<precision>[A-Za-z0-9]+)_(?P<repeat>\d+)\.log$")
PRECISION_ALIASES = {"fp16": "amp", "mixed": "amp", "amp": "amp", "fp32": "fp32", "tf32": "tf32"}

#: One case's figures in the result JSON: average_speed, batch_size_per_device, median_speed, speedup.
CaseFigures = dict[str, float | None]
#: The DLPerf result JSON: ``{model key: {case: figures}}``.
ResultJson = dict[str, dict[str, CaseFigures]]


@dataclass(frozen=True)
class FolderLog:
    """One repeat's log in a DLPerf folder, with what its path says."""

    path: Path
    model: str
    batch_size_per_device: int
    precision: str
    nodes: int
    gpus_per_node: int
    repeat: int

    @property
    def case(self) -> str:
        return f"{self.nodes}n{self.gpus_per_node}g"


def scan_folder(root: str | Path) -> tuple[list[FolderLog], list[Path]]:
    """Every ``NnMg/<model>_b<batch>_<precision>_<k>.log`` below ``root``, and the .log files that do not
    follow the naming (reported, not guessed)."""
    logs, unnamed = [], []
    for path in sorted(Path(root).rglob("*.log")):
        case = _CASE_DIR.match(path.parent.name)
        name = _LOG_NAME.match(path.name)
        if not (case and name):
            unnamed.append(path)
            continue
        logs.append(
            FolderLog(
                path=path,
                model=name["model"],
                batch_size_per_device=int(name["batch"]),
                precision=PRECISION_ALIASES.get(name["precision"].lower(), name["precision"].lower()),
                nodes=int(case[1]),
                gpus_per_node=int(case[2]),
                repeat=int(name["repeat"]),
            )
        )
    return logs, unnamed


@dataclass(frozen=True)
class RepeatFigure:
    """One repeat's outcome: throughput None when it failed."""

    log: FolderLog
    throughput: float | None


def result_json(figures: list[RepeatFigure]) -> ResultJson:
    """The DLPerf result JSON. Keys are the model name, or ``<model>_b<batch>_<precision>`` when a model
    appears with several batch sizes or precisions (so they cannot collide)."""
    groups: dict[tuple[str, int, str], dict[str, list[float]]] = {}
    for fig in figures:
        key = (fig.log.model, fig.log.batch_size_per_device, fig.log.precision)
        cases = groups.setdefault(key, {})
        values = cases.setdefault(fig.log.case, [])
        if fig.throughput is not None:
            values.append(fig.throughput)
    models = [k[0] for k in groups]
    out: ResultJson = {}
    for (model, batch, precision), cases in groups.items():
        name = model if models.count(model) == 1 else f"{model}_b{batch}_{precision}"
        base = cases.get("1n1g")
        base_median = statistics.median(base) if base else None
        table: dict[str, CaseFigures] = {}
        for case in sorted(cases, key=lambda c: tuple(int(x) for x in _CASE_DIR.match(c).groups())):  # type: ignore[union-attr]
            values = cases[case]
            median = statistics.median(values) if values else None
            table[case] = {
                "average_speed": round(statistics.fmean(values), 2) if values else None,
                "batch_size_per_device": batch,
                "median_speed": round(median, 2) if median is not None else None,
                "speedup": round(median / base_median, 2) if median is not None and base_median else None,
            }
        out[name] = table
    return out
