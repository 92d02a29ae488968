"""Each mapped case run task pulls its own planned run from an XCom of its own, not the whole plan.

Airflow expands a mapped task over the list an upstream task returned, and every mapped task instance then
pulls that whole list to take its one item (``airflow.sdk``'s ``DictOfListsExpandInput.resolve``: one
``xcom_pull`` of the full value per task instance, Airflow 3.3). With ~600 bytes per planned run, a night of
1,000 case runs moved its 600 KB list a thousand times, and the cost per case run grew with the matrix
(``bench/growth.py``, docs/benchmarks.md (g)). So the task that hands the case runs out pushes each planned run
under its own key (``case_run_<i>``) and returns their indexes only; the mapped tasks expand over the indexes and
each pulls its own planned run: a cost per case run that does not depend on how many there are.
"""

from __future__ import annotations

from typing import Any

from dlperf_core.run.handoff import PlannedRun

KEY_PREFIX = "case_run_"


def key_of(index: int) -> str:
    """The XCom key of the planned run at ``index`` (its map index in the mapped tasks)."""
    return f"{KEY_PREFIX}{index}"


def hand_out(ti: Any, items: list[PlannedRun]) -> list[int]:
    """Push each of ``items`` under its own key from the running task ``ti``; return their indexes (what the
    mapped tasks expand over)."""
    for index, item in enumerate(items):
        ti.xcom_push(key=key_of(index), value=item)
    return list(range(len(items)))


def handed_out(ti: Any, task_id: str, index: int) -> PlannedRun:
    """The planned run ``task_id`` handed out at ``index``, pulled by the running task ``ti``."""
    item = ti.xcom_pull(task_ids=task_id, key=key_of(index))
    if not isinstance(item, PlannedRun):
        raise TypeError(f"{task_id} handed out no planned run at index {index} (XCom {key_of(index)}: {item!r})")
    return item
