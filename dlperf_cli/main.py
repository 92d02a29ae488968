"""``dlperf run | parse | results``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _cmd_run(args: argparse.Namespace) -> int:
    from dlperf_core.errors import ConfigError
    from dlperf_core.suite import load_suite

    try:
        load_suite(args.suite)  # refuse a bad suite before Airflow even starts
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.db:
        os.environ["DLPERF_DB_URL"] = args.db
    os.environ.setdefault("DLPERF_PROGRESS", "1")
    conf = {"suite": str(Path(args.suite).resolve()), "runtime": args.runtime or "suite"}
    if args.inventory:
        conf["inventory"] = str(Path(args.inventory).resolve())
    if args.repeats:
        conf["repeats"] = args.repeats
    from dlperf_cli.embedded import run_dag

    print(f"dlperf: running {args.suite} through the dlperf_benchmark DAG (dag.test)", file=sys.stderr, flush=True)
    logical_date = None
    if args.run_date:
        from datetime import datetime, timezone

        logical_date = datetime.fromisoformat(args.run_date)
        if logical_date.tzinfo is None:
            logical_date = logical_date.replace(tzinfo=timezone.utc)
    dag_run = run_dag(conf, logical_date)
    from dlperf_core.reporting import seed_tables
    from dlperf_core.storage import ResultStore, default_db_url

    store = ResultStore(default_db_url())
    store.ensure_schema()  # a run refused at planning never reached the database: no crash on an empty one
    summary = store.summary(dag_id=dag_run.dag_id, run_id=dag_run.run_id)
    from dlperf_core.reporting.tables import max_batch_markdown

    searched = max_batch_markdown(store.max_batch_searches(run_id=dag_run.run_id, dag_id=dag_run.dag_id))
    if len(summary) or not searched:  # a run of searches only has no case table to show
        print(seed_tables(summary))
    if searched:
        print(("\n" if len(summary) else "") + searched)
    state = str(dag_run.state)
    from dlperf_cli.report_cmd import report_location

    page = report_location(dag_run.dag_id, dag_run.run_id)
    print(f"\nreport: {page}" if page else "\nreport: none written (see the make_report task log)")
    print(f"\nDAG run {dag_run.run_id}: {state}; results in {_redact(default_db_url())}")
    return 0 if state.endswith("success") else 1


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _cmd_parse(args: argparse.Namespace) -> int:
    from dlperf_core.parsing import parse_file

    out = []
    for path in args.logs:
        for run in parse_file(path, format=args.format, warmup=args.warmup, measured=args.measured):
            out.append(run.to_dict())
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for r in out:
            tp = f"{r['throughput']:.2f}" if r["throughput"] else "-"
            rep = f"{r['reported_throughput']:.2f}" if r["reported_throughput"] else "-"
            print(f"{r['file']}\t{r['format']}\t{r['status']}\tthroughput={tp}\treported={rep}\t{r['reason'] or ''}")
    return 0 if all(r["status"] == "ok" for r in out) else 1


def _cmd_import(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from dlperf_core.dlperf_folder import RepeatFigure, result_json, scan_folder
    from dlperf_core.parsing import parse_file
    from dlperf_core.storage import BenchmarkRunRecord, ResultRecord, ResultStore, default_db_url

    root = Path(args.folder).resolve()
    logs, unnamed = scan_folder(root)
    for path in unnamed:
        print(f"skipped (not <NnMg>/<model>_b<batch>_<precision>_<k>.log): {path}", file=sys.stderr)
    if not logs:
        print(f"no DLPerf-style logs under {root}", file=sys.stderr)
        return 2
    store = ResultStore(args.db or default_db_url())
    store.ensure_schema()
    now = datetime.now(timezone.utc)
    run = BenchmarkRunRecord(
        dag_id="dlperf_import", run_id=f"import__{root}", suite=root.name, trigger="import", runtime="import",
        started_at=now, finished_at=now, status="success",
    )
    store.upsert_run(run)
    figures, failed = [], 0
    for log in logs:
        runs = parse_file(log.path, format=args.format)
        total = log.nodes * log.gpus_per_node
        parsed = next((r for r in runs if r.gpus == total), runs[0])  # a file may hold several runs
        ok = parsed.status == "ok"
        failed += not ok
        figures.append(RepeatFigure(log, parsed.throughput if ok else None))
        store.upsert_result(
            ResultRecord(
                dag_id=run.dag_id, run_id=run.run_id,
                case_key=f"{args.framework or parsed.format}/{log.model}/{log.precision}/b{log.batch_size_per_device}/{log.case}",
                framework=args.framework or parsed.format, model=log.model, precision=log.precision,
                batch_size_per_device=log.batch_size_per_device, nodes=log.nodes, gpus_per_node=log.gpus_per_node,
                repeat=log.repeat, status="ok" if ok else "failed", reason=parsed.reason,
                throughput=parsed.throughput if ok else None, reported_throughput=parsed.reported_throughput,
                iterations=parsed.iterations, log_path=str(log.path), started_at=now, finished_at=now,
                benchmark_run=run,
            )
        )
        figure = f"{parsed.throughput:.2f}" if ok else f"failed: {parsed.reason}"
        print(f"{log.path.relative_to(root)}\t{parsed.format}\t{figure}", file=sys.stderr)
    result = result_json(figures)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(json.dumps(result, indent=2, sort_keys=True))
    print(f"imported {len(logs)} logs ({failed} failed) as run {run.run_id}", file=sys.stderr)
    return 0


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
    run.add_argument("--db", help="results database URL (default: $DLPERF_DB_URL or .dlperf/dlperf.db)")
    run.add_argument(
        "--run-date",
        help="logical date (ISO) of the DAG run; giving the same date again re-runs that same DAG run, "
        "replacing its rows rather than adding new ones",
    )
    run.set_defaults(func=_cmd_run)

    parse = sub.add_parser("parse", help="parse training logs and print throughput per run")
    parse.add_argument("logs", nargs="+")
    parse.add_argument("--json", action="store_true")
    parse.add_argument("--format", help="force a log format instead of detecting it")
    parse.add_argument("--warmup", type=int, help="warm-up iterations to skip (default: the format's)")
    parse.add_argument("--measured", type=int, help="iterations in the measured window (default: to the end)")
    parse.set_defaults(func=_cmd_parse)

    imp = sub.add_parser("import", help="store a DLPerf-style result folder and print its DLPerf result JSON")
    imp.add_argument("folder", help="folder of {nodes}n{gpus}g/{model}_b{batch}_{precision}_{k}.log files")
    imp.add_argument("--db", help="results database URL")
    imp.add_argument("--json-out", help="also write the DLPerf result JSON to this file")
    imp.add_argument("--format", help="force a log format instead of detecting it")
    imp.add_argument("--framework", help="framework name to store (default: the detected log format)")
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
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
