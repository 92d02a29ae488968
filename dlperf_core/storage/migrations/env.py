"""Alembic environment of the dlperf results database.

Works without an ``alembic.ini``: :mod:`dlperf_core.storage.migrate` builds the
:class:`alembic.config.Config` in code and hands over either an open SQLAlchemy ``Connection``
(``config.attributes["connection"]``, used as is, inside the caller's transaction) or a URL
(``sqlalchemy.url`` main option). With neither, :func:`dlperf_core.storage.store.default_db_url`
is used. The version table is ``dlperf_alembic_version`` so that the schema can share a database
with Airflow's own ``alembic_version``.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from dlperf_core.storage.migrate import VERSION_TABLE
from dlperf_core.storage.models import Base

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    """The database URL from the config, else the dlperf default."""
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from dlperf_core.storage.store import default_db_url

    return default_db_url()


def _configure(connection: Connection) -> None:
    """Configure the migration context on an open connection."""
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_migrations_offline() -> None:
    """Emit the migration SQL as text (``alembic upgrade --sql``)."""
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run the migrations on the given connection, or on a fresh engine for the URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
