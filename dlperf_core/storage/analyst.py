"""A read-only PostgreSQL role for analysts: SELECT on every table and view of the results schema, now
and on the ones later migrations create (default privileges), and read-only transactions by default.

``dlperf db analyst-role --name NAME`` calls :func:`create_analyst_role`; the password comes from an
environment variable, never from the command line (where ``ps`` and shell history would keep it).
"""

from __future__ import annotations

import re

from sqlalchemy import Engine, text

from dlperf_core.storage.engine import write_transaction

ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def create_analyst_role(engine: Engine, name: str, password: str | None, schema: str = "public") -> bool:
    """Create (or update) the read-only role ``name`` on ``engine``'s database; True when it was new.

    Idempotent: running it again resets the password and re-grants. The grants cover the objects of
    ``schema`` that exist now, and (ALTER DEFAULT PRIVILEGES) those that the connecting user, the one
    that runs the migrations, creates later.
    """
    if engine.dialect.name != "postgresql":
        raise ValueError("analyst roles need PostgreSQL (a SQLite file is read-only by file permissions)")
    if not ROLE_NAME.match(name):
        raise ValueError(f"role name {name!r}: use lower-case letters, digits and _ (at most 63)")
    if not password:
        raise ValueError("an empty password is refused")
    with write_transaction(engine) as conn:
        quote = conn.dialect.identifier_preparer.quote
        role, sch = quote(name), quote(schema)
        database = quote(conn.execute(text("SELECT current_database()")).scalar_one())
        new = conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :n"), {"n": name}).first() is None
        if new:
            conn.execute(text(f"CREATE ROLE {role} LOGIN"))
        conn.execute(
            text(f"ALTER ROLE {role} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD :pw"),
            {"pw": password},
        )
        conn.execute(text(f"ALTER ROLE {role} SET default_transaction_read_only = on"))
        conn.execute(text(f"GRANT CONNECT ON DATABASE {database} TO {role}"))
        conn.execute(text(f"GRANT USAGE ON SCHEMA {sch} TO {role}"))
        conn.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA {sch} TO {role}"))  # tables and views
        conn.execute(text(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {sch} GRANT SELECT ON TABLES TO {role}"))
    return new
