"""``dlperf import``: a DLPerf-style folder of logs from elsewhere, turned into result rows one file at a time.

Pure apart from reading the log files: :func:`import_folder` yields one :class:`ImportedLog` per file (the
row to store, or why the file is skipped) so that a caller can store each row, show progress and stop at any
point; :class:`ImportSummary` tallies what happened. Storing is the caller's (``dlperf import`` stores each
row as it comes, ``--dry-run`` prints it instead), so the same code serves both.

Logs from elsewhere get the fitted window by default (``ParseOptions.fit``): a run its authors stopped
before the format's window is measured over the iterations it has and says so (``window_fitted``);
``strict=True`` keeps the window that dlperf's own runs use.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from dlperf_core.importers.dlperf_folder import FolderLog, RepeatFigure
from dlperf_core.measure.measurement import Measurement
from dlperf_core.measure.origin import IMPORTED
from dlperf_core.model import ARGS_MARK, UNKNOWN_ARGS, Case, CaseOutcome, NodeOutcome, series_base
from dlperf_core.parsing import ParsedRun, parse_file
from dlperf_core.storage.records import BenchmarkRunRecord, ResultRecord

IMPORT_DAG_ID = "dlperf_import"
UNNAMED = "name is not <NnMg>/<model>_b<batch>_<precision>_<k>.log"


@dataclass(frozen=True)
class ImportedLog:
    """One file of the folder: the row it gives (``record``), or the reason it is skipped."""

    path: Path
    size: int  # bytes
    log: FolderLog | None = None  # what the file's path says (None for a file outside the naming)
    record: ResultRecord | None = None
    parsed: ParsedRun | None = None
    skipped: str | None = None  # why no row comes from this file
    runs_found: int = 0  # runs the parser found in the file (several GPU counts may share one file)

    @property
    def status(self) -> str:
        """ "ok" or "failed" (a stored row), or "skipped"."""
        return self.record.status if self.record is not None else "skipped"

    def figure(self) -> RepeatFigure | None:
        """This repeat for the DLPerf result JSON (a failed repeat has no figure); None when skipped."""
        if self.log is None or self.record is None:
            return None
        return RepeatFigure(self.log, self.record.throughput if self.record.status == "ok" else None)


@dataclass
class ImportSummary:
    """What an import did: rows by status, reasons of the failed rows and of the skipped files."""

    files: int = 0
    bytes: int = 0
    runs_found: int = 0
    ok: int = 0
    fitted: int = 0  # ok rows whose window was fitted to a short log
    failed: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)

    def add(self, item: ImportedLog) -> None:
        self.files += 1
        self.bytes += item.size
        self.runs_found += item.runs_found
        if item.record is None:
            self.skipped[item.skipped or "unknown"] += 1
        elif item.record.status == "ok":
            self.ok += 1
            self.fitted += item.record.window_fitted
        else:
            self.failed[item.record.reason or "unknown"] += 1

    @property
    def stored(self) -> int:
        return self.ok + sum(self.failed.values())

    def lines(self, *, dry_run: bool = False) -> list[str]:
        """The closing summary, one line per fact, reasons most frequent first."""
        verb = "would store" if dry_run else "stored"
        out = [
            f"{self.files} files, {self.bytes / 1e6:.1f} MB, {self.runs_found} runs found",
            f"{verb} {self.stored} rows: {self.ok} ok ({self.fitted} with a fitted window), "
            f"{sum(self.failed.values())} failed",
        ]
        out += [f"  failed x{n}: {reason}" for reason, n in self.failed.most_common()]
        out.append(f"skipped {sum(self.skipped.values())} files")
        out += [f"  skipped x{n}: {reason}" for reason, n in self.skipped.most_common()]
        return out


def import_run(root: Path, now: datetime) -> BenchmarkRunRecord:
    """The benchmark run an import of ``root`` stores into: one per folder, so importing again updates it."""
    return BenchmarkRunRecord(
        dag_id=IMPORT_DAG_ID,
        run_id=f"import__{root}",
        suite=root.name,
        trigger="import",
        runtime="import",
        started_at=now,
        finished_at=now,
        status="success",
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def import_folder(
    logs: list[FolderLog],
    unnamed: list[Path],
    run: BenchmarkRunRecord,
    *,
    now: datetime,
    format: str | None = None,
    framework: str | None = None,
    strict: bool = False,
) -> Iterator[ImportedLog]:
    """One :class:`ImportedLog` per file: the unnamed ones first (skipped), then each case log parsed (with a
    fitted window unless ``strict``) into the row of its repeat. ``logs`` and ``unnamed`` are what
    :func:`dlperf_core.importers.dlperf_folder.scan_folder` found in a folder."""
    for path in unnamed:
        yield ImportedLog(path=path, size=_size(path), skipped=UNNAMED)
    for log in logs:
        size = _size(log.path)
        try:
            runs = parse_file(log.path, format=format, fit=not strict)
        except OSError as exc:
            yield ImportedLog(path=log.path, size=size, log=log, skipped=f"unreadable: {exc.strerror or exc}")
            continue
        total = log.nodes * log.gpus_per_node
        parsed = next((r for r in runs if r.gpus == total), runs[0])  # a file may hold several runs
        ok = parsed.status == "ok"
        name = framework or parsed.format
        first, last = parsed.window or (None, None)
        case = Case(
            framework=name,
            model=log.model,
            precision=log.precision,
            batch_size_per_device=log.batch_size_per_device,
            nodes=log.nodes,
            gpus_per_node=log.gpus_per_node,
            warmup_iterations=first - 1 if first else 0,
            measured_iterations=parsed.iterations or 0,
        )
        measurement = Measurement(
            status="ok" if ok else "failed",
            reason=parsed.reason,
            throughput=parsed.throughput if ok else None,
            reported_throughput=parsed.reported_throughput,
            iterations=parsed.iterations,
            window_first=first,
            window_last=last,
        )
        found = CaseOutcome(now, now, [NodeOutcome(node="", rank=0, exit_code=None, log_path=str(log.path))], None)
        record = ResultRecord.from_run(
            run.dag_id,
            run.run_id,
            case,
            log.repeat,
            measurement,
            found,
            window_fitted=parsed.window_fitted,
            figure_origin=IMPORTED,  # a log from elsewhere: who printed it is not dlperf's to say
            benchmark_run=run,
        )
        # what the imported run was given (its extra arguments, its own window) is not known: its key says so, as
        # rows stored before configurations were recorded do (the window dlperf read is in window_first/last)
        unknown = f"{series_base(case.key)}+{ARGS_MARK}{UNKNOWN_ARGS}"
        record = replace(record, case_key=unknown, variant=None, configuration=None)
        yield ImportedLog(path=log.path, size=size, log=log, record=record, parsed=parsed, runs_found=len(runs))
