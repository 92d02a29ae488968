"""Where the test suite's time goes: each test file's seconds (set-up, call and teardown) from pytest's JUnit XML,
the files of the Docker Engine group (tests/conftest.py: ENGINE_TESTS, one after another on one pytest-xdist worker)
apart from the rest, and the longest tests.

    python bench/ci_durations.py .dlperf/test-report.xml [--top 15] [--markdown]

`make test` writes that report (TEST_REPORT); `.ci/run` prints this table after the tests. Figures, not checks: the
budget is scripts/check-test-budget.sh's. docs/ci.md keeps the table of a clean-clone run.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import in_engine_group, on_own_network  # noqa: E402  (tests/conftest.py: the groups)


def durations(report: Path) -> dict[str, float]:
    """Test node id -> seconds (JUnit's time: set-up, call and teardown) of every test case in the report."""
    found: dict[str, float] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        module = (case.get("classname") or "").split(".")
        # classname is the module path with dots, then the class if any: find where the file name ends
        for cut in range(len(module), 0, -1):
            path = "/".join(module[:cut]) + ".py"
            if (REPO / path).is_file():
                nodeid = "::".join([path, *module[cut:], case.get("name", "?")])
                break
        else:
            nodeid = f"{case.get('classname')}::{case.get('name')}"
        found[nodeid] = found.get(nodeid, 0.0) + float(case.get("time", 0.0))
    return found


def group_of(nodeid: str) -> str:
    if in_engine_group(nodeid):
        return "engine"
    return "own network" if on_own_network(nodeid) else "free"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--top", type=int, default=15, help="files and tests to list (default 15)")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table (docs/ci.md)")
    args = parser.parse_args()
    tests = durations(args.report)
    files: dict[str, float] = defaultdict(float)
    groups: dict[str, float] = defaultdict(float)
    groups_of_file: dict[str, set[str]] = defaultdict(set)
    for nodeid, seconds in tests.items():
        path = nodeid.split("::", 1)[0]
        files[path] += seconds
        groups[group_of(nodeid)] += seconds
        groups_of_file[path].add(group_of(nodeid))
    print(f"{len(tests)} tests, {sum(tests.values()):.0f} s in all (summed over the workers)")
    for group, seconds in sorted(groups.items(), key=lambda g: -g[1]):
        print(f"  {group:12} {seconds:7.0f} s  ({seconds / 60:.1f} min)")
    longest = sorted(files.items(), key=lambda f: -f[1])[: args.top]
    if args.markdown:
        print("\n| test file | group | seconds |\n|---|---|---:|")
        for path, seconds in longest:
            print(f"| `{path}` | {' + '.join(sorted(groups_of_file[path]))} | {seconds:.0f} |")
    else:
        print(f"\nthe {len(longest)} longest files:")
        for path, seconds in longest:
            print(f"  {seconds:7.1f} s  {' + '.join(sorted(groups_of_file[path])):11}  {path}")
        print(f"\nthe {args.top} longest tests:")
        for nodeid, seconds in sorted(tests.items(), key=lambda t: -t[1])[: args.top]:
            print(f"  {seconds:7.1f} s  {nodeid}")


if __name__ == "__main__":
    main()
