#!/usr/bin/env bash
# docker/airflow/build.sh: build dlperf's Airflow image (default dlperf/airflow:3.3.2) from the repo root.
#
# Called by scripts/build-images.sh after the base image exists (it holds the build lock); usable alone.
# Skipped when the image exists with the same `dlperf.inputs-hash` label: a hash of the Dockerfile,
# entrypoint, locks, pyproject, dlperf's sources, DAGs, plugins, suites, inventories, CA bundle, base id.
#
# Usage: docker/airflow/build.sh [--force]
# Environment: AIRFLOW_IMAGE (tag), AIRFLOW_BASE_IMAGE (default $DLPERF_BASE_IMAGE or
#              dlperf/debian-base:bookworm; must exist), CA_BUNDLE (default /etc/ssl/certs/ca-certificates.crt).
set -euo pipefail

FORCE=0
case "${1:-}" in
  --force) FORCE=1 ;;
  "") ;;
  -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
  *) echo "build.sh: unknown argument: $1" >&2; exit 2 ;;
esac

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
IMAGE="${AIRFLOW_IMAGE:-dlperf/airflow:3.3.2}"
BASE="${AIRFLOW_BASE_IMAGE:-${DLPERF_BASE_IMAGE:-dlperf/debian-base:bookworm}}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
DOCKERFILE=docker/airflow/Dockerfile
say() { echo "[build-airflow] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# One Airflow-image build at a time (its own lock: scripts/build-images.sh already holds the images lock);
# a waiter then finds the image up to date.
exec 7>"${TMPDIR:-/tmp}/dlperf-build-airflow.lock"
if command -v flock >/dev/null 2>&1 && ! flock -n 7; then
  say "another build of $IMAGE is running; waiting for it"
  flock 7
fi

docker image inspect "$BASE" >/dev/null 2>&1 \
  || die "base image $BASE missing: run scripts/build-images.sh (it makes it with debootstrap)"
[ -f "$CA_BUNDLE" ] || die "CA bundle $CA_BUNDLE not found (set CA_BUNDLE)"
mkdir -p docker/airflow/ca
cmp -s "$CA_BUNDLE" docker/airflow/ca/ca-certificates.crt || cp "$CA_BUNDLE" docker/airflow/ca/ca-certificates.crt

# shellcheck source=scripts/image-inputs.sh
. "$REPO/scripts/image-inputs.sh"
inputs_hash="$(inputs_hash "$BASE" "" docker/airflow requirements.lock pyproject.toml README.md .dockerignore \
  dlperf_core dlperf_cli plugins dags suites inventories)"
current="$(built_from "$IMAGE")"
if [ "$FORCE" -eq 0 ] && [ "$current" = "$inputs_hash" ]; then
  say "$IMAGE is up to date (inputs $inputs_hash); skipping (use --force to rebuild)"
  exit 0
fi
say "building $IMAGE from $BASE (inputs $inputs_hash, was ${current:-none})"
t0=$(date +%s)
old_id="$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
no_cache=()
[ "$FORCE" -eq 1 ] && no_cache=(--no-cache)
docker build --pull=false --force-rm "${no_cache[@]}" -t "$IMAGE" -f "$DOCKERFILE" \
  --build-arg "BASE_IMAGE=$BASE" --label "dlperf.inputs-hash=$inputs_hash" \
  --label "org.opencontainers.image.base.name=$BASE" \
  --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" .
new_id="$(docker image inspect --format '{{.Id}}' "$IMAGE")"
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
  docker image rm "$old_id" >/dev/null 2>&1 || say "(kept the previous $IMAGE ${old_id:7:12}: still in use)"
fi
size="$(docker image inspect --format '{{.Size}}' "$IMAGE")"
say "built $IMAGE ($((size / 1024 / 1024)) MiB) in $(( $(date +%s) - t0 )) s: $(docker run --rm "$IMAGE" version 2>/dev/null | tail -n 1)"
