"""What the docs quote is what dlperf prints: each error text (and reason) a page quotes, checked against the text
the real function produces now; and the deploy guide's REST helper, which must show Airflow's answer to a call it
refuses.

A quote is the page's text as it stands. In it, ``...`` stands for any text (an elided list, a path, a detail),
``<node>``, ``<url>`` and ``<folder>`` for one of those, and the rest must be the code's text, character for
character: the whole message, its start, or a part of it (``how``). The messages come from calling the functions
that raise or return them (planning, the runtime's error, the spool, the log-disk probe, the unreliable rule, a
lost case run), with only the failure they report simulated where it needs a broken machine (a full disk, a
database that does not answer).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from helpers import REPO, result_record

DOCS = REPO / "docs"
PLACEHOLDERS = ("...", "<node>", "<url>", "<folder>")


def pattern_of(quote: str) -> str:
    """The regular expression of a quote: its text literally, each placeholder any text."""
    parts = re.split("(" + "|".join(re.escape(p) for p in PLACEHOLDERS) + ")", quote)
    return "".join(".*?" if part in PLACEHOLDERS else re.escape(part) for part in parts)


def refusal(params: dict) -> str:
    """What plan_cases raises for a trigger's ``params`` (dlperf_core.plan.trigger), as its task log shows it."""
    from dlperf_core.errors import ConfigError
    from dlperf_core.plan.defaults import DeploymentDefaults
    from dlperf_core.plan.trigger import plan_trigger, resolve_trigger

    try:
        plan_trigger(resolve_trigger(params, DeploymentDefaults()))
    except ConfigError as exc:
        return str(exc)
    raise AssertionError(f"{params} was not refused")


def runtime_error_of_a_silent_engine() -> str:
    """A case's reason when its runtime raised and the node's Docker Engine does not answer (no engine needed:
    the socket is not there)."""
    from dlperf_airflow.docker_runtime import DockerRuntime
    from dlperf_airflow.runtimes import runtime_error
    from dlperf_core.cluster.inventory import Inventory, Node

    node = Node(name="node3", gpus=1, accelerator="cpu", docker_url="unix:///tmp/dlperf-doc-texts-no-engine.sock")
    runtime = DockerRuntime(Inventory(name="one", nodes=(node,)))
    return runtime_error(runtime, [node], ConnectionError("Connection aborted."))


@contextlib.contextmanager
def full_disk() -> Iterator[Path]:
    """A folder on a disk that is full: there, and everywhere while it is open, every fsync fails with ENOSPC (what
    the spool and the log probe do last before a file counts as written)."""

    def fsync(_fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory(prefix="dlperf-full-") as folder:
        patch.setattr(os, "fsync", fsync)
        yield Path(folder)


def spool_failure() -> str:
    """What store_result fails with when the results database does not answer and the spool's disk is full."""
    from sqlalchemy.exc import OperationalError

    from dlperf_core.storage.spool import ResultSpool, SpoolFailed, store_or_spool

    class DatabaseDown:
        def upsert_result(self, _record: object) -> None:
            raise OperationalError("INSERT INTO results ...", {}, ConnectionRefusedError("connection refused"))

    with full_disk() as folder, pytest.raises(SpoolFailed) as failed:
        spool = ResultSpool("postgresql://db/dlperf", root=folder)
        store_or_spool(DatabaseDown(), result_record(), spool)  # type: ignore[arg-type]
    return str(failed.value)


def full_log_disk() -> str:
    """What a case run's repeat fails with when the log folder's disk is full."""
    from dlperf_core.run.runtime.base import log_disk_full

    with full_disk() as folder:
        said = log_disk_full(folder)
    assert said is not None
    return said


def too_big_for_the_inventory() -> str:
    """Planning the smoke suite at 4n8g on the local inventory (2 nodes)."""
    from dlperf_core.cluster.inventory import load_inventory
    from dlperf_core.errors import ConfigError
    from dlperf_core.plan.cases import plan_suite
    from dlperf_core.plan.suite import parse_suite

    raw = yaml.safe_load((REPO / "suites/smoke.yaml").read_text())
    raw["benchmarks"][0]["topologies"] = ["4n8g"]
    try:
        plan_suite(parse_suite(raw, "too-big.yaml"), load_inventory(REPO / "inventories/local.yaml"))
    except ConfigError as exc:
        return str(exc)
    raise AssertionError("a 4-node case was planned on 2 nodes")


def unreliable() -> str:
    from dlperf_core.measure.noise import unreliable_reason

    said = unreliable_reason(0.72, 7.09, 2)
    assert said is not None
    return said


def lost_run_case() -> str:
    from dlperf_core.run.run_status import lost_reason

    return lost_reason({"run_case": "failed", "store_result": "upstream_failed"})


@dataclass(frozen=True)
class Quote:
    page: str  # under docs/
    text: str  # as the page has it
    how: str  # "whole": the whole message; "start": its start; "part": anywhere in it
    produce: Callable[[], str]


TRIGGER = "invalid trigger form (1 problem(s)):\n  trigger form: "
SMOKE = {"suite": "suites/smoke.yaml", "runtime": "local"}
QUOTES = [
    Quote(
        "operations.md",
        TRIGGER + "unknown key 'topology' (did you mean 'topologies'?); the known keys are suite, runtime, inventory, "
        "frameworks, models, precisions, topologies, case_keys, repeats, batch_size, compile",
        "whole",
        lambda: refusal({**SMOKE, "topology": ["1n1g"], "repeats": 1}),
    ),
    Quote(
        "deploy.md",
        "unknown key 'topology' (did you mean 'topologies'?); the known keys are suite, runtime, ...",
        "part",
        lambda: refusal({"topology": ["1n1g"], "repeats": 1}),
    ),
    Quote(
        "operations.md",
        TRIGGER + "suite: unknown suite 'smoke' (did you mean 'suites/smoke.yaml'?); known suites: ... (or a YAML "
        "file's path, relative to the dlperf home /opt/dlperf or absolute)",
        "whole",
        lambda: refusal({"suite": "smoke", "runtime": "local"}).replace(str(REPO), "/opt/dlperf"),
    ),
    Quote(
        "operations.md",
        TRIGGER + "topologies: 4n8g not in suite 'smoke' (it has 1n1g, 1n2g, 2n1g)",
        "whole",
        lambda: refusal({**SMOKE, "topologies": ["4n8g"]}),
    ),
    Quote(
        "operations.md",
        "runtime error: node3's Docker Engine at unix:///... does not answer (...)",
        "start",
        lambda: runtime_error_of_a_silent_engine(),
    ),
    Quote(
        "reliability.md",
        "runtime error: <node>'s Docker Engine at <url> does not answer (...)",
        "start",
        lambda: runtime_error_of_a_silent_engine(),
    ),
    Quote(
        "operations.md",
        "... could not be spooled to ... either: [Errno 28] No space left on device",
        "part",
        spool_failure,
    ),
    Quote(
        "reliability.md",
        "results database unavailable (...) and result ... could not be spooled to ... either: [Errno 28] No space "
        "left on device",
        "start",
        spool_failure,
    ),
    Quote(
        "reliability.md",
        "log disk full: No space left on device (ENOSPC) writing in <folder>",
        "whole",
        full_log_disk,
    ),
    Quote(
        "reliability.md",
        "needs 4 nodes, inventory 'local' has 2",
        "part",
        lambda: too_big_for_the_inventory(),
    ),
    Quote("metrics.md", "CV 0.72 > 0.10; speedup 7.09 > 2 devices", "whole", lambda: unreliable()),
    Quote(
        "reliability.md",
        "lost: run_case failed, store_result upstream_failed, before ...",
        "start",
        lambda: lost_run_case(),
    ),
]


def page_text(page: str) -> str:
    """A page's text with the line breaks of its prose joined (a quote in a paragraph may wrap); code blocks keep
    theirs."""
    out, in_code = [], False
    for line in (DOCS / page).read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        out.append(line + "\n" if in_code or line.startswith("```") or not line.strip() else line + " ")
    return "".join(out)


@pytest.mark.parametrize("quote", QUOTES, ids=[f"{q.page}:{q.text[:48]}" for q in QUOTES])
def test_each_error_text_the_docs_quote_is_what_the_code_says(quote, monkeypatch):
    monkeypatch.setenv("DLPERF_HOME", str(REPO))
    assert quote.text in page_text(quote.page), f"{quote.page} no longer quotes it"
    said = quote.produce()
    match = {"whole": re.fullmatch, "start": re.match, "part": re.search}[quote.how]
    assert match(pattern_of(quote.text), said, flags=re.S), (
        f"{quote.page} quotes:\n{quote.text}\n\nthe code says:\n{said}"
    )


def test_the_deploy_guide_lists_the_trigger_keys():
    """Step 5 names the keys a trigger's conf may have: those the DAG's plan_cases knows, no more, no fewer."""
    from dlperf_core.plan.trigger import TRIGGER_KEYS

    text = page_text("deploy.md")
    listed = re.search(r"`conf` holds the Trigger form's fields \(([^)]*)\)", text)
    assert listed, "deploy.md no longer lists the trigger's fields"
    assert re.findall(r"`(\w+)`", listed[1]) == list(TRIGGER_KEYS)


# ------------------------------------------------------------------ the deploy guide's REST helper, api()


def guide_api() -> str:
    """The ``api`` function of the deploy guide's step 4, as written there."""
    text = (DOCS / "deploy.md").read_text()
    found = re.search(r"^api\(\) \{.*?^\}\n", text, flags=re.M | re.S)
    assert found, "deploy.md's step 4 no longer defines api()"
    return found[0]


class FakeAirflow(BaseHTTPRequestHandler):
    """Answers ``/api/v2/ok`` with 200 and ``/api/v2/dags/dlperf_benchmark/dagRuns`` with 400, as Airflow's REST API
    answers (compact JSON); keeps what it was asked."""

    answers = {
        "/api/v2/ok": (200, {"dag_id": "dlperf_benchmark", "is_paused": False}),
        "/api/v2/dags/dlperf_benchmark/dagRuns": (400, {"detail": "Invalid input for param repeats: 500 > 100"}),
    }
    asked: list[tuple[str, str, str | None, str]] = []

    def answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        self.asked.append((self.command, self.path, self.headers.get("Authorization"), body))
        status, answer = self.answers[self.path]
        data = json.dumps(answer, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = answer

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


def test_the_guides_api_helper_prints_airflows_answer_and_fails_on_an_http_error():
    """Step 4's ``api`` under ``bash -euo pipefail`` (as tests/e2e/test_compose_e2e.py runs the guide): the answer
    alone on stdout when the call succeeds; when Airflow refuses it, nothing on stdout, the call, the status and
    Airflow's answer (its reason) on stderr, and a failure that stops the script."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeAirflow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ui = f"http://127.0.0.1:{server.server_address[1]}"

    def bash(command: str) -> subprocess.CompletedProcess[str]:
        script = f"set -euo pipefail\nUI={ui}\nTOKEN=t0ken\n{guide_api()}{command}\n"
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)

    try:
        ok = bash("api GET /ok")
        assert (ok.returncode, ok.stdout, ok.stderr) == (0, '{"dag_id":"dlperf_benchmark","is_paused":false}', "")
        conf = '{"logical_date": null, "conf": {"repeats": 500}}'
        refused = bash(f"api POST /dags/dlperf_benchmark/dagRuns '{conf}' >/dev/null\necho carried on")
        assert refused.returncode != 0 and refused.stdout == "", refused
        said = 'POST /dags/dlperf_benchmark/dagRuns: HTTP 400: {"detail":"Invalid input for param repeats: 500 > 100"}'
        assert refused.stderr == said + "\n", refused.stderr
        # the guide's words about it
        quoted = 'POST /dags/dlperf_benchmark/dagRuns: HTTP 400: {"detail":"..."}'
        assert quoted in page_text("deploy.md") and re.fullmatch(pattern_of(quoted), said)
        assert FakeAirflow.asked[-1] == ("POST", "/api/v2/dags/dlperf_benchmark/dagRuns", "Bearer t0ken", conf)
        assert bash("until api POST /dags/dlperf_benchmark/dagRuns 2>/dev/null; do exit 3; done").returncode == 3
    finally:
        server.shutdown()
        server.server_close()
    gone = bash("api GET /ok")  # nothing answers: curl's own error, and a failure
    assert gone.returncode != 0 and gone.stdout == "" and "curl" in gone.stderr, gone
