"""The results database given as an Airflow connection: its SQLAlchemy URL (dlperf_core.storage.engine)."""

from __future__ import annotations

import pytest
from sqlalchemy import make_url

from dlperf_core.errors import ConfigError
from dlperf_core.storage.engine import url_of_connection


def test_a_postgres_connection_is_its_psycopg2_url_with_libpq_options_only():
    url = url_of_connection(
        "dlperf_results",
        "postgres",
        host="db.example.com",
        port=5433,
        login="dlperf",
        password="p@ss/word",
        schema="results",
        extra={"sslmode": "require", "cursor": "realdictcursor", "connect_timeout": 10},
    )
    parsed = make_url(url)
    assert parsed.drivername == "postgresql+psycopg2"
    assert (parsed.host, parsed.port, parsed.username, parsed.password) == (
        "db.example.com",
        5433,
        "dlperf",
        "p@ss/word",
    )
    assert parsed.database == "results"
    assert dict(parsed.query) == {"sslmode": "require", "connect_timeout": "10"}  # the hook's cursor is no libpq option


def test_a_sqlite_connection_is_its_file_and_other_types_are_refused():
    url = url_of_connection("r", "sqlite", host="/data/dlperf.db", port=None, login=None, password=None, schema=None)
    assert url == "sqlite:////data/dlperf.db"
    with pytest.raises(ConfigError, match="Airflow connection r.*its type is 'http'"):
        url_of_connection("r", "http", host="x", port=None, login=None, password=None, schema=None)
    with pytest.raises(ConfigError, match="needs a host"):
        url_of_connection("r", "postgres", host=None, port=None, login=None, password=None, schema=None)
