"""The wait of a Slurm case run, on Airflow's triggerer: no worker is held while the job queues and runs.

:class:`SlurmJobTrigger` polls ``scontrol show job -o <id>`` (:func:`dlperf_core.run.runtime.slurm_jobs.job_state_command`)
on the login node every ``poll_s`` seconds over one reused asyncssh connection (the SSH provider's
:class:`~airflow.providers.ssh.hooks.ssh.SSHHookAsync` on the inventory's ``slurm.connection``, as the provider's own
``SSHRemoteJobTrigger`` does: reconnect on a dropped connection) and fires exactly one event (:class:`WaitEnd`'s JSON
form), never a zero where the job's end was not seen:

* ``ended``: the job reached an end state (its parsed state, and :func:`~dlperf_core.run.runtime.slurm_jobs.end_reason`:
  None when it COMPLETED with exit code 0);
* ``forgotten``: neither scontrol (``Invalid job id``: purged after MinJobAge, or never known) nor Slurm's
  accounting (sacct, where slurmdbd runs) knows the job;
* ``unreachable``: the login node (or scontrol on it) did not answer for longer than ``unreachable_s``;
* ``drained``: under ``on_drained: fail``, the job pends on nodes that are drained or down, two looks in a row
  (:func:`~dlperf_core.run.runtime.slurm_jobs.pending_reason`: ``ReqNodeNotAvail``, ...): it is cancelled (scancel)
  and the wait ends with Slurm's reason.

A task killed, cleared or marked while deferred cancels its job: the triggerer calls :meth:`SlurmJobTrigger.on_kill`
(scancel) only on such a user action; ``cleanup()`` is left alone, since it also runs when the triggerer restarts
or hands the trigger to another triggerer, and the job must then keep running.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

import asyncssh
from airflow.providers.ssh.hooks.ssh import SSHHookAsync
from airflow.triggers.base import BaseTrigger, TriggerEvent

from dlperf_core.run.runtime import slurm_jobs

if TYPE_CHECKING:
    from asyncssh import SSHClientConnection

log = logging.getLogger("dlperf.slurm")

OnDrained = Literal["wait", "fail"]
WaitStatus = Literal["ended", "forgotten", "unreachable", "drained"]

_CONNECTION_ERRORS = (OSError, asyncssh.Error, TimeoutError)
"""The connection itself broke or was refused (as the provider's SSHRemoteJobTrigger counts them): reconnect."""

DRAINED_LOOKS = 2
"""Looks in a row that must see the job waiting on drained or down nodes before ``on_drained: fail`` cancels it (as
the runtime's own poll counts them: a backfill plan shows the same reason for a moment)."""


def job_fields(job: slurm_jobs.SlurmJob) -> dict[str, Any]:
    """The parsed job as JSON (a field that is not a JSON scalar as its text)."""
    plain = (str, int, float, bool, type(None))
    return {f.name: v if isinstance(v := getattr(job, f.name), plain) else str(v) for f in fields(job)}


@dataclass(frozen=True)
class WaitEnd:
    """How the wait on a Slurm job ended: the trigger's one event, and what the resumed task reads of it."""

    job_id: str
    status: WaitStatus
    reason: str | None = None  # None only for a job that ended well (COMPLETED, exit code 0)
    state: str | None = None  # the job's last state read (COMPLETED, TIMEOUT, PENDING, ...)
    job: dict[str, Any] | None = None  # the parsed job (job_fields), when one was read

    @property
    def wait_failure(self) -> str | None:
        """Why the wait ended before the job's end was seen (the case fails with it), None when it ended."""
        return None if self.status == "ended" else self.reason

    @property
    def end_reason(self) -> str | None:
        """What the job's end state said was wrong (TIMEOUT, NODE_FAIL, FAILED with its exit code, ...)."""
        return self.reason if self.status == "ended" else None

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "status": self.status,
            "reason": self.reason,
            "state": self.state,
            "job": self.job,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WaitEnd:
        status = data.get("status")
        if status not in ("ended", "forgotten", "unreachable", "drained"):
            raise ValueError(f"not the end of a wait on a Slurm job: {data!r}")
        return cls(str(data["job_id"]), status, data.get("reason"), data.get("state"), data.get("job"))


class SlurmJobTrigger(BaseTrigger):
    """Waits for Slurm job ``job_id`` on the login node of Airflow SSH connection ``ssh_conn_id`` (module docstring).

    :param poll_s: seconds between two looks at the job (the inventory's ``slurm.poll_s``)
    :param on_drained: ``wait`` (a job pending on drained nodes keeps waiting) or ``fail`` (cancel it, end the wait)
    :param unreachable_s: how long the login node may not answer before the wait ends (``unreachable``)
    :param command_timeout_s: bound of one command (scontrol, scancel) on the login node
    """

    def __init__(
        self,
        ssh_conn_id: str,
        job_id: str,
        poll_s: float = 30.0,
        on_drained: OnDrained = "wait",
        unreachable_s: float = 600.0,
        command_timeout_s: float = 60.0,
    ) -> None:
        super().__init__()
        self.ssh_conn_id = ssh_conn_id
        self.job_id = str(job_id)
        self.poll_s = float(poll_s)
        self.on_drained: OnDrained = on_drained
        self.unreachable_s = float(unreachable_s)
        self.command_timeout_s = float(command_timeout_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "ssh_conn_id": self.ssh_conn_id,
                "job_id": self.job_id,
                "poll_s": self.poll_s,
                "on_drained": self.on_drained,
                "unreachable_s": self.unreachable_s,
                "command_timeout_s": self.command_timeout_s,
            },
        )

    # ------------------------------------------------------------------ the login node

    async def _connect(self) -> SSHClientConnection:
        return await SSHHookAsync(ssh_conn_id=self.ssh_conn_id).get_conn()

    @staticmethod
    async def _close(conn: SSHClientConnection) -> None:
        try:
            conn.close()
            await conn.wait_closed()
        except Exception:  # noqa: BLE001, S110 - closing is best effort: nothing to recover
            pass

    async def _run(self, conn: SSHClientConnection, command: str) -> tuple[int, str, str]:
        """``command`` on the login node: (exit status, stdout, stderr); a command ended by a signal reads -1."""
        result = await conn.run(command, timeout=self.command_timeout_s, check=False)

        def text(value: object) -> str:
            return value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")

        status = result.exit_status if result.exit_status is not None else -1
        return status, text(result.stdout), text(result.stderr)

    async def cancel(self, conn: SSHClientConnection | None = None) -> str:
        """``scancel <id>`` on the login node (a connection of its own unless given); what it said."""
        own = conn is None
        conn = conn or await self._connect()
        try:
            status, out, err = await self._run(conn, slurm_jobs.cancel_command(self.job_id))
        finally:
            if own:
                await self._close(conn)
        said = (out + err).strip()
        if status != 0:
            raise RuntimeError(f"scancel {self.job_id} exited {status}: {said}")
        return said

    # ------------------------------------------------------------------ the wait

    def _end(self, status: WaitStatus, reason: str | None, job: slurm_jobs.SlurmJob | None = None) -> TriggerEvent:
        end = WaitEnd(self.job_id, status, reason, job.state if job else None, job_fields(job) if job else None)
        return TriggerEvent(end.to_json())

    async def _read(self, conn: SSHClientConnection) -> slurm_jobs.SlurmJob | None:
        """The job's state: scontrol's, else (scontrol forgot it: MinJobAge) Slurm accounting's (None: neither knows
        it); SlurmError when scontrol answered with something else (slurmctld down)."""
        status, out, err = await self._run(conn, slurm_jobs.job_state_command(self.job_id))
        try:
            job = slurm_jobs.parse_job_state(out + "\n" + err)
        except slurm_jobs.SlurmError as exc:
            raise slurm_jobs.SlurmError(f"scontrol exited {status}: {(err or out).strip()[-300:]}") from exc
        if job is not None:
            return job
        status, out, _ = await self._run(conn, slurm_jobs.sacct_command(self.job_id))
        return slurm_jobs.parse_sacct(out, self.job_id) if status == 0 else None

    async def run(self) -> AsyncIterator[TriggerEvent]:
        conn: SSHClientConnection | None = None
        down_since: float | None = None  # since when the job's state could not be read
        drained = 0  # looks in a row that saw the job wait on drained or down nodes
        clock: Callable[[], float] = time.monotonic
        try:
            while True:
                try:
                    if conn is None:
                        conn = await self._connect()
                    job = await self._read(conn)
                except (*_CONNECTION_ERRORS, slurm_jobs.SlurmError) as exc:
                    if conn is not None and not isinstance(exc, slurm_jobs.SlurmError):
                        await self._close(conn)
                        conn = None
                    problem = f"{type(exc).__name__}: {str(exc).strip() or 'no answer'}"
                    down_since = down_since if down_since is not None else clock()
                    waited = clock() - down_since
                    if waited >= self.unreachable_s:
                        yield self._end(
                            "unreachable",
                            f"slurm job {self.job_id}: its state could not be read over the ssh connection "
                            f"{self.ssh_conn_id} for {waited:.0f} s: {problem}",
                        )
                        return
                    self.log.warning("slurm job %s: state not read (%s); trying again", self.job_id, problem)
                    await asyncio.sleep(min(self.poll_s, self.unreachable_s - waited))
                    continue
                down_since = None
                if job is None:
                    yield self._end(
                        "forgotten",
                        f"slurm job {self.job_id}: its end is not known: scontrol does not know it (it ended longer "
                        "ago than MinJobAge, or was never submitted) and sacct has no record of it",
                    )
                    return
                if slurm_jobs.is_finished(job):
                    self.log.info("slurm job %s ended: %s", self.job_id, job.state)
                    yield self._end("ended", slurm_jobs.end_reason(job), job)
                    return
                waiting = slurm_jobs.pending_reason(job)
                drained = drained + 1 if waiting else 0
                if waiting and self.on_drained == "fail" and drained >= DRAINED_LOOKS:
                    reason = f"{waiting}: cancelled (on_drained: fail)"
                    try:
                        await self.cancel(conn)
                    except Exception as exc:  # noqa: BLE001 - the reason says it could not be cancelled
                        reason = f"{waiting}: scancel failed (on_drained: fail): {type(exc).__name__}: {exc}"
                    yield self._end("drained", reason, job)
                    return
                await asyncio.sleep(self.poll_s)
        finally:
            if conn is not None:
                await self._close(conn)

    async def on_kill(self) -> None:
        """The task was killed, cleared or marked while deferred (a user's action): cancel the job."""
        said = await self.cancel()
        self.log.info("slurm job %s cancelled (scancel)%s", self.job_id, f": {said}" if said else "")
