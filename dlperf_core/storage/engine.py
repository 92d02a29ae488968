"""Engine construction for the results database (PostgreSQL or SQLite) and write transactions.

SQLite gets real transactions (``BEGIN`` emitted by SQLAlchemy instead of the ``sqlite3`` driver's
legacy mode, so DDL is transactional too), ``PRAGMA foreign_keys=ON``, a 30 s busy timeout and
``BEGIN IMMEDIATE`` for writes (the write lock is taken up front, so concurrent writers queue up
instead of failing on a lock upgrade). The folder of a SQLite file is created when missing.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, make_url

_SQLITE_BEGIN = "dlperf_sqlite_begin"
"""Connection execution option naming the SQLite BEGIN mode (DEFERRED or IMMEDIATE)."""


def _sqlite_file(database: str | None) -> Path | None:
    """The file of a SQLite ``database`` URL part, or None for an in-memory database."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def _sqrt(value: float | None) -> float | None:
    """sqrt for SQLite builds without math functions (NULL and negatives give NULL, as there)."""
    return None if value is None or value < 0 else math.sqrt(value)


def make_engine(url: str) -> Engine:
    """Create an engine for ``url`` with the dlperf SQLite settings (see module docstring)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True)
    path = _sqlite_file(parsed.database)
    if path is not None:
        path.expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        try:
            cursor.execute("SELECT sqrt(4.0)")  # the case_summary view's stdev needs it
        except sqlite3.OperationalError:  # SQLite built without its math functions
            dbapi_connection.create_function("sqrt", 1, _sqrt, deterministic=True)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get(_SQLITE_BEGIN, "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction meant for writing, committed on success.

    On SQLite the transaction starts with ``BEGIN IMMEDIATE`` (only when the engine came from
    :func:`make_engine`; otherwise the driver's default applies).
    """
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.execution_options(**{_SQLITE_BEGIN: "IMMEDIATE"})
        with conn.begin():
            yield conn


LIBPQ_OPTIONS = frozenset(
    {
        "sslmode", "sslcert", "sslkey", "sslrootcert", "sslcrl", "connect_timeout", "application_name", "options",
        "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "target_session_attrs",
    }
)  # fmt: skip
"""The extras of a postgres connection that are libpq's options (others, such as the hook's ``cursor``, are not)."""


def url_of_connection(
    conn_id: str,
    conn_type: str | None,
    *,
    host: str | None,
    port: int | None,
    login: str | None,
    password: str | None,
    schema: str | None,
    extra: dict[str, Any] | None = None,
) -> str:
    """The SQLAlchemy URL of an Airflow connection to a results database: ``postgres`` (the Postgres provider's type:
    host, port, login, password, schema = the database; the extras that are libpq options, such as ``sslmode``,
    become query options) or
    ``sqlite`` (host = the file). Raises ConfigError naming the connection otherwise."""
    from sqlalchemy.engine import URL

    from dlperf_core.errors import ConfigError

    source = f"Airflow connection {conn_id}"
    if conn_type in ("postgres", "postgresql"):
        if not host:
            raise ConfigError(source, ["a postgres connection needs a host"])
        query = {k: str(v) for k, v in (extra or {}).items() if k in LIBPQ_OPTIONS and v not in (None, "")}
        url = URL.create(
            "postgresql+psycopg2",
            username=login or None,
            password=password or None,
            host=host,
            port=port or None,
            database=schema or None,
            query=query,
        )
        return url.render_as_string(hide_password=False)
    if conn_type == "sqlite":
        if not host:
            raise ConfigError(source, ["a sqlite connection names the database file as its host"])
        return f"sqlite:///{host}"
    raise ConfigError(
        source,
        [f"its type is {conn_type!r}: dlperf stores results in PostgreSQL (conn type postgres) or SQLite (sqlite)"],
    )
