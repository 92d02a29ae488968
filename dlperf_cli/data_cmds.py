"""``dlperf compare RUN_A RUN_B`` and ``dlperf db analyst-role --name NAME``."""

from __future__ import annotations

import argparse
import os
import sys


def _store(url: str | None):
    from dlperf_core.storage import ResultStore, default_db_url

    store = ResultStore(url or default_db_url())
    store.ensure_schema()
    return store


def cmd_compare(args: argparse.Namespace) -> int:
    from dlperf_core.measure.compare import compare_runs, format_table, to_frame

    store = _store(args.db)
    try:
        a = store.results(run_id=args.run_a)
        b = store.results(run_id=args.run_b)
    finally:
        store.dispose()
    missing = [run for run, rows in ((args.run_a, a), (args.run_b, b)) if rows.empty]
    if missing:
        print(f"no results for run {', '.join(missing)} (see `dlperf results --all`)", file=sys.stderr)
        return 2
    rows = compare_runs(a, b, alpha=args.alpha)
    if args.json:
        print(to_frame(rows).to_json(orient="records", indent=2))
    else:
        print(format_table(rows, args.run_a, args.run_b, alpha=args.alpha))
    return 0


def cmd_analyst_role(args: argparse.Namespace) -> int:
    from dlperf_core.storage.analyst import create_analyst_role

    password = os.environ.get(args.password_env)
    if not password:
        print(f"set the role's password in ${args.password_env} (it is never taken as an argument)", file=sys.stderr)
        return 2
    store = _store(args.db)
    try:
        new = create_analyst_role(store.engine, args.name, password)
    except ValueError as exc:
        print(f"dlperf db analyst-role: {exc}", file=sys.stderr)
        return 2
    finally:
        store.dispose()
    verb = "created" if new else "updated"
    print(f"read-only role {args.name} {verb}: SELECT on every table and view, also on those created later")
    return 0


def add_data_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``compare`` and ``db`` on the dlperf parser."""
    cmp = sub.add_parser("compare", help="per-case differences between two runs, with their significance")
    cmp.add_argument("run_a", metavar="RUN_A", help="run id of the reference run")
    cmp.add_argument("run_b", metavar="RUN_B", help="run id of the run compared with it")
    cmp.add_argument("--db", help="results database URL (default: $DLPERF_DB_URL or .dlperf/dlperf.db)")
    cmp.add_argument("--alpha", type=float, default=0.05, help="significance level of the Welch t-test")
    cmp.add_argument("--json", action="store_true")
    cmp.set_defaults(func=cmd_compare)

    db = sub.add_parser("db", help="results database administration")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    role = db_sub.add_parser("analyst-role", help="create a read-only PostgreSQL role for analysts")
    role.add_argument("--name", required=True, help="role name (lower-case letters, digits, _)")
    role.add_argument(
        "--password-env",
        default="DLPERF_ANALYST_PASSWORD",
        help="environment variable holding the password (default: DLPERF_ANALYST_PASSWORD)",
    )
    role.add_argument("--db", help="results database URL (an admin connection)")
    role.set_defaults(func=cmd_analyst_role)
