"""dlperf compare: Welch's t-test per case (checked against the formula), and the CLI on PostgreSQL."""

from __future__ import annotations

import json
import math
import subprocess
from datetime import UTC, datetime

import pandas as pd
import pytest

from dlperf_core.measure.compare import compare_runs, format_table
from helpers import DLPERF, REPO, cli_env, result_record

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rows(run_id: str, figures: dict[str, list[float | None]]) -> pd.DataFrame:
    """Result rows of one run: None is a failed repeat."""
    return pd.DataFrame(
        [
            {
                "run_id": run_id,
                "case_key": key,
                "repeat": i,
                "status": "ok" if v is not None else "failed",
                "throughput": v,
            }
            for key, values in figures.items()
            for i, v in enumerate(values)
        ]
    )


def welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """Welch's t statistic and degrees of freedom, by the textbook formula."""
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1)
    se2 = va / len(a) + vb / len(b)
    t = (ma - mb) / math.sqrt(se2)
    df = se2**2 / ((va / len(a)) ** 2 / (len(a) - 1) + (vb / len(b)) ** 2 / (len(b) - 1))
    return t, df


def test_a_clear_slowdown_is_significant_and_noise_is_not():
    a = rows("A", {"fast": [1000, 1004, 998, 1001], "same": [500, 507, 495, 502]})
    b = rows("B", {"fast": [950, 948, 953, 951], "same": [503, 497, 505, 499]})
    got = {c.case_key: c for c in compare_runs(a, b)}
    fast, same = got["fast"], got["same"]
    assert fast.significant is True and fast.p_value < 1e-4
    assert fast.change_pct == pytest.approx((950.5 / 1000.5 - 1) * 100)
    t, _ = welch([1000, 1004, 998, 1001], [950, 948, 953, 951])
    assert fast.t_statistic == pytest.approx(t)
    assert same.significant is False and same.p_value > 0.5


def test_untestable_cases_say_why():
    a = rows("A", {"one": [100.0], "flat": [5.0, 5.0], "failed": [None, 7.0], "gone": [1.0, 2.0]})
    b = rows("B", {"one": [90.0, 91.0], "flat": [5.0, 5.0], "failed": [7.1, 7.2], "new": [3.0, 3.1]})
    got = {c.case_key: c for c in compare_runs(a, b)}
    assert got["one"].p_value is None and "fewer than 2" in got["one"].note
    assert got["flat"].significant is None and "no spread" in got["flat"].note
    assert got["failed"].n_a == 1 and got["failed"].significant is None  # the failed repeat is not a zero
    assert got["gone"].note == "only in A" and got["new"].note == "only in B"
    table = format_table(list(got.values()), "A", "B")
    assert "| gone | 2 | 0 |" in table and "Welch" in table


@pytest.mark.postgres
def test_cli_compare_on_postgres(tmp_path, pg_url):
    from dlperf_core.storage import ResultStore

    store = ResultStore(pg_url)
    store.ensure_schema()
    for run_id, values in (("night-1", [1000.0, 1003.0, 997.0]), ("night-2", [940.0, 944.0, 938.0])):
        store.upsert_results(
            [
                result_record(run_id=run_id, case_key="pt/r50/amp/b256/1n8g", repeat=i, throughput=v, started_at=T0)
                for i, v in enumerate(values)
            ]
        )
    store.dispose()
    env = cli_env(tmp_path, pg_url)
    out = subprocess.run(
        [*DLPERF, "compare", "night-1", "night-2", "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["significant"] is True and row["change_pct"] == pytest.approx(-6.0)
    text = subprocess.run(
        [*DLPERF, "compare", "night-1", "night-2"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert "| pt/r50/amp/b256/1n8g | 3 | 3 | 1000.00 | 940.00 | -6.00 |" in text.stdout
    missing = subprocess.run(
        [*DLPERF, "compare", "night-1", "nope"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 2 and "no results for run nope" in missing.stderr
