#!/usr/bin/env bash
# Make sure a PostgreSQL server answers on 127.0.0.1:5432 (the tests create their own databases in it).
set -euo pipefail
if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then exit 0; fi
if ! command -v pg_ctlcluster >/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql
fi
ver=$(ls /etc/postgresql | sort -V | tail -1)
pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && exit 0; sleep 1; done
echo "PostgreSQL did not come up on 127.0.0.1:5432" >&2; exit 1
