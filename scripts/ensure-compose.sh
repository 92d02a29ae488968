#!/usr/bin/env bash
# ensure-compose.sh: make sure a Compose implementation can validate docker-compose.yaml.
#
# Accepts `docker compose` (the v2 plugin) when present; otherwise installs Debian's `docker-compose`
# (1.29, compose-spec aware) with apt-get. Prints the command to use on stdout ("docker compose" or
# "docker-compose"). Idempotent; needs root only when it has to install.
set -euo pipefail
say() { echo "[ensure-compose] $*" >&2; }

if docker compose version >/dev/null 2>&1; then echo "docker compose"; exit 0; fi
if command -v docker-compose >/dev/null 2>&1; then echo "docker-compose"; exit 0; fi
command -v apt-get >/dev/null 2>&1 || { say "ERROR: need docker compose or docker-compose, and apt-get is not available"; exit 1; }
[ "$(id -u)" -eq 0 ] || { say "ERROR: installing docker-compose needs root"; exit 1; }
LOCK="${TMPDIR:-/tmp}/dlperf-apt.lock"
exec 9>"$LOCK"
command -v flock >/dev/null 2>&1 && flock 9
if ! command -v docker-compose >/dev/null 2>&1; then
  say "installing docker-compose with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends docker-compose >/dev/null
fi
command -v docker-compose >/dev/null 2>&1 || { say "ERROR: docker-compose still missing after apt-get install"; exit 1; }
echo "docker-compose"
