"""The report as JSON: the run, and per framework the DLPerf result JSON (per model and case:
average_speed, median_speed, speedup, batch_size_per_device, 2 decimals) built by
:func:`dlperf_core.importers.dlperf_folder.result_json` from the run's repeats, plus the case summary (with each case's
``cv``, ``unreliable``, ``unreliable_reason`` and ``figure_origin``, and the rule under ``unreliable_rule``) and
the run's regressions and the per-node sweeps' node scores (``nodes``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from dlperf_core.importers.dlperf_folder import FolderLog, RepeatFigure, ResultJson, result_json
from dlperf_core.measure.noise import MAX_RELIABLE_CV, UNRELIABLE_RULE
from dlperf_core.reporting.data import ReportData, records
from dlperf_core.reporting.tables import case_origins


def repeat_figures(results: pd.DataFrame) -> list[RepeatFigure]:
    """The run's repeats as the DLPerf JSON builder's input (a failed repeat has no throughput)."""
    figures = []
    for r in results.itertuples():
        log = FolderLog(
            path=Path(r.log_path or ""),
            model=r.model,
            batch_size_per_device=int(r.batch_size_per_device),
            precision=r.precision,
            nodes=int(r.nodes),
            gpus_per_node=int(r.gpus_per_node),
            repeat=int(r.repeat),
        )
        figures.append(RepeatFigure(log, float(r.throughput) if r.status == "ok" else None))
    return figures


def dlperf_result_json(results: pd.DataFrame) -> dict[str, ResultJson]:
    """``{framework: DLPerf result JSON}``: one DLPerf JSON per framework, as each seed report had."""
    if results.empty:
        return {}
    return {
        str(framework): result_json(repeat_figures(group))
        for framework, group in results.groupby("framework", sort=True)
    }


def report_json(data: ReportData) -> dict[str, Any]:
    """The JSON document of one run's report."""
    regressions = data.regressions
    if not regressions.empty:
        regressions = regressions[regressions["run_id"] == data.run.run_id]
    ok = int((data.results["status"] == "ok").sum()) if not data.results.empty else 0
    origins = case_origins(data.results)
    return {
        "run": data.run.to_json(),
        "repeats": {"ok": ok, "failed": int(len(data.results) - ok)},
        "dlperf": dlperf_result_json(data.results),
        # per case: cv, unreliable, unreliable_reason among the figures, and figure_origin (who printed the lines
        # its figure was read from: framework | dlperf | imported, None when unknown)
        "cases": [{**case, "figure_origin": origins.get(case["case_key"])} for case in records(data.summary)],
        "unreliable_rule": {"max_cv": MAX_RELIABLE_CV, "rule": UNRELIABLE_RULE},
        "failed_repeats": records(data.failed_repeats),
        # the per-node sweeps: each node against its peers (slower_than, rule, scores; slow: the nodes named)
        "nodes": {**data.nodes.to_json(), "slow": [s.to_json() for s in data.nodes.slow]},
        # each repeat's GPU health snapshot: verdict (ok | flagged | refused | no_gpus), findings, throttling
        "gpu_health": records(data.gpu_health),
        "regressions": records(regressions),
    }


def render_json(data: ReportData) -> str:
    def strict(value: Any) -> Any:  # json.dumps would write NaN, which is not JSON
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: strict(v) for k, v in value.items()}
        if isinstance(value, list):
            return [strict(v) for v in value]
        return value

    return json.dumps(strict(report_json(data)), indent=2, sort_keys=True, allow_nan=False) + "\n"
