#!/usr/bin/env bash
# build-cpu-images.sh: build the seed frameworks' CPU images (issue: every seed framework trains for real).
#
# Each CPU recipe is a folder docker/<recipe>/ with a Dockerfile and an image.env:
#     TAG=dlperf/mindspore:cpu          the image's name (the adapter's cpu_image)
#     DEBIAN_SUITE=bookworm             Debian release of the local base (bullseye where a framework
#                                       needs an older Python, e.g. OneFlow 0.9.0: cp39)
# The build context is the repo root (see /.dockerignore); docker/ca/ca-certificates.crt (gitignored) holds
# the host CA bundle, through which the package registries are reached from inside a build.
# A recipe is skipped when its image exists with the same `dlperf.inputs-hash` label (a hash of the recipe
# folder, the shared CA bundle and setup script, and the base image id), so a second run takes seconds.
#
# Usage: scripts/build-cpu-images.sh [--force] [RECIPE...]     (default: every docker/*/image.env)
# Environment: CA_BUNDLE (default /etc/ssl/certs/ca-certificates.crt)
set -euo pipefail

FORCE=0
RECIPES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "build-cpu-images.sh: unknown argument: $1" >&2; exit 2 ;;
    *) RECIPES+=("${1%/}") ;;
  esac
  shift
done

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
say() { echo "[build-cpu-images] $*" >&2; }
# shellcheck source=scripts/image-inputs.sh
. "$REPO/scripts/image-inputs.sh"
die() { say "ERROR: $*"; exit 1; }

if [ "${#RECIPES[@]}" -eq 0 ]; then
  for f in docker/*/image.env; do RECIPES+=("$(basename "$(dirname "$f")")"); done
fi

"$REPO/scripts/ensure-docker.sh"
[ -f "$CA_BUNDLE" ] || die "CA bundle $CA_BUNDLE not found (set CA_BUNDLE)"
mkdir -p docker/ca
cmp -s "$CA_BUNDLE" docker/ca/ca-certificates.crt || cp "$CA_BUNDLE" docker/ca/ca-certificates.crt

for recipe in "${RECIPES[@]}"; do
  recipe="$(basename "$recipe")"
  dir="docker/$recipe"
  [ -f "$dir/image.env" ] || die "$dir/image.env not found (known: $(cd docker && ls -d */image.env | cut -d/ -f1 | xargs))"
  TAG="" DEBIAN_SUITE=""
  # shellcheck disable=SC1090
  . "$dir/image.env"
  [ -n "$TAG" ] || die "$dir/image.env sets no TAG"
  # One build of each recipe at a time (tests and people may call this concurrently).
  exec 6>"${TMPDIR:-/tmp}/dlperf-build-cpu-$recipe.lock"
  if command -v flock >/dev/null 2>&1 && ! flock -n 6; then
    say "another build of $TAG is running; waiting for it"
    flock 6
  fi
  suite="${DEBIAN_SUITE:-bookworm}"
  base="dlperf/debian-base:$suite"
  t0=$(date +%s)
  DEBIAN_SUITE="$suite" "$REPO/docker/base/build-base.sh" --name "$base"
  inputs_hash="$(inputs_hash "$base" "" "$dir" docker/ca docker/base/python-cpu.sh .dockerignore)"
  current="$(built_from "$TAG")"
  if [ "$FORCE" -eq 0 ] && [ "$current" = "$inputs_hash" ]; then
    say "$TAG is up to date (inputs $inputs_hash); skipping"
    continue
  fi
  say "building $TAG from $base (inputs $inputs_hash, was ${current:-none})"
  old_id="$(docker image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)"
  no_cache=()
  [ "$FORCE" -eq 1 ] && no_cache=(--no-cache)
  docker build --pull=false --force-rm "${no_cache[@]}" -t "$TAG" -f "$dir/Dockerfile" \
    --build-arg "BASE_IMAGE=$base" --label "dlperf.inputs-hash=$inputs_hash" \
    --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" .
  new_id="$(docker image inspect --format '{{.Id}}' "$TAG")"
  if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
    docker image rm "$old_id" >/dev/null 2>&1 || say "(kept the previous $TAG ${old_id:7:12}: still in use)"
  fi
  size="$(docker image inspect --format '{{.Size}}' "$TAG")"
  say "built $TAG ($((size / 1024 / 1024)) MiB) in $(( $(date +%s) - t0 )) s"
done
