"""The fault ledger: every fault test records what it injected and what it observed; at the end of the
session pytest prints the table and the totals (faults injected, survived, results lost, containers
leaked), and writes them as JSON to ``$DLPERF_RELIABILITY_JSON`` when set (bench/reliability_report.py
turns that into the docs/reliability.md tables). The figures come from the run, never from a hand.

The ledger is registered as a session plugin by tests/conftest.py (not a conftest hook), so it also sees the fault
tests that live elsewhere (EXTERNAL: the docker kill and re-run tests, the supervisor's watchdog test) when they run
in the same session: for those, passing means what their assertions say (nothing lost, nothing left).

Under pytest-xdist (``make test`` runs two workers) each worker keeps the records of its own tests and hands them
to the controller at its end (``workeroutput``); the controller merges them and prints the one ledger.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

LEDGER_PLUGIN = "dlperf-fault-ledger"
WORKER_OUTPUT_KEY = "dlperf_fault_ledger"  # the records an xdist worker hands to the controller


@dataclass
class FaultRecord:
    """One injected fault (or bad input, or security check) and what came of it."""

    kind: str  # "fault" | "bad input" | "security"
    name: str
    injected: str  # how it was injected / what was checked
    expected: str
    test: str = ""  # pytest node id
    observed: str = ""  # what the test saw (filled in by the test)
    results_lost: int | None = None  # results produced but not in the database at the end
    results_duplicated: int | None = None  # result rows stored twice for one case run and repeat
    containers_leaked: int | None = None  # containers of the run still present at the end
    survived: bool | None = None  # the test passed (None: skipped or not run)
    skipped: str | None = None  # skip reason


EXTERNAL: dict[str, FaultRecord] = {
    "tests/e2e/test_e2e_docker.py::test_killed_container_fails_only_its_case_and_leaves_nothing": FaultRecord(
        kind="fault",
        name="container killed mid-run",
        injected="`docker kill` of the 1n1g case's container after iteration 3 (real dockerd, dag.test)",
        expected="that repeat failed with 'killed' reason; the 1n2g case still runs ok; no dlperf container left",
    ),
    "tests/e2e/test_e2e_docker.py::test_smoke_suite_on_container_nodes_twice_without_duplicates": FaultRecord(
        kind="fault",
        name="re-run of a whole DAG run (docker)",
        injected="the same DAG run (same logical date, same run id) run twice on container nodes",
        expected="6 rows both times, the same row ids (updated in place); no container left",
    ),
    "tests/airflow_plugin/test_ssh_preflight.py::test_cases_on_a_bad_node_fail_with_the_reason_and_the_rest_run": FaultRecord(
        kind="fault",
        name="node unreachable (sshd down)",
        injected="inventory node 'bad' points at a port where no sshd listens (real sshd for 'good'); "
        "plan -> preflight -> run_case -> store_result",
        expected="preflight names 'bad' (unreachable over ssh); its 2n1g case failed without starting; 1n1g ok",
    ),
    "tests/airflow_plugin/test_results_api.py::test_plugin_app_behind_airflow_auth": FaultRecord(
        kind="security",
        name="results API requires authentication",
        injected="requests to the plugin's FastAPI app without and with an Airflow token",
        expected="refused without authentication, served with it",
    ),
    "tests/core/storage/test_schema_views.py::test_analyst_role_reads_but_cannot_write": FaultRecord(
        kind="security",
        name="analysts' role cannot write",
        injected="INSERT/UPDATE/DDL as the analyst role on real PostgreSQL",
        expected="reads work, every write is refused",
    ),
    "tests/core/run/runtime/test_supervise.py::test_watchdog_stops_a_silent_training": FaultRecord(
        kind="fault",
        name="silent process (supervisor level)",
        injected="a real process that prints 3 lines then sleeps; watchdog 2 s",
        expected="failure 'watchdog: no log progress for 2 s' within 30 s",
    ),
}


class FaultLedger:
    """Collects FaultRecords over the session and reports them."""

    def __init__(self) -> None:
        self.records: dict[str, FaultRecord] = {}

    def add(self, nodeid: str, record: FaultRecord) -> FaultRecord:
        record.test = nodeid
        self.records[nodeid] = record
        return record

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item):  # pluggy passes only the arguments a hook names
        outcome = yield
        report = outcome.get_result()
        nodeid = item.nodeid
        if nodeid not in self.records and nodeid in EXTERNAL and report.when == "call":
            self.add(nodeid, FaultRecord(**asdict(EXTERNAL[nodeid])))
            if report.passed:
                rec = self.records[nodeid]
                if rec.kind == "fault":
                    rec.results_lost, rec.containers_leaked = 0, 0  # what the test asserts
                rec.observed = "as expected (the test's assertions held)"
        rec = self.records.get(nodeid)
        if rec is None:
            return
        if report.skipped:
            rec.survived = None
            longrepr = report.longrepr
            rec.skipped = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        elif report.failed:
            rec.survived = False
            if not rec.observed:
                rec.observed = f"test failed in {report.when}"
        elif report.when == "call":
            rec.survived = True

    def totals(self) -> dict[str, int]:
        faults = [r for r in self.records.values() if r.kind == "fault" and r.skipped is None]
        return {
            "faults_injected": len(faults),
            "survived": sum(1 for r in faults if r.survived),
            "results_lost": sum(r.results_lost or 0 for r in faults),
            "results_lost_unmeasured": sum(1 for r in faults if r.results_lost is None),
            "results_duplicated": sum(r.results_duplicated or 0 for r in faults),
            "containers_leaked": sum(r.containers_leaked or 0 for r in faults),
            "containers_leaked_unmeasured": sum(1 for r in faults if r.containers_leaked is None),
            "bad_inputs_checked": sum(1 for r in self.records.values() if r.kind == "bad input" and r.survived),
            "security_checks_passed": sum(1 for r in self.records.values() if r.kind == "security" and r.survived),
        }

    def pytest_sessionfinish(self, session) -> None:
        """On an xdist worker: hand this worker's records to the controller."""
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKER_OUTPUT_KEY] = json.dumps([asdict(r) for r in self.records.values()])

    @pytest.hookimpl(optionalhook=True)  # an xdist hook: known only where pytest-xdist is loaded
    def pytest_testnodedown(self, node, error) -> None:  # noqa: ARG002 - the hook's signature
        """On the xdist controller: take a finished worker's records."""
        for fields in json.loads(getattr(node, "workeroutput", {}).get(WORKER_OUTPUT_KEY, "[]")):
            self.records[fields["test"]] = FaultRecord(**fields)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.records or hasattr(terminalreporter.config, "workerinput"):
            return
        tr = terminalreporter
        tr.section("dlperf fault ledger")
        for r in sorted(self.records.values(), key=lambda r: (r.kind, r.name)):
            state = "skipped" if r.skipped else ("held" if r.survived else "FAILED")
            tr.write_line(
                f"[{r.kind}] {r.name}: {state}; lost={r.results_lost} duplicated={r.results_duplicated} "
                f"leaked={r.containers_leaked}; {r.observed}"
            )
        totals = self.totals()
        tr.write_line(
            "totals: faults injected {faults_injected}, survived {survived}, results lost {results_lost}, "
            "results duplicated {results_duplicated}, containers leaked {containers_leaked}".format(**totals)
        )
        out = os.environ.get("DLPERF_RELIABILITY_JSON")
        if out:
            data = {"records": [asdict(r) for r in self.records.values()], "totals": totals}
            Path(out).write_text(json.dumps(data, indent=2) + "\n")


def register(config) -> None:
    """Register the ledger as a session plugin (once): tests/conftest.py's pytest_configure."""
    if not config.pluginmanager.has_plugin(LEDGER_PLUGIN):
        config.pluginmanager.register(FaultLedger(), LEDGER_PLUGIN)
