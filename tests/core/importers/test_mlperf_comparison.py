"""A configuration beside the field's record (dlperf_core.importers.mlperf_comparison), over MLPerf Training v1.0 imported
with ``dlperf import`` into SQLite: the systems of the same accelerator and nearest count, per accelerator;
CPU-only per node; no matching system said so."""

from __future__ import annotations

import subprocess

import pytest

from dlperf_core.importers.mlperf_comparison import FieldSystem, beside_the_record, field_systems
from dlperf_core.storage import ResultStore
from helpers import DLPERF, REPO, SHARED

V1 = SHARED / "mlperf" / "training_v1.0"


@pytest.fixture(scope="module")
def systems(tmp_path_factory: pytest.TempPathFactory) -> list[FieldSystem]:
    if not (V1 / "resnet_scores.csv").is_file():
        pytest.skip(f"no MLPerf results at {V1}")
    db = f"sqlite:///{tmp_path_factory.mktemp('mlperf') / 'r.db'}"
    out = subprocess.run([*DLPERF, "import", str(V1), "--db", db], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    store = ResultStore(db)
    try:
        return field_systems(store, "1.0.0")
    finally:
        store.dispose()


def test_every_imported_system_has_a_median_throughput_and_a_score(systems):
    assert len(systems) == 35
    assert all(s.throughput is not None and s.throughput > 0 and s.score_minutes for s in systems)


def test_eight_a100_sxm_80gb_as_nvidia_smi_names_them_find_the_8_gpu_systems_of_that_chip(systems):
    beside = beside_the_record(
        accelerator_name="NVIDIA A100-SXM4-80GB", accelerators=8, nodes=1, throughput=20_000.0, systems=systems
    )
    assert beside.unit == "accelerator" and beside.per_unit == 2_500.0 and beside.note is None
    folders = {n.system.system_folder for n in beside.neighbours}
    assert "dgxa100_ngc21.05_mxnet" in folders and "nf5488a5_mxnet" in folders
    assert all(n.system.accelerators == 8 for n in beside.neighbours)
    assert "nf5488m6_mxnet" not in folders  # A100-SXM4-40GB: another memory size
    for n in beside.neighbours:
        assert n.system.throughput is not None and n.per_unit == pytest.approx(n.system.throughput / 8)
        assert 2_000 < n.per_unit < 4_000  # an A100's ResNet-50 rate in these logs


def test_one_gpu_finds_the_smallest_systems_of_its_chip_and_another_chip_finds_none(systems):
    one = beside_the_record(
        accelerator_name="NVIDIA A100-SXM4-80GB", accelerators=1, nodes=1, throughput=2_600.0, systems=systems
    )
    assert {n.system.accelerators for n in one.neighbours} == {4}  # no smaller A100 SXM 80 GB system was submitted
    h100 = beside_the_record(
        accelerator_name="NVIDIA H100 80GB HBM3", accelerators=1, nodes=1, throughput=3_900.0, systems=systems
    )
    assert h100.neighbours == () and h100.note == "no MLPerf system of resnet with nvidia h100 sxm 80gb imported"


def test_a_cpu_only_configuration_is_compared_per_node_with_the_cpu_systems(systems):
    cpu = beside_the_record(accelerator_name=None, accelerators=0, nodes=2, throughput=100.0, systems=systems)
    assert cpu.unit == "node" and cpu.per_unit == 50.0 and cpu.accelerator is None
    assert [n.system.system_folder for n in cpu.neighbours] == ["2-nodes-16s-8376H-tensorflow"]
    assert cpu.neighbours[0].per_unit == pytest.approx(cpu.neighbours[0].system.throughput / 2)
    none = beside_the_record(accelerator_name=None, accelerators=0, nodes=1, throughput=1.0, systems=[])
    assert none.neighbours == () and none.note == "no CPU-only MLPerf system of resnet imported"
