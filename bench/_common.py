"""Shared bits of the benchmark scripts: run `dlperf run`, run the workload bare, parse, summarise."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


WORKLOAD = REPO / "dlperf_core" / "workload" / "train.py"


def machine() -> str:
    return f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"


def dll_times(text: str) -> list[datetime]:
    """The instants of a log's DLLogger lines (``DLL <date> <time> - ...``, UTC on this machine)."""
    return [
        datetime.strptime(line[4:30], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
        for line in text.splitlines()
        if line.startswith("DLL ")
    ]


def bare_command(args: list[str], nproc: int = 1) -> list[str]:
    """The workload launched with torchrun alone (standalone, ``nproc`` processes), no dlperf around it."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    return [*torchrun, "--nproc_per_node", str(nproc), str(WORKLOAD), *args]


def bare_env() -> dict[str, str]:
    """The environment of a bare launch: this one, with gloo on the loopback interface."""
    return {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}


def bare_run(args: list[str], nproc: int = 1, threads: int | None = None) -> float:
    """The training loop launched bare (torchrun, no dlperf around it); throughput by dlperf's parser."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "bare.log"
        cmd = bare_command(args, nproc)
        if threads:
            cmd += ["--threads", str(threads)]
        with log.open("wb") as out:
            subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=True, env=bare_env())
        warmup = int(args[args.index("--warmup-iterations") + 1])
        measured = int(args[args.index("--iterations") + 1])
        return throughput_of_log(log.read_text(), warmup, measured)


def throughput_of_log(text: str, warmup: int, measured: int) -> float:
    """dlperf's window rule over a DLLogger log's text."""
    from dlperf_core.parsing import parse_log

    run = parse_log(text, format="ngc_pytorch_dllogger", warmup=warmup, measured=measured)[0]
    assert run.status == "ok", run.reason
    return run.throughput


def dlperf_run(suite: Path, runtime: str, db_url: str, home: Path) -> tuple[str, float]:
    """`dlperf run` on a suite; returns (DAG run id, wall seconds)."""
    import re
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(home / "airflow"), DLPERF_LOG_DIR=str(home / "logs"), DLPERF_DB_URL=db_url)
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "dlperf_cli.main", "run", str(suite), "--runtime", runtime],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"dlperf run failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return re.findall(r"^DAG run (\S+): ", out.stdout, flags=re.M)[-1], wall


def median_cv(values: list[float]) -> tuple[float, float]:
    med = statistics.median(values)
    cv = statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0
    return med, cv
