"""dlperf results storage: SQLAlchemy models, Alembic migrations, the ``case_summary`` view and an
idempotent :class:`ResultStore` (PostgreSQL or SQLite). No Airflow import here."""

from dlperf_core.storage.migrate import current_revision, downgrade, head_revision, upgrade
from dlperf_core.storage.models import (
    CASE_SUMMARY_COLUMNS,
    Base,
    BenchmarkRun,
    Result,
    case_summary,
)
from dlperf_core.storage.records import BenchmarkRunRecord, ResultRecord
from dlperf_core.storage.store import ResultStore, default_db_url

__all__ = [
    "CASE_SUMMARY_COLUMNS",
    "Base",
    "BenchmarkRun",
    "BenchmarkRunRecord",
    "Result",
    "ResultRecord",
    "ResultStore",
    "case_summary",
    "current_revision",
    "default_db_url",
    "downgrade",
    "head_revision",
    "upgrade",
]
