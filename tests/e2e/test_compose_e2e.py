"""The deploy guide, followed literally: docs/deploy.md's "On one host, step by step" on this machine.

The test copies the repository's tracked files into a fresh folder (a clean clone, as a new user has it), takes
the guide's ``bash`` blocks of steps 1 to 6 in order and runs them as one script in that folder: build the
images (``--compose``), ``.env`` with new secrets, ``docker compose up``, wait until healthy, sign in to the REST
API, unpause the DAG so that Airflow itself starts a ``scheduled`` run (the first night, with the deployment's
defaults), trigger a run on demand, wait for both to succeed, query the results database with the guide's SQL.
Then it opens the results page (1,280 px wide: it must fit) and the DAG run's "dlperf results" tab in Chromium
(both screenshots go into the docs: docs/img/compose-results-page.png and compose-run-results.png), follows a report link, checks that a browser without a session is sent to the login page, and runs
step 7 (``down -v``): nothing of the project is left, and no framework container either.

The stack publishes on its own loopback address (127.0.0.2 unless DLPERF_E2E_PUBLISH_ADDR says otherwise),
beside the PostgreSQL and Redis the other tests use on 127.0.0.1. Where only Debian's ``docker-compose`` (1.29)
exists, ``docker compose`` in the guide's lines is run by it (a ``docker`` shim on PATH).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from helpers import REPO, dlperf_containers, docker_available

pytestmark = [pytest.mark.docker, pytest.mark.postgres]

GUIDE = REPO / "docs" / "deploy.md"
SECTION = "## On one host, step by step"
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT = REPO / "docs" / "img" / "compose-run-results.png"
PAGE_SCREENSHOT = REPO / "docs" / "img" / "compose-results-page.png"
PAGE_WIDTH = 1280  # the results page fits it: no horizontal scrolling of the page itself
PUBLISH_ADDR = os.environ.get("DLPERF_E2E_PUBLISH_ADDR", "127.0.0.2")
GUIDE_TIMEOUT_S = 1500


def guide_steps(text: str) -> list[tuple[str, list[str]]]:
    """The steps (``### `` headings) of the guide's single-host section, each with its ``bash`` blocks."""
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    for part in re.split(r"^### ", section, flags=re.M)[1:]:
        title = part.splitlines()[0].strip()
        steps.append((title, re.findall(r"^```bash\n(.*?)^```", part, flags=re.M | re.S)))
    return steps


def test_the_guide_has_the_steps_the_test_runs():
    steps = guide_steps(GUIDE.read_text())
    assert [t.split(".")[0] for t, _ in steps] == [str(i) for i in range(1, 8)]
    assert all(blocks for _, blocks in steps), "every step shows its commands"
    assert steps[-1][1] == ["docker compose down -v\n"]
    script = "".join(b for _, blocks in steps for b in blocks)
    assert '"logical_date": null' in script  # Airflow 3's trigger body
    assert "run_type=scheduled" in script and '"is_paused": false' in script


@pytest.fixture(scope="module")
def compose_command() -> str:
    proc = subprocess.run(
        ["bash", str(REPO / "scripts/ensure-compose.sh")], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        pytest.skip(f"no Compose implementation: {proc.stderr.strip()[-300:]}")
    return proc.stdout.strip().splitlines()[-1]


def shim_folder(tmp_path: Path, compose: str) -> Path:
    """A folder for PATH whose ``docker`` runs ``docker compose ...`` with ``compose`` (docker-compose 1.29
    where the plugin is missing) and everything else with the real client."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = shutil.which("docker")
    assert real, "no docker client"
    shim = bin_dir / "docker"
    if compose == "docker compose":
        shim.symlink_to(real)
    else:
        shim.write_text(f'#!/bin/sh\nif [ "$1" = compose ]; then shift; exec {compose} "$@"; fi\nexec {real} "$@"\n')
        shim.chmod(0o755)
    return bin_dir


def fresh_copy(dest: Path) -> Path:
    """The repository's tracked files in ``dest`` (as a clone has them), plus the torch wheel the reference
    image is built from (git-ignored; build-images.sh would download it again otherwise)."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    wheels = REPO / "docker/pytorch-reference/wheels"
    if wheels.is_dir():
        shutil.copytree(wheels, dest / "docker/pytorch-reference/wheels", dirs_exist_ok=True)
    return dest


def project_leftovers(project: str) -> list[str]:
    out: list[str] = []
    for kind in ("ps -a", "volume ls", "network ls"):
        proc = subprocess.run(
            ["docker", *kind.split(), "-q", "--filter", f"label=com.docker.compose.project={project}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        out += [f"{kind}: {line}" for line in proc.stdout.split()]
    return out


def run_bash(script: str, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_deploy_guide_on_one_host(tmp_path, compose_command):
    if not docker_available():
        pytest.skip("no Docker engine (scripts/ensure-docker.sh starts one)")
    project = f"dlperfe2e{uuid.uuid4().hex[:8]}"
    home = fresh_copy(tmp_path / project)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DLPERF", "COMPOSE"))}
    env |= {"PATH": f"{shim_folder(tmp_path, compose_command)}:{env['PATH']}", "DLPERF_PUBLISH_ADDR": PUBLISH_ADDR}
    steps = guide_steps(GUIDE.read_text())
    up_to_results = "\n".join(b for _, blocks in steps[:-1] for b in blocks)
    # the shell state (UI, TOKEN, api) is printed for the checks below, after the guide's own lines
    script = up_to_results + '\necho "E2E UI=$UI"\necho "E2E TOKEN=$TOKEN"\necho "E2E NIGHT=$NIGHT"\n'
    try:
        guide = run_bash(script, home, env, GUIDE_TIMEOUT_S)
        logs = ""
        if guide.returncode != 0:
            logs = run_bash("docker compose ps; docker compose logs --tail 60", home, env, 300).stdout
        assert guide.returncode == 0, f"{guide.stdout[-6000:]}\n{guide.stderr[-6000:]}\n{logs[-12000:]}"
        said = dict(re.findall(r"^E2E (\w+)=(.*)$", guide.stdout, re.M))
        ui, night = said["UI"], said["NIGHT"]
        assert ui == f"http://{PUBLISH_ADDR}:8080"
        # the scheduled run (Airflow's own, the deployment's defaults) and the on-demand one both succeeded
        assert f"{night}: success" in guide.stdout and "on-demand-1: success" in guide.stdout
        assert night.startswith("scheduled__")
        # the guide's SQL printed the latest summary: the smoke suite's topologies, from the scheduled run
        table = guide.stdout.split("samples_per_s", 1)[1]
        for topology in ("1n1g", "1n2g", "2n1g"):
            assert re.search(rf"pytorch_reference\s*\|\s*{topology}\b", table), table
        # the night ran on the docker runtime with the single-host inventory (the deployment's defaults)
        runs = run_bash(
            "docker compose exec -T postgres psql -U dlperf -d dlperf -At -c "
            '"SELECT run_id, trigger, runtime, status FROM benchmark_runs ORDER BY started_at"',
            home,
            env,
            120,
        )
        assert runs.returncode == 0, runs.stderr
        assert f"{night}|scheduled|docker|success" in runs.stdout.splitlines()
        assert "on-demand-1|manual|docker|success" in runs.stdout.splitlines()
        check_refused_trigger(ui, said["TOKEN"])
        check_pages(ui, said["TOKEN"], night, home / ".env", tmp_path)
    finally:
        down = run_bash("\n".join(steps[-1][1]), home, env, 600)
        leftovers = project_leftovers(project)
        framework = [c for c in dlperf_containers() if c]
    assert down.returncode == 0, down.stderr[-3000:]
    assert leftovers == [], leftovers
    assert framework == [], f"framework containers left behind: {framework}"


def check_refused_trigger(ui: str, token: str) -> None:
    """A misspelt key through the REST API, as the guide's step 5 sends one: Airflow creates the run (it accepts
    any key), plan_cases refuses it before any case runs, and the run's dlperf results page says why."""
    import json
    import time
    import urllib.request

    def call(method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"{ui}{path}",
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read() or b"{}")

    run_id = "misspelt-key"
    conf = {"topology": ["1n1g"], "repeats": 1}
    call("POST", "/api/v2/dags/dlperf_benchmark/dagRuns", {"dag_run_id": run_id, "logical_date": None, "conf": conf})
    deadline = time.monotonic() + 300
    state = "queued"
    while state in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(3)
        state = call("GET", f"/api/v2/dags/dlperf_benchmark/dagRuns/{run_id}")["state"]
    assert state == "failed", state
    tis = call("GET", f"/api/v2/dags/dlperf_benchmark/dagRuns/{run_id}/taskInstances")["task_instances"]
    states = {t["task_id"]: t["state"] for t in tis}
    assert states["plan_cases"] == "failed" and "case_run.run_case" not in {
        k for k, v in states.items() if v == "success"
    }
    request = urllib.request.Request(
        f"{ui}/dlperf/runs/dlperf_benchmark/{run_id}", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        page = answer.read().decode()
    from html import unescape

    assert "unknown key 'topology' (did you mean 'topologies'?)" in unescape(page), page[-3000:]


def check_pages(ui: str, token: str, night: str, env_file: Path, tmp_path: Path) -> None:
    """The results page and the run's tab in Chromium; a report file through the plugin; no session -> login."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *_args, **_kwargs):  # type: ignore[no-untyped-def]
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(f"{ui}/dlperf/", headers={"Accept": "text/html"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        opener.open(request, timeout=30)
    assert refused.value.code == 303
    assert "/auth/login" in refused.value.headers["Location"], refused.value.headers["Location"]

    quoted = urllib.parse.quote(night, safe="")
    authed = urllib.request.Request(
        f"{ui}/dlperf/reports/dlperf_benchmark/{quoted}/report.json", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(authed, timeout=30) as answer:
        report = json.load(answer)
    assert report, "the night's JSON report, served from the dlperf-state volume by the api-server"

    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} missing: the page checks in a browser need scripts/ensure-chromium.sh")
    from playwright.sync_api import sync_playwright

    password = re.search(r"^DLPERF_ADMIN_PASSWORD=(.*)$", env_file.read_text(), re.M)
    assert password
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": PAGE_WIDTH, "height": 1100})
            page.goto(f"{ui}/dlperf/")  # no session: the login page, which comes back here
            page.wait_for_url("**/auth/login**")
            page.fill('input[name="username"]', "admin")
            page.fill('input[name="password"]', password.group(1))
            page.click('button[type="submit"]')
            page.wait_for_url("**/dlperf/**", timeout=60_000)
            page.locator("#summary").wait_for(timeout=30_000)
            summary = page.locator("#summary").inner_text()
            assert "CV" in summary and "2n1g" in summary, summary
            assert night in summary and "on-demand-1" not in summary  # the latest nightly, not the 1-repeat run
            assert "latest nightly" in page.locator("#summary-source").inner_text()
            assert "on-demand-1" in page.locator("#latest-any").inner_text()  # there, flagged as one repeat
            assert "single repeat" in page.locator("#latest-any").inner_text()
            assert night in page.locator("#runs").inner_text()
            assert page.evaluate("document.documentElement.scrollWidth") <= PAGE_WIDTH
            page.screenshot(path=str(tmp_path / "results-page.png"), full_page=True)
            page.goto(f"{ui}/dags/dlperf_benchmark/runs/{quoted}/plugin/dlperf-run-results")
            frame = page.frame_locator("iframe").first
            frame.locator("#dlperf-run-links").wait_for(timeout=60_000)
            assert "report.html" not in frame.locator("#dlperf-run-links").inner_text()  # labels, not names
            assert "HTML" in frame.locator("#dlperf-run-links").inner_text()
            page.wait_for_timeout(1500)
            page.screenshot(path=str(tmp_path / "run-tab.png"), full_page=True)
        finally:
            browser.close()
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tmp_path / "run-tab.png", SCREENSHOT)
    shutil.copyfile(tmp_path / "results-page.png", PAGE_SCREENSHOT)
