"""Reports from a real results database (SQLite and PostgreSQL): seed-shaped tables with the right
speedups, the DLPerf result JSON, PNG plots that are real images, a self-contained HTML page, and
`dlperf report` on the command line. The last test runs the DAG with a failing case: the run stays
failed and still gets its report."""

from __future__ import annotations

import base64
import io
import json
import random
import re
import statistics
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from PIL import Image

from dlperf_core.reporting import (
    ReportError,
    build_report,
    load_report_data,
    report_dir,
    seed_table_frames,
    seed_tables,
)
from dlperf_core.reporting.data import RunInfo
from dlperf_core.reporting.tables import seed_columns, side_by_side_frame
from dlperf_core.storage import ResultStore
from helpers import DLPERF, REPO, cli_env, result_record, run_record

DAG = "dlperf_benchmark"
NIGHT1 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
NIGHTS = {f"scheduled__{(NIGHT1 + timedelta(days=k)).isoformat()}": NIGHT1 + timedelta(days=k) for k in range(2)}
LATEST = list(NIGHTS)[-1]
TOPOLOGIES = [(1, 1), (1, 4), (1, 8), (2, 8), (4, 8)]
# (framework, precision, batch, 1n1g samples/s, per-GPU scaling efficiency at 32 GPUs): seed-like figures
CONFIGS = [
    ("pytorch_reference", "fp32", 128, 367.3, 0.93),
    ("pytorch_reference", "amp", 256, 802.9, 0.88),
    ("ngc_mxnet", "fp32", 128, 389.8, 0.95),
]
REPEATS = 5
FAILED = ("ngc_mxnet", "fp32", 128, (2, 8), 3)  # this repeat failed (out of memory) on the latest night


def _throughput(rng: random.Random, base: float, eff32: float, gpus: int, night: int) -> float:
    efficiency = 1 - (1 - eff32) * (gpus - 1) / 31
    slowdown = 0.9 if night == 1 and gpus == 32 else 1.0  # the second night is 10 % slower at 4n8g
    return base * gpus * efficiency * slowdown * rng.uniform(0.99, 1.01)


def fill_store(url: str) -> dict[tuple, list[float]]:
    """Two scheduled nights of 3 configurations x 5 topologies x 5 repeats, one repeat failed; returns the
    latest night's ok throughputs per (framework, precision, batch, (nodes, gpus))."""
    rng = random.Random(20260301)
    store = ResultStore(url)
    store.ensure_schema()
    latest: dict[tuple, list[float]] = {}
    for night, (run_id, started) in enumerate(NIGHTS.items()):
        run = run_record(
            dag_id=DAG,
            run_id=run_id,
            suite="resnet50-gpu",
            trigger="scheduled",
            started_at=started,
            finished_at=started + timedelta(hours=3),
            status="failed" if night else "success",
        )
        store.upsert_run(run)
        rows = []
        for framework, precision, batch, base, eff in CONFIGS:
            for nodes, gpn in TOPOLOGIES:
                case_key = f"{framework}/resnet50_v1.5/{precision}/b{batch}/{nodes}n{gpn}g"
                for repeat in range(REPEATS):
                    failed = night == 1 and (framework, precision, batch, (nodes, gpn), repeat) == FAILED
                    value = None if failed else _throughput(rng, base, eff, nodes * gpn, night)
                    if night == 1 and value is not None:
                        latest.setdefault((framework, precision, batch, (nodes, gpn)), []).append(value)
                    rows.append(
                        result_record(
                            case_key=case_key,
                            repeat=repeat,
                            status="failed" if failed else "ok",
                            reason="out of memory" if failed else None,
                            throughput=value,
                            reported_throughput=value,
                            iterations=None if failed else 100,
                            log_path=f"/logs/{run_id}/{case_key}/r{repeat}/node0.log",
                            started_at=started + timedelta(minutes=repeat),
                            benchmark_run=run,
                        )
                    )
        store.upsert_results(rows)
    record_regression(store, latest)  # the 4n8g slowdown as the detector records it
    store.dispose()
    return latest


def record_regression(store: ResultStore, latest: dict[tuple, list[float]]) -> None:
    from dlperf_core.measure.regression import Verdict
    from dlperf_core.storage.rows import Configuration

    framework, precision, batch = "pytorch_reference", "fp32", 128
    now = statistics.median(latest[(framework, precision, batch, (4, 8))])
    before = now / 0.9
    configuration = Configuration(
        framework=framework,
        model="resnet50_v1.5",
        precision=precision,
        batch_size_per_device=batch,
        variant="",
        nodes=4,
        gpus_per_node=8,
    )
    verdict = Verdict(
        kind="new",
        night=NIGHTS[LATEST].date(),
        run_id=LATEST,
        median_throughput=now,
        baseline_median=before,
        baseline_mad=before * 0.004,
        baseline_nights=1,
        change_pct=(now / before - 1) * 100,
        robust_z=-17.0,
        direction="slower",
    )
    key = f"{framework}/resnet50_v1.5/{precision}/b{batch}/4n8g"
    store.record_regression(DAG, LATEST, key, configuration, verdict)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def filled(request):
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    return url, fill_store(url)


def _png_ok(data: bytes) -> tuple[int, int]:
    """Check a PNG is a real, non-trivial image; return its size."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000, len(data)
    with Image.open(io.BytesIO(data)) as image:
        image.verify()
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
        assert width >= 600 and height >= 350, image.size
        colors = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colors is not None and len(colors) > 50  # lines, text and markers, not a blank canvas
    return width, height


def test_the_report_jsons_run_is_generated_with_the_times_as_isoformat_writes_them():
    """The ``run`` of the report JSON is RunInfo's generated form; its times keep the text the hand-written form
    gave them (``+00:00``, not pydantic's ``Z``), so report.json files read the same as before."""
    info = RunInfo(
        "d", "r", "suites/smoke.yaml", "manual", "local", "success", datetime(2024, 5, 1, 2, tzinfo=UTC), None
    )
    assert info.to_json() == {
        "dag_id": "d",
        "run_id": "r",
        "suite": "suites/smoke.yaml",
        "trigger": "manual",
        "runtime": "local",
        "status": "success",
        "started_at": "2024-05-01T02:00:00+00:00",
        "finished_at": None,
    }
    assert RunInfo.from_json(json.loads(json.dumps(info.to_json()))) == info


def test_seed_tables_have_the_seed_columns_and_the_right_speedups(filled):
    url, latest = filled
    store = ResultStore(url)
    tables = seed_table_frames(store.summary(run_id=LATEST, dag_id=DAG))
    assert [(t.framework, t.precision, t.batch_size_per_device) for t in tables] == [
        ("ngc_mxnet", "fp32", 128),
        ("pytorch_reference", "amp", 256),
        ("pytorch_reference", "fp32", 128),
    ]
    for table in tables:
        assert list(table.frame.columns) == seed_columns(table.framework)
        assert list(zip(table.frame["node_num"], table.frame["gpu_num_per_node"])) == TOPOLOGIES
        key = (table.framework, table.precision, table.batch_size_per_device)
        base = statistics.median(latest[(*key, (1, 1))])
        for row in table.frame.itertuples(index=False):
            values = latest[(*key, (row.node_num, row.gpu_num_per_node))]
            assert row[3] == pytest.approx(statistics.median(values))
            assert row.speedup == pytest.approx(statistics.median(values) / base)
            assert row.n == len(values)
            assert row.failed == (1 if (*key, (row.node_num, row.gpu_num_per_node), 3) == FAILED else 0)
            assert row.speedup_vs == "this run"
            assert row[8] == pytest.approx(statistics.stdev(values) / statistics.fmean(values) * 100)  # cv(%)
            assert row.unreliable == ""  # +-1 % noise and sub-linear scaling: nothing flagged
    text = seed_tables(store.summary(run_id=LATEST, dag_id=DAG))
    assert (
        "| node_num | gpu_num_per_node | batch_size_per_device | samples/s(ngc_mxnet) | speedup | speedup_vs | n | failed "
        "| cv(%) | unreliable |" in text
    )
    assert "unreliable: CV" not in text  # the rule is spelled out only under tables that flag a row
    assert "### pytorch_reference resnet50_v1.5 amp batch 256 (median of repeats)" in text


def test_frameworks_side_by_side_per_precision(filled):
    url, latest = filled
    summary = ResultStore(url).summary(run_id=LATEST, dag_id=DAG)
    fp32 = side_by_side_frame(summary, "fp32")
    assert list(fp32.columns) == [
        "node_num",
        "gpu_num_per_node",
        "samples/s(ngc_mxnet)",
        "speedup(ngc_mxnet)",
        "samples/s(pytorch_reference)",
        "speedup(pytorch_reference)",
    ]
    assert list(zip(fp32["node_num"], fp32["gpu_num_per_node"])) == TOPOLOGIES
    for row in fp32.itertuples(index=False):
        for i, framework in ((2, "ngc_mxnet"), (4, "pytorch_reference")):
            values = latest[(framework, "fp32", 128, (row.node_num, row.gpu_num_per_node))]
            base = statistics.median(latest[(framework, "fp32", 128, (1, 1))])
            assert row[i] == pytest.approx(statistics.median(values))
            assert row[i + 1] == pytest.approx(statistics.median(values) / base)
    amp = side_by_side_frame(summary, "amp")  # only pytorch_reference ran AMP
    assert list(amp.columns) == [
        "node_num",
        "gpu_num_per_node",
        "samples/s(pytorch_reference)",
        "speedup(pytorch_reference)",
    ]
    text = seed_tables(summary)
    assert "### Frameworks side by side, fp32" in text and "### Frameworks side by side, amp" in text
    one = summary[summary["framework"] == "ngc_mxnet"]
    assert "side by side" not in seed_tables(one)  # one framework: its own table is enough


def test_every_format_renders_with_real_plots(filled, tmp_path):
    url, latest = filled
    store = ResultStore(url)
    out = tmp_path / "report"
    files = build_report(store, LATEST, fmt=["html", "md", "json"], out_dir=out)
    assert files.run_id == LATEST and files.main == out / "report.html"
    kinds = sorted(p.kind for p in files.plots)
    # scaling and framework comparison per model/precision/batch (2); history per configuration (3)
    assert kinds == sorted(["scaling"] * 2 + ["frameworks"] * 2 + ["history"] * 3)
    for plot in files.plots:
        assert plot.path.parent == out / "plots"
        _png_ok(plot.path.read_bytes())

    page = (out / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<table>") >= 4  # run tables: failed repeats + 3 seed tables
    assert "<th>samples/s(pytorch_reference)</th><th>speedup</th>" in page
    assert "out of memory" in page  # the failed repeat and its reason
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(embedded) == len(files.plots)  # self-contained: every plot inside the page
    for data in embedded:
        _png_ok(base64.b64decode(data))
    assert "No history yet" not in page  # the recorded regression is in the page's table and the JSON
    assert "Regressions found at this run" in page and "pytorch_reference/resnet50_v1.5/fp32/b128/4n8g" in page

    markdown = (out / "report.md").read_text()
    for plot in files.plots:
        assert f"](plots/{plot.path.name})" in markdown
    assert "| 4        | 8                | 256                   |" in markdown

    doc = json.loads((out / "report.json").read_text())
    assert doc["run"]["run_id"] == LATEST and doc["run"]["status"] == "failed"
    assert doc["repeats"] == {"ok": 3 * 5 * 5 - 1, "failed": 1}
    mxnet = doc["dlperf"]["ngc_mxnet"]["resnet50_v1.5"]  # one configuration of that framework: keyed by model
    values = latest[("ngc_mxnet", "fp32", 128, (2, 8))]
    assert len(values) == 4  # the failed repeat is left out, not counted as 0
    assert mxnet["2n8g"] == {
        "average_speed": round(statistics.fmean(values), 2),
        "batch_size_per_device": 128,
        "median_speed": round(statistics.median(values), 2),
        "speedup": round(statistics.median(values) / statistics.median(latest[("ngc_mxnet", "fp32", 128, (1, 1))]), 2),
    }
    assert set(doc["dlperf"]["pytorch_reference"]) == {"resnet50_v1.5_b128_fp32", "resnet50_v1.5_b256_amp"}
    assert list(mxnet) == ["1n1g", "1n4g", "1n8g", "2n8g", "4n8g"]
    assert doc["failed_repeats"][0]["reason"] == "out of memory"
    assert [(r["case_key"], r["direction"]) for r in doc["regressions"]] == [
        ("pytorch_reference/resnet50_v1.5/fp32/b128/4n8g", "slower")
    ]
    assert doc["regressions"][0]["change_pct"] == pytest.approx(-10.0)


def test_an_older_run_and_the_latest_one_are_told_apart(filled, tmp_path):
    url, _ = filled
    first = build_report(ResultStore(url), list(NIGHTS)[0], fmt="json", out_dir=tmp_path / "first")
    latest = build_report(ResultStore(url), None, fmt="json", out_dir=tmp_path / "latest")
    assert first.run_id == list(NIGHTS)[0] and latest.run_id == LATEST
    assert first.plots == () and sorted(p.name for p in (tmp_path / "first").iterdir()) == ["report.json"]
    older = load_report_data(ResultStore(url), list(NIGHTS)[0])
    if older.history is not None:  # the history of an older run stops at that run's night
        assert len(older.history) == 15 and set(older.history["run_id"]) == {list(NIGHTS)[0]}
        assert len(load_report_data(ResultStore(url), LATEST).history) == 30


def test_bad_requests_get_a_clear_error_and_write_nothing(sqlite_url, tmp_path):
    store = ResultStore(sqlite_url)
    store.ensure_schema()
    with pytest.raises(ReportError, match="any benchmark run"):
        build_report(store, None, fmt="html", out_dir=tmp_path / "empty")
    fill_store(sqlite_url)
    with pytest.raises(ReportError, match="no run 'nope'"):
        build_report(store, "nope", fmt="html", out_dir=tmp_path / "nope")
    with pytest.raises(ReportError, match="unknown report format"):
        build_report(store, LATEST, fmt="pdf", out_dir=tmp_path / "pdf")
    assert not any((tmp_path / name).exists() for name in ("empty", "nope", "pdf"))


def test_report_dir_is_safe_for_any_run_id(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_REPORT_DIR", str(tmp_path))
    path = report_dir(DAG, "manual__2026-03-02T02:00:00+00:00")
    assert path == tmp_path / DAG / "manual__2026-03-02T02_00_00_00_00"
    assert report_dir(DAG, "../../etc").parent == tmp_path / DAG


def test_cli_report_latest_html(sqlite_url, tmp_path):
    url = sqlite_url
    fill_store(url)
    out = tmp_path / "cli-report"
    env = cli_env(tmp_path, url)

    def report(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*DLPERF, "report", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
        )

    done = report("--latest", "--format", "html", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"report of {DAG} / {LATEST}: {out / 'report.html'}" in done.stderr
    assert (out / "report.html").stat().st_size > 100_000
    for png in (out / "plots").glob("*.png"):
        _png_ok(png.read_bytes())
    first = report("--run", list(NIGHTS)[0], "--format", "json", "--out", str(tmp_path / "json"))
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout)["run"]["run_id"] == list(NIGHTS)[0]
    bad = report("--run", "nope", "--out", str(tmp_path / "bad"))
    assert bad.returncode == 2 and "no run 'nope'" in bad.stderr
    assert not (tmp_path / "bad").exists()


def test_a_failed_run_stays_failed_and_still_gets_its_report(tmp_path, sqlite_url):
    """The DAG's make_report runs after a failed finish_run, writes the report, and does not turn the
    DAG run green (it is a teardown, so finish_run decides the run's state)."""
    suite = tmp_path / "failing.yaml"
    suite.write_text(
        (REPO / "suites" / "smoke.yaml")
        .read_text()
        .replace("topologies: [1n1g, 1n2g, 2n1g]", "topologies: [1n1g]")
        .replace("extra_args: [", "extra_args: [--no-such-option, ")
    )
    reports = tmp_path / "reports"
    done = subprocess.run(
        [*DLPERF, "run", str(suite), "--runtime", "local", "--repeats", "1"],
        cwd=REPO,
        env=cli_env(tmp_path, sqlite_url, DLPERF_REPORT_DIR=str(reports)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
    run_id = re.findall(r"^DAG run (\S+): (\S+);", done.stdout, flags=re.M)[-1]
    assert run_id[1].endswith("failed")  # make_report succeeded after finish_run failed: still failed
    page = report_dir(DAG, run_id[0], reports) / "report.html"
    assert f"report: {page}" in done.stdout
    html = page.read_text()
    assert "Failed repeats" in html and 'class="status-failed">failed<' in html
    assert (page.parent / "report.json").is_file() and (page.parent / "report.md").is_file()
    store = ResultStore(sqlite_url)  # the run records where its report is
    runs = (
        store.engine.connect()
        .exec_driver_sql("SELECT report_path FROM benchmark_runs WHERE run_id = ?", (run_id[0],))
        .all()
    )
    assert runs == [(str(page),)]
