"""dlperf's home: one folder every default location hangs off, whatever the current directory is.

``DLPERF_HOME`` (absolute; a relative value is taken against the current directory) is:

- where relative suite and inventory paths are resolved (``suites/smoke.yaml``, ``inventories/local.yaml``);
- the parent of the state folder ``$DLPERF_HOME/.dlperf/``, which holds the defaults of

  - the results database: ``.dlperf/dlperf.db`` (SQLite), unless ``DLPERF_DB_URL`` (or ``--db``) names one;
  - node logs: ``.dlperf/logs/``, unless ``DLPERF_LOG_DIR``;
  - reports: ``.dlperf/reports/``, unless ``DLPERF_REPORT_DIR``;
  - the result spool: ``.dlperf/spool/``, unless ``DLPERF_SPOOL_DIR``;
  - the embedded Airflow of ``dlperf run``: ``.dlperf/airflow/``, unless ``AIRFLOW_HOME``.

Without ``DLPERF_HOME`` the home is the checkout dlperf runs from: the folder that holds ``dlperf_core/``
(with ``pyproject.toml`` beside it; an editable install, as ``make venv`` makes, counts). A copy installed
outside a checkout (site-packages) uses ``${XDG_DATA_HOME:-~/.local/share}/dlperf`` instead of writing into
site-packages; the Docker image sets ``DLPERF_HOME=/opt/dlperf``.

So ``dlperf results`` run from any folder reads the database ``dlperf run`` wrote, and setting
``DLPERF_HOME`` moves all of it at once. Nothing here creates a folder except :func:`state_dir` with
``create=True``.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "DLPERF_HOME"
"""The environment variable that names dlperf's home."""
STATE_DIRNAME = ".dlperf"
"""The state folder's name, under the home."""

_PACKAGE_DIR = Path(__file__).resolve().parent


def checkout_root() -> Path | None:
    """The checkout holding this ``dlperf_core`` (its parent folder, with ``pyproject.toml``), else None."""
    root = _PACKAGE_DIR.parent
    return root if (root / "pyproject.toml").is_file() else None


def _installed_home() -> Path:
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data).expanduser() / "dlperf"


def dlperf_home() -> Path:
    """``$DLPERF_HOME``, else the checkout holding ``dlperf_core``, else ``$XDG_DATA_HOME/dlperf``
    (absolute; not created)."""
    configured = os.environ.get(HOME_ENV)
    if configured:
        return Path(configured).resolve()
    return (checkout_root() or _installed_home()).resolve()


def resolve(path: str | os.PathLike[str]) -> Path:
    """``path`` as it is when absolute, else under :func:`dlperf_home` (suites, inventories)."""
    p = Path(path)
    return p if p.is_absolute() else dlperf_home() / p


def state_dir(*parts: str, create: bool = False) -> Path:
    """``$DLPERF_HOME/.dlperf[/parts...]`` (absolute), created with its parents when ``create``."""
    folder = dlperf_home().joinpath(STATE_DIRNAME, *parts)
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def env_path(variable: str, *default_parts: str) -> Path:
    """The folder named by ``$variable`` when set (absolute), else ``state_dir(*default_parts)``."""
    configured = os.environ.get(variable)
    return Path(configured).resolve() if configured else state_dir(*default_parts)
