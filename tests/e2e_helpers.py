"""Helpers for the end-to-end tests: run `dlperf run` on a suite (dag.test) and read what it stored, run a
command in the repository and insist that it succeeds, read what Docker says about an image."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dlperf_core.storage import ResultStore
from helpers import DLPERF, REPO, cli_env, run_id_of


def run_ok(argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in the repository root, its output captured as text; assert it exited 0 (else show the tails)."""
    out = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-4000:]
    return out


@dataclass
class SuiteRun:
    """A successful `dlperf run`: its output, the results store it wrote to and the DAG run's id."""

    out: subprocess.CompletedProcess[str]
    store: ResultStore
    run_id: str

    @property
    def stdout(self) -> str:
        return self.out.stdout

    def results(self) -> pd.DataFrame:
        """The result rows this run stored."""
        return self.store.results(run_id=self.run_id)


def run_suite(tmp_path: Path, pg_url: str, suite: str | Path, *args: str, timeout: float) -> SuiteRun:
    """`dlperf run SUITE ARGS` with the test's own Airflow home, log folder and results DB; assert it succeeded."""
    out = run_ok([*DLPERF, "run", str(suite), *args], env=cli_env(tmp_path, pg_url), timeout=timeout)
    return SuiteRun(out, ResultStore(pg_url), run_id_of(out.stdout))


def docker_output(*args: str) -> str:
    """The standard output of ``docker ARGS``, which must succeed."""
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout
