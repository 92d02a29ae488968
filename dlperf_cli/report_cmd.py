"""``dlperf report [--run ID | --latest] [--format md|json|html] [--out DIR]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_report_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``report`` subcommand."""
    rep = sub.add_parser("report", help="write a run's report: seed tables, DLPerf JSON, PNG plots, HTML page")
    which = rep.add_mutually_exclusive_group()
    which.add_argument("--run", dest="run_id", help="the run id (DAG run id) to report on")
    which.add_argument("--latest", action="store_true", help="the most recently started run (the default)")
    rep.add_argument("--dag-id", help="the DAG the run belongs to (only needed when a run id is in several)")
    rep.add_argument("--format", choices=["md", "json", "html"], default="md", help="document format (default md)")
    rep.add_argument("--out", help="folder to write into (default: $DLPERF_REPORT_DIR/<dag_id>/<run_id>)")
    rep.add_argument("--db", help="results database URL (default: $DLPERF_DB_URL or .dlperf/dlperf.db)")
    rep.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from dlperf_core.reporting import ReportError, build_report, report_dir
    from dlperf_core.reporting.data import find_run
    from dlperf_core.storage import ResultStore, default_db_url

    store = ResultStore(args.db or default_db_url())
    try:
        store.ensure_schema()
        run = find_run(store, args.run_id, args.dag_id)
        out = Path(args.out) if args.out else report_dir(run.dag_id, run.run_id)
        files = build_report(store, run.run_id, dag_id=run.dag_id, fmt=args.format, out_dir=out)
    except ReportError as exc:
        print(f"dlperf report: {exc}", file=sys.stderr)
        return 2
    finally:
        store.dispose()
    if args.format in ("md", "json"):  # text documents also go to stdout, for reading or piping
        print(files.main.read_text(encoding="utf-8"), end="")
    for plot in files.plots:
        print(f"plot: {plot.path}", file=sys.stderr)
    print(f"report of {files.dag_id} / {files.run_id}: {files.main}", file=sys.stderr)
    return 0


def report_location(dag_id: str, run_id: str) -> Path | None:
    """The HTML report the DAG's make_report task wrote for this run, if it is there."""
    from dlperf_core.reporting.paths import FORMATS, report_dir

    page = report_dir(dag_id, run_id) / FORMATS["html"]
    return page if page.is_file() else None
