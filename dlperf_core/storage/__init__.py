"""dlperf results storage: SQLAlchemy models, Alembic migrations, the views (``case_summary``,
``latest_summary``, ``nightly_history``, ``open_regressions``) and an idempotent
:class:`ResultStore` (PostgreSQL or SQLite). No Airflow import here."""

from dlperf_core.storage.migrate import current_revision, downgrade, head_revision, upgrade
from dlperf_core.storage.models import (
    CASE_SUMMARY_COLUMNS,
    CONFIGURATION_COLUMNS,
    Base,
    BenchmarkRun,
    FabricProbe,
    FabricProbeSize,
    MaxBatchSearchResult,
    Regression,
    Result,
    StoredEnvironment,
    case_summary,
    latest_summary,
    nightly_history,
    open_regressions,
)
from dlperf_core.storage.records import (
    BenchmarkRunRecord,
    MaxBatchSearchRecord,
    ProbeRecord,
    ProbeSizeRecord,
    ResultRecord,
)
from dlperf_core.storage.store import ResultStore, default_db_url

__all__ = [
    "CASE_SUMMARY_COLUMNS",
    "CONFIGURATION_COLUMNS",
    "Base",
    "BenchmarkRun",
    "BenchmarkRunRecord",
    "FabricProbe",
    "FabricProbeSize",
    "ProbeRecord",
    "ProbeSizeRecord",
    "MaxBatchSearchRecord",
    "MaxBatchSearchResult",
    "Regression",
    "Result",
    "ResultRecord",
    "ResultStore",
    "StoredEnvironment",
    "case_summary",
    "latest_summary",
    "nightly_history",
    "open_regressions",
    "current_revision",
    "default_db_url",
    "downgrade",
    "head_revision",
    "upgrade",
]
