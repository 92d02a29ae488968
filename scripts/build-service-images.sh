#!/usr/bin/env bash
# build-service-images.sh: the PostgreSQL and Redis images docker-compose.yaml runs, one way or the other.
#
#   postgres:15-bookworm   redis:7.0-bookworm       (the tags docker-compose.yaml and .env.example name)
#
# For each: an image already there under that tag is used as it is (the official one, pulled or `docker load`ed,
# or an earlier build of this script, rebuilt when its inputs changed); else `docker pull`; where no registry
# answers, it is built from Debian bookworm's own packages (docker/postgres/, docker/redis/: PostgreSQL 15 and
# Redis 7.0, the same major versions as the official tags, so a data volume made by one starts under the other)
# on the local Debian base, and tagged with that name. Those builds carry the label
# dlperf.built-from=debian-bookworm-packages (`docker image inspect` tells which one you have).
#
# Usage: scripts/build-service-images.sh [--force]      (--force: rebuild the Debian-package images)
# Environment: DLPERF_PULL_SERVICE_IMAGES=auto|no (default auto: try the registry first, 60 s at most),
#              DLPERF_BASE_IMAGE (default dlperf/debian-base:bookworm; built by docker/base/build-base.sh).
set -euo pipefail

FORCE=0
case "${1:-}" in
  --force) FORCE=1 ;;
  "") ;;
  -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
  *) echo "build-service-images.sh: unknown argument: $1" >&2; exit 2 ;;
esac

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
BASE="${DLPERF_BASE_IMAGE:-dlperf/debian-base:bookworm}"
PULL="${DLPERF_PULL_SERVICE_IMAGES:-auto}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
say() { echo "[service-images] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# shellcheck source=scripts/image-inputs.sh
. "$REPO/scripts/image-inputs.sh"

"$REPO/scripts/ensure-docker.sh"

built_here() { docker image inspect --format '{{ index .Config.Labels "dlperf.built-from" }}' "$1" 2>/dev/null || true; }

# one_image TAG RECIPE_DIR
one_image() {
  local tag="$1" recipe="$2" origin
  if docker image inspect "$tag" >/dev/null 2>&1; then
    origin="$(built_here "$tag")"
    if [ -z "$origin" ]; then
      say "$tag: present (not built here: the official image, pulled or loaded); using it"
      return 0
    fi
  elif [ "$PULL" != no ] && timeout 60 docker pull -q "$tag" >/dev/null 2>&1; then
    say "$tag: pulled"
    return 0
  else
    [ "$PULL" = no ] || say "$tag: could not be pulled (no registry answers); building it from Debian's packages"
  fi
  docker image inspect "$BASE" >/dev/null 2>&1 || "$REPO/docker/base/build-base.sh" --name "$BASE"
  mkdir -p "$recipe/ca"
  cmp -s "$CA_BUNDLE" "$recipe/ca/ca-certificates.crt" 2>/dev/null || cp "$CA_BUNDLE" "$recipe/ca/ca-certificates.crt"
  local hash current
  hash="$(inputs_hash "$BASE" "" "$recipe")"
  current="$(built_from "$tag")"
  if [ "$FORCE" -eq 0 ] && [ "$current" = "$hash" ]; then
    say "$tag: built from Debian's packages, up to date (inputs $hash)"
    return 0
  fi
  local t0 old_id
  t0=$(date +%s)
  old_id="$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)"
  docker build --pull=false --force-rm -q -t "$tag" -f "$recipe/Dockerfile" --build-arg "BASE_IMAGE=$BASE" \
    --label "dlperf.inputs-hash=$hash" --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    . >/dev/null || die "docker build of $tag failed"
  if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect --format '{{.Id}}' "$tag")" ]; then
    docker image rm "$old_id" >/dev/null 2>&1 || true
  fi
  say "$tag: built from Debian's packages in $(( $(date +%s) - t0 )) s ($(( $(docker image inspect --format '{{.Size}}' "$tag") / 1024 / 1024 )) MiB)"
}

one_image postgres:15-bookworm docker/postgres
one_image redis:7.0-bookworm docker/redis
