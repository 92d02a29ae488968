"""dlperf results storage: SQLAlchemy models, Alembic migrations, the views (``case_summary``,
``latest_summary``, ``nightly_history``, ``open_regressions``, the fabric views, ``mlperf_scores``) and an idempotent
:class:`ResultStore` (PostgreSQL or SQLite). No Airflow import here.

Each table is declared once, as an ORM class in :mod:`dlperf_core.storage.models`; the record a caller hands the
store (:mod:`dlperf_core.storage.records`), the typed row a read answers with (:mod:`dlperf_core.storage.rows`)
and the spool's JSON (the record's generated form) are checked against that declaration when they are defined
(:mod:`dlperf_core.storage.shape`). The store is its writes (:mod:`~dlperf_core.storage.writes`, one upsert:
:mod:`~dlperf_core.storage.sql`), typed reads (:mod:`~dlperf_core.storage.reads`) and DataFrame reads for reports
(:mod:`~dlperf_core.storage.frames`), over shared queries (:mod:`~dlperf_core.storage.queries`).

The package's public face is what callers need: the store, the records they hand it, the typed rows its reads
answer with, the column lists of the views and the migration functions. The ORM classes and view definitions stay
in :mod:`dlperf_core.storage.models` (import them from there)."""

from dlperf_core.storage.migrate import current_revision, downgrade, head_revision, upgrade
from dlperf_core.storage.models import CASE_SUMMARY_COLUMNS, CONFIGURATION_COLUMNS, Base, BenchmarkRun
from dlperf_core.storage.records import (
    BenchmarkRunRecord,
    FabricRecord,
    FabricSizeRecord,
    MaxBatchSearchRecord,
    ResultRecord,
)
from dlperf_core.storage.rows import (
    BenchmarkRunRow,
    CaseSummaryRow,
    Configuration,
    EnvironmentRow,
    FabricHistoryRow,
    FabricRow,
    FabricSummaryRow,
    HistoryRow,
    MaxBatchSearchRow,
    MlperfScoreRow,
    RegressionRow,
    ResultRow,
)
from dlperf_core.storage.store import ResultStore, default_db_url

__all__ = [
    "CASE_SUMMARY_COLUMNS",
    "CONFIGURATION_COLUMNS",
    "Base",
    "BenchmarkRun",
    "BenchmarkRunRecord",
    "CaseSummaryRow",
    "Configuration",
    "EnvironmentRow",
    "FabricHistoryRow",
    "FabricRecord",
    "FabricRow",
    "FabricSizeRecord",
    "FabricSummaryRow",
    "HistoryRow",
    "MaxBatchSearchRecord",
    "MaxBatchSearchRow",
    "MlperfScoreRow",
    "RegressionRow",
    "ResultRecord",
    "ResultRow",
    "ResultStore",
    "BenchmarkRunRow",
    "current_revision",
    "default_db_url",
    "downgrade",
    "head_revision",
    "upgrade",
]
