#!/usr/bin/env bash
# ensure-compose.sh: make sure a Compose implementation can validate docker-compose.yaml.
#
# Accepts `docker compose` (the v2 plugin) when present; otherwise installs Debian's `docker-compose`
# (1.29, compose-spec aware) with apt-get. Prints the command to use on stdout ("docker compose" or
# "docker-compose"). Idempotent; needs root only when it has to install.
set -euo pipefail
# shellcheck source=scripts/lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt-install.sh"

if docker compose version >/dev/null 2>&1; then echo "docker compose"; exit 0; fi
apt_install ensure-compose 'command -v docker-compose >/dev/null 2>&1' docker-compose
echo "docker-compose"
