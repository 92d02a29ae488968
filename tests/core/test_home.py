"""One home: every default location (results database, logs, reports, spool, embedded Airflow home, relative
suites and inventories) hangs off ``DLPERF_HOME`` (default: the checkout), never off the current directory,
and the commands that use the results database name it on stderr when they start."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlperf_cli.main import build_parser, results_database_line
from dlperf_core import home
from dlperf_core.reporting.paths import report_root
from dlperf_core.run.jobs import default_log_root
from dlperf_core.storage import default_db_url
from dlperf_core.storage.spool import default_spool_dir
from helpers import DLPERF, REPO

OVERRIDES = ("DLPERF_HOME", "DLPERF_DB_URL", "DLPERF_LOG_DIR", "DLPERF_SPOOL_DIR", "DLPERF_REPORT_DIR")
LOG = REPO / "tests" / "data" / "cpu_logs" / "ngc_mxnet_1n2g.log"


@pytest.fixture
def no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OVERRIDES:
        monkeypatch.delenv(name, raising=False)


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any dlperf or Airflow location setting (plus ``extra``)."""
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDES and not k.startswith("AIRFLOW")}
    env.pop("PYTHONPATH", None)
    return env | extra


def dlperf(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DLPERF, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def start_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The first line on stderr, which names the results database."""
    return proc.stderr.splitlines()[0]


def dlperf_folder(root: Path) -> Path:
    """A DLPerf-style result folder with one case log (a failed repeat is a stored row all the same)."""
    (root / "1n2g").mkdir(parents=True)
    shutil.copy(LOG, root / "1n2g" / "rn50_b8_fp32_1.log")
    return root


def import_from_folder_a(tmp_path: Path, env: dict[str, str], db: str) -> tuple[Path, Path, Path]:
    """`dlperf import` of a DLPerf folder, run in the new folder tmp_path/a, succeeds and names the results
    database ``db``; returns that folder, another new one (tmp_path/b) and the imported DLPerf folder."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    folder = dlperf_folder(tmp_path / "rn50")
    imported = dlperf(["import", str(folder)], a, env)
    assert imported.returncode == 0, imported.stderr
    assert start_line(imported) == f"dlperf: results database {db}"
    return a, b, folder


def run_ids(proc: subprocess.CompletedProcess[str]) -> set[str]:
    assert proc.returncode == 0, proc.stderr
    return {row["run_id"] for row in json.loads(proc.stdout)}


# --------------------------------------------------------------------------- in-process defaults


@pytest.mark.usefixtures("no_overrides")
def test_defaults_hang_off_the_checkout_whatever_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    state = REPO / ".dlperf"
    assert home.checkout_root() == REPO and home.dlperf_home() == REPO
    assert home.state_dir() == state and home.state_dir("logs") == state / "logs"
    assert default_db_url() == f"sqlite:///{state / 'dlperf.db'}"
    assert default_log_root() == state / "logs"
    assert default_spool_dir() == state / "spool"
    assert report_root() == state / "reports"
    assert home.resolve("suites/smoke.yaml") == REPO / "suites" / "smoke.yaml"
    assert home.resolve("/abs/suite.yaml") == Path("/abs/suite.yaml")
    assert list(tmp_path.iterdir()) == []  # nothing written into the current directory


@pytest.mark.usefixtures("no_overrides")
def test_dlperf_home_moves_everything_and_specific_overrides_win(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DLPERF_HOME", "elsewhere")  # relative: taken against the current directory
    state = tmp_path / "elsewhere" / ".dlperf"
    assert home.dlperf_home() == tmp_path / "elsewhere"
    assert default_db_url() == f"sqlite:///{state / 'dlperf.db'}" and state.is_dir()
    assert (default_log_root(), default_spool_dir(), report_root()) == (
        state / "logs",
        state / "spool",
        state / "reports",
    )
    assert home.resolve("suites/x.yaml") == tmp_path / "elsewhere" / "suites" / "x.yaml"
    for name, value in {
        "DLPERF_DB_URL": "postgresql+psycopg2://u@h/db",
        "DLPERF_LOG_DIR": "/l",
        "DLPERF_SPOOL_DIR": "/s",
        "DLPERF_REPORT_DIR": "/r",
    }.items():
        monkeypatch.setenv(name, value)
    assert default_db_url() == "postgresql+psycopg2://u@h/db"
    assert (default_log_root(), default_spool_dir(), report_root()) == (Path("/l"), Path("/s"), Path("/r"))


@pytest.mark.usefixtures("no_overrides")
def test_the_triggers_suite_and_inventory_paths_follow_the_same_home(tmp_path, monkeypatch):
    from dlperf_core.plan.defaults import DeploymentDefaults
    from dlperf_core.plan.trigger import resolve_trigger

    monkeypatch.chdir(tmp_path)
    form = {"suite": "suites/smoke.yaml", "runtime": "local", "inventory": "inventories/local.yaml"}
    settings = resolve_trigger(form, DeploymentDefaults()).settings
    assert home.dlperf_home() == REPO
    assert (settings.suite, settings.inventory) == (
        str(REPO / "suites/smoke.yaml"),
        str(REPO / "inventories/local.yaml"),
    )
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites/smoke.yaml").write_text((REPO / "suites/smoke.yaml").read_text())
    (tmp_path / "inventories").mkdir()
    (tmp_path / "inventories/local.yaml").write_text((REPO / "inventories/local.yaml").read_text())
    monkeypatch.setenv("DLPERF_HOME", str(tmp_path))
    settings = resolve_trigger(form, DeploymentDefaults()).settings
    assert home.dlperf_home() == tmp_path
    assert (settings.suite, settings.inventory) == (
        str(tmp_path / "suites/smoke.yaml"),
        str(tmp_path / "inventories/local.yaml"),
    )


def test_embedded_airflow_home_follows_dlperf_home(tmp_path):
    code = (
        "from dlperf_cli.embedded import prepare_environment; import os; "
        "print(prepare_environment(), os.environ['DLPERF_HOME'])"
    )
    for env, where in ((clean_env(), REPO), (clean_env(DLPERF_HOME=str(tmp_path / "h")), tmp_path / "h")):
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [str(where / ".dlperf" / "airflow"), str(where)]
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(DLPERF_HOME=str(tmp_path / "h"), AIRFLOW_HOME=str(tmp_path / "af")),
    )
    assert done.stdout.split()[0] == str(tmp_path / "af")  # AIRFLOW_HOME wins


# --------------------------------------------------------------------------- the start line


@pytest.mark.usefixtures("no_overrides")
def test_start_line_only_for_commands_that_use_results(monkeypatch):
    parse = build_parser().parse_args
    monkeypatch.setenv("DLPERF_DB_URL", "postgresql+psycopg2://dlperf:secret@db:5432/dlperf")
    masked = "dlperf: results database postgresql+psycopg2://dlperf:***@db:5432/dlperf"
    for argv in (
        ["run", "suites/smoke.yaml"],
        ["import", "f"],
        ["results"],
        ["report"],
        ["compare", "a", "b"],
        ["db", "analyst-role", "--name", "x"],
    ):
        assert results_database_line(parse(argv)) == masked, argv
    for argv in (["parse", "x.log"], ["import", "f", "--dry-run"]):
        assert results_database_line(parse(argv)) is None, argv
    line = results_database_line(parse(["results", "--db", "postgresql://a:other@h/d"]))
    assert line == "dlperf: results database postgresql://a:***@h/d"  # --db wins, also masked


def test_start_line_masks_the_password_on_stderr(tmp_path):
    url = "postgresql+psycopg2://dlperf:pw@127.0.0.1:1/dlperf"
    done = dlperf(["import", str(tmp_path)], tmp_path, clean_env(DLPERF_DB_URL=url))  # empty folder: exits 2
    assert done.returncode == 2
    assert start_line(done) == "dlperf: results database postgresql+psycopg2://dlperf:***@127.0.0.1:1/dlperf"
    assert ":pw@" not in done.stdout + done.stderr


def test_the_repository_database_is_named_from_any_cwd(tmp_path):
    """No settings at all: from the repository and from a folder outside it, the same database."""
    empty = tmp_path / "empty"
    empty.mkdir()
    lines = {start_line(dlperf(["import", str(empty)], cwd, clean_env())) for cwd in (REPO, tmp_path)}
    assert lines == {f"dlperf: results database sqlite:///{REPO / '.dlperf' / 'dlperf.db'}"}
    assert not (tmp_path / ".dlperf").exists()


# --------------------------------------------------------------------------- real commands, several folders


def test_import_from_one_cwd_is_seen_from_another(tmp_path):
    """A checkout of its own (so the repository's database is left alone), no settings at all: `dlperf import`
    in one folder, `dlperf results` in two others (one the checkout) read the same database."""
    checkout = tmp_path / "checkout"
    for part in ("dlperf_core", "dlperf_cli"):
        shutil.copytree(REPO / part, checkout / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", checkout / "pyproject.toml")
    env = clean_env(PYTHONPATH=str(checkout))
    db = f"sqlite:///{checkout / '.dlperf' / 'dlperf.db'}"
    a, b, folder = import_from_folder_a(tmp_path, env, db)
    run_id = f"import__{folder}"
    for cwd in (b, checkout):
        seen = dlperf(["results", "--all", "--json"], cwd, env)
        assert start_line(seen) == f"dlperf: results database {db}"
        assert run_id in run_ids(seen)
    assert (checkout / ".dlperf" / "dlperf.db").is_file()
    assert not (a / ".dlperf").exists() and not (b / ".dlperf").exists()


def test_dlperf_home_moves_the_database_of_every_command(tmp_path):
    dlperf_home = tmp_path / "home"
    env = clean_env(DLPERF_HOME=str(dlperf_home))
    db = f"sqlite:///{dlperf_home / '.dlperf' / 'dlperf.db'}"
    a, b, folder = import_from_folder_a(tmp_path, env, db)
    seen = dlperf(["results", "--all", "--json"], b, env)
    assert start_line(seen) == f"dlperf: results database {db}" and f"import__{folder}" in run_ids(seen)
    assert (dlperf_home / ".dlperf" / "dlperf.db").is_file()
    assert not (a / ".dlperf").exists() and not (b / ".dlperf").exists()
    # the report of that run lands under the same home too
    report = dlperf(["report", "--latest", "--format", "json"], b, env)
    assert report.returncode == 0, report.stderr
    assert start_line(report) == f"dlperf: results database {db}"
    assert str(dlperf_home / ".dlperf" / "reports") in report.stderr
