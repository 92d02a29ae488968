"""MLPerf Training submissions as MLCommons publishes them: the folder layout, the system descriptions, and the
official score and compliance verdicts, computed by MLCommons' own ``mlperf_logging`` package (its result
summarizer and compliance checker), not by a copy of its rules.

Layout (a round's folder, e.g. ``training_v1.0``, or one submitter's folder)::

    <submitter>/systems/<system>.json                        the system description
    <submitter>/results/<system>/<benchmark>/result_<n>.txt  one MLLOG file per run (dlperf_core.parsing.mllog)

The summarizer is stateful: its closed-division RCP check writes a ``scaling.json`` beside the result files,
and a later run reads it back and scales the score. ``official_scores`` therefore runs it on a fresh copy of
the result files and system descriptions alone, so the score is the one computed over exactly those files,
however often it is run, and the submission folder is never written to.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf_core.cluster.environment import Environment
from dlperf_core.parsing import mllog

USAGE = "training"
RESULT_GLOB = "result_*.txt"
_SOFTWARE = {"cuda_driver_version": "driver", "cuda_version": "CUDA", "cudnn_version": "cuDNN", "nccl_version": "NCCL"}


@dataclass(frozen=True)
class BenchmarkFolder:
    """One system's runs of one benchmark: ``<submitter>/results/<system>/<benchmark>/``."""

    submitter_folder: str
    system_folder: str
    benchmark: str
    path: Path

    @property
    def results(self) -> list[Path]:
        return sorted(self.path.glob(RESULT_GLOB))

    def description_path(self) -> Path:
        return self.path.parents[2] / "systems" / f"{self.system_folder}.json"


@dataclass(frozen=True)
class MlperfSystem:
    """A system description (``<submitter>/systems/<system>.json``), the fields dlperf keeps. ``submitter`` is the
    description's name for it (``PCL & PKU``), ``submitter_folder`` the folder's (``PCL``)."""

    submitter: str
    submitter_folder: str
    system_folder: str
    system_name: str
    division: str
    nodes: int
    accelerators_per_node: int  # 0 for a CPU-only system
    accelerator_model: str  # "" for a CPU-only system
    accelerator_memory: (
        str  # as the description states it: "80 GB", "32GB", "" (dlperf_core.cluster.accelerators reads it)
    )
    host_processor_model: str
    host_processors_per_node: int
    framework: str
    interconnect: str  # the accelerators' interconnect, else the host's networking, as the description says
    software: Mapping[str, str]  # other_software_stack: cuda_version, cuda_driver_version, cudnn_version, ...
    description: Mapping[str, Any]  # the whole description, as it is

    @property
    def accelerators(self) -> int:
        return self.nodes * self.accelerators_per_node

    def environment(self) -> Environment:
        """The description as an environment row: accelerator model and count, host CPU, framework, CUDA, driver,
        cuDNN and NCCL versions where the description states them (what it does not is listed as missing)."""
        stated = {k: v for k, v in self.software.items() if v}
        missing = [label for key, label in _SOFTWARE.items() if key not in stated]
        return Environment(
            framework=self.framework or None,
            framework_version=None,  # the description names the framework with its version ("MXNet ... 21.05")
            image=None,
            image_digest=None,
            hostnames=(),
            gpu_model=self.accelerator_model if self.accelerators else None,
            gpu_count=self.accelerators,
            driver_version=stated.get("cuda_driver_version"),
            cuda_version=stated.get("cuda_version"),
            cudnn_version=stated.get("cudnn_version"),
            nccl_version=stated.get("nccl_version"),
            power_limit_w=None,
            sm_clock_max_mhz=None,
            cpu_model=self.host_processor_model or None,
            cpu_count=None,
            memory_total_mb=None,
            topology=self.interconnect or None,
            infiniband=(),
            missing=tuple(f"{label} (not in the MLPerf system description)" for label in missing),
        )

    @classmethod
    def from_description(cls, text: str, submitter_folder: str, system_folder: str) -> MlperfSystem:
        desc = json.loads(text)
        if not isinstance(desc, dict):
            raise ValueError(f"{system_folder}: a system description is a JSON object")  # noqa: TRY004 - bad input, as json.loads says

        stack = desc.get("other_software_stack")

        def field(name: str) -> str:
            value = desc.get(name, "")
            return "" if value is None else str(value).strip()

        return cls(
            submitter=field("submitter") or submitter_folder,
            submitter_folder=submitter_folder,
            system_folder=system_folder,
            system_name=field("system_name") or system_folder,
            division=field("division"),
            nodes=_count(field("number_of_nodes"), default=1),
            accelerators_per_node=_count(field("accelerators_per_node"), default=0),
            accelerator_model=field("accelerator_model_name"),
            accelerator_memory=field("accelerator_memory_capacity"),
            host_processor_model=field("host_processor_model_name"),
            host_processors_per_node=_count(field("host_processors_per_node"), default=0),
            framework=field("framework"),
            interconnect=field("accelerator_interconnect") or field("host_networking"),
            software={str(k): str(v).strip() for k, v in stack.items()} if isinstance(stack, dict) else {},
            description=desc,
        )


def _count(text: str, default: int) -> int:
    """A description's count ("8", "8.0", " 8 "); ``default`` where it is empty or no whole number."""
    found = re.fullmatch(r"\s*(\d+)(?:\.0*)?\s*", text)
    return int(found.group(1)) if found else default


@dataclass(frozen=True)
class RunCompliance:
    """The compliance checker's verdict on one run and its message ("" when it has none)."""

    file: str
    valid: bool
    message: str


@dataclass(frozen=True)
class MlperfScore:
    """A system's official score for one benchmark: minutes to train, the olympic mean of its runs as MLCommons'
    summarizer computes it (None when too many runs did not converge)."""

    submitter_folder: str
    system_folder: str
    benchmark: str
    score_minutes: float | None
    runs: int


def benchmark_folders(root: Path) -> Iterator[BenchmarkFolder]:
    """Every ``<submitter>/results/<system>/<benchmark>/`` with result files under ``root`` (a round's folder, or
    one submitter's), in path order."""
    root = Path(root)
    submitters = [root] if (root / "results").is_dir() else sorted(p for p in root.iterdir() if p.is_dir())
    for submitter in submitters:
        for path in sorted((submitter / "results").glob("*/*")):
            if path.is_dir() and any(path.glob(RESULT_GLOB)):
                yield BenchmarkFolder(submitter.name, path.parent.name, path.name, path)


def is_submission(root: Path) -> bool:
    """Whether ``root`` holds the MLPerf submission layout."""
    return next(benchmark_folders(root), None) is not None


def ruleset_of(root: Path) -> str | None:
    """The rules' version a round's folder name says (``training_v1.0`` -> ``1.0.0``), None when it says none."""
    for part in reversed(Path(root).resolve().parts):
        found = re.fullmatch(r"training_v(\d+)\.(\d+)(?:\.(\d+))?", part)
        if found:
            return f"{found.group(1)}.{found.group(2)}.{found.group(3) or 0}"
    return None


def read_system(folder: BenchmarkFolder) -> MlperfSystem:
    """The system description of ``folder``'s system; FileNotFoundError names the file it looked for."""
    path = folder.description_path()
    return MlperfSystem.from_description(
        path.read_text(encoding="utf-8"), folder.submitter_folder, folder.system_folder
    )


def bare_system(folder: BenchmarkFolder) -> MlperfSystem:
    """A system whose description is missing: its folder names alone (one node, no accelerators stated)."""
    return MlperfSystem.from_description("{}", folder.submitter_folder, folder.system_folder)


@dataclass(frozen=True)
class SubmittedRun:
    """One run of a submission as dlperf reads it: the MLLOG reading and the compliance checker's verdict."""

    folder: BenchmarkFolder
    result: Path
    run: mllog.MlperfRun
    compliance: RunCompliance


def read_run(folder: BenchmarkFolder, result: Path, ruleset: str) -> SubmittedRun:
    """One result file: parsed by dlperf's MLLOG parser (one run per file: the first, where a file has more) and
    checked by mlperf_logging's compliance checker."""
    text = result.read_bytes().decode("utf-8", errors="replace")
    run = mllog.read_runs(text, str(result))[0]
    return SubmittedRun(folder, result, run, check_compliance(result, ruleset))


def check_compliance(result: Path, ruleset: str) -> RunCompliance:
    """The compliance checker of ``mlperf_logging`` on one result file, with the messages it gathered."""
    from mlperf_logging.compliance_checker import mlp_compliance

    checker = mlp_compliance.make_checker(usage=USAGE, ruleset=ruleset, quiet=False, werror=False)
    with _quiet():
        valid = bool(checker.check_file(str(result), f"{USAGE}_{ruleset}/common.yaml"))
    messages = [*checker.warnings.values(), *checker.overwritable.values(), *checker.not_overwritable]
    return RunCompliance(str(result), valid, "\n".join(str(m).strip() for m in messages))


def official_scores(root: Path, ruleset: str) -> list[MlperfScore]:
    """The score of every (submitter, system, benchmark) under ``root``, by ``mlperf_logging``'s result summarizer
    run per submitter over a fresh copy of the result files and system descriptions alone (see the module
    docstring)."""
    from mlperf_logging.result_summarizer import result_summarizer

    folders = list(benchmark_folders(root))
    scores: list[MlperfScore] = []
    for submitter in sorted({f.submitter_folder for f in folders}):
        mine = [f for f in folders if f.submitter_folder == submitter]
        with tempfile.TemporaryDirectory(prefix="dlperf-mlperf-") as tmp:
            copy = Path(tmp) / submitter
            for f in mine:
                target = copy / "results" / f.system_folder / f.benchmark
                target.mkdir(parents=True)
                for result in f.results:
                    shutil.copyfile(result, target / result.name)
                description = f.description_path()
                if description.is_file():
                    (copy / "systems").mkdir(exist_ok=True)
                    shutil.copyfile(description, copy / "systems" / description.name)
            with _quiet():
                table = result_summarizer.summarize_results(str(copy), USAGE, ruleset)[0]  # a DataFrame
            # a row's details_url ends with ".../systems/<system folder>.json": the folder, whatever the name
            by_folder = {
                str(row["details_url"]).rsplit("/", 1)[-1].removesuffix(".json"): row for _, row in table.iterrows()
            }
            for f in mine:
                row = by_folder.get(f.system_folder)
                value = row.get(f.benchmark) if row is not None else None
                score = float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
                scores.append(MlperfScore(submitter, f.system_folder, f.benchmark, score, len(f.results)))
    return scores


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The summarizer and checker print and log as they go (a command-line tool's habit): keep that out of
    dlperf's output."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        root.setLevel(level)
