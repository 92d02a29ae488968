"""Tests of the window rule (dlperf_core.parsing.window.measure): timestamps or printed rates, the window's
bounds, too few iterations, and that ``measure`` is total."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlperf_core.parsing import IterationRecord, WindowResult, measure
from parsing_checks import SETTINGS


def test_measure_without_timestamps_weights_rates_by_iterations() -> None:
    recs = [
        IterationRecord(5, None, 50.0, 1.0),
        IterationRecord(10, None, 100.0, 1.0),  # covers 6..10
        IterationRecord(20, None, 200.0, 1.0),  # covers 11..20
    ]
    res = measure(recs, warmup=5, measured=None, global_batch=64)
    assert isinstance(res, WindowResult) and res.method == "printed_rates"
    assert res.throughput == pytest.approx(15 / (5 / 100 + 10 / 200)) == pytest.approx(150.0)
    assert res.samples == 15 * 64 and res.seconds == pytest.approx(15 * 64 / 150.0)
    assert res.window == (6, 20) and res.iterations == 15


def test_measure_timestamps() -> None:
    recs = [IterationRecord(i, 100.0 + 0.5 * i, 1.0, 1.0) for i in range(0, 41, 10)]
    res = measure(recs, warmup=10, measured=20, global_batch=8)
    assert isinstance(res, WindowResult) and res.method == "timestamps"
    assert res.window == (11, 30) and res.samples == 160 and res.seconds == pytest.approx(10.0)
    assert res.throughput == pytest.approx(16.0)


def test_measure_bad_times_fall_back_to_rates_and_bad_rates_fail() -> None:
    same_time = [IterationRecord(i, 5.0, 80.0, 1.0) for i in range(1, 11)]
    res = measure(same_time, warmup=2, measured=None, global_batch=8)
    assert isinstance(res, WindowResult) and res.method == "printed_rates" and res.throughput == 80.0
    for bad in (0.0, -3.0, math.inf, math.nan, None):
        recs = [IterationRecord(i, None, bad, 1.0) for i in range(1, 11)]
        assert measure(recs, warmup=2, measured=None, global_batch=8) == "no usable timing in the window"


def test_measure_too_few_iterations() -> None:
    recs = [IterationRecord(i, float(i), 10.0, 1.0) for i in range(1, 51)]
    assert measure(recs, warmup=5, measured=100, global_batch=1) == (
        "too few iterations for the window (got 50, need 105)"
    )
    assert measure(recs, warmup=50, measured=None, global_batch=1) == (
        "too few iterations for the window (got 50, need 51)"
    )
    assert measure([], warmup=5, measured=None, global_batch=1) == ("too few iterations for the window (got 0, need 6)")
    one = [IterationRecord(10, 1.0, 10.0, 1.0)]  # nothing before it to start the clock
    assert measure(one, warmup=5, measured=None, global_batch=1) == (
        "too few iterations for the window (got 10, need 11)"
    )
    with pytest.raises(ValueError):
        measure(recs, warmup=-1, measured=None, global_batch=1)


# ------------------------------------------------------------------------------------ robustness
# Parsing any text never crashes: tests/core/parsing/test_parsing_fuzz.py (every registered format). The rule
# itself:
@SETTINGS
@given(
    st.lists(
        st.builds(
            IterationRecord,
            st.integers(-5, 60),
            st.none() | st.floats(allow_nan=True, allow_infinity=True),
            st.none() | st.floats(allow_nan=True, allow_infinity=True),
            st.none() | st.floats(allow_nan=True, allow_infinity=True),
        ),
        max_size=30,
    ),
    st.integers(0, 20),
    st.none() | st.integers(1, 40),
    st.none() | st.integers(-2, 1000),
)
def test_measure_is_total(recs: list[IterationRecord], warmup: int, measured: int | None, batch: int | None) -> None:
    res = measure(recs, warmup=warmup, measured=measured, global_batch=batch)
    if isinstance(res, WindowResult):
        assert math.isfinite(res.throughput) and res.throughput > 0 and res.iterations > 0
    else:
        assert isinstance(res, str) and res
