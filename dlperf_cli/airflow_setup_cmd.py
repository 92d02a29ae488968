"""``dlperf airflow-setup``: what an Airflow admin adds to an Airflow that already runs, once dlperf is installed
into it (docs/airflow-provider.md).

It prints, as ``airflow.cfg`` lines (``--format cfg``) or as ``AIRFLOW__...`` environment variables
(``--format env``, shell-quoted):

- ``[dag_processor] dag_bundle_config_list``: the admin's own bundles (``--bundles``; default Airflow 3.3's
  default, the ``dags-folder`` bundle: setting the option replaces that default, so it is kept explicitly) plus
  dlperf's :data:`BUNDLE_NAME` bundle, a ``LocalDagBundle`` at the installed DAG files (the package
  :data:`BUNDLE_PACKAGE`, which is the repository's ``dags/``);
- ``[core] allowed_deserialization_classes``: the admin's own (``--allowed-deserialization-classes``; default
  Airflow's ``airflow.*``) with dlperf's (:data:`dlperf_core.json_form.ALLOWED_DESERIALIZATION_CLASSES`) appended;
- ``[core] max_map_length``: :data:`dlperf_core.plan.defaults.MAX_CASE_RUNS` (a night maps more case runs than
  Airflow's default 1,024);
- the pool the DAG's cases share (:data:`CLUSTER_POOL`, counting deferred tasks), as the ``airflow pools set``
  command that creates it, and the results database's connection (``dlperf_results``) as the ``airflow connections
  add`` command that makes it (comments: neither is a configuration option).

It reads nothing from the running Airflow and writes nothing: the admin puts the lines where the deployment keeps
its configuration.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from dlperf_core.json_form import ALLOWED_DESERIALIZATION_CLASSES
from dlperf_core.plan.defaults import CLUSTER_POOL, CLUSTER_POOL_DESCRIPTION, CLUSTER_POOL_SLOTS, MAX_CASE_RUNS

BUNDLE_PACKAGE = "dlperf_airflow.bundle"
"""The installed DAG files (pyproject.toml maps the repository's dags/ to it)."""
BUNDLE_NAME = "dlperf"
LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"
DEFAULT_BUNDLES: list[dict[str, Any]] = [{"name": "dags-folder", "classpath": LOCAL_BUNDLE, "kwargs": {}}]
"""Airflow 3.3's default ``[dag_processor] dag_bundle_config_list`` (its config.yml): the dags folder."""
AIRFLOW_DESERIALIZATION_DEFAULT = "airflow.*"
"""Airflow 3.3's default ``[core] allowed_deserialization_classes``."""


def bundle_path() -> Path:
    """The folder of the installed DAG files (site-packages/dlperf_airflow/bundle; in an editable install,
    the checkout's dags/)."""
    root = resources.files(BUNDLE_PACKAGE)
    if not isinstance(root, Path):  # a package on the file system: a Path (a zip import would not be)
        raise TypeError(f"{BUNDLE_PACKAGE} is not a folder on the file system ({root!r}): a LocalDagBundle needs one")
    return root


def bundle_entry(path: Path) -> dict[str, Any]:
    """dlperf's entry of ``dag_bundle_config_list``: a LocalDagBundle at ``path``."""
    return {"name": BUNDLE_NAME, "classpath": LOCAL_BUNDLE, "kwargs": {"path": str(path), "refresh_interval": 0}}


def bundle_list(own: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    """The admin's bundles, less any named :data:`BUNDLE_NAME` (an older entry of dlperf's), then dlperf's."""
    return [b for b in own if b.get("name") != BUNDLE_NAME] + [bundle_entry(path)]


def deserialization_classes(own: str) -> str:
    """The admin's ``allowed_deserialization_classes`` (space separated, as Airflow reads it) with dlperf's
    patterns appended, each once."""
    patterns = own.split()
    patterns += [p for p in ALLOWED_DESERIALIZATION_CLASSES.split() if p not in patterns]
    return " ".join(patterns)


def settings(own_bundles: list[dict[str, Any]], own_classes: str, path: Path) -> list[tuple[str, str, str]]:
    """``(section, option, value)`` of every option dlperf needs set."""
    return [
        ("dag_processor", "dag_bundle_config_list", json.dumps(bundle_list(own_bundles, path))),
        ("core", "allowed_deserialization_classes", deserialization_classes(own_classes)),
        ("core", "max_map_length", str(MAX_CASE_RUNS)),
    ]


def pool_command() -> str:
    """The ``airflow pools set`` command that creates (or updates) the cluster's pool."""
    return shlex.join(
        [
            "airflow",
            "pools",
            "set",
            "--include-deferred",
            CLUSTER_POOL,
            str(CLUSTER_POOL_SLOTS),
            CLUSTER_POOL_DESCRIPTION,
        ]
    )


def render(values: list[tuple[str, str, str]], path: Path, fmt: str) -> str:
    """``values`` as airflow.cfg lines (``cfg``) or ``AIRFLOW__SECTION__OPTION=value`` lines (``env``)."""
    lines = [f"# dlperf's DAG bundle: {path}"]
    if fmt == "env":
        lines += [f"AIRFLOW__{s.upper()}__{o.upper()}={shlex.quote(v)}" for s, o, v in values]
    else:
        section = None
        for s, o, v in values:
            if s != section:
                lines.append(f"[{s}]")
                section = s
            lines.append(f"{o} = {v}")
    lines.append(f"# and once, where Airflow's metadata database is reachable: {pool_command()}")
    lines.append(
        "# the results database, unless the workers and the api-server set DLPERF_DB_URL: "
        "airflow connections add dlperf_results --conn-uri 'postgresql://dlperf:<password>@db-host:5432/dlperf'"
    )
    lines.append("# (per node pools and connections: dlperf cluster sync --inventory FILE)")
    return "\n".join(lines)


def cmd_airflow_setup(args: argparse.Namespace) -> int:
    try:
        own = json.loads(args.bundles) if args.bundles else DEFAULT_BUNDLES
    except json.JSONDecodeError as exc:
        print(f"--bundles is not JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(own, list) or not all(isinstance(b, dict) for b in own):
        print("--bundles is not a JSON list of bundle objects", file=sys.stderr)
        return 2
    path = bundle_path()
    print(render(settings(own, args.allowed_deserialization_classes, path), path, args.format))
    return 0


def add_airflow_setup_parser(sub) -> None:
    """``dlperf airflow-setup`` on the CLI's subcommand parser."""
    p = sub.add_parser(
        "airflow-setup",
        help="print the configuration an existing Airflow needs for dlperf: its DAG bundle, "
        "allowed_deserialization_classes, max_map_length and pool",
    )
    p.add_argument(
        "--format", choices=["cfg", "env"], default="cfg", help="airflow.cfg lines or AIRFLOW__ environment lines"
    )
    p.add_argument(
        "--bundles",
        help="your [dag_processor] dag_bundle_config_list (JSON), kept before dlperf's bundle "
        "(default: Airflow's default, the dags-folder bundle)",
    )
    p.add_argument(
        "--allowed-deserialization-classes",
        default=AIRFLOW_DESERIALIZATION_DEFAULT,
        help=f"your [core] allowed_deserialization_classes, kept before dlperf's (default: {AIRFLOW_DESERIALIZATION_DEFAULT!r})",
    )
    p.set_defaults(func=cmd_airflow_setup)
