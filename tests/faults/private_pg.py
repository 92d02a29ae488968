"""A private PostgreSQL server for tests that stop the database: never the shared one on 5432.

``initdb`` refuses to run as root, so the cluster folder belongs to the ``postgres`` user and the
server runs as that user (``runuser``) when the tests run as root.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _bin(name: str) -> str | None:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(found[-1]) if found else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivatePostgres:
    """A throw-away cluster in a temp folder on a free port; ``start()``/``stop()`` at will."""

    def __init__(self) -> None:
        initdb, self.pg_ctl = _bin("initdb"), _bin("pg_ctl")
        if not initdb or not self.pg_ctl:
            raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
        self.as_user: list[str] = []
        self.folder = Path(tempfile.mkdtemp(prefix="dlperf-pg-"))
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.data = self.folder / "data"
        self.port = _free_port()
        self._run([initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync"])

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run([*self.as_user, *argv], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stdout[-1000:]}{done.stderr[-1000:]}")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run([self.pg_ctl, "-D", str(self.data), "-o", opts, "-l", str(self.folder / "server.log"), "-w", "start"])

    def stop(self) -> None:
        self._run([self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop"])

    def destroy(self) -> None:
        subprocess.run(
            [*self.as_user, self.pg_ctl, "-D", str(self.data), "-m", "immediate", "stop"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def running_private_pg() -> Iterator[PrivatePostgres]:
    """A started :class:`PrivatePostgres` for a pytest fixture (``yield from``), destroyed after; the test is skipped
    where no server can be made here."""
    import pytest

    try:
        server = PrivatePostgres()
    except (RuntimeError, KeyError, OSError) as exc:
        pytest.skip(f"cannot create a private PostgreSQL server: {exc}")
    try:
        server.start()
        yield server
    finally:
        server.destroy()
