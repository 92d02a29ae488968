"""Run the dlperf Alembic migrations from code, with no ``alembic.ini`` on disk.

``bind`` may be a URL, an :class:`~sqlalchemy.Engine` or an open :class:`~sqlalchemy.Connection`.
With a URL or an Engine the migration runs in one transaction (DDL is transactional on
PostgreSQL and, with :func:`~dlperf_core.storage.engine.make_engine`, on SQLite) that first takes
a lock, so concurrent callers wait for each other and then find the schema at head:
``pg_advisory_xact_lock`` on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite. With a Connection the
caller owns the transaction. For an in-memory SQLite database pass the Engine, not the URL.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from dlperf_core.storage.engine import make_engine, write_transaction

MIGRATIONS_DIR: Path = Path(__file__).resolve().with_name("migrations")
"""The Alembic script directory shipped in the package."""

VERSION_TABLE = "dlperf_alembic_version"
"""Alembic version table of the dlperf schema (kept apart from Airflow's ``alembic_version``)."""

_PG_LOCK_KEY = 0x646C70657266  # "dlperf": advisory lock key serialising migrations

Bind = str | Engine | Connection


def alembic_config(url: str | None = None, connection: Connection | None = None) -> Config:
    """An Alembic Config built in code: script location, and the URL or open connection to use."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The head revision of the shipped migrations."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migrations found"
    return head


def _run(bind: Bind, action: str, revision: str) -> None:
    """Run ``command.upgrade``/``command.downgrade`` on ``bind`` (see module docstring)."""
    if isinstance(bind, Connection):
        getattr(command, action)(alembic_config(connection=bind), revision)
        return
    engine = make_engine(bind) if isinstance(bind, str) else bind
    try:
        with write_transaction(engine) as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
            getattr(command, action)(alembic_config(connection=conn), revision)
    finally:
        if isinstance(bind, str):
            engine.dispose()


def upgrade(bind: Bind, revision: str = "head") -> None:
    """Upgrade the schema of ``bind`` to ``revision`` (default: head). Idempotent."""
    _run(bind, "upgrade", revision)


def downgrade(bind: Bind, revision: str = "base") -> None:
    """Downgrade the schema of ``bind`` to ``revision`` (default: base, i.e. drop everything)."""
    _run(bind, "downgrade", revision)


def current_revision(bind: Bind) -> str | None:
    """The revision the database of ``bind`` is at, or None when it has no dlperf schema."""
    if isinstance(bind, Connection):
        context = MigrationContext.configure(bind, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()
    engine = make_engine(bind) if isinstance(bind, str) else bind
    try:
        with engine.connect() as conn:
            return current_revision(conn)
    finally:
        if isinstance(bind, str):
            engine.dispose()
