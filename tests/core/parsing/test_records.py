"""Tests of the records a parser keeps (dlperf_core.parsing.records): columns that read as records."""

from __future__ import annotations

import math

import pytest

from dlperf_core.parsing import IterationRecord, measure
from dlperf_core.parsing.failures import loss_failure


def test_record_columns_read_as_records_and_measure_alike() -> None:
    from dlperf_core.parsing import RecordColumns

    records = tuple(IterationRecord(i, 1000.0 + 0.5 * i, 200.0 + i, 7.0 - 0.01 * i, 0, i // 10) for i in range(1, 31))
    cols = RecordColumns.of(records)
    assert len(cols) == 30 and cols == records and records == tuple(cols) and cols[-1] == records[-1]
    assert cols[2:5] == records[2:5] and list(cols) == list(records)
    with pytest.raises(IndexError):
        cols[30]
    bare = RecordColumns([1, 2], [None, None], [1.0, 2.0], [None, float("nan")])  # no rank or epoch column
    assert bare[0] == IterationRecord(1, None, 1.0, None, None, None) and math.isnan(bare[1].loss)
    for window in ((5, 10), (5, None), (0, 20), (29, 1), (25, 10)):
        for fit in (False, True):
            for batch in (None, 64):
                a = measure(records, warmup=window[0], measured=window[1], global_batch=batch, fit=fit)
                b = measure(cols, warmup=window[0], measured=window[1], global_batch=batch, fit=fit)
                assert a == b, (window, fit, batch)
    shuffled = records[10:] + records[:10] + records[3:4]  # out of order, with a repeated number
    assert (
        measure(shuffled, warmup=5, measured=20, global_batch=64)
        == measure(RecordColumns.of(shuffled), warmup=5, measured=20, global_batch=64)
        == measure(records, warmup=5, measured=20, global_batch=64)
    )
    assert loss_failure(bare) == "loss is NaN/inf at iteration 2"
