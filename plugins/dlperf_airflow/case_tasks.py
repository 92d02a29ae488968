"""What Airflow knows of one case run's tasks in this DAG run, as ``finish_run`` asks it through the running task
instance (the task SDK's ``xcom_pull`` and ``get_task_states``): the outcome its case-running task handed over,
and the states of its tasks. ``finish_run`` uses them for the case runs that stored nothing
(:func:`dlperf_airflow.steps.finish_step`)."""

from __future__ import annotations

import logging
from typing import Any

from dlperf_airflow.task_ids import CASE_RUN_GROUP
from dlperf_core.model import RunIds
from dlperf_core.run.handoff import ExecutedRun

log = logging.getLogger("dlperf")


def is_case_task(task_id: str) -> bool:
    """A task of a case run: one in the ``case_run`` group; not ``search_max_batch``, which is mapped over the
    searches with map indexes of its own."""
    return task_id.startswith(CASE_RUN_GROUP + ".")


class CaseTasks:
    """The case run tasks of DAG run ``ids``, by map index, seen from the running task instance ``ti``;
    ``executing``: the task that hands a case's outcome over (``case_run.run_case``, or ``case_run.collect_case``
    under node routing)."""

    def __init__(self, ti: Any, ids: RunIds, executing: str) -> None:
        self._ti = ti
        self._ids = ids
        self._executing_task = executing

    def outcome(self, index: int) -> ExecutedRun | None:
        """What the case-running task at ``index`` handed over (``run_case``, or ``collect_case`` under node
        routing), None when it handed nothing over (killed, never ran) or Airflow cannot say."""
        try:
            found = self._ti.xcom_pull(task_ids=self._executing_task, map_indexes=index)
        except Exception as exc:  # noqa: BLE001 - then the case run is told lost, with its tasks' states
            log.warning("could not read %s[%d]'s outcome: %s: %s", self._executing_task, index, type(exc).__name__, exc)
            return None
        return found if isinstance(found, ExecutedRun) else None

    def states(self, index: int) -> dict[str, str | None]:
        """{task: state} of the case run tasks at ``index``, named within their group (``run_case``,
        ``store_result``, ``on_node0``), in the order they run (store_result last; Airflow answers in no set
        order); {} when Airflow cannot say."""
        try:
            found = self._ti.get_task_states(dag_id=self._ids.dag_id, run_ids=[self._ids.run_id], map_index=index)
        except Exception as exc:  # noqa: BLE001 - the reason is then told without the states
            log.warning("could not read the task states of map index %d: %s: %s", index, type(exc).__name__, exc)
            return {}
        suffix = f"_{index}"
        named = {key.removesuffix(suffix): state for key, state in (found.get(self._ids.run_id) or {}).items()}
        ours = {task.removeprefix(CASE_RUN_GROUP + "."): state for task, state in named.items() if is_case_task(task)}
        return dict(sorted(ours.items(), key=lambda item: (item[0] == "store_result", item[0])))
