"""The skip guard (tests/ci_skips.py): under CI=true a skipped test fails the pytest session unless it is listed
in ALLOWED_ON_CI and skipped for the listed reason; without CI a skip is a skip. Each case runs a real pytest on a
tiny test folder, in one process and on two pytest-xdist workers (where only the controller sees every report)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci_skips import ALLOWED_ON_CI, listed, on_ci
from helpers import REPO

CONFTEST = """
import ci_skips


def pytest_configure(config):
    ci_skips.register(config, allowed={
        "test_tiny.py::test_listed": "by design",
        "test_tiny.py::test_listed_for_another_reason": "by design",
        "test_listed_module.py": "not on this machine",
    })
"""

TINY = """
import pytest


def test_ok():
    pass


def test_listed():
    pytest.skip("by design: needs what CI has not")


def test_listed_for_another_reason():
    pytest.skip("no Docker engine")


def test_unlisted():
    pytest.skip("no PostgreSQL server")


@pytest.mark.skipif(True, reason="a skipif mark")
def test_unlisted_mark():
    pass


@pytest.mark.xfail(reason="a known bug", strict=True)
def test_xfail():
    assert False
"""

UNLISTED_MODULE = 'import pytest\n\npytest.importorskip("dlperf_no_such_module")\n\n\ndef test_never():\n    pass\n'
LISTED_MODULE = 'import pytest\n\npytest.skip("not on this machine", allow_module_level=True)\n'


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_tiny.py").write_text(TINY)
    (tmp_path / "test_unlisted_module.py").write_text(UNLISTED_MODULE)
    (tmp_path / "test_listed_module.py").write_text(LISTED_MODULE)
    return tmp_path


def pytest_in(folder: Path, *args: str, ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env["PYTHONPATH"] = str(REPO / "tests")
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def unexpected(out: str) -> list[str]:
    return sorted(line.split(" ", 2)[2] for line in out.splitlines() if line.startswith("UNEXPECTED SKIP "))


EXPECTED = [
    "test_tiny.py::test_listed_for_another_reason: no Docker engine",  # listed, but not for this reason
    "test_tiny.py::test_unlisted: no PostgreSQL server",
    "test_tiny.py::test_unlisted_mark: a skipif mark",
    "test_unlisted_module.py: could not import 'dlperf_no_such_module': No module named 'dlperf_no_such_module'",
]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "two xdist workers"])
def test_on_ci_an_unlisted_skip_fails_the_session_and_is_named(folder: Path, workers: list[str]):
    done = pytest_in(folder, *workers, ci="true")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert unexpected(done.stdout) == EXPECTED, done.stdout[-3000:]
    assert "skip guard: 4 test(s) skipped on CI (CI=true) that are not in ALLOWED_ON_CI" in done.stdout
    assert "1 passed, 6 skipped, 1 xfailed" in done.stdout  # the counts as pytest has them: the xfail is no skip


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "two xdist workers"])
def test_on_ci_only_listed_skips_pass(folder: Path, workers: list[str]):
    (folder / "test_unlisted_module.py").unlink()
    done = pytest_in(folder, *workers, "-k", "not unlisted and not another_reason", ci="true")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "UNEXPECTED SKIP" not in done.stdout and "skip guard" not in done.stdout
    assert "1 passed, 2 skipped" in done.stdout


@pytest.mark.parametrize("ci", [None, "false", ""])
def test_without_ci_a_skip_is_a_skip(folder: Path, ci: str | None):
    done = pytest_in(folder, ci=ci)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "UNEXPECTED SKIP" not in done.stdout


def test_a_failure_keeps_its_exit_status(folder: Path):
    (folder / "test_failing.py").write_text("def test_fails():\n    assert False\n")
    done = pytest_in(folder, ci="true")
    assert done.returncode == 1 and "UNEXPECTED SKIP" in done.stdout


def test_ci_and_the_entries():
    assert on_ci({"CI": "true"}) and on_ci({"CI": "TRUE"}) and on_ci({"CI": "1"})
    assert not on_ci({}) and not on_ci({"CI": "false"}) and not on_ci({"CI": "0"})
    entries = ("tests/chaos/", "tests/a.py", "tests/b.py::test_x")
    assert listed("tests/chaos/test_y.py::test_z", entries) == "tests/chaos/"
    assert listed("tests/a.py::test_q[1-2]", entries) == "tests/a.py"
    assert listed("tests/a.py", entries) == "tests/a.py"  # the module itself (a module-level skip)
    assert listed("tests/a.pyx::t", entries) is None
    assert listed("tests/b.py::test_x[p]", entries) == "tests/b.py::test_x"
    assert listed("tests/b.py::test_xy", entries) is None


def test_every_allowed_entry_names_a_test_that_exists_and_says_why():
    """The list stays short and true: each entry is a test file (or test) of this repository, with a reason, and its
    comment in tests/ci_skips.py says why it may skip on CI."""
    source = (REPO / "tests" / "ci_skips.py").read_text()
    assert 0 < len(ALLOWED_ON_CI) <= 10
    for entry, reason in ALLOWED_ON_CI.items():
        path = entry.split("::", 1)[0]
        assert (REPO / path).exists(), entry
        assert reason.strip(), entry
        before = source[: source.index(f'"{entry}"')].rstrip().splitlines()
        assert before[-1].strip().startswith("#"), f"{entry}: a comment above it says why it may skip on CI"
    chaos = (REPO / "tests/chaos/test_node_and_disk_chaos.py").read_text()
    assert ALLOWED_ON_CI["tests/chaos/test_node_and_disk_chaos.py"] in chaos  # the reason its skipif gives
