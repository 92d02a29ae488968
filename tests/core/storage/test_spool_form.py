"""The spool's JSON form is generated from the record type (``ResultRecord.to_json``): files that dlperf wrote
before that (``tests/data/spool/*.json``, written by the hand-written form of the commit before it) read back
as the same records, and the generated form writes them again byte for byte."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dlperf_core.storage import BenchmarkRunRecord, ResultRecord
from dlperf_core.storage.spool import record_from_json, record_to_json

SPOOL_FILES = Path(__file__).resolve().parents[2] / "data" / "spool"
T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)

RUN: dict[str, Any] = dict(
    dag_id="dlperf_benchmark",
    run_id="scheduled__2026-01-01T02:00:00+00:00",
    suite="seeds",
    trigger="scheduled",
    runtime="docker",
    started_at=T0,
    triggered_by="scheduler",
)
RECORDS: dict[str, dict[str, Any]] = {
    # everything filled in, with its run
    "full": dict(
        dag_id=RUN["dag_id"],
        run_id=RUN["run_id"],
        case_key="pytorch_reference/resnet50_v1.5/amp/b64/1n2g+compile+args=1f0c9a2e",
        framework="pytorch_reference",
        model="resnet50_v1.5",
        precision="amp",
        batch_size_per_device=64,
        nodes=1,
        gpus_per_node=2,
        repeat=2,
        status="ok",
        throughput=1234.5,
        reported_throughput=1200.0,
        iterations=90,
        log_path="/data/logs/run/node0.log",
        started_at=T0,
        finished_at=datetime(2026, 1, 1, 2, 5, 30, 123456, tzinfo=UTC),
        environment_id=7,
        gpu_memory_peak_mb=30512.0,
        window_first=11,
        window_last=100,
        window_fitted=False,
        compile=True,
        mfu=0.41,
        energy_per_sample_j=0.25,
        gpu_power_mean_w=612.5,
        figure_origin="framework",
        configuration={"framework": "pytorch_reference", "extra_args": ["--epochs", "1"], "env": {"A": "1"}},
        launch_spec={"nodes": [{"name": "node0", "command": ["python", "train.py"], "env": {}}]},
        oversubscription=None,
        benchmark_run=RUN,
    ),
    # a failed repeat without its run, a naive start (taken as UTC when stored), oversubscribed
    "failed": dict(
        dag_id="cli",
        run_id="cli__20260101T020000",
        case_key="oneflow/resnet50/fp32/b8/1n1g",
        framework="oneflow",
        model="resnet50",
        precision="fp32",
        batch_size_per_device=8,
        nodes=1,
        gpus_per_node=1,
        repeat=0,
        status="failed",
        reason="exit code 137: OOM killed",
        started_at=datetime(2026, 1, 1, 2, 0),
        oversubscription="4 ranks on 2 cores",
    ),
}


def record(name: str) -> ResultRecord:
    values = dict(RECORDS[name])
    run = values.pop("benchmark_run", None)
    return ResultRecord(**values, benchmark_run=None if run is None else BenchmarkRunRecord(**run))


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_a_spool_file_written_before_the_generated_form_reads_back(name: str) -> None:
    text = (SPOOL_FILES / f"{name}.json").read_text()
    assert record_from_json(text) == record(name)
    assert record_to_json(record(name)) == text  # the generated form is the text dlperf wrote before


def test_an_unknown_field_is_a_bad_file() -> None:
    text = (SPOOL_FILES / "failed.json").read_text().replace('"dag_id"', '"dag_idd"')
    with pytest.raises(ValueError, match="dag_idd"):
        record_from_json(text)


if __name__ == "__main__":  # writes the files, with the code of the commit before the generated form
    for name in RECORDS:
        (SPOOL_FILES / f"{name}.json").write_text(record_to_json(record(name)))
