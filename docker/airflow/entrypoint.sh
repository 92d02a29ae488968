#!/usr/bin/env bash
# dlperf Airflow image entrypoint, used like the official image's:
#   docker run IMAGE api-server | scheduler | dag-processor | triggerer | celery worker ... | version | ...
#       -> airflow <command> ...
#   docker run IMAGE airflow ... | dlperf ... | bash | python ...   -> run as given
# When DLPERF_ADMIN_PASSWORD is set, the simple auth manager's passwords file (users from
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS) is written from it, so no password lives in the image.
set -euo pipefail

if [ -n "${DLPERF_ADMIN_PASSWORD:-}" ] && [ -n "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:-}" ]; then
  python - <<'PY'
import json, os
users = os.environ.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "admin:admin")
names = [u.split(":")[0].strip() for u in users.split(",") if u.strip()]
path = os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
old = os.umask(0o077)
with open(path, "w") as f:
    json.dump({n: os.environ["DLPERF_ADMIN_PASSWORD"] for n in names}, f)
os.umask(old)
PY
fi

# The UI's own address (links, the login's redirect back): AIRFLOW_BASE_URL when set, else the address the
# api-server is published on (DLPERF_PUBLISH_ADDR), so publishing elsewhere needs no second setting.
if [ -z "${AIRFLOW__API__BASE_URL:-}" ]; then
  export AIRFLOW__API__BASE_URL="${AIRFLOW_BASE_URL:-http://${DLPERF_PUBLISH_ADDR:-localhost}:8080}"
fi

# dlperf's DAGs: the installed package's bundle beside the dags-folder one (`dlperf airflow-setup`, written at the
# image's build), unless the deployment gives its own list.
if [ -z "${AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST:-}" ] && [ -f /opt/venv/dlperf-bundle.env ]; then
  set -a
  # shellcheck disable=SC1091
  . /opt/venv/dlperf-bundle.env
  set +a
fi

AIRFLOW_COMMANDS=" api-server scheduler dag-processor triggerer celery db version info config connections \
pools variables dags tasks users jobs providers plugins standalone cheat-sheet kerberos rotate-fernet-key "
if [ $# -eq 0 ]; then
  exec airflow --help
elif [[ "$AIRFLOW_COMMANDS" == *" $1 "* || "$1" == -* ]]; then
  exec airflow "$@"
else
  exec "$@"
fi
