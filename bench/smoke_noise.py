"""How steady the smoke suite's figures are on the compose deployment of this host (docs/benchmarks.md (i)).

Takes a clean copy of the repository at a git revision (``--rev``, default: the work tree's tracked files),
builds the compose images from it (``scripts/build-images.sh --compose``: what changed only), starts the compose
deployment (docs/deploy.md, its own project and loopback address), unpauses the DAG (the first night: the
deployment's defaults, the smoke suite on the docker runtime) and triggers ``--runs - 1`` more runs with the same
defaults, one after the other. Then it reads every run's ``case_summary`` rows with psql in the deployment's own
PostgreSQL and prints, per run and topology: the median throughput over the repeats, their CV, the speedup the
view computes, and the flag; then per topology over the runs: the spread of the medians (CV of the run medians),
the largest within-run CV, and the speedups' range against the device count. ``down -v`` at the end.

Goal (issue 39): every row's CV under 5% and every speedup within 20% of its device count.

    python bench/smoke_noise.py --runs 5 --label after
    python bench/smoke_noise.py --runs 5 --rev 505a4ba --label before
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CV_GOAL = 0.05
SPEEDUP_TOLERANCE = 0.20


def sh(script: str, cwd: Path, env: dict[str, str], timeout: float = 1800) -> str:
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise RuntimeError(f"failed ({proc.returncode}): {script[:200]}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def checkout(rev: str | None, dest: Path) -> None:
    """The tracked files at ``rev`` (None: the work tree's tracked and untracked-not-ignored files)."""
    dest.mkdir(parents=True)
    if rev:
        archive = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(dest, filter="data")
    else:
        names = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        for name in filter(None, (n.decode() for n in names)):
            if (REPO / name).is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, dest / name)
    wheels = REPO / "docker/pytorch-reference/wheels"
    if wheels.is_dir():
        shutil.copytree(wheels, dest / "docker/pytorch-reference/wheels", dirs_exist_ok=True)


def shim(folder: Path) -> str:
    """A PATH folder whose ``docker compose`` is the Compose this host has (docker-compose 1.29 where the plugin
    is missing)."""
    compose = (
        subprocess.run(["bash", str(REPO / "scripts/ensure-compose.sh")], capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    folder.mkdir()
    real = shutil.which("docker")
    assert real
    if compose == "docker compose":
        (folder / "docker").symlink_to(real)
    else:
        (folder / "docker").write_text(
            f'#!/bin/sh\nif [ "$1" = compose ]; then shift; exec {compose} "$@"; fi\nexec {real} "$@"\n'
        )
        (folder / "docker").chmod(0o755)
    return str(folder)


UP = r"""
scripts/build-images.sh --compose >/dev/null
scripts/new-env.sh > .env
docker compose up -d >/dev/null 2>&1
set -a; . ./.env; set +a
UI="http://$DLPERF_PUBLISH_ADDR:8080"
until curl -fsS "$UI/api/v2/monitor/health" 2>/dev/null | python3 -c 'import json, sys
h = json.load(sys.stdin); sys.exit(any(c.get("status") != "healthy" for c in h.values()))'; do sleep 5; done
curl -sS -X POST "$UI/auth/token" -H 'Content-Type: application/json' \
  -d "{\"username\": \"admin\", \"password\": \"$DLPERF_ADMIN_PASSWORD\"}" | python3 -c 'import json, sys
print(json.load(sys.stdin)["access_token"])'
"""


class Api:
    def __init__(self, ui: str, token: str):
        self.ui, self.token = ui, token

    def __call__(self, method: str, path: str, body: dict | None = None) -> dict:
        import urllib.request

        request = urllib.request.Request(
            f"{self.ui}/api/v2{path}",
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.load(answer)

    def wait(self, run_id: str, timeout: float = 1800) -> str:
        end = time.monotonic() + timeout
        quoted = urllib.parse.quote(run_id, safe="")
        while time.monotonic() < end:
            state = self("GET", f"/dags/dlperf_benchmark/dagRuns/{quoted}")["state"]
            if state in ("success", "failed"):
                return state
            time.sleep(5)
        raise TimeoutError(run_id)


SQL = (
    "SELECT s.run_id, s.nodes, s.gpus_per_node, s.n, s.median_throughput, s.cv, s.speedup, s.unreliable_reason "
    "FROM case_summary s JOIN benchmark_runs b ON b.dag_id = s.dag_id AND b.run_id = s.run_id "
    "ORDER BY b.started_at, s.nodes, s.gpus_per_node"
)


def number(text: str) -> float | None:
    return float(text) if text else None


def measure(runs: int, rev: str | None, addr: str) -> list[dict]:
    project = f"dlperfnoise{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / project
        checkout(rev, home)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DLPERF", "COMPOSE"))}
        env |= {"PATH": f"{shim(Path(tmp) / 'bin')}:{env['PATH']}", "DLPERF_PUBLISH_ADDR": addr}
        env |= {"COMPOSE_PROJECT_NAME": project}
        try:
            started = time.monotonic()
            token = sh(UP, home, env).strip().splitlines()[-1]
            print(f"deployment up in {time.monotonic() - started:.0f} s", flush=True)
            api = Api(f"http://{addr}:8080", token)
            while True:
                try:
                    api("GET", "/dags/dlperf_benchmark")
                    break
                except Exception:  # noqa: BLE001 - not parsed yet
                    time.sleep(5)
            api("PATCH", "/dags/dlperf_benchmark", {"is_paused": False})
            night = None
            while night is None:
                listed = api("GET", "/dags/dlperf_benchmark/dagRuns?run_type=scheduled")["dag_runs"]
                night = listed[0]["dag_run_id"] if listed else None
                time.sleep(2)
            run_ids = [night]
            print(f"{night}: {api.wait(night)} ({time.monotonic() - started:.0f} s)", flush=True)
            for i in range(1, runs):
                run_id = f"noise-{i}"
                api("POST", "/dags/dlperf_benchmark/dagRuns", {"dag_run_id": run_id, "logical_date": None, "conf": {}})
                print(f"{run_id}: {api.wait(run_id)} ({time.monotonic() - started:.0f} s)", flush=True)
                run_ids.append(run_id)
            out = sh(f'docker compose exec -T postgres psql -U dlperf -d dlperf -At -F "|" -c "{SQL}"', home, env)
        finally:
            subprocess.run(
                ["bash", "-c", "docker compose down -v >/dev/null 2>&1"], cwd=home, env=env, timeout=600, check=False
            )
    rows = []
    for line in out.strip().splitlines():
        run_id, nodes, gpus, n, median, cv, speedup, reason = line.split("|")
        rows.append(
            {
                "run": run_id,
                "topology": f"{nodes}n{gpus}g",
                "devices": int(nodes) * int(gpus),
                "n": int(n),
                "median": number(median),
                "cv": number(cv),
                "speedup": number(speedup),
                "flag": reason or "",
            }
        )
    return rows


def report(rows: list[dict], label: str) -> str:
    lines = [
        f"### {label}",
        "",
        "| run | topology | repeats | median samples/s | CV | speedup | flag |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cv = f"{r['cv']:.1%}" if r["cv"] is not None else "–"
        speedup = f"{r['speedup']:.2f}" if r["speedup"] is not None else "–"
        median = f"{r['median']:.2f}" if r["median"] is not None else "failed"
        lines.append(f"| {r['run']} | {r['topology']} | {r['n']} | {median} | {cv} | {speedup} | {r['flag']} |")
    lines += [
        "",
        "| topology | runs | CV of the run medians | largest CV in a run | speedups | goal |",
        "|---|---|---|---|---|---|",
    ]
    verdict = True
    for topology in sorted({r["topology"] for r in rows}, key=lambda t: (int(t.split("n")[0]), t)):
        mine = [r for r in rows if r["topology"] == topology]
        medians = [r["median"] for r in mine if r["median"] is not None]
        cvs = [r["cv"] for r in mine if r["cv"] is not None]
        speedups = [r["speedup"] for r in mine if r["speedup"] is not None]
        devices = mine[0]["devices"]
        spread = statistics.stdev(medians) / statistics.mean(medians) if len(medians) > 1 else None
        ok = bool(cvs) and max(cvs) < CV_GOAL and len(medians) == len(mine)
        if devices > 1:
            ok = ok and bool(speedups) and all(abs(s - devices) <= SPEEDUP_TOLERANCE * devices for s in speedups)
        verdict &= ok
        lines.append(
            f"| {topology} | {len(mine)} | {f'{spread:.1%}' if spread is not None else '–'} | "
            f"{f'{max(cvs):.1%}' if cvs else '–'} | "
            f"{', '.join(f'{s:.2f}' for s in speedups) if devices > 1 else '(baseline)'} | {'met' if ok else 'missed'} |"
        )
    lines += [
        "",
        f"goal (every CV < {CV_GOAL:.0%}, every speedup within {SPEEDUP_TOLERANCE:.0%} of the device count): "
        f"{'met' if verdict else 'missed'}",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rev", default=None, help="git revision to measure (default: the work tree)")
    parser.add_argument("--label", default="this tree")
    parser.add_argument("--addr", default="127.0.0.3", help="loopback address the deployment publishes on")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    rows = measure(args.runs, args.rev, args.addr)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(report(rows, f"{args.label} ({args.rev or 'work tree'}, {os.cpu_count()} cores)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
