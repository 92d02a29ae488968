"""``dlperf import`` of an MLPerf Training submission folder (``<submitter>/results/<system>/<benchmark>/result_*.txt``
with ``<submitter>/systems/<system>.json``): every run, the system descriptions and the official scores, stored;
the scores printed. The reading and scoring are :mod:`dlperf_core.importers.mlperf`'s."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dlperf_core.importers.mlperf import SubmittedRun


def import_mlperf(args: argparse.Namespace, root: Path, redact: Callable[[str], str]) -> int:
    """Store every run under ``root`` with its system and the systems' official scores; print the scores.
    ``redact`` masks the password of the database URL it names (``dlperf_cli.main``'s)."""
    from dlperf_core.importers import mlperf
    from dlperf_core.storage import ResultStore, default_db_url

    ruleset = args.ruleset or mlperf.ruleset_of(root)
    if ruleset is None:
        print(
            f"{root}: the MLPerf rules' version is not in the folder's name (training_vX.Y): give --ruleset, e.g. 1.0.0",
            file=sys.stderr,
        )
        return 2
    folders = list(mlperf.benchmark_folders(root))
    store = None
    if not args.dry_run:
        store = ResultStore(args.db or default_db_url())
        store.ensure_schema()
    runs = without_throughput = 0
    system_ids: dict[tuple[str, str], int] = {}
    for folder in folders:
        try:
            system = mlperf.read_system(folder)
        except FileNotFoundError:
            print(f"{folder.path}: no system description at {folder.description_path()}", file=sys.stderr)
            system = mlperf.bare_system(folder)
        if store is not None:
            environment_id = store.upsert_environment(system.environment())
            system_ids[(folder.submitter_folder, folder.system_folder)] = store.upsert_mlperf_system(
                system, ruleset, environment_id
            )
        for result in folder.results:
            submitted = mlperf.read_run(folder, result, ruleset)
            runs += 1
            without_throughput += submitted.run.throughput is None
            if store is not None:
                store.upsert_mlperf_run(system_ids[(folder.submitter_folder, folder.system_folder)], submitted)
            print(_run_line(root, submitted), file=sys.stderr)
    scores = mlperf.official_scores(root, ruleset)
    print("submitter\tsystem\tbenchmark\tscore_minutes\truns")
    for score in scores:
        if store is not None:
            system_id = system_ids[(score.submitter_folder, score.system_folder)]
            store.upsert_mlperf_score(system_id, score.benchmark, score.score_minutes)
        shown = f"{score.score_minutes:.6f}" if score.score_minutes is not None else "-"
        print(f"{score.submitter_folder}\t{score.system_folder}\t{score.benchmark}\t{shown}\t{score.runs}")
    where = f"in {redact(store.url)}" if store is not None else "nothing stored (--dry-run)"
    if store is not None:
        store.dispose()
    print(
        f"imported {runs} MLPerf runs of {len(folders)} system benchmarks (ruleset {ruleset}; "
        f"{without_throughput} without a throughput) and {len(scores)} official scores, {where}",
        file=sys.stderr,
    )
    return 0


def _run_line(root: Path, submitted: SubmittedRun) -> str:
    """One run's outcome, tab-separated: path, time to train, throughput or reason, compliance."""
    run, compliance = submitted.run, submitted.compliance
    rel = submitted.result.relative_to(root) if submitted.result.is_relative_to(root) else submitted.result
    ttt = f"{run.time_to_train_s / 60:.2f} min" if run.time_to_train_s is not None else "no time to train"
    figure = f"{run.throughput:.1f} samples/s" if run.throughput is not None else f"failed: {run.reason}"
    why = (compliance.message.splitlines() or ["no message"])[0]
    verdict = "compliant" if compliance.valid else f"not compliant: {why}"
    return f"{rel}\t{ttt}\t{figure}\t{verdict}"
