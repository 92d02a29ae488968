"""MLPerf Training submissions (dlperf_core.importers.mlperf) over every ResNet-50 run of MLPerf Training v1.0 in
``$DLPERF_SHARED/mlperf/training_v1.0``: the official scores recomputed by mlperf_logging's own summarizer match
the published ones, the compliance checker's verdicts and the system descriptions are read."""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from pathlib import Path

import pytest

from dlperf_core.importers import mlperf
from helpers import SHARED

V1 = SHARED / "mlperf" / "training_v1.0"
pytestmark = pytest.mark.skipif(not (V1 / "resnet_scores.csv").is_file(), reason=f"no MLPerf results at {V1}")


def _published() -> dict[str, dict[str, str]]:
    with (V1 / "resnet_scores.csv").open(newline="") as f:
        return {row["system_folder"]: row for row in csv.DictReader(f)}


def test_the_layout_is_found_and_the_ruleset_read_from_the_rounds_folder_name():
    folders = list(mlperf.benchmark_folders(V1))
    assert len(folders) == 35 and {f.benchmark for f in folders} == {"resnet"}
    assert sum(len(f.results) for f in folders) == 175
    assert mlperf.is_submission(V1) and mlperf.is_submission(V1 / "PCL")  # a round, or one submitter's folder
    assert not mlperf.is_submission(V1 / "PCL" / "systems")
    assert mlperf.ruleset_of(V1) == "1.0.0" and mlperf.ruleset_of(Path("/x/y")) is None


def test_every_official_score_is_reproduced_by_mlperf_loggings_summarizer_to_0_1_percent(tmp_path):
    """The summarizer runs on a fresh copy of the result files: the shared folder's scaling.json files (written
    by an earlier run of the summarizer's RCP check) are not read, and nothing is written beside the results."""
    published = _published()
    before = sorted(p.name for p in V1.rglob("*"))
    scores = mlperf.official_scores(V1, "1.0.0")
    assert sorted(s.system_folder for s in scores) == sorted(published)
    for s in scores:
        want = float(published[s.system_folder]["resnet_minutes"])
        assert s.score_minutes is not None and s.score_minutes == pytest.approx(want, rel=0.001), s
        assert s.runs == 5
    assert sorted(p.name for p in V1.rglob("*")) == before

    # a folder that holds a scaling.json: the score is the same again (the summarizer alone would scale it)
    nvidia = V1 / "NVIDIA"
    copy = tmp_path / "NVIDIA"
    shutil.copytree(nvidia, copy)
    (copy / "results" / "dgxa100_ngc21.05_mxnet" / "resnet" / "scaling.json").write_text('{"scaling_factor": 2.0}')
    again = {s.system_folder: s.score_minutes for s in mlperf.official_scores(copy, "1.0.0")}
    assert again["dgxa100_ngc21.05_mxnet"] == pytest.approx(
        float(published["dgxa100_ngc21.05_mxnet"]["resnet_minutes"])
    )


def test_the_compliance_checker_judges_every_run_and_says_why_one_fails():
    verdicts = Counter()
    for folder in mlperf.benchmark_folders(V1):
        for result in folder.results:
            run = mlperf.check_compliance(result, "1.0.0")
            verdicts[run.valid] += 1
            if not run.valid:
                assert run.message.startswith("Failed checks for eval_accuracy"), run
    assert verdicts == {True: 169, False: 6}  # six runs stopped short of 75.9% top-1: MLCommons drops them
    failed = mlperf.check_compliance(V1 / "NVIDIA/results/dgxa100_ngc21.05_mxnet/resnet/result_1.txt", "1.0.0")
    assert not failed.valid and "0.7590" in failed.message


def test_every_system_description_is_read_as_the_published_table_has_it():
    published = _published()
    for folder in mlperf.benchmark_folders(V1):
        system = mlperf.read_system(folder)
        row = published[folder.system_folder]
        assert (system.submitter, system.system_name) == (row["submitter"], row["system_name"])
        assert system.nodes == int(row["number_of_nodes"])
        assert system.accelerators == int(row["accelerators_count"])
        assert system.accelerator_model == row["accelerator_model_name"]
    intel = mlperf.read_system(next(mlperf.benchmark_folders(V1 / "Intel")))
    assert intel.accelerators == 0 and intel.host_processors_per_node == 8  # CPU-only: no accelerators
    pcl = mlperf.read_system(next(mlperf.benchmark_folders(V1 / "PCL")))
    assert (pcl.submitter, pcl.submitter_folder) == ("PCL & PKU", "PCL")


def test_a_bad_description_is_a_clear_error():
    with pytest.raises(ValueError, match="JSON object"):
        mlperf.MlperfSystem.from_description("[]", "X", "y")
    system = mlperf.MlperfSystem.from_description('{"number_of_nodes": "", "accelerators_per_node": "8.0"}', "X", "y")
    assert (system.submitter, system.system_name, system.nodes, system.accelerators) == ("X", "y", 1, 8)
