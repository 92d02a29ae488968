"""A run's report beside the imported MLPerf Training systems: the section appears once `dlperf import` stored a
round, with the systems of the same accelerator and nearest count (per accelerator), CPU-only per node."""

from __future__ import annotations

import subprocess

import pytest

from dlperf_core.importers.mlperf import MlperfSystem
from dlperf_core.reporting import build_report
from dlperf_core.reporting.tables import MLPERF_TITLE
from dlperf_core.storage import ResultStore
from helpers import DLPERF, REPO, SHARED, result_record, run_record

V1 = SHARED / "mlperf" / "training_v1.0"
pytestmark = pytest.mark.skipif(not (V1 / "resnet_scores.csv").is_file(), reason=f"no MLPerf results at {V1}")


def _a_run(store: ResultStore) -> None:
    """One run: ResNet-50 on 8 A100 SXM 80 GB (as nvidia-smi names them) at 20,000 img/s, and on 2 CPU nodes."""
    run = run_record()
    store.upsert_run(run)
    a100 = MlperfSystem.from_description(
        '{"accelerator_model_name": "NVIDIA A100-SXM4-80GB", "accelerators_per_node": "8"}', "-", "-"
    ).environment()
    gpu = store.upsert_environment(a100)
    store.upsert_results(
        [
            result_record(
                case_key="pytorch_reference/resnet50_v1.5/amp/b256/1n8g",
                throughput=20_000.0,
                environment_id=gpu,
                benchmark_run=run,
            ),
            result_record(case_key="pytorch_reference/resnet50_v1.5/fp32/b8/2n1g", throughput=60.0, benchmark_run=run),
        ]
    )


def test_the_report_puts_the_run_beside_the_imported_mlperf_systems(sqlite_url, tmp_path):
    store = ResultStore(sqlite_url)
    store.ensure_schema()
    try:
        _a_run(store)
        before = build_report(store, fmt="md", out_dir=tmp_path / "before").main.read_text()
        assert MLPERF_TITLE not in before  # nothing imported: no section

        out = subprocess.run(
            [*DLPERF, "import", str(V1), "--db", sqlite_url], capture_output=True, text=True, cwd=REPO, timeout=600
        )
        assert out.returncode == 0, out.stderr[-3000:]
        files = build_report(store, fmt=["md", "html"], out_dir=tmp_path / "after")
        markdown = files.documents["md"].read_text()
        html = files.documents["html"].read_text()
    finally:
        store.dispose()
    assert MLPERF_TITLE in markdown and "Beside MLPerf Training" in html
    lines = markdown.splitlines()
    gpu = [line for line in lines if "/1n8g" in line and "nvidia a100 sxm 80gb" in line]
    assert any("NVIDIA dgxa100_ngc21.05_mxnet" in line and "| 8 " in line for line in gpu), gpu
    assert all("2,500" in line or "2500" in line for line in gpu)  # 20,000 img/s over 8 GPUs
    cpu = [line for line in lines if "/2n1g" in line and "CPU only" in line]
    assert len(cpu) == 1 and "Intel 2-nodes-16s-8376H-tensorflow" in cpu[0], cpu
