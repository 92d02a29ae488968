"""``dlperf run | parse | results``."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import UTC
from pathlib import Path


def _cmd_run(args: argparse.Namespace) -> int:
    from dlperf_core.errors import ConfigError
    from dlperf_core.plan.cases import check_suite
    from dlperf_core.plan.suite import load_suite

    try:
        check_suite(load_suite(args.suite))  # refuse a bad suite before Airflow even starts
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.db:
        os.environ["DLPERF_DB_URL"] = args.db
    os.environ.setdefault("DLPERF_PROGRESS", "1")
    from dlperf_core.plan.defaults import SUITE_RUNTIME
    from dlperf_core.plan.trigger_form import TriggerForm

    form = TriggerForm(
        suite=str(Path(args.suite).resolve()),
        runtime=args.runtime or SUITE_RUNTIME,  # not the deployment's default: the suite's own, unless overridden
        inventory=str(Path(args.inventory).resolve()) if args.inventory else "",
        repeats=args.repeats or 0,
        compile=args.compile or "suite",
    )
    conf = form.to_params()
    from dlperf_cli.embedded import run_dag

    print(f"dlperf: running {args.suite} through the dlperf_benchmark DAG (dag.test)", file=sys.stderr, flush=True)
    logical_date = None
    if args.run_date:
        from datetime import datetime

        logical_date = datetime.fromisoformat(args.run_date)
        if logical_date.tzinfo is None:
            logical_date = logical_date.replace(tzinfo=UTC)
    dag_run = run_dag(conf, logical_date)
    from dlperf_core.reporting import seed_tables
    from dlperf_core.storage import ResultStore, default_db_url

    store = ResultStore(default_db_url())
    store.ensure_schema()  # a run refused at planning never reached the database: no crash on an empty one
    summary = store.summary(dag_id=dag_run.dag_id, run_id=dag_run.run_id)
    from dlperf_core.measure.node_peers import NodePolicy
    from dlperf_core.reporting.nodes import nodes_markdown, scores_of, without_sweeps
    from dlperf_core.reporting.tables import fabric_markdown, max_batch_markdown

    searched = max_batch_markdown(store.max_batch_searches(run_id=dag_run.run_id, dag_id=dag_run.dag_id))
    fabric = fabric_markdown(store.fabric_summary(run_id=dag_run.run_id, dag_id=dag_run.dag_id))
    cases = without_sweeps(summary)  # a per-node sweep's cases: the Nodes section, node by node
    if len(cases) or not (searched or fabric or len(summary)):  # searches, fabric or sweeps only: no case table
        print(seed_tables(cases))
    nodes = ""
    if len(cases) < len(summary):  # a per-node sweep: each node against its peers (two nodes: its own nights)
        nodes = nodes_markdown(scores_of(summary, store.history(), dag_run.run_id, NodePolicy.from_env()))
    for extra in (nodes, searched, fabric):
        if extra:
            print("\n" + extra)
    state = str(dag_run.state)
    from dlperf_cli.report_cmd import report_location

    page = report_location(dag_run.dag_id, dag_run.run_id)
    print(f"\nreport: {page}" if page else "\nreport: none written (see the make_report task log)")
    print(f"\nDAG run {dag_run.run_id}: {state}; results in {_redact(default_db_url())}")
    return 0 if state.endswith("success") else 1


def _redact(url: str) -> str:
    """``url`` with its password masked (``***``), also when SQLAlchemy cannot parse it."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: mask all between "://user:" and the last "@"
        return re.sub(r"(://[^/@:]*:).*@", r"\1***@", url)


RESULTS_COMMANDS = frozenset({"run", "import", "results", "report", "compare", "db", "reproduce"})
"""The commands that read or write the results database (they name it on stderr when they start)."""


def results_database_line(args: argparse.Namespace) -> str | None:
    """``dlperf: results database URL`` (password masked) for a command that uses the results database,
    else None: the database ``--db`` names, else ``$DLPERF_DB_URL``, else ``$DLPERF_HOME/.dlperf/dlperf.db``."""
    if args.command not in RESULTS_COMMANDS or getattr(args, "dry_run", False):
        return None
    from dlperf_core.storage import default_db_url

    return f"dlperf: results database {_redact(getattr(args, 'db', None) or default_db_url())}"


def _cmd_parse(args: argparse.Namespace) -> int:
    from dlperf_core.measure.origin import IMPORTED
    from dlperf_core.parsing import parse_file

    out: list[dict] = []
    for path in args.logs:
        runs = parse_file(path, format=args.format, warmup=args.warmup, measured=args.measured, fit=not args.strict)
        # a log dlperf did not launch: its figure is "imported", as `dlperf import` would store it
        out.extend({**run.to_dict(), "figure_origin": IMPORTED} for run in runs)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for r in out:
            tp = f"{r['throughput']:.2f}" if r["throughput"] else "-"
            rep = f"{r['reported_throughput']:.2f}" if r["reported_throughput"] else "-"
            window = f"window={r['window'][0]}-{r['window'][1]}" if r["window"] else "window=-"
            window += " (fitted)" if r["window_fitted"] else ""
            print(
                f"{r['file']}\t{r['format']}\t{r['status']}\tthroughput={tp}\treported={rep}\t{window}"
                f"\t{r['reason'] or ''}"
            )
    return 0 if all(r["status"] == "ok" for r in out) else 1


def _cmd_import(args: argparse.Namespace) -> int:
    from datetime import datetime

    from dlperf_core.importers.dlperf_folder import result_json, scan_folder
    from dlperf_core.importers.log_import import ImportSummary, import_folder, import_run
    from dlperf_core.importers.mlperf import is_submission
    from dlperf_core.storage import ResultStore, default_db_url

    root = Path(args.folder).resolve()
    if is_submission(root):  # MLPerf's layout: <submitter>/results/<system>/<benchmark>/result_*.txt
        from dlperf_cli.mlperf_cmd import import_mlperf

        return import_mlperf(args, root, _redact)
    logs, unnamed = scan_folder(root)
    if not logs:
        for path in unnamed:
            print(f"skipped (not <NnMg>/<model>_b<batch>_<precision>_<k>.log): {path}", file=sys.stderr)
        print(f"no DLPerf-style logs under {root}", file=sys.stderr)
        return 2
    now = datetime.now(UTC)
    run = import_run(root, now)
    store = None
    if not args.dry_run:
        store = ResultStore(args.db or default_db_url())
        store.ensure_schema()
        store.upsert_run(run)
    summary, figures = ImportSummary(), []
    items = import_folder(logs, unnamed, run, now=now, format=args.format, framework=args.framework, strict=args.strict)
    show_bar = args.progress if args.progress is not None else sys.stderr.isatty()
    with _ImportProgress(
        len(logs) + len(unnamed), sum(_size(p) for p in [*(g.path for g in logs), *unnamed]), enabled=show_bar
    ) as bar:
        for item in items:
            if store is not None and item.record is not None:
                store.upsert_result(item.record)  # row by row: an interrupted import keeps what it stored
            summary.add(item)
            if (figure := item.figure()) is not None:
                figures.append(figure)
            bar.advance(item, summary)
            line = _import_line(root, item)
            if args.dry_run:
                print(line)
            elif not show_bar:
                print(line, file=sys.stderr)
    if store is not None:
        store.dispose()
    result = result_json(figures)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    if not args.dry_run:
        print(json.dumps(result, indent=2, sort_keys=True))
    for line in summary.lines(dry_run=args.dry_run):
        print(line, file=sys.stderr)
    where = f"as run {run.run_id} in {_redact(store.url)}" if store is not None else "nothing stored (--dry-run)"
    print(f"imported {len(logs)} logs ({sum(summary.failed.values())} failed), {where}", file=sys.stderr)
    return 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _import_line(root: Path, item) -> str:
    """One file's outcome, tab-separated: path, format, figure or reason, window."""
    rel = item.path.relative_to(root) if item.path.is_relative_to(root) else item.path
    record = item.record
    if record is None:
        return f"{rel}\tskipped\t{item.skipped}"
    fmt = item.parsed.format if item.parsed is not None else "-"
    if record.status != "ok":
        return f"{rel}\t{fmt}\t{record.case_key} r{record.repeat}\tfailed: {record.reason}"
    fitted = " (fitted)" if record.window_fitted else ""
    return (
        f"{rel}\t{fmt}\t{record.case_key} r{record.repeat}\t{record.throughput:.2f}"
        f"\twindow {record.window_first}-{record.window_last}{fitted}"
    )


class _ImportProgress:
    """A progress bar on the terminal (files, MB, runs found, ok / failed / skipped); nothing when disabled."""

    def __init__(self, files: int, total_bytes: int, *, enabled: bool) -> None:
        self.enabled, self.files, self.total_bytes = enabled, files, total_bytes
        self.done_bytes = 0

    def __enter__(self) -> _ImportProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            width = None if sys.stderr.isatty() else 160  # forced onto a pipe: wide enough for every column
            self.progress = Progress(
                TextColumn("importing"),
                BarColumn(bar_width=24),
                TextColumn(
                    "{task.completed}/{task.total} files, {task.fields[mb]}, {task.fields[runs]} runs found:"
                    " {task.fields[tally]}"
                ),
                TimeElapsedColumn(),
                console=Console(stderr=True, force_terminal=True, width=width),
                transient=False,
            )
            self.progress.__enter__()
            self.task = self.progress.add_task("import", total=self.files, mb=self._mb(), runs=0, tally="")
        return self

    def _mb(self) -> str:
        return f"{self.done_bytes / 1e6:.1f}/{self.total_bytes / 1e6:.1f} MB"

    def advance(self, item, summary) -> None:
        if not self.enabled:
            return
        self.done_bytes += item.size
        tally = f"{summary.ok} ok, {sum(summary.failed.values())} failed, {sum(summary.skipped.values())} skipped"
        self.progress.update(self.task, advance=1, mb=self._mb(), runs=summary.runs_found, tally=tally)

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.progress.__exit__(*exc)


def _cmd_results(args: argparse.Namespace) -> int:
    from dlperf_core.reporting import seed_tables
    from dlperf_core.storage import ResultStore, default_db_url

    store = ResultStore(args.db or default_db_url())
    store.ensure_schema()
    summary = store.summary(run_id=args.run_id, latest=args.run_id is None and not args.all)
    if args.json:
        print(summary.to_json(orient="records", date_format="iso", indent=2))
    else:
        print(seed_tables(summary))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dlperf", description="Deep-learning training benchmarks through Airflow.")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a suite through the dlperf_benchmark DAG in this process")
    run.add_argument("suite", help="suite YAML file, e.g. suites/smoke.yaml")
    run.add_argument("--runtime", choices=["local", "docker"], help="override the suite's runtime")
    run.add_argument("--inventory", help="node inventory YAML (default: the suite's or the runtime's)")
    run.add_argument("--repeats", type=int, help="override repeats per case")
    run.add_argument(
        "--compile",
        choices=["suite", "eager", "compiled", "both"],
        help="torch.compile for the benchmarks that can (default: as the suite says)",
    )
    run.add_argument("--db", help="results database URL (default: $DLPERF_DB_URL or $DLPERF_HOME/.dlperf/dlperf.db)")
    run.add_argument(
        "--run-date",
        help="logical date (ISO) of the DAG run; giving the same date again re-runs that same DAG run, "
        "replacing its rows rather than adding new ones",
    )
    run.set_defaults(func=_cmd_run)

    from dlperf_core.parsing.window import MIN_FITTED_MEASURED

    parse = sub.add_parser("parse", help="parse training logs and print throughput per run")
    parse.add_argument("logs", nargs="+")
    parse.add_argument("--json", action="store_true")
    parse.add_argument("--format", help="force a log format instead of detecting it")
    parse.add_argument("--warmup", type=int, help="warm-up iterations to skip (default: the format's)")
    parse.add_argument("--measured", type=int, help="iterations in the measured window (default: the format's)")
    parse.add_argument(
        "--strict",
        action="store_true",
        help="the window of dlperf's own runs: a log shorter than warm-up + measured, or stopped before its "
        "planned end, is failed (default: the window is fitted to the log, with at least "
        f"{MIN_FITTED_MEASURED} iterations after warm-up, and the run says window_fitted)",
    )
    parse.set_defaults(func=_cmd_parse)

    imp = sub.add_parser(
        "import",
        help="store a DLPerf-style result folder and print its DLPerf result JSON, or an MLPerf Training "
        "submission folder with its official scores",
    )
    imp.add_argument(
        "folder",
        help="folder of {nodes}n{gpus}g/{model}_b{batch}_{precision}_{k}.log files, or of MLPerf's "
        "<submitter>/results/<system>/<benchmark>/result_<n>.txt (a round's folder or one submitter's)",
    )
    imp.add_argument(
        "--ruleset",
        help="MLPerf: the rules' version for mlperf_logging (default: from a folder named training_vX.Y, e.g. 1.0.0)",
    )
    imp.add_argument("--db", help="results database URL")
    imp.add_argument("--json-out", help="also write the DLPerf result JSON to this file")
    imp.add_argument("--format", help="force a log format instead of detecting it")
    imp.add_argument("--framework", help="framework name to store (default: the detected log format)")
    imp.add_argument(
        "--strict",
        action="store_true",
        help="strict windows as for dlperf's own runs (default: fitted to each log, see dlperf parse)",
    )
    imp.add_argument(
        "--dry-run",
        action="store_true",
        help="print the row each file would give (and the summary) without storing anything",
    )
    imp.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr (default: when stderr is a terminal)",
    )
    imp.set_defaults(func=_cmd_import)

    res = sub.add_parser("results", help="print the per-case summary from the results database")
    res.add_argument("--db", help="results database URL")
    res.add_argument("--run-id", help="a DAG run id (default: the latest benchmark run)")
    res.add_argument("--all", action="store_true", help="every run, not only the latest")
    res.add_argument("--json", action="store_true")
    res.set_defaults(func=_cmd_results)

    from dlperf_cli.report_cmd import add_report_parser

    add_report_parser(sub)  # dlperf report

    from dlperf_cli.commands_cmd import add_commands_parser

    add_commands_parser(sub)  # dlperf commands

    from dlperf_cli.cluster_cmd import add_cluster_parser

    add_cluster_parser(sub)  # dlperf cluster sync

    from dlperf_cli.data_cmds import add_data_commands

    add_data_commands(sub)  # dlperf compare, dlperf db analyst-role

    from dlperf_cli.reproduce_cmd import add_reproduce_parser

    add_reproduce_parser(sub)  # dlperf reproduce

    from dlperf_cli.regressions_cmd import add_regressions_parser

    add_regressions_parser(sub)  # dlperf regressions replay

    from dlperf_cli.airflow_setup_cmd import add_airflow_setup_parser

    add_airflow_setup_parser(sub)  # dlperf airflow-setup
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if (line := results_database_line(args)) is not None:
        print(line, file=sys.stderr, flush=True)  # run from another folder, still visibly the same database
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
