"""Run the fault-injection suite and print the docs/reliability.md tables and totals from that run.

    .venv/bin/python bench/reliability_report.py [--json FILE] [--only-faults] [-- PYTEST_ARGS...]

Runs pytest on tests/faults/ and tests/chaos/ plus the fault and security tests that live elsewhere (the ledger in
tests/fault_ledger.py records each: what was injected, what the test observed, results lost,
containers leaked), then prints markdown: faults, bad inputs, security, and the totals (faults injected,
survived, results lost, containers leaked). Every figure comes from the run; nothing is typed in.
Exit status: pytest's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fault_ledger import EXTERNAL  # noqa: E402  (the list of fault tests outside tests/faults)


def _cell(text: object) -> str:
    return str(text if text is not None else "-").replace("|", "\\|").replace("\n", " ")


def _state(rec: dict) -> str:
    if rec["skipped"]:
        return f"skipped: {rec['skipped']}"
    return "held" if rec["survived"] else "**FAILED**"


def markdown(data: dict) -> str:
    records = data["records"]
    out = []
    kinds = [("fault", "Faults"), ("bad input", "Bad input"), ("security", "Security")]
    for kind, title in kinds:
        rows = sorted((r for r in records if r["kind"] == kind), key=lambda r: r["name"])
        if not rows:
            continue
        out.append(f"### {title}\n")
        if kind == "fault":
            out.append("| fault | how injected | expected | observed | held | lost | duplicated | leaked | test |")
            out.append("| ----- | ------------ | -------- | -------- | ---- | ---- | ---------- | ------ | ---- |")
            for r in rows:
                out.append(
                    "| "
                    + " | ".join(
                        _cell(x)
                        for x in (
                            r["name"],
                            r["injected"],
                            r["expected"],
                            r["observed"],
                            _state(r),
                            r["results_lost"],
                            r.get("results_duplicated"),
                            r["containers_leaked"],
                            f"`{r['test']}`",
                        )
                    )
                    + " |"
                )
        else:
            out.append("| input / check | how | expected | observed | held | test |")
            out.append("| ------------- | --- | -------- | -------- | ---- | ---- |")
            for r in rows:
                out.append(
                    "| "
                    + " | ".join(
                        _cell(x)
                        for x in (r["name"], r["injected"], r["expected"], r["observed"], _state(r), f"`{r['test']}`")
                    )
                    + " |"
                )
        out.append("")
    t = data["totals"]
    out.append("### Totals\n")
    out.append(
        "| faults injected | survived | results lost | results duplicated | containers leaked | bad inputs handled "
        "| security checks passed |"
    )
    out.append(
        "| --------------- | -------- | ------------ | ------------------ | ----------------- | ------------------ "
        "| ---------------------- |"
    )
    out.append(
        f"| {t['faults_injected']} | {t['survived']} | {t['results_lost']} | {t.get('results_duplicated', 0)} | "
        f"{t['containers_leaked']} | "
        f"{t['bad_inputs_checked']} | {t['security_checks_passed']} |"
    )
    if t["results_lost_unmeasured"] or t["containers_leaked_unmeasured"]:
        out.append(
            f"\n(not measured because the test failed: results lost in {t['results_lost_unmeasured']}, "
            f"containers in {t['containers_leaked_unmeasured']} faults)"
        )
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="also keep the ledger JSON here")
    parser.add_argument("--only-faults", action="store_true", help="tests/faults only, not the external tests")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    out = Path(args.json) if args.json else Path(tempfile.mkstemp(suffix=".json")[1])
    targets = ["tests/faults"] + ([] if args.only_faults else ["tests/chaos", *sorted(EXTERNAL)])
    env = {**os.environ, "DLPERF_RELIABILITY_JSON": str(out)}
    started = datetime.now(UTC)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *targets, *args.pytest_args],
        cwd=REPO,
        env=env,
    )
    minutes = (datetime.now(UTC) - started).total_seconds() / 60
    if not out.exists() or not out.read_text().strip():
        print("no ledger written (did pytest collect tests/faults?)", file=sys.stderr)
        return done.returncode or 1
    data = json.loads(out.read_text())
    print(
        f"\n<!-- bench/reliability_report.py, {started:%Y-%m-%d %H:%M} UTC, {platform.node()}, "
        f"{os.cpu_count()} CPUs, {minutes:.1f} min, pytest exit {done.returncode} -->\n"
    )
    print(markdown(data))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
