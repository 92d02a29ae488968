#!/usr/bin/env bash
# Run once by the postgres image on an empty data volume (/docker-entrypoint-initdb.d): dlperf's results
# database and its own user, beside Airflow's metadata database, in the same server. The password comes
# from the environment (DLPERF_DB_PASSWORD, from .env), never from this file.
set -euo pipefail
: "${DLPERF_DB_PASSWORD:?DLPERF_DB_PASSWORD must be set (see .env.example)}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     --set=dlperf_user="${DLPERF_DB_USER:-dlperf}" --set=dlperf_db="${DLPERF_DB_NAME:-dlperf}" \
     --set=dlperf_password="$DLPERF_DB_PASSWORD" <<'SQL'
CREATE USER :"dlperf_user" WITH PASSWORD :'dlperf_password';
CREATE DATABASE :"dlperf_db" OWNER :"dlperf_user";
SQL
