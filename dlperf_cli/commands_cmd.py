"""``dlperf commands SUITE``: print the exact command and container of every node of every case (dry run)."""

from __future__ import annotations

import argparse
import sys


def _cmd_commands(args: argparse.Namespace) -> int:
    from dlperf_core.errors import ConfigError

    try:
        text, note = _suite_commands(args)
    except (ConfigError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 2
    print(text)
    if note:
        print(f"warning: {note}", file=sys.stderr)
    return 0


def _suite_commands(args: argparse.Namespace) -> tuple[str, str | None]:
    """The text ``dlperf commands`` prints, and what planning would warn about on the docker runtime (nodes that
    preflight cannot check: :func:`dlperf_core.plan.trigger.unchecked_by_preflight`); ConfigError or ValueError for
    a suite or inventory it cannot use."""
    from dlperf_core.cluster.inventory import load_inventory
    from dlperf_core.errors import ConfigError
    from dlperf_core.plan.cases import PlanFilters, expand_cases, nodes_used
    from dlperf_core.plan.suite import load_suite
    from dlperf_core.plan.trigger import unchecked_by_preflight
    from dlperf_core.run.commands import suite_commands

    suite = load_suite(args.suite)
    inventory_path = args.inventory or suite.inventory_path()
    if inventory_path is None:
        raise ConfigError(args.suite, ["no inventory: give --inventory or set one in the suite"])
    filters = PlanFilters(
        frameworks=tuple(args.framework or ()),
        precisions=tuple(args.precision or ()),
        topologies=tuple(args.topology or ()),
    )
    inventory = load_inventory(inventory_path)
    note = None
    if suite.runtime == "docker":
        fitting = [case for case, _ in expand_cases(suite, filters, inventory) if case.nodes <= len(inventory.nodes)]
        note = unchecked_by_preflight(nodes_used(fitting, inventory), inventory.name)
    return suite_commands(suite, inventory, filters), note


def add_commands_parser(sub) -> None:
    cmd = sub.add_parser(
        "commands", help="print every node's command and container settings for a suite's cases (nothing runs)"
    )
    cmd.add_argument("suite", help="suite YAML file")
    cmd.add_argument("--inventory", help="node inventory (default: the suite's)")
    cmd.add_argument("--framework", action="append", help="only this framework (repeatable)")
    cmd.add_argument("--precision", action="append", help="only this precision (repeatable)")
    cmd.add_argument("--topology", action="append", help="only this topology, e.g. 2n8g (repeatable)")
    cmd.set_defaults(func=_cmd_commands)
