"""When ``dlperf_benchmark`` runs by itself: Airflow's configuration option ``[dlperf] schedule``.

Set it on every Airflow component that parses DAGs (the DAG processor and the scheduler read the DAG's
schedule from the parsed DAG), in ``airflow.cfg`` or as the environment variable :data:`SCHEDULE_ENV`, as
Airflow reads every option. Its value is a cron expression (five fields, ``30 1 * * 1-5``, as Airflow's cron timetable reads it) or one of cron's
presets (``@daily``), in Airflow's ``[core] default_timezone`` (UTC unless the deployment changes it); ``none``
turns the nightly run off (the DAG then runs only when triggered). Unset or empty, the DAG runs at
:data:`DEFAULT_SCHEDULE`, 02:00 every night. A value that is none of these fails the DAG file's parse with
:class:`ScheduleError`, which names the option, the value and why (Airflow shows it as the DAG's import error).

Read at parse time, like ``[dlperf] cluster_inventory``: a change reaches the DAG at its next parse.
"""

from __future__ import annotations

SCHEDULE_SECTION = "dlperf"
SCHEDULE_OPTION = "schedule"
SCHEDULE_ENV = "AIRFLOW__DLPERF__SCHEDULE"
"""The option as an environment variable (it wins over ``airflow.cfg``)."""
DEFAULT_SCHEDULE = "0 2 * * *"
"""The nightly run at 02:00 in Airflow's default timezone (UTC) when the option is not set."""
NO_SCHEDULE = "none"
"""The option's value that turns the nightly run off: the DAG runs only when triggered."""


class ScheduleError(ValueError):
    """``[dlperf] schedule`` is neither a cron expression, a cron preset nor ``none``."""


def parse_schedule(value: str) -> str | None:
    """The DAG's ``schedule`` for the option's ``value``: :data:`DEFAULT_SCHEDULE` when empty, None for
    :data:`NO_SCHEDULE` (any case), else the cron expression or preset itself once Airflow's cron timetable
    accepts it; :class:`ScheduleError` otherwise."""
    text = value.strip()
    if not text:
        return DEFAULT_SCHEDULE
    if text.lower() == NO_SCHEDULE:
        return None
    from airflow.exceptions import AirflowTimetableInvalid
    from airflow.timetables.trigger import CronTriggerTimetable

    try:
        CronTriggerTimetable(text, timezone="UTC").validate()
    except (AirflowTimetableInvalid, ValueError) as exc:
        raise ScheduleError(
            f"[{SCHEDULE_SECTION}] {SCHEDULE_OPTION} ({SCHEDULE_ENV}) is {text!r}: {str(exc).rstrip('.')}. Give a cron expression of "
            f"five fields (minute hour day-of-month month day-of-week, e.g. {DEFAULT_SCHEDULE!r}, the default), "
            f"a preset such as '@daily', or {NO_SCHEDULE!r} for no nightly run"
        ) from exc
    return text


def nightly_schedule() -> str | None:
    """``[dlperf] schedule`` from Airflow's configuration (its SDK's ``conf``: the environment variable
    :data:`SCHEDULE_ENV`, else ``airflow.cfg``), as the DAG's ``schedule`` (:func:`parse_schedule`)."""
    from airflow.sdk import conf

    return parse_schedule(conf.get(SCHEDULE_SECTION, SCHEDULE_OPTION, fallback="") or "")
