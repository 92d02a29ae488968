"""``dlperf reproduce RUN_ID CASE_KEY [--repeat N] [--db URL] [--run]``: one stored data point, again.

Without ``--run`` it prints the result's launch spec (``results.launch_spec``, :mod:`dlperf_core.run.launch_spec`) as
shell commands to run by hand on the nodes. With ``--run`` it re-runs the point through the same
``dlperf_benchmark`` DAG as ``dlperf run`` (so it holds the same pool), as a new DAG run whose plan is that case
once (the ``case_keys`` filter), stores its row beside the original's and prints one comparison line.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dlperf_core.run.launch_spec import LaunchSpec
    from dlperf_core.storage import ResultStore
    from dlperf_core.storage.rows import ResultRow


class Refused(Exception):
    """Why a data point cannot be reproduced (exit 2, nothing on stdout)."""


def add_reproduce_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``reproduce`` subcommand."""
    rep = sub.add_parser(
        "reproduce",
        help="print the commands that measured a stored data point, or re-run it as a new run (--run)",
    )
    rep.add_argument("run_id", metavar="RUN_ID", help="the run id (DAG run id) the data point belongs to")
    rep.add_argument(
        "case_key",
        metavar="CASE_KEY",
        help="its case key (results.case_key); without its +args=... part when that names one case of the run",
    )
    rep.add_argument("--repeat", type=int, help="which repeat (default: the first ok one, else 0)")
    rep.add_argument("--db", help="results database URL (default: $DLPERF_DB_URL or $DLPERF_HOME/.dlperf/dlperf.db)")
    rep.add_argument(
        "--run",
        action="store_true",
        help="re-run it through the dlperf_benchmark DAG (a new run, stored beside the original) and compare",
    )
    rep.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from dlperf_core.storage import ResultStore, default_db_url

    if args.db:  # --run: the DAG's tasks write where this command reads
        os.environ["DLPERF_DB_URL"] = args.db
    store = ResultStore(args.db or default_db_url())
    try:
        store.ensure_schema()
        row = find_row(store, args.run_id, args.case_key, args.repeat)
        if not args.run:
            print(script_of(row), end="")
            return 0
        return rerun(store, row)
    except Refused as exc:
        print(f"dlperf reproduce: {exc}", file=sys.stderr)
        return 2
    finally:
        store.dispose()


def find_row(store: ResultStore, run_id: str, case_key: str, repeat: int | None) -> ResultRow:
    """The stored result to reproduce: ``case_key`` (or the one case of the run whose key is ``case_key`` and a
    ``+args=`` part) of ``run_id``, its repeat ``repeat`` (None: the first ok one, else 0)."""
    from dlperf_core.model import series_base

    rows = store.result_rows(run_id=run_id)
    if not rows:
        raise Refused(f"no results for run {run_id} (see `dlperf results --all`)")
    keys = sorted({r.case_key for r in rows})
    if case_key not in keys:
        near = [k for k in keys if series_base(k) == case_key]
        if len(near) != 1:
            which = "several cases: " + ", ".join(near) + "; give the full key" if near else "no case " + case_key
            raise Refused(f"run {run_id} has {which} (its cases: {', '.join(keys)})")
        case_key = near[0]
    of_case = [r for r in rows if r.case_key == case_key]
    dags = sorted({r.dag_id for r in of_case})
    if len(dags) > 1:
        raise Refused(f"run {run_id} of several DAGs ({', '.join(dags)}) has {case_key}")
    if repeat is None:
        ok = sorted(r.repeat for r in of_case if r.status == "ok")
        repeat = ok[0] if ok else 0
    chosen = [r for r in of_case if r.repeat == repeat]
    if not chosen:
        have = ", ".join(str(r) for r in sorted(r.repeat for r in of_case))
        raise Refused(f"{case_key} of run {run_id} has no repeat {repeat} (its repeats: {have})")
    row = chosen[0]
    if not row.launch_spec:
        how = (
            "was imported from a log (dlperf import): dlperf did not launch it"
            if row.figure_origin == "imported"
            else "was stored without a launch spec (before migration 0010 recorded them), so nothing says how it "
            "was launched"
        )
        raise Refused(f"{case_key} repeat {repeat} of run {run_id} {how}")
    return row


def figure_of(row: ResultRow) -> str:
    """``123.45 samples/s``, or ``failed: reason``."""
    from dlperf_core.measure.efficiency import throughput_unit

    if row.status == "ok" and row.throughput is not None:
        return f"{row.throughput:.2f} {throughput_unit(row.model)}"
    return f"failed: {row.reason or 'no reason stored'}"


def _launch_spec(row: ResultRow) -> LaunchSpec:
    """The row's launch spec (:func:`find_row` only hands on rows that have one)."""
    from dlperf_core.run.launch_spec import LaunchSpec

    assert row.launch_spec is not None, f"{row.case_key} repeat {row.repeat} has no launch spec"
    return LaunchSpec.from_json(row.launch_spec)


def script_of(row: ResultRow) -> str:
    from dlperf_core.run.launch_spec import shell_script

    return shell_script(_launch_spec(row), run_id=row.run_id, dag_id=row.dag_id, figure=figure_of(row))


def rerun_conf(row: ResultRow) -> dict[str, object]:
    """The trigger conf that plans the row's case once, from the suite and inventory files it was planned from
    (its launch spec names them) and its stored configuration; Refused, saying why, when they cannot give it
    back."""
    from dataclasses import replace

    from dlperf_core.cluster.inventory import load_inventory
    from dlperf_core.errors import ConfigError
    from dlperf_core.plan.cases import plan_suite
    from dlperf_core.plan.form_overrides import apply_form
    from dlperf_core.plan.reproduce import reproduce_form
    from dlperf_core.plan.suite import load_suite

    spec = _launch_spec(row)
    key = row.case_key
    configuration = row.configuration
    if not configuration:
        raise Refused(f"{key} was stored without its configuration: it cannot be planned again")
    for what, path in (("suite", spec.suite), ("inventory", spec.inventory)):
        if not path or not Path(path).is_file():
            raise Refused(f"cannot re-run {key}: the {what} file it was planned from ({path}) is not here")
    assert spec.suite is not None and spec.inventory is not None
    try:
        suite = load_suite(spec.suite)
        form = reproduce_form(suite, configuration, key)
        plan_suite(apply_form(suite, form), load_inventory(spec.inventory), form.filters())
    except ConfigError as exc:
        raise Refused(f"cannot rebuild {key} from its stored configuration and {spec.suite}:\n{exc}") from exc
    return replace(form, suite=spec.suite, runtime=spec.runtime, inventory=spec.inventory).to_params()


def rerun(store: ResultStore, row: ResultRow) -> int:
    """Re-run the row's case through the DAG as a new run; print the comparison line."""
    conf = rerun_conf(row)
    key, original_run = row.case_key, row.run_id
    os.environ.setdefault("DLPERF_PROGRESS", "1")
    print(
        f"dlperf: re-running {key} (repeat {row.repeat} of run {original_run}) through the dlperf_benchmark DAG",
        file=sys.stderr,
        flush=True,
    )
    from dlperf_cli.embedded import run_dag

    dag_run = run_dag(conf)
    new = [r for r in store.result_rows(run_id=dag_run.run_id, dag_id=dag_run.dag_id) if r.case_key == key]
    if not new:
        print(f"dlperf reproduce: run {dag_run.run_id} stored no row of {key} ({dag_run.state})", file=sys.stderr)
        return 1
    again = new[0]
    _note_image_changes(row, again)
    print(comparison_line(row, again))
    return 0 if again.status == "ok" and str(dag_run.state).endswith("success") else 1


def comparison_line(original: ResultRow, again: ResultRow) -> str:
    """``reproduced KEY: 123.40 samples/s vs 120.10 in RUN (+2.7%); new run NEW`` (or what failed)."""
    key, run_id, new_run = original.case_key, original.run_id, again.run_id
    if again.status != "ok" or again.throughput is None:
        return f"reproduce of {key} failed in run {new_run}: {again.reason}; {figure_of(original)} in {run_id}"
    figure = figure_of(again)
    if original.status == "ok" and original.throughput is not None:
        change = (again.throughput - original.throughput) / original.throughput * 100
        return (
            f"reproduced {key}: {figure} vs {original.throughput:.2f} in {run_id} ({change:+.1f}%); new run {new_run}"
        )
    return f"reproduced {key}: {figure} vs failed in {run_id}; new run {new_run}"


def _note_image_changes(original: ResultRow, again: ResultRow) -> None:
    """Say on stderr where a node ran another image than the original did (the tag moved, a rebuild)."""
    if not again.launch_spec:
        return
    before = {n.rank: n.image for n in _launch_spec(original).nodes}
    for node in _launch_spec(again).nodes:
        old = before.get(node.rank)
        if old and node.image and old.id and node.image.id and old.id != node.image.id:
            print(
                f"dlperf reproduce: note: {node.node} ran image {node.image.id} ({node.image.tag}); "
                f"the original ran {old.id} ({old.tag})",
                file=sys.stderr,
            )
