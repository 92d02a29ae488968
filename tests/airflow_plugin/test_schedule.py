"""The nightly schedule is Airflow's configuration option ``[dlperf] schedule`` (dlperf_airflow/schedule.py),
read when the DAG file is parsed: unset keeps 02:00, a cron expression or preset replaces it, ``none`` turns the
nightly run off, and anything else fails the parse with an import error that names the option and the value."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dlperf_airflow.schedule import DEFAULT_SCHEDULE, SCHEDULE_ENV, ScheduleError, parse_schedule
from helpers import REPO


@pytest.mark.parametrize(
    ("value", "schedule"),
    [("", DEFAULT_SCHEDULE), ("  ", DEFAULT_SCHEDULE), (" 30 1 * * 1-5 ", "30 1 * * 1-5"), ("@daily", "@daily")]
    + [("none", None), ("None", None)],
)
def test_a_schedule_is_a_cron_expression_a_preset_or_none(value, schedule):
    assert parse_schedule(value) == schedule


@pytest.mark.parametrize("value", ["61 2 * * *", "nightly", "0 2 * *", "@once", "0 2 * * * 2026"])
def test_anything_else_is_refused_naming_the_option_and_the_value(value):
    with pytest.raises(ScheduleError) as refused:
        parse_schedule(value)
    text = str(refused.value)
    assert f"[dlperf] schedule ({SCHEDULE_ENV}) is {value!r}" in text
    assert "'0 2 * * *', the default" in text


PARSE = r"""
import json, os, sys
from dlperf_cli.embedded import prepare_environment
prepare_environment()
from airflow.dag_processing.dagbag import DagBag
seen = {}
for value in sys.argv[2:]:
    if value == "<unset>":
        os.environ.pop("AIRFLOW__DLPERF__SCHEDULE", None)
    else:
        os.environ["AIRFLOW__DLPERF__SCHEDULE"] = value
    bag = DagBag(dag_folder=sys.argv[1])
    dag = bag.dags.get("dlperf_benchmark")
    seen[value] = {
        "schedule": None if dag is None else (None if dag.schedule is None else str(dag.schedule)),
        "timetable": None if dag is None else type(dag.timetable).__name__,
        "errors": list(bag.import_errors.values()),
    }
print(json.dumps(seen))
"""


def test_the_dag_file_reads_the_schedule_at_parse_time(tmp_path):
    """A real DagBag parses dags/ under each value in one fresh interpreter (Airflow reads an option's
    environment variable at each read, and each DagBag imports the DAG file anew)."""
    airflow_home = tmp_path / "airflow"
    airflow_home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env |= {"AIRFLOW_HOME": str(airflow_home), "DLPERF_HOME": str(REPO), "DLPERF_DB_URL": "sqlite://"}
    values = ["<unset>", "30 1 * * 1-5", "none", "61 2 * * *"]
    out = subprocess.run(
        [sys.executable, "-c", PARSE, str(REPO / "dags"), *values], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["<unset>"] == {"schedule": "0 2 * * *", "timetable": "CronTriggerTimetable", "errors": []}
    assert seen["30 1 * * 1-5"] == {"schedule": "30 1 * * 1-5", "timetable": "CronTriggerTimetable", "errors": []}
    assert seen["none"] == {"schedule": None, "timetable": "NullTimetable", "errors": []}
    refused = seen["61 2 * * *"]
    assert refused["schedule"] is None  # no DAG at all: the parse failed
    assert len(refused["errors"]) == 1
    assert "ScheduleError: [dlperf] schedule (AIRFLOW__DLPERF__SCHEDULE) is '61 2 * * *'" in refused["errors"][0]
    assert "out of range" in refused["errors"][0]
