#!/usr/bin/env bash
# ensure-registry.sh: make sure Debian's container registry server (package docker-registry, the CNCF
# distribution registry, /usr/bin/docker-registry) is installed.
#
# Only installs (apt-get install docker-registry) when missing. It does NOT start, configure or enable the
# packaged registry service: tests/airflow_plugin/test_docker_tls.py starts its own registry on a loopback port, with TLS and
# htpasswd logins in a temporary folder, next to its own TLS-only Docker engine. Idempotent; needs root only
# when it has to install.
set -euo pipefail
# shellcheck source=scripts/lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt-install.sh"

apt_install ensure-registry '[ -x /usr/bin/docker-registry ]' docker-registry
echo "[ensure-registry] docker-registry: $(/usr/bin/docker-registry --version 2>&1 | head -n 1 || true)" >&2
