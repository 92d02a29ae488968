"""End to end on the embedded default: `dlperf run` -> dag.test() -> local processes -> parse -> PostgreSQL."""

import math
import subprocess
from pathlib import Path

import pytest

from dlperf_core.parsing import detect_format, parse_log
from e2e_helpers import run_suite
from helpers import DLPERF, REPO, cli_env

pytestmark = pytest.mark.postgres


def test_local_runtime_smoke_suite_lands_in_postgres(tmp_path, pg_url):
    run = run_suite(tmp_path, pg_url, "suites/smoke.yaml", "--runtime", "local", "--repeats", "1", timeout=900)
    assert "| node_num | gpu_num_per_node | batch_size_per_device |" in run.stdout
    rows = run.results()
    assert len(rows) == 3 and set(rows["status"]) == {"ok"}
    assert all(math.isfinite(t) and t > 0 for t in rows["throughput"])
    assert all(r > 0 for r in rows["reported_throughput"])
    assert all((tmp_path / "logs").rglob("node0.log"))
    summary = run.store.summary(run_id=run.run_id)
    assert sorted(zip(summary["nodes"], summary["gpus_per_node"])) == [(1, 1), (1, 2), (2, 1)]
    one = summary[(summary["nodes"] == 1) & (summary["gpus_per_node"] == 1)].iloc[0]
    assert one["speedup"] == pytest.approx(1.0)
    assert summary["speedup"].notna().all() and set(summary["baseline_of"]) == {"this run"}
    # --repeats 1: every row says so (a row may give a second reason too: on a loaded 2-core machine the CPU
    # stand-ins' 1n2g once measured a speedup of 2.10, "speedup 2.10 > 2 devices; single repeat")
    assert all("single repeat" in str(reason).split("; ") for reason in summary["unreliable_reason"])
    # the figures in the printed table are the ones stored
    assert f"{one['median_throughput']:.2f}" in run.stdout
    # each table names its configuration's fingerprint, the one stored, as README.md shows it
    (fingerprint,) = {key.split("+args=")[1] for key in rows["case_key"]}
    assert f"configuration args={fingerprint}\n" in run.stdout
    assert f"configuration args={fingerprint}\n" in (REPO / "README.md").read_text()
    stored = rows.iloc[0]["configuration"]
    assert stored["extra_args"] == ["--image-size", "64", "--width", "16", "--device", "cpu"]
    assert (stored["warmup_iterations"], stored["measured_iterations"]) == (5, 30)
    # node 0's log also holds MLPerf's MLLOG events: read as MLLOG and as the seed format (DLLogger), it gives
    # the same throughput, the one stored
    for log, throughput in zip(rows["log_path"], rows["throughput"]):
        text = Path(log).read_text()
        (mllog,) = parse_log(text, format="mlperf_mllog")
        (seed,) = parse_log(text, format="ngc_pytorch_dllogger", warmup=5, measured=30)
        assert detect_format(text) == "mlperf_mllog" and mllog.status == seed.status == "ok", (mllog, seed)
        assert mllog.throughput == pytest.approx(seed.throughput, rel=1e-4)  # float seconds vs whole ms
        assert seed.throughput == pytest.approx(throughput)


def test_bad_suite_is_refused_before_anything_runs(tmp_path, pg_url):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\nbenchmarks:\n  - {framework: pytorch_reference, model: resnet50_v1.5, topologies: [2x], batch_size_per_device: 8}\n"
    )
    out = subprocess.run(
        [*DLPERF, "run", str(bad)], cwd=REPO, env=cli_env(tmp_path, pg_url), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2
    assert str(bad) in out.stderr and "benchmarks[0].topologies[0]" in out.stderr
    assert not (tmp_path / "airflow").exists()  # refused before Airflow started
