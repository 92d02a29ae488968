"""The deploy guide, followed literally: docs/deploy.md's "On one host, step by step" on this machine.

The test copies the repository's tracked files into a fresh folder (a clean clone, as a new user has it), takes
the guide's ``bash`` blocks of steps 1 to 6 in order and runs them as one script in that folder: build the
images (``--compose``), ``.env`` with new secrets, ``docker compose up``, wait until healthy, sign in to the REST
API, unpause the DAG so that Airflow itself starts a ``scheduled`` run (the first night, with the deployment's
defaults), trigger a run on demand, wait for both to succeed, query the results database with the guide's SQL.
Then it opens the results page (1,280 px wide: it must fit) and the DAG run's "dlperf results" tab in Chromium
(both screenshots go into the docs: docs/img/compose-results-page.png and compose-run-results.png), follows a report link, checks that a browser without a session is sent to the login page, and runs
step 7 (``down -v``): nothing of the project is left, and no framework container either.

The deployment alerts to Slack and email (docs/operations.md, "Regression alerts"): its ``.env`` is new-env.sh's with
the alert lines set (``ALERT_ENV``: ``slack,email``, the connections of local stand-ins). After the pages, a stand-in
webhook and SMTP server (tests/alert_stand_ins.py in a container on the deployment's network, reached by the name
``dlperf-alerts``) start, and the history of the night's 1n1g configuration is seeded in the results database: 5
good scheduled nights (a verdict needs Policy.min_nights), copies of the night's own rows at 1/0.7 of its throughput
on an environment that differs from the night's in the image digest, then a first bad night at the night's level on
the night's environment (a regression is confirmed once a second night is at the new level): the night measured is
30% slower than its history on purpose, and the slowdown came with a new image. Its ``finish_run`` is cleared with
what follows it (detect_regressions, make_report), the way docs/operations.md says to send an alert again: exactly
one message reaches each stand-in, with the night, the configuration, the size, the first bad night, what changed and
the run's page. 9.1 s measured on 2026-11-29 (``check_regression_alert``).

Before ``down -v`` it follows docs/cluster-guide.md ("Point dlperf at your cluster") on that running deployment,
through the page's two-node night: ``suites/cluster-check.yaml``, the reference workload at 2n1g under torchrun and
under mpirun, each node's part run by that node's own Celery worker. Its two GPU nodes are stand-ins: containers on
the deployment's network, each an sshd on port 22 at its own address with a user ``dlperf`` (a password for
``ssh-copy-id``, answered through SSH_ASKPASS) in the group of this machine's Docker socket, which both nodes share.
The page's blocks run as written (CLUSTER_BLOCKS says which and why not), with one substitution, ``map_page``: the
page's addresses (10.0.0.10, 10.0.0.11, the central 10.0.0.2) become the stand-ins' and the deployment's, and
``/var/log/dlperf`` a log folder per node (both nodes are this machine). The inventory is the page's, made a CPU
stand-in's (``stand_in_inventory``). What cannot run here is not run, and says why: the GPU image's build needs
nvcr.io, so ``docker tag dlperf/pytorch-reference:cpu dlperf/pytorch-reference:gpu`` stands in for it (the
stand-ins train on CPU); ImageNet's preparation (step 4) needs ImageNet; step 5's YAML is a fragment, no command;
step 7's schedule starts no run here (tests/docs/test_cluster_guide.py parses it). Checked: the page's ssh loop
reached both engines, the run succeeded with the two ``ok`` rows of the page's SQL, each ``case_run.on_<node>`` task
ran on its node's queue, preflight ran. A block added, removed or of another kind fails the test at once
(test_the_cluster_guide_has_the_blocks_the_test_follows).

The stack publishes on its own loopback address (127.0.0.2 unless DLPERF_E2E_PUBLISH_ADDR says otherwise),
beside the PostgreSQL and Redis the other tests use on 127.0.0.1. Where only Debian's ``docker-compose`` (1.29)
exists, ``docker compose`` in the guide's lines is run by it (a ``docker`` shim on PATH).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.parse
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from sqlalchemy.engine import URL

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
    env |= ALERT_ENV  # new-env.sh writes them into .env, as an operator's own values
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
        check_regression_alert(home, project, ui, said["TOKEN"], night)
        follow_cluster_guide(home, env, tmp_path, project, ui, said["TOKEN"])
    finally:
        subprocess.run(["docker", "rm", "-f", f"{project}-alerts"], capture_output=True, timeout=120)
        stand_ins = remove_cluster_stand_ins(project, tmp_path, env)
        down = run_bash("\n".join(steps[-1][1]), home, env, 600)
        leftovers = project_leftovers(project)
        framework = [c for c in dlperf_containers() if c]
    assert stand_ins == [], stand_ins
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
            tab = f"{ui}/dags/dlperf_benchmark/runs/{quoted}/plugin/dlperf-run-results"
            page.goto(tab)
            frame = page.frame_locator("iframe").first
            try:
                frame.locator("#dlperf-run-links").wait_for(timeout=60_000)
            except Exception as exc:  # noqa: BLE001 - what the browser showed, then one more load of the tab
                page.screenshot(path=str(tmp_path / "run-tab-first-load.png"), full_page=True)
                frames = [f.url for f in page.frames]
                print(
                    f"the run tab showed no link bar in 60 s ({type(exc).__name__}); frames {frames}; loading it again"
                )
                page.goto(tab)
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


# ---------------------------------------------------------------------------------------------------------------------
# Regression alerts to Slack and email (docs/operations.md, "Regression alerts"), at local stand-ins

ALERTS_NAME = "dlperf-alerts"  # the stand-ins' name on the deployment's network (a network alias)
ALERTS_HTTP_PORT, ALERTS_SMTP_PORT = 8025, 2525
ALERT_ENV = {  # .env's alert lines: slack and email through the providers' default connections, at the stand-ins
    "DLPERF_REGRESSION_NOTIFIERS": "slack,email",
    "AIRFLOW_CONN_SLACK_WEBHOOK_DEFAULT": "slackwebhook://:T0000%2FB0000%2FXXXXXXXX@"
    + urllib.parse.quote(f"http://{ALERTS_NAME}:{ALERTS_HTTP_PORT}/services", safe=""),
    "AIRFLOW_CONN_SMTP_DEFAULT": f"smtp://{ALERTS_NAME}:{ALERTS_SMTP_PORT}?disable_ssl=true&disable_tls=true",
    "DLPERF_ALERT_EMAIL_TO": "perf-team@example.org",
    "DLPERF_ALERT_EMAIL_FROM": "dlperf@example.org",
}
SLOWER = 0.7  # the night against its seeded history
OLD_DIGEST = "sha256:" + "0" * 64  # the seeded nights' image digest: what the alert says changed


def deployment_network(project: str) -> str:
    """The name of the deployment's network (compose names it; the central host's containers are on it)."""
    found = subprocess.run(
        ["docker", "network", "ls", "-q", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.split()  # fmt: skip
    assert len(found) == 1, found
    return subprocess.run(
        ["docker", "network", "inspect", "-f", "{{.Name}}", found[0]], capture_output=True, text=True, check=True
    ).stdout.strip()


def start_alert_stand_ins(project: str) -> str:
    """tests/alert_stand_ins.py in a container on the deployment's network, named ALERTS_NAME there; its name."""
    import time

    container = f"{project}-alerts"
    script = REPO / "tests" / "alert_stand_ins.py"
    subprocess.run(
        ["docker", "run", "-d", "--name", container, "--network", deployment_network(project),
         "--network-alias", ALERTS_NAME, "--label", "dlperf.e2e=alerts", "-v", f"{script}:/alert_stand_ins.py:ro",
         "--entrypoint", "python3", STAND_IN_IMAGE, "/alert_stand_ins.py",
         "--http-port", str(ALERTS_HTTP_PORT), "--smtp-port", str(ALERTS_SMTP_PORT)],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while '"ready": true' not in alert_stand_in_output(container):
        assert time.monotonic() < deadline, alert_stand_in_output(container)
        time.sleep(0.5)
    return container


def alert_stand_in_output(container: str) -> str:
    logs = subprocess.run(["docker", "logs", container], capture_output=True, text=True, timeout=60)
    return logs.stdout + logs.stderr


def seed_history(db_url: str, night: str, good: int = 5) -> tuple[str, str, str | None]:
    """The history of the night's 1n1g configuration before it: ``good`` good scheduled nights (a verdict needs
    Policy.min_nights) at 1/SLOWER of the night's throughput (a little noise between nights) on a copy of its
    environment whose image digest is OLD_DIGEST, then the first bad night, the day before, at the night's level on
    its own environment (a regression is confirmed once a second night is at the new level: Policy.confirm_nights).
    Each a copy of the night's run and 1n1g rows, in the tables as the deployment's database has them (reflected).
    Returns the case key, the first bad night (ISO) and the night's own image digest."""
    from sqlalchemy import MetaData, create_engine, insert, select

    engine = create_engine(db_url)
    try:
        meta = MetaData()
        meta.reflect(engine, only=["benchmark_runs", "results", "environments"])
        runs, results, environments = (meta.tables[t] for t in ("benchmark_runs", "results", "environments"))
        with engine.begin() as db:
            run = db.execute(select(runs).where(runs.c.run_id == night)).mappings().one()
            rows = (
                db.execute(
                    select(results).where(
                        results.c.run_id == night,
                        results.c.nodes == 1,
                        results.c.gpus_per_node == 1,
                        results.c.status == "ok",
                    )
                )
                .mappings()
                .all()
            )
            keys = {row["case_key"] for row in rows}
            assert len(keys) == 1 and rows[0]["environment_id"] is not None, rows
            new_env = rows[0]["environment_id"]
            env = db.execute(select(environments).where(environments.c.id == new_env)).mappings().one()
            old_env = {k: v for k, v in env.items() if k != "id"}
            old_env |= {"image_digest": OLD_DIGEST, "content_hash": "e2e-seeded-" + str(env["content_hash"])[:40]}
            if isinstance(old_env.get("data"), dict) and "image_digest" in old_env["data"]:
                old_env["data"] = old_env["data"] | {"image_digest": OLD_DIGEST}
            old_env_id = db.execute(insert(environments).values(old_env).returning(environments.c.id)).scalar_one()
            seeded = [(days, (1 + 0.002 * (days - 4)) / SLOWER, old_env_id) for days in range(good + 1, 1, -1)]
            seeded.append((1, 1.003, new_env))  # the first bad night
            for days, scale, env_id in seeded:
                earlier = timedelta(days=days)
                copy_run = {k: v for k, v in run.items() if k not in ("id", "created_at")}
                copy_run |= {"run_id": f"seeded-night-{days}", "started_at": run["started_at"] - earlier}
                copy_run |= {"finished_at": (run["finished_at"] or run["started_at"]) - earlier, "report_path": None}
                run_pk = db.execute(insert(runs).values(copy_run).returning(runs.c.id)).scalar_one()
                for row in rows:
                    copy = {k: v for k, v in row.items() if k not in ("id", "created_at", "updated_at")}
                    copy |= {"benchmark_run_id": run_pk, "run_id": copy_run["run_id"], "environment_id": env_id}
                    copy |= {"started_at": row["started_at"] - earlier, "throughput": row["throughput"] * scale}
                    if row["finished_at"] is not None:
                        copy["finished_at"] = row["finished_at"] - earlier
                    if row.get("reported_throughput") is not None:
                        copy["reported_throughput"] = row["reported_throughput"] * scale
                    db.execute(insert(results).values(copy))
        first_bad = (run["started_at"] - timedelta(days=1)).date().isoformat()
        return keys.pop(), first_bad, env["image_digest"]
    finally:
        engine.dispose()


def stored_regressions(db_url: str) -> list[tuple[str, str, str, str | None]]:
    """(run, case key, status, label) of every row of ``regressions``."""
    from sqlalchemy import create_engine, text

    engine = create_engine(db_url)
    try:
        with engine.connect() as db:
            rows = db.execute(text("SELECT run_id, case_key, status, label FROM regressions ORDER BY id")).all()
        return [tuple(row) for row in rows]  # type: ignore[misc]
    finally:
        engine.dispose()


def check_regression_alert(home: Path, project: str, ui: str, token: str, night: str) -> None:
    """The night, 30% slower than a seeded history, alerts once to Slack and once by email (module docstring):
    its finish_run is cleared with what follows it, as docs/operations.md says to send an alert again."""
    import json
    import time
    import urllib.request

    started = time.monotonic()

    def call(method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"{ui}/api/v2{path}",
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read() or b"{}")

    container = start_alert_stand_ins(project)
    password = re.search(r"^DLPERF_DB_PASSWORD=(.*)$", (home / ".env").read_text(), re.M)
    assert password
    db_url = URL.create(
        "postgresql+psycopg2", "dlperf", password.group(1), PUBLISH_ADDR, 5432, "dlperf"
    ).render_as_string(hide_password=False)
    case_key, first_bad, digest = seed_history(db_url, night)
    quoted = urllib.parse.quote(night, safe="")
    tis = f"/dags/dlperf_benchmark/dagRuns/{quoted}/taskInstances"
    tries = call("GET", f"{tis}/detect_regressions")["try_number"]
    call(
        "POST",
        "/dags/dlperf_benchmark/clearTaskInstances",
        {"dry_run": False, "dag_run_id": night, "task_ids": ["finish_run"], "only_failed": False,
         "include_downstream": True, "reset_dag_runs": True},
    )  # fmt: skip
    deadline = time.monotonic() + 300
    state = "queued"
    while time.monotonic() < deadline:
        ti = call("GET", f"{tis}/detect_regressions")
        run_state = call("GET", f"/dags/dlperf_benchmark/dagRuns/{quoted}")["state"]
        state = ti["state"] if ti["try_number"] > tries else "cleared"
        if state in ("success", "failed") and run_state not in ("queued", "running"):
            break
        time.sleep(2)
    assert (state, run_state) == ("success", "success"), (state, run_state, alert_stand_in_output(container)[-3000:])
    received = [json.loads(line) for line in alert_stand_in_output(container).splitlines() if line.startswith("{")]
    slack = [m for m in received if m.get("channel") == "slack"]
    mail = [m for m in received if m.get("channel") == "email"]
    if not (len(slack) == 1 and len(mail) == 1):  # one message each, for the night's one new regression
        request = urllib.request.Request(
            f"{ui}/api/v2{tis}/detect_regressions/logs/{ti['try_number']}?full_content=true",
            headers={"Authorization": f"Bearer {token}", "Accept": "text/plain"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            log = answer.read().decode(errors="replace")
        raise AssertionError(f"{received}\ndetect_regressions' log:\n{log[-6000:]}")
    page = f"{ui}/dags/dlperf_benchmark/runs/{quoted}/plugin/dlperf-run-results"
    text = slack[0]["json"]["text"]
    assert slack[0]["path"] == "/services/T0000/B0000/XXXXXXXX", slack[0]
    assert f"*{case_key}*" in text and "• *night:* " in text and f"(run {night} of dlperf_benchmark)" in text, text
    assert re.search(r"• \*size:\* slower by (29|30)\.\d%: median ", text), text
    assert f"• *first bad night:* {first_bad} (1 day before tonight)" in text, text
    assert f"• *image digest:* {OLD_DIGEST} -&gt; {digest}" in text, text
    assert "• *put down to:* framework (" in text and f"• *page:* <{page}|" in text, text
    assert mail[0]["to"] == ["perf-team@example.org"] and mail[0]["from"] == "dlperf@example.org", mail[0]
    assert mail[0]["subject"].startswith("dlperf: 1 new regression on ") and case_key in mail[0]["subject"], mail[0]
    html = "".join(p["text"] for p in mail[0]["parts"] if p["type"] == "text/html")
    assert f'<a href="{page}">' in html and f"<h3>{case_key}</h3>" in html, html
    assert stored_regressions(db_url) == [(night, case_key, "open", "framework")]  # stored once, as it was alerted
    # the link opens: the UI answers at the run's tab
    with urllib.request.urlopen(
        urllib.request.Request(page, headers={"Authorization": f"Bearer {token}"}), timeout=60
    ) as answer:
        assert answer.status == 200
    print(f"\nE2E regression alert: {time.monotonic() - started:.1f} s; the email's subject: {mail[0]['subject']}")
    print("the Slack message as posted:\n" + text)


# ---------------------------------------------------------------------------------------------------------------------
# docs/cluster-guide.md, "Point dlperf at your cluster", on two stand-in nodes of the deployment above

CLUSTER_GUIDE = REPO / "docs" / "cluster-guide.md"
NODES = ("gpu-node-0", "gpu-node-1")
PAGE_ADDRESSES = {"gpu-node-0": "10.0.0.10", "gpu-node-1": "10.0.0.11"}
PAGE_CENTRAL = "10.0.0.2"
PAGE_LOG_DIR = "/var/log/dlperf"
STAND_IN_IMAGE = "dlperf/pytorch-reference:cpu"  # the nodes' base (sshd, useradd) and the GPU image's stand-in
GPU_IMAGE = "dlperf/pytorch-reference:gpu"  # what suites/cluster-check.yaml runs
NODE_PASSWORD = "stand-in-node"  # what ssh-copy-id's user types once per node (here through SSH_ASKPASS)
CLUSTER_GUIDE_TIMEOUT_S = 900

# Each fenced block of the page, in order, as (section, kind, what the test does). "run": run as written, with the
# page's addresses (and log folder) swapped for the stand-ins' (``map_page``). "skip": not run, for the reason.
# A block added, removed or changed in kind fails test_the_cluster_guide_has_the_blocks_the_test_follows.
CLUSTER_BLOCKS: tuple[tuple[str, str, str], ...] = (
    ("1", "yaml", "the inventory: written as the page has it, made a stand-in's (stand_in_inventory)"),
    ("1", "bash", "run"),
    ("2", "bash", "run"),
    ("3", "bash", "run"),
    ("3", "bash", "run"),
    ("4", "text", "skip: no ImageNet here (the JPEG tree; cluster-check trains on synthetic data)"),
    ("4", "text", "skip: no ImageNet and no MXNet GPU image here (RecordIO)"),
    ("5", "yaml", "skip: a fragment of a suite and an inventory, no command"),
    ("6", "bash", "run"),
    ("6", "text", "run: appended to .env"),
    ("6", "bash", "run"),
    ("6", "text", "run: on each node, in its own copy of the repository (gpu-node-1 for gpu-node-0 on the other)"),
    ("6", "bash", "run"),
    ("7", "text", "skip: the schedule's value is parsed by tests/docs/test_cluster_guide.py; no run waits for it"),
    ("8", "bash", "run"),
    ("8", "bash", "run"),
)


def cluster_guide_blocks(text: str) -> list[tuple[str, str, str]]:
    """(section number, kind, body) of every fenced block of the page's numbered sections, in order."""
    found = []
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        number = part.split(".", 1)[0]
        if number.isdigit():
            found += [(number, k, b) for k, b in re.findall(r"^```(\w+)\n(.*?)^```", part, flags=re.M | re.S)]
    return found


def map_page(text: str, mapping: dict[str, str]) -> str:
    """``text`` with each of the page's addresses (and paths) replaced by the stand-in's: the one substitution."""
    for page, stand_in in mapping.items():
        text = re.sub(rf"(?<![\w.]){re.escape(page)}(?![\w.])", stand_in, text)
    return text


def stand_in_inventory(page_yaml: str, mapping: dict[str, str], network: str, log_dirs: dict[str, str]) -> str:
    """The page's inventory for two CPU stand-in nodes on this machine's engine: what only a GPU node has goes
    (the NVIDIA accelerator, InfiniBand, memlock, the ImageNet mount), the nodes get one device each and a Docker
    network of their own (one engine: on ``network: host`` both nodes would be this machine, with one name), each
    its own log folder, and NCCL_SOCKET_IFNAME names the interface the stand-ins have (Open MPI's TCP follows it).
    Names, addresses (mapped), queues, docker_url, ssh and the rest stay as the page has them."""
    inventory = yaml.safe_load(page_yaml)
    for node in inventory["nodes"]:
        for gpu_only in ("infiniband", "infiniband_devices", "memlock", "mounts", "data_paths"):
            del node[gpu_only]
        node |= {"address": map_page(node["address"], mapping), "accelerator": "cpu", "gpus": 1, "network": network}
        node["log_dir"] = log_dirs[node["name"]]
        node["env"]["NCCL_SOCKET_IFNAME"] = "eth0"
    return yaml.safe_dump(inventory, sort_keys=False)


SKIPPED_ARE = {5: "ILSVRC2012_img_train.tar", 6: "im2rec.py", 7: "env: {UCX_NET_DEVICES", 13: "DLPERF_SCHEDULE="}
"""What each skipped block (by its index in CLUSTER_BLOCKS) is about: another text there is a block to look at."""


def test_the_cluster_guide_has_the_blocks_the_test_follows():
    blocks = cluster_guide_blocks(CLUSTER_GUIDE.read_text())
    assert [(s, k) for s, k, _ in blocks] == [(s, k) for s, k, _ in CLUSTER_BLOCKS]
    skipped = {i for i, (_, _, how) in enumerate(CLUSTER_BLOCKS) if how.startswith("skip")}
    assert skipped == set(SKIPPED_ARE)
    for i, marker in SKIPPED_ARE.items():
        assert marker in blocks[i][2], (CLUSTER_BLOCKS[i], blocks[i][2])
    text = CLUSTER_GUIDE.read_text()
    for address in (*PAGE_ADDRESSES.values(), PAGE_CENTRAL):
        assert address in text
    assert f"log_dir: {PAGE_LOG_DIR}" in text and f"DLPERF_NODE_LOG_DIR={PAGE_LOG_DIR}" in text
    assert "TAG=dlperf/pytorch-reference:gpu scripts/build-images.sh" in text  # what the docker tag stands for


def start_stand_in_node(name: str, container: str, network: str, log_dir: Path) -> str:
    """A stand-in GPU node: sshd on port 22 at its own address on the deployment's network (which the central
    host's containers and this host reach), a user ``dlperf`` with a password and the Docker socket's group, the
    Docker client, this machine's engine (both nodes share it) and the node's log folder. Returns its address."""
    gid = Path("/var/run/docker.sock").stat().st_gid
    docker_client = os.path.realpath(shutil.which("docker", path="/usr/local/bin:/usr/bin") or "docker")
    setup = (
        f"groupadd -o -g {gid} docker-engine && useradd -m -s /bin/bash -G docker-engine dlperf && "
        f"echo dlperf:{NODE_PASSWORD} | chpasswd && ssh-keygen -A && mkdir -p /run/sshd && "
        "exec /usr/sbin/sshd -D -e -o PasswordAuthentication=yes"
    )
    subprocess.run(
        ["docker", "run", "-d", "--name", container, "--hostname", name, "--network", network,
         "--label", "dlperf.e2e=cluster-guide",
         "-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", f"{docker_client}:/usr/local/bin/docker:ro",
         "-v", f"{log_dir}:{log_dir}", "--entrypoint", "sh", STAND_IN_IMAGE, "-c", setup],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    address = subprocess.run(
        ["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    import socket
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(2)
            if s.connect_ex((address, 22)) == 0:
                return address
        time.sleep(0.5)
    logs = subprocess.run(["docker", "logs", container], capture_output=True, text=True, timeout=60)
    raise AssertionError(f"stand-in {name}: no sshd at {address}:22: {logs.stdout}{logs.stderr}")


def cluster_guide_script(deploy: list[tuple[str, list[str]]], page: str, mapping: dict[str, str],
                         node_dirs: dict[str, Path], node_log_dirs: dict[str, str]) -> str:  # fmt: skip
    """The page's blocks as one script on the central host: first the deploy guide's steps 3 and 4 again (the
    stack is up: they wait for it and sign in, giving ``UI``, ``TOKEN``, ``api``) and step 5's ``wait_run``, which
    the page's step 8 uses; then each block as CLUSTER_BLOCKS says. The lines marked ``# stand-in`` are the test's
    own: what a person does on the other machines (a node's copy of the repository gets the same .env)."""
    wait_run = re.search(r"^wait_run\(\) \{.*?^\}\n", "".join(deploy[4][1]), flags=re.M | re.S)
    assert wait_run, "docs/deploy.md step 5 defines wait_run"
    lines = [*deploy[2][1], *deploy[3][1], wait_run.group(0)]
    for (section, kind, body), (_, _, how) in zip(cluster_guide_blocks(page), CLUSTER_BLOCKS, strict=True):
        if not how.startswith("run"):
            continue
        if kind == "bash":
            lines.append(f"echo 'E2E step {section}'\n{map_page(body, mapping)}")
        elif body.startswith("DLPERF_PUBLISH_ADDR="):  # the central host's .env
            lines.append(  # each line in place of the one of that name (new-env.sh wrote them all), else added
                'while IFS= read -r line; do name="${line%%=*}"; if grep -q "^$name=" .env; then '
                'sed -i "s|^$name=.*|$line|" .env; else echo "$line" >> .env; fi; done <<\'E2E_ENV\'\n'
                f"{map_page(body, mapping)}E2E_ENV\n"
            )
        else:  # the node worker, on each node
            assert "--profile node-worker" in body, body
            for node, folder in node_dirs.items():
                command = map_page(body.replace("gpu-node-0", node), {**mapping, PAGE_LOG_DIR: node_log_dirs[node]})
                lines.append(f"cp .env {folder}/.env  # stand-in: the node's copy of the repository\n")
                lines.append(f"(cd {folder} && {command.strip()})\n")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def follow_cluster_guide(home: Path, env: dict[str, str], tmp_path: Path, project: str, ui: str, token: str) -> None:
    """docs/cluster-guide.md on two stand-in nodes of the running deployment (see the module's docstring)."""
    import json
    import urllib.request

    network = deployment_network(project)  # the central host's containers reach the stand-ins on it
    uid = re.search(r"^AIRFLOW_UID=(\d+)$", (home / ".env").read_text(), re.M)
    assert uid
    node_dirs, log_dirs, mapping = {}, {}, {PAGE_CENTRAL: PUBLISH_ADDR}
    for node in NODES:
        log_dir = tmp_path / f"{node}-logs"  # the node's log folder: it exists, and the node worker writes in it
        log_dir.mkdir()
        os.chown(log_dir, int(uid.group(1)), 0)
        log_dirs[node] = str(log_dir)
        mapping[PAGE_ADDRESSES[node]] = start_stand_in_node(node, f"{project}-{node}", network, log_dir)
    if not (home / ".venv").exists():  # the page's `make venv`: this checkout's venv (dlperf installed -e) stands in
        (home / ".venv").symlink_to(REPO / ".venv")
    page = CLUSTER_GUIDE.read_text()
    (home / "inventories" / "my-cluster.yaml").write_text(
        stand_in_inventory(cluster_guide_blocks(page)[0][2], mapping, f"{project}-cluster", log_dirs)
    )
    for node in NODES:  # each node's copy of the repository (with the inventory), as the page's step 6 says
        node_dirs[node] = tmp_path / f"{project}-{node}"
        shutil.copytree(home, node_dirs[node], symlinks=True, ignore=shutil.ignore_patterns("wheels", ".venv", "ssh"))
    # the page's GPU build (BASE_IMAGE=nvcr.io/... TAG=dlperf/pytorch-reference:gpu scripts/build-images.sh) needs
    # nvcr.io: the CPU build stands in under the GPU build's name (the stand-in nodes train on CPU)
    if image_id(GPU_IMAGE) not in ("", image_id(STAND_IN_IMAGE)):
        pytest.skip(f"{GPU_IMAGE} is a real build here: the CPU build would have to take its name")
    subprocess.run(["docker", "tag", STAND_IN_IMAGE, GPU_IMAGE], check=True)
    askpass = tmp_path / "askpass"  # ssh-copy-id's password prompt, answered as its user would
    askpass.write_text(f"#!/bin/sh\necho {NODE_PASSWORD}\n")
    askpass.chmod(0o755)
    if shutil.which("sudo") is None and os.geteuid() == 0:  # root, without sudo installed: sudo X is X
        sudo = tmp_path / "sudo-bin" / "sudo"
        sudo.parent.mkdir()
        sudo.write_text('#!/bin/sh\nexec "$@"\n')
        sudo.chmod(0o755)
        env = env | {"PATH": f"{sudo.parent}:{env['PATH']}"}
    user_home = tmp_path / "operator"  # the person's own home, with the ~/.ssh ssh-copy-id works in
    (user_home / ".ssh").mkdir(parents=True, mode=0o700)
    env = env | {"HOME": str(user_home), "SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"}
    script = cluster_guide_script(guide_steps(GUIDE.read_text()), page, mapping, node_dirs, log_dirs)
    guide = run_bash(script, home, env, CLUSTER_GUIDE_TIMEOUT_S)
    if guide.returncode != 0:
        logs = "".join(
            run_bash("docker compose logs --tail 40 airflow-node-worker", folder, env, 120).stdout
            for folder in node_dirs.values()
        )
        raise AssertionError(f"{guide.stdout[-8000:]}\n{guide.stderr[-6000:]}\n{logs[-8000:]}")
    out = guide.stdout
    said = re.split(r"^E2E step \d\n", out, flags=re.M)[1:]  # each run block's output, in the page's order
    assert "## node 0: gpu-node-0" in said[0] and "## node 1: gpu-node-1" in said[0], said[0]  # dlperf commands
    runtimes = re.findall(r"^\{.*\}$", said[1], re.M)  # the ssh loop: each node's engine answered, its runtimes
    assert len(runtimes) == 2 and all('"runc"' in r for r in runtimes), said[1]
    assert said[2].split() == [f"image={GPU_IMAGE}"], said[2]
    assert said[3].count(f"Loaded image: {GPU_IMAGE}") == 2, said[3]
    assert "cluster-check-1: success" in out, out[-4000:]
    rows = re.findall(r"^\s*(\S+)\s*\|\s*(\w+)\s*\|\s*([\d.]+)\s*\|", out.split("samples_per_s", 1)[-1], re.M)
    assert sorted((key.split("/")[0], status) for key, status, _ in rows) == [
        ("pytorch_reference", "ok"), ("pytorch_reference_mpi", "ok")], rows  # fmt: skip
    assert all("2n1g" in key and float(tput) > 0 for key, _, tput in rows), rows
    # each node's part ran as its own task on its own queue (its node worker); preflight checked both nodes over ssh
    # (it stores the cases of a node it fails as failed rows, not ok)
    request = urllib.request.Request(
        f"{ui}/api/v2/dags/dlperf_benchmark/dagRuns/cluster-check-1/taskInstances?limit=100",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        tis = json.load(answer)["task_instances"]
    on_nodes = sorted((t["task_id"], t["state"], t["queue"]) for t in tis if t["task_id"].startswith("case_run.on_"))
    assert on_nodes == sorted((f"case_run.on_{n}", "success", n) for n in NODES for _ in range(2)), on_nodes
    assert any(t["task_id"] == "preflight" and t["state"] == "success" for t in tis), tis


def image_id(image: str) -> str:
    """The engine's id of ``image`` ("" when it has none of that name)."""
    found = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", image], capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else ""


def remove_cluster_stand_ins(project: str, tmp_path: Path, env: dict[str, str]) -> list[str]:
    """Stop the node workers, remove the stand-in nodes, their network and the GPU tag; what could not be."""
    problems = []
    for node in NODES:
        folder = tmp_path / f"{project}-{node}"
        if folder.is_dir():
            down = run_bash("docker compose --profile node-worker down -v", folder, env, 300)
            if down.returncode != 0:
                problems.append(f"{node} worker: {down.stderr[-500:]}")
            problems += project_leftovers(folder.name)
        subprocess.run(["docker", "rm", "-f", f"{project}-{node}"], capture_output=True, timeout=120)
    subprocess.run(["docker", "network", "rm", f"{project}-cluster"], capture_output=True, timeout=120)
    if image_id(GPU_IMAGE) == image_id(STAND_IN_IMAGE):  # the stand-in's name, not a real GPU build
        subprocess.run(["docker", "rmi", GPU_IMAGE], capture_output=True, timeout=120)
    return problems
