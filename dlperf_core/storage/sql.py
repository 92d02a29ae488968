"""What the store's writes and reads share: the one upsert (``INSERT .. ON CONFLICT``, PostgreSQL and SQLite), the
id of a row by its unique key, UTC times, the retry of a write, and the filter of one run's rows."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import Connection, Select, Table, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import OperationalError

P = ParamSpec("P")
T = TypeVar("T")

RETRIES = 3
"""Tries of a write before an OperationalError is re-raised."""
RETRY_BACKOFF_S = 0.25
"""Sleep before the second try; doubled before each further one."""


def retry(fn: Callable[P, T]) -> Callable[P, T]:
    """Retry ``fn`` on OperationalError (lost connection, locked database): RETRIES tries."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        for attempt in range(1, RETRIES + 1):
            try:
                return fn(*args, **kwargs)
            except OperationalError:
                if attempt == RETRIES:
                    raise
                time.sleep(RETRY_BACKOFF_S * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    return wrapper


def utc(value: datetime | None) -> datetime | None:
    """``value`` in UTC (naive values are taken as UTC already)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def now() -> datetime:
    """The current time, aware, UTC."""
    return datetime.now(UTC)


def table_of(source: Table | type) -> Table:
    """The ``Table`` of ``source`` (a table, or an ORM class)."""
    table = source if isinstance(source, Table) else source.__table__  # type: ignore[attr-defined]
    if not isinstance(table, Table):
        raise TypeError(f"{source!r} has no table")
    return table


def insert_for(conn: Connection, source: Table | type) -> postgresql.Insert | sqlite.Insert:
    """The dialect INSERT (with ON CONFLICT support) for ``source`` on ``conn``."""
    name = conn.dialect.name
    if name == "postgresql":
        return postgresql.insert(table_of(source))
    if name == "sqlite":
        return sqlite.insert(table_of(source))
    raise NotImplementedError(f"dlperf storage supports postgresql and sqlite, not {name}")


def upsert(
    conn: Connection,
    source: Table | type,
    values: Mapping[str, object],
    key: Sequence[str],
    *,
    keep: Iterable[str] = (),
    also: Mapping[str, object] | None = None,
    update: bool = True,
) -> None:
    """Insert the row ``values`` into ``source``; when a row with the same ``key`` (a unique constraint) is there,
    set its other columns of ``values`` (but those in ``keep``) to the new ones, and ``also``'s columns to their
    values; with ``update=False``, leave that row as it is (``ON CONFLICT DO NOTHING``). All values are bound."""
    stmt = insert_for(conn, source).values(**values)
    if not update:
        conn.execute(stmt.on_conflict_do_nothing(index_elements=list(key)))
        return
    unchanged = {*key, *keep}
    set_: dict[str, object] = {name: stmt.excluded[name] for name in values if name not in unchanged}
    set_.update(also or {})
    conn.execute(stmt.on_conflict_do_update(index_elements=list(key), set_=set_))


def id_of(conn: Connection, source: Table | type, values: Mapping[str, object], key: Sequence[str]) -> int:
    """The ``id`` of the row of ``source`` whose ``key`` columns have ``values``' values (it must exist)."""
    table = table_of(source)
    stmt = select(table.c.id).where(*(table.c[name] == values[name] for name in key))
    return int(conn.execute(stmt).scalar_one())


def of_run(stmt: Select[Any], columns: Any, run_id: str | None, dag_id: str | None) -> Select[Any]:
    """``stmt`` kept to the rows of ``run_id`` and of ``dag_id``, each when given (``columns``: the ``.c`` of
    the table or view read, which has both)."""
    if run_id is not None:
        stmt = stmt.where(columns.run_id == run_id)
    if dag_id is not None:
        stmt = stmt.where(columns.dag_id == dag_id)
    return stmt
