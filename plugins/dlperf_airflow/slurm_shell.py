"""The Slurm runtime's way to its login node on a worker: the SSH provider's hook (paramiko) on the Airflow SSH
connection the inventory's ``slurm.connection`` names, as the core's ``RemoteShell``
(:mod:`dlperf_core.run.runtime.slurm`): commands (sbatch, scontrol, scancel, sacct) and files (the batch script, the
job's output) over one connection, opened on first use and opened again when it dropped."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from dlperf_core.run.runtime.slurm import RemoteResult

if TYPE_CHECKING:
    from airflow.providers.ssh.hooks.ssh import SSHHook

SSHClient = Any  # paramiko's SSHClient (paramiko ships no type information)

log = logging.getLogger("dlperf.slurm")

CONNECT_TIMEOUT_S = 30


class LoginNodeError(RuntimeError):
    """The login node could not be reached or refused a command's channel: the message names the connection."""


class SshLoginShell:
    """A ``RemoteShell`` on the login node of Airflow SSH connection ``conn_id`` (its host named in errors)."""

    def __init__(self, conn_id: str, hook: SSHHook | None = None) -> None:
        self.conn_id = conn_id
        self._hook = hook
        self._client: SSHClient | None = None
        self._lock = threading.Lock()

    @property
    def hook(self) -> SSHHook:
        if self._hook is None:
            from airflow.providers.ssh.hooks.ssh import SSHHook

            self._hook = SSHHook(ssh_conn_id=self.conn_id, conn_timeout=CONNECT_TIMEOUT_S, conn_retry_attempts=1)
        return self._hook

    @property
    def where(self) -> str:
        """The login node as errors name it: ``user@host:port (connection <id>)``."""
        hook = self._hook
        if hook is None or not getattr(hook, "remote_host", None):
            return f"the login node of ssh connection {self.conn_id}"
        return f"login node {hook.username}@{hook.remote_host}:{hook.port} (ssh connection {self.conn_id})"

    def _connected(self) -> SSHClient:
        with self._lock:
            client = self._client
            transport = client.get_transport() if client is not None else None
            if client is None or transport is None or not transport.is_active():
                try:
                    client = self._client = self.hook.get_conn()
                except Exception as exc:
                    raise LoginNodeError(f"{self.where}: cannot connect: {type(exc).__name__}: {exc}") from exc
            return client

    def run(self, command: str, timeout_s: float) -> RemoteResult:
        """``command`` on the login node, bounded by ``timeout_s`` (of silence and of the whole command)."""
        client = self._connected()
        try:
            status, out, err = self.hook.exec_ssh_client_command(
                client, command, get_pty=False, environment=None, timeout=timeout_s
            )
        except Exception as exc:
            self.close()  # a dropped connection is opened again by the next command
            raise LoginNodeError(f"{self.where}: {command.split()[0] if command else command}: {exc}") from exc
        return RemoteResult(status, out.decode(errors="replace"), err.decode(errors="replace"))

    def write_file(self, path: str, text: str) -> None:
        """``text`` into ``path`` on the login node (SFTP; its folder made first)."""
        client = self._connected()
        try:
            with client.open_sftp() as sftp:
                folder = path.rsplit("/", 1)[0] if "/" in path.strip("/") else ""
                if folder:
                    self._makedirs(sftp, folder)
                with sftp.open(path, "w") as out:
                    out.write(text.encode())
        except Exception as exc:
            raise LoginNodeError(f"{self.where}: cannot write {path}: {type(exc).__name__}: {exc}") from exc

    def read_file(self, path: str) -> bytes:
        """The bytes of ``path`` on the login node (SFTP)."""
        client = self._connected()
        try:
            with client.open_sftp() as sftp, sftp.open(path, "rb") as src:
                return bytes(src.read())
        except FileNotFoundError:
            raise
        except OSError as exc:
            if getattr(exc, "errno", None) == 2:
                raise FileNotFoundError(2, f"{self.where}: no such file", path) from exc
            raise LoginNodeError(f"{self.where}: cannot read {path}: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:
            raise LoginNodeError(f"{self.where}: cannot read {path}: {type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _makedirs(sftp, folder: str) -> None:  # noqa: ANN001 - paramiko's SFTPClient
        parts = folder.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if not sub:
                continue
            try:
                sftp.stat(sub)
            except OSError:
                sftp.mkdir(sub)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                try:
                    self._client.close()
                finally:
                    self._client = None
