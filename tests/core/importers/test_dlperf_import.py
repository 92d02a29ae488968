"""`dlperf import` of a DLPerf-style folder built from real published logs."""

import json
import re
import shutil
import subprocess

import pytest

from dlperf_core.importers.dlperf_folder import PRECISION_ALIASES, RepeatFigure, result_json, scan_folder
from dlperf_core.storage import ResultStore
from helpers import DLPERF, REPO
from parsing_logs import NGC, needs_ngc_logs


def build_folder(root):
    """1n1g and 1n8g AMP bs128 cases from the real NGC PyTorch logs, plus a broken repeat and a 10n8g case."""
    (root / "1n1g").mkdir(parents=True)
    (root / "1n8g").mkdir()
    (root / "10n8g").mkdir()
    shutil.copy(NGC / "pytorch_gpu1_amp_bs128.txt", root / "1n1g" / "r50_b128_amp_1.log")
    shutil.copy(NGC / "pytorch_gpu1_amp_bs128.txt", root / "1n1g" / "r50_b128_fp16_2.log")  # fp16 = amp
    shutil.copy(NGC / "pytorch_gpu8_amp_bs128.txt", root / "1n8g" / "r50_b128_amp_1.log")
    text = (NGC / "pytorch_gpu8_amp_bs128.txt").read_text()
    (root / "1n8g" / "r50_b128_amp_2.log").write_text(text[: len(text) // 3])  # stopped a third of the way
    shutil.copy(NGC / "pytorch_gpu1_fp32_bs128.txt", root / "10n8g" / "r50_b128_fp32_1.log")  # fp32, no 1n1g
    (root / "notes.log").write_text("not a case log\n")


@needs_ngc_logs
def test_import_stores_every_run_and_writes_the_dlperf_json(tmp_path):
    folder = tmp_path / "rn50"
    build_folder(folder)
    db = f"sqlite:///{tmp_path / 'r.db'}"
    out_json = tmp_path / "result.json"
    out = subprocess.run(
        [*DLPERF, "import", str(folder), "--db", db, "--json-out", str(out_json)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    assert "notes.log" in out.stderr and "skipped x1: name is not" in out.stderr  # reported, not guessed
    # a foreign log stopped early is measured over what it holds (fitted window), and says so
    rows = ResultStore(db).results()
    assert len(rows) == 5 and (rows["status"] == "ok").all()
    cut = rows[rows["log_path"].str.endswith("r50_b128_amp_2.log")].iloc[0]
    assert cut["window_fitted"] and cut["window_first"] == 6 and cut["window_last"] < 40
    assert not rows[~rows["log_path"].str.endswith("r50_b128_amp_2.log")]["window_fitted"].any()
    assert "stored 5 rows: 5 ok (1 with a fitted window), 0 failed" in out.stderr
    # --strict: the window of dlperf's own runs; the same import updates the same rows
    out = subprocess.run(
        [*DLPERF, "import", str(folder), "--db", db, "--json-out", str(out_json), "--strict"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    assert "failed x1: truncated log: last line cut" in out.stderr
    result = json.loads(out_json.read_text())
    amp = result["r50_b128_amp"]
    assert set(amp) == {"1n1g", "1n8g"}
    assert amp["1n1g"]["speedup"] == 1.0 and amp["1n1g"]["batch_size_per_device"] == 128
    # the failed (truncated) repeat is left out, not counted as 0
    rows = ResultStore(db).results()
    assert len(rows) == 5 and (rows["status"] == "failed").sum() == 1
    ok8 = rows[(rows["gpus_per_node"] == 8) & (rows["nodes"] == 1) & (rows["status"] == "ok")]["throughput"].iloc[0]
    assert amp["1n8g"]["median_speed"] == round(ok8, 2) == amp["1n8g"]["average_speed"]
    assert amp["1n8g"]["speedup"] == pytest.approx(ok8 / amp["1n1g"]["median_speed"], abs=0.01)
    # fp32 at 10n8g: read (two-digit node count), but no 1n1g: speedup None, not 1.0
    assert result["r50_b128_fp32"]["10n8g"]["speedup"] is None
    # importing again adds nothing
    again = subprocess.run(
        [*DLPERF, "import", str(folder), "--db", db, "--strict"], capture_output=True, text=True, cwd=REPO
    )
    assert again.returncode == 0 and len(ResultStore(db).results()) == 5


@needs_ngc_logs
def test_dry_run_prints_each_row_and_stores_nothing(tmp_path):
    folder = tmp_path / "rn50"
    build_folder(folder)
    db = tmp_path / "r.db"
    out = subprocess.run(
        [*DLPERF, "import", str(folder), "--db", f"sqlite:///{db}", "--dry-run"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 6 and "notes.log\tskipped\tname is not" in out.stdout
    assert any("1n8g/r50_b128_amp_2.log" in line and "(fitted)" in line for line in lines)
    assert any(
        line.startswith(
            "1n1g/r50_b128_amp_1.log\tngc_pytorch_dllogger\tngc_pytorch_dllogger/r50/amp/b128/1n1g+args=unknown r1\t"
        )
        for line in lines
    )
    assert "would store 5 rows" in out.stderr and "nothing stored (--dry-run)" in out.stderr
    assert not db.exists()


@needs_ngc_logs
def test_a_thousand_file_import_shows_progress_and_a_summary(tmp_path):
    """1,000 files: real NGC PyTorch logs (some stopped early, some broken), a few outside the naming."""
    folder = tmp_path / "big"
    sources = sorted(NGC.glob("*.txt"))
    broken = "DLL 2020-12-16 11:33:58.199136 - PARAMETER batch_size : 128  world_size : 1\nCUDA out of memory\n"
    for i in range(990):
        case = folder / f"{1 + i % 4}n{(1, 8)[i % 2]}g"
        case.mkdir(parents=True, exist_ok=True)
        path = case / f"r50_b128_amp_{i}.log"
        if i % 100 == 7:
            path.write_text(broken)
        else:
            text = sources[i % len(sources)].read_text()
            path.write_text(text if i % 10 else text[: len(text) // 2])  # every 10th stopped half-way
    for i in range(10):
        (folder / f"notes_{i}.log").write_text("not a case log\n")
    db = f"sqlite:///{tmp_path / 'big.db'}"
    out = subprocess.run(
        [*DLPERF, "import", str(folder), "--db", db, "--progress"], capture_output=True, text=True, cwd=REPO
    )
    assert out.returncode == 0, out.stderr[-3000:]
    err = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.stderr)  # the bar's terminal colours
    # the bar's last state, and that it moved while the import ran
    assert re.search(r"1000/1000 files, (13\.\d)/\1 MB, 990 runs found: 980 ok, 10 failed, 10 skipped", err), err[-800:]
    assert len(set(re.findall(r" (\d+)/1000 files,", err))) >= 3
    assert "1000 files, 13." in err and "MB, 990 runs found" in err
    assert "stored 990 rows: 980 ok (99 with a fitted window), 10 failed" in err
    assert "failed x10: out of memory" in err
    assert "skipped 10 files" in err and "skipped x10: name is not" in err
    assert len(ResultStore(db).results()) == 990


def test_result_json_keys_and_rounding(tmp_path):
    (tmp_path / "1n1g").mkdir()
    (tmp_path / "2n8g").mkdir()
    for i in (1, 2, 3):
        (tmp_path / "1n1g" / f"m_b64_fp32_{i}.log").write_text("")
        (tmp_path / "2n8g" / f"m_b64_fp32_{i}.log").write_text("")
    logs, unnamed = scan_folder(tmp_path)
    assert not unnamed and len(logs) == 6
    speeds = {"1n1g": [100.0, 101.0, 99.0], "2n8g": [1500.0, None, 1510.123]}
    figures = []
    for log in logs:
        figures.append(RepeatFigure(log, speeds[log.case][log.repeat - 1]))
    result = result_json(figures)
    assert result == {
        "m": {
            "1n1g": {"average_speed": 100.0, "batch_size_per_device": 64, "median_speed": 100.0, "speedup": 1.0},
            "2n8g": {"average_speed": 1505.06, "batch_size_per_device": 64, "median_speed": 1505.06, "speedup": 15.05},
        }
    }
    assert PRECISION_ALIASES["fp16"] == "amp"
