"""Each table is declared once (its ORM class in dlperf_core.storage.models): the records and typed rows are checked
against it when defined, the one upsert helper writes every table, and the old "probe" names of the fabric
benchmark stay as aliases until their callers move."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from dlperf_core.storage import models, records
from dlperf_core.storage.shape import BOOKKEEPING, ShapeError, column_values, record_of_table, row_of_table
from dlperf_core.storage.sql import id_of, upsert

RECORD_TABLES = {  # record type -> its table, and the fields it carries beside the columns
    records.BenchmarkRunRecord: (models.BenchmarkRun, ()),
    records.ResultRecord: (models.Result, ("benchmark_run", "gpu_health")),
    records.MaxBatchSearchRecord: (models.MaxBatchSearchResult, ()),
    records.FabricRecord: (models.FabricBenchmark, ("sizes",)),
}
FILLED_IN = {records.GpuHealthRecord: (models.GpuHealthSnapshot, ("id", "result_id", "created_at"))}


@pytest.mark.parametrize("record", list(RECORD_TABLES), ids=lambda r: r.__name__)
def test_each_record_is_its_table_less_what_the_store_fills_in(record: type) -> None:
    from dataclasses import fields

    table, beside = RECORD_TABLES[record]
    columns = {c.name for c in table.__table__.columns} - set(BOOKKEEPING)
    assert {f.name for f in fields(record)} == columns | set(beside)


def test_the_health_snapshot_record_is_its_table_less_its_result_and_bookkeeping() -> None:
    from dataclasses import fields

    for record, (table, filled_in) in FILLED_IN.items():
        assert {f.name for f in fields(record)} == {c.name for c in table.__table__.columns} - set(filled_in)


def test_a_row_type_that_drifts_from_its_table_fails_when_defined() -> None:
    with pytest.raises(ShapeError, match=r"missing fields \['created_at'\]"):

        @row_of_table(models.BenchmarkRun)
        @dataclass(frozen=True, kw_only=True)
        class NoCreatedAt:
            id: int
            dag_id: str
            run_id: str
            suite: str
            trigger: str
            runtime: str
            started_at: datetime
            finished_at: datetime | None
            status: str
            triggered_by: str | None
            report_path: str | None

    with pytest.raises(ShapeError, match=r"FabricSizes.size_bytes is str, its column holds int"):

        @row_of_table(models.FabricBenchmarkSize)
        @dataclass(frozen=True)
        class FabricSizes:
            probe_id: int
            size_bytes: str
            time_us: float
            algbw_gbs: float
            busbw_gbs: float

    with pytest.raises(ShapeError, match=r"time_us: None allowed True"):

        @row_of_table(models.FabricBenchmarkSize)
        @dataclass(frozen=True)
        class MaybeTime:
            probe_id: int
            size_bytes: int
            time_us: float | None
            algbw_gbs: float
            busbw_gbs: float


def test_a_record_that_drifts_from_its_table_fails_when_defined() -> None:
    with pytest.raises(ShapeError, match=r"unknown fields \['colour'\]"):

        @record_of_table(models.FabricBenchmarkSize, filled_in=("probe_id",))
        @dataclass(frozen=True)
        class Coloured:
            size_bytes: int
            time_us: float
            algbw_gbs: float
            busbw_gbs: float
            colour: str

    with pytest.raises(ShapeError, match=r"may be None, its column may not and has no default"):

        @record_of_table(models.FabricBenchmarkSize, filled_in=("probe_id",))
        @dataclass(frozen=True)
        class NoSize:
            size_bytes: int | None
            time_us: float
            algbw_gbs: float
            busbw_gbs: float


def test_the_values_a_record_binds_are_its_columns() -> None:
    size = records.FabricSizeRecord(1024, 5.0, 0.2, 0.1)
    assert column_values(size, models.FabricBenchmarkSize) == {
        "size_bytes": 1024,
        "time_us": 5.0,
        "algbw_gbs": 0.2,
        "busbw_gbs": 0.1,
    }


def test_one_upsert_inserts_updates_keeps_and_leaves_alone(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 't.db'}")
    table = sa.Table(
        "t",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("k", sa.Text, nullable=False, unique=True),
        sa.Column("a", sa.Integer),
        sa.Column("b", sa.Integer),
        sa.Column("c", sa.Integer),
    )
    table.metadata.create_all(engine)

    def stored() -> list[Any]:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.select(table.c.k, table.c.a, table.c.b, table.c.c))]

    with engine.begin() as conn:
        upsert(conn, table, {"k": "x", "a": 1, "b": 1, "c": 1}, ("k",))
        first = id_of(conn, table, {"k": "x"}, ("k",))
        upsert(conn, table, {"k": "x", "a": 2, "b": 2}, ("k",), keep=("b",), also={"c": 9})
        assert id_of(conn, table, {"k": "x"}, ("k",)) == first
    assert stored() == [("x", 2, 1, 9)]
    with engine.begin() as conn:
        upsert(conn, table, {"k": "x", "a": 3, "b": 3, "c": 3}, ("k",), update=False)
        upsert(conn, table, {"k": "y", "a": 4, "b": 4, "c": 4}, ("k",), update=False)
    assert stored() == [("x", 2, 1, 9), ("y", 4, 4, 4)]
    engine.dispose()


def test_the_fabric_benchmark_table_keeps_its_name() -> None:
    assert models.FabricBenchmark.__tablename__ == "fabric_probes"  # the table keeps its name: no migration
