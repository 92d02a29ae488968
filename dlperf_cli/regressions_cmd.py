"""``dlperf regressions replay [CSV] [--db URL]``: a nightly series judged night by night as the nightly task would;
``dlperf regressions accept ID --reason TEXT``: a regression accepted as the new normal.

The rule is the nightly task's own (:func:`dlperf_core.measure.regression.judge_series`, through
:mod:`dlperf_core.measure.replay`); the series comes from a CSV file (header ``night,configuration,median,repeats,cv``)
or from the results database's nightly history. Nothing is stored and nobody is alerted. A CSV that cannot be read
is refused with its line named (exit 2) before anything is printed.
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dlperf_core.measure.replay import SeriesNight


def add_regressions_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``regressions`` (with its subcommand ``replay``) on the dlperf parser."""
    from dlperf_core.measure.regression import Policy
    from dlperf_core.measure.replay import CSV_COLUMNS

    regressions = sub.add_parser("regressions", help="the nightly regression detector over a series of your own")
    regressions_sub = regressions.add_subparsers(dest="regressions_command", required=True)
    replay = regressions_sub.add_parser(
        "replay",
        help="print each night's verdict of a nightly series (a CSV file, or the results database's nightly "
        "history), as the nightly task would have given it",
    )
    replay.add_argument(
        "csv",
        nargs="?",
        metavar="CSV",
        help=f"a CSV file with the header {','.join(CSV_COLUMNS)} (one row per configuration and night; see "
        "docs/operations.md); without it, --db",
    )
    replay.add_argument("--db", help="read the nightly history of this results database instead of a CSV file")
    replay.add_argument("--configuration", help="only the configurations whose name contains this text")
    replay.add_argument(
        "--confirm-nights",
        type=int,
        default=Policy().confirm_nights,
        help="nights at a new level before it is a regression (default %(default)s: the rule flags, change points "
        "confirm); 1: the median/MAD rule alone, alerting the morning after the first bad night",
    )
    replay.add_argument(
        "--brief", action="store_true", help="only the nights judged suspected, new or recovered (and the totals)"
    )
    replay.set_defaults(func=cmd_replay)
    accept = regressions_sub.add_parser(
        "accept",
        help="accept an open regression as the new normal: it is closed, and its configuration's baseline starts "
        "on its first bad night (nightly history is kept)",
    )
    accept.add_argument("regression_id", type=int, metavar="ID", help="the regression's id (regressions.id)")
    accept.add_argument("--reason", required=True, help="why it is the new normal (kept in closed_reason)")
    accept.add_argument(
        "--from",
        dest="from_night",
        type=_night,
        metavar="YYYY-MM-DD",
        help="the night the baseline starts on (default: the regression's first bad night, else its night)",
    )
    accept.add_argument("--db", help="results database URL (default: $DLPERF_DB_URL or .dlperf/dlperf.db)")
    accept.set_defaults(func=cmd_accept)


def _night(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date YYYY-MM-DD: {text!r}") from None


def cmd_accept(args: argparse.Namespace) -> int:
    """Accept regression ``args.regression_id`` as the new normal (``ResultStore.accept_regression``)."""
    from dlperf_core.storage import ResultStore, default_db_url

    store = ResultStore(args.db or default_db_url())
    try:
        start = store.accept_regression(args.regression_id, args.reason, args.from_night)
    except ValueError as exc:
        print(f"dlperf regressions accept: {exc}", file=sys.stderr)
        return 2
    finally:
        store.dispose()
    if start is None:
        print(f"dlperf regressions accept: no open regression with id {args.regression_id}", file=sys.stderr)
        return 1
    print(f"regression {args.regression_id} accepted as the new normal: its configuration's baseline starts on {start}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from dlperf_core.measure.regression import Policy
    from dlperf_core.measure.replay import ReplayInputError, format_replay, read_csv, replay

    if (args.csv is None) == (args.db is None):
        print("dlperf regressions replay: give a CSV file or --db URL (one of them)", file=sys.stderr)
        return 2
    try:
        policy = Policy(confirm_nights=args.confirm_nights)
    except ValueError as exc:
        print(f"dlperf regressions replay: {exc}", file=sys.stderr)
        return 2
    try:
        if args.csv is not None:
            path = Path(args.csv)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ReplayInputError(f"{path}: cannot be read ({exc})") from None
            nights = read_csv(text, str(path))
        else:
            nights = _database_nights(args.db)
    except ReplayInputError as exc:
        print(f"dlperf regressions replay: {exc}", file=sys.stderr)
        return 2
    if args.configuration:
        nights = [n for n in nights if args.configuration in n.configuration]
    if not nights:
        print("dlperf regressions replay: no nights to replay", file=sys.stderr)
        return 2
    print(format_replay(replay(nights, policy), brief=args.brief))  # built whole first: nothing half-printed
    return 0


def _database_nights(url: str) -> list[SeriesNight]:
    """Every configuration's ``nightly_history`` rows in the database at ``url``, with their environments."""
    from dlperf_core.measure.regression import NightlyRow
    from dlperf_core.measure.replay import from_nightly_rows
    from dlperf_core.storage import ResultStore

    store = ResultStore(url)
    try:
        store.ensure_schema()
        configurations = {row.configuration for row in store.summary_rows()}
        rows = [
            NightlyRow.from_history(row)
            for configuration in configurations
            for row in store.history_rows(configuration)
        ]
        ids = {row.environment_id for row in rows if row.environment_id is not None}
        environments = store.environment_infrastructure(ids)
    finally:
        store.dispose()
    return from_nightly_rows(rows, environments)
