#!/usr/bin/env bash
# ensure-registry.sh: make sure Debian's container registry server (package docker-registry, the CNCF
# distribution registry, /usr/bin/docker-registry) is installed.
#
# Only installs (apt-get install docker-registry) when missing. It does NOT start, configure or enable the
# packaged registry service: tests/test_docker_tls.py starts its own registry on a loopback port, with TLS and
# htpasswd logins in a temporary folder, next to its own TLS-only Docker engine. Idempotent; needs root only
# when it has to install.
set -euo pipefail
say() { echo "[ensure-registry] $*" >&2; }

REGISTRY=/usr/bin/docker-registry
if [ -x "$REGISTRY" ]; then
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || { say "ERROR: need docker-registry and apt-get is not available"; exit 1; }
[ "$(id -u)" -eq 0 ] || { say "ERROR: installing docker-registry needs root"; exit 1; }
LOCK="${TMPDIR:-/tmp}/dlperf-apt.lock"
exec 9>"$LOCK"
command -v flock >/dev/null 2>&1 && flock 9
if [ ! -x "$REGISTRY" ]; then
  say "installing docker-registry with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d 101: the package must not start its own registry service.
  policy=/usr/sbin/policy-rc.d
  restore_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; restore_policy=1
  fi
  trap '[ "$restore_policy" -eq 1 ] && rm -f "$policy"' EXIT
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends docker-registry >/dev/null
fi
[ -x "$REGISTRY" ] || { say "ERROR: $REGISTRY still missing after apt-get install"; exit 1; }
say "docker-registry: $("$REGISTRY" --version 2>&1 | head -n 1 || true)"
