"""ResultStore: the dlperf results database, its writes, typed reads and DataFrame reads for reports.

The store is put together from three parts, one module each:

* :mod:`dlperf_core.storage.writes`: idempotent writes, each one ``INSERT .. ON CONFLICT`` (the one upsert of
  :mod:`dlperf_core.storage.sql`, PostgreSQL and SQLite dialects), all values bound, each in its own transaction,
  retried on ``OperationalError`` (3 tries, exponential backoff);
* :mod:`dlperf_core.storage.reads`: the typed reads (``run_info``, ``run_rows``, ``open_regression`` and the
  ``*_rows`` methods), answering with the frozen rows of :mod:`dlperf_core.storage.rows` (NULL as None, numbers as
  int/float, timestamps aware UTC): what the DAG's steps, the pure core and the CLI's commands work with;
* :mod:`dlperf_core.storage.frames`: the DataFrame reads (``summary``, ``results``, ``history``, ``regressions``,
  ``runs``, ...), for the reporting edge only: reports, printed tables, plots and analyses
  (:mod:`dlperf_core.reporting`, ``dlperf results``, ``dlperf compare``).

Both kinds of read run the same queries (:mod:`dlperf_core.storage.queries`).
"""

from __future__ import annotations

import os

from sqlalchemy import Engine

from dlperf_core.home import state_dir
from dlperf_core.storage import migrate
from dlperf_core.storage.engine import make_engine
from dlperf_core.storage.frames import StoreFrames
from dlperf_core.storage.sql import RETRIES, RETRY_BACKOFF_S, retry
from dlperf_core.storage.writes import StoreWrites

__all__ = ["RETRIES", "RETRY_BACKOFF_S", "ResultStore", "default_db_url"]


def default_db_url() -> str:
    """``$DLPERF_DB_URL``, else a SQLite file ``$DLPERF_HOME/.dlperf/dlperf.db`` (folder created; see
    :mod:`dlperf_core.home`), the same whatever the current directory."""
    url = os.environ.get("DLPERF_DB_URL")
    if url:
        return url
    return f"sqlite:///{state_dir(create=True) / 'dlperf.db'}"


class ResultStore(StoreWrites, StoreFrames):
    """The dlperf results database at ``url`` (PostgreSQL or SQLite; default
    :func:`default_db_url`). Call :meth:`ensure_schema` before the first use of a database."""

    def __init__(self, url: str | None = None) -> None:
        self.url: str = url if url is not None else default_db_url()
        self.engine: Engine = make_engine(self.url)

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.dispose()

    def __repr__(self) -> str:
        return f"ResultStore({self.engine.url!r})"

    def dispose(self) -> None:
        """Close the pooled connections."""
        self.engine.dispose()

    @retry
    def ensure_schema(self) -> None:
        """Upgrade the schema to the head migration; idempotent and serialised by a lock."""
        if self.engine.dialect.name != "postgresql":
            migrate.upgrade(self.engine)
            return
        before = migrate.current_revision(self.engine)
        migrate.upgrade(self.engine)
        if before != migrate.current_revision(self.engine):
            self.engine.dispose()  # new sessions pick up what a migration set for the database (jit = off)
