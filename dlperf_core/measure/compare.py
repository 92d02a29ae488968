"""Per-case comparison of two benchmark runs, with the significance of each difference.

Test: **Welch's t-test** on the repeats' throughputs (``scipy.stats.ttest_ind(equal_var=False)``).
Why not Mann-Whitney: with the 2 to 5 repeats a nightly case has, a rank test cannot reach
significance at all (with 2 vs 2 repeats its smallest two-sided p-value is 0.33, with 3 vs 3 it is
0.10), so every difference would read "not significant". Welch's test works from 2 repeats per side
and does not assume equal variances; its normality assumption is reasonable for throughput repeats
of one case on one machine. A case with fewer than 2 ok repeats on a side gets no p-value.

Pure: takes the two runs' ``results`` rows as DataFrames (``ResultStore.results``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
from scipy import stats

ALPHA = 0.05


@dataclass(frozen=True)
class CaseComparison:
    """One case present in run A and/or run B."""

    case_key: str
    n_a: int
    n_b: int
    median_a: float | None
    median_b: float | None
    mean_a: float | None
    mean_b: float | None
    change_pct: float | None  # median B vs median A
    t_statistic: float | None
    p_value: float | None
    significant: bool | None  # None: not testable (too few repeats, or no spread at all)
    note: str = ""


def _figures(values: pd.Series) -> tuple[int, float | None, float | None]:
    if values.empty:
        return 0, None, None
    return int(values.size), float(values.median()), float(values.mean())


def compare_runs(a: pd.DataFrame, b: pd.DataFrame, alpha: float = ALPHA) -> list[CaseComparison]:
    """Compare the ok repeats of each case of run ``a`` with those of run ``b`` (sorted by case)."""
    ok_a = a[a["status"] == "ok"].groupby("case_key")["throughput"]
    ok_b = b[b["status"] == "ok"].groupby("case_key")["throughput"]
    groups_a = {k: v.astype(float) for k, v in ok_a}
    groups_b = {k: v.astype(float) for k, v in ok_b}
    keys = sorted(set(a["case_key"]) | set(b["case_key"]))
    empty = pd.Series(dtype=float)
    out = []
    for key in keys:
        xa, xb = groups_a.get(key, empty), groups_b.get(key, empty)
        n_a, med_a, mean_a = _figures(xa)
        n_b, med_b, mean_b = _figures(xb)
        change = (med_b / med_a - 1.0) * 100.0 if med_a and med_b is not None else None
        t = p = None
        significant: bool | None = None
        note = ""
        if n_a < 2 or n_b < 2:
            note = "fewer than 2 ok repeats on a side: no test"
            if key not in set(a["case_key"]):
                note = "only in B"
            elif key not in set(b["case_key"]):
                note = "only in A"
        elif xa.std() == 0 and xb.std() == 0:
            note = "no spread in either run: no test"
        else:
            result = stats.ttest_ind(xa, xb, equal_var=False)
            t, p = float(result.statistic), float(result.pvalue)
            if math.isnan(p):
                t = p = None
                note = "test undefined"
            else:
                significant = p < alpha
        out.append(CaseComparison(key, n_a, n_b, med_a, med_b, mean_a, mean_b, change, t, p, significant, note))
    return out


def to_frame(rows: list[CaseComparison]) -> pd.DataFrame:
    """The comparison as a DataFrame (one row per case)."""
    columns = list(CaseComparison.__dataclass_fields__)
    return pd.DataFrame([vars(r) for r in rows], columns=columns)


def format_table(rows: list[CaseComparison], run_a: str, run_b: str, alpha: float = ALPHA) -> str:
    """A Markdown table of the comparison, for people."""

    def num(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    lines = [
        f"A = {run_a}",
        f"B = {run_b}",
        f"Welch t-test on the ok repeats; significant when p < {alpha}",
        "",
        "| case | n A | n B | median A | median B | change % | p | significant | note |",
        "| ---- | --- | --- | -------- | -------- | -------- | - | ----------- | ---- |",
    ]
    for r in rows:
        verdict = {True: "yes", False: "no", None: "-"}[r.significant]
        lines.append(
            f"| {r.case_key} | {r.n_a} | {r.n_b} | {num(r.median_a, '.2f')} | {num(r.median_b, '.2f')} | "
            f"{num(r.change_pct, '+.2f')} | {num(r.p_value, '.3g')} | {verdict} | {r.note} |"
        )
    return "\n".join(lines)
