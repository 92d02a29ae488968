#!/usr/bin/env bash
# docker/slurm/build.sh: build the images of dlperf's Slurm test cluster (Debian bookworm's Slurm 22.05 + MUNGE):
#
#   dlperf/slurm-controller:22.05   FROM dlperf/debian-base:bookworm   slurmctld + client commands + sshd (login node)
#   dlperf/slurm-node-torch:cpu     FROM dlperf/pytorch-reference:cpu  slurmd (partition torch)
#   dlperf/slurm-node-mxnet:cpu     FROM dlperf/ngc-mxnet:cpu          slurmd (partition mxnet)
#
# The framework images must exist (scripts/build-images.sh / make images builds them). Each image is skipped when
# it exists with the same `dlperf.inputs-hash` label (scripts/image-inputs.sh: this folder, the CA bundle and the
# id of the image it is built FROM), so a second run takes about a second. The build context is this folder alone.
#
# Usage: docker/slurm/build.sh [--force] [controller|torch|mxnet ...]     (default: all three)
# Environment: DLPERF_BASE_IMAGE (default dlperf/debian-base:bookworm), CA_BUNDLE (default
#              /etc/ssl/certs/ca-certificates.crt).
set -euo pipefail

FORCE=0
WHICH=()
while [ $# -gt 0 ]; do
  case "$1" in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    controller|torch|mxnet) WHICH+=("$1") ;;
    *) echo "build.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
[ "${#WHICH[@]}" -gt 0 ] || WHICH=(controller torch mxnet)

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
cd "$HERE"
BASE="${DLPERF_BASE_IMAGE:-dlperf/debian-base:bookworm}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
say() { echo "[build-slurm] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

exec 7>"${TMPDIR:-/tmp}/dlperf-build-slurm.lock"
if command -v flock >/dev/null 2>&1 && ! flock -n 7; then
  say "another build of the Slurm images is running; waiting for it"
  flock 7
fi

[ -f "$CA_BUNDLE" ] || die "CA bundle $CA_BUNDLE not found (set CA_BUNDLE)"
mkdir -p ca
cmp -s "$CA_BUNDLE" ca/ca-certificates.crt || cp "$CA_BUNDLE" ca/ca-certificates.crt

# shellcheck source=scripts/image-inputs.sh
. "$REPO/scripts/image-inputs.sh"
inputs=(controller.Dockerfile node.Dockerfile install-slurm.sh entrypoint.sh slurm.conf ca)

build() {  # build TAG FROM DOCKERFILE BUILD_ARG
  local tag="$1" from="$2" dockerfile="$3" arg="$4" hash current t0 old_id new_id
  docker image inspect "$from" >/dev/null 2>&1 \
    || die "$from missing: build it first (scripts/build-images.sh, or make images)"
  hash="$(inputs_hash "$from" "$arg" "${inputs[@]}")"
  current="$(built_from "$tag")"
  if [ "$FORCE" -eq 0 ] && [ "$current" = "$hash" ]; then
    say "$tag is up to date (inputs $hash); skipping"
    return
  fi
  say "building $tag from $from (inputs $hash, was ${current:-none})"
  t0=$(date +%s)
  old_id="$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)"
  local no_cache=()
  [ "$FORCE" -eq 1 ] && no_cache=(--no-cache)
  docker build --pull=false --force-rm "${no_cache[@]}" -t "$tag" -f "$dockerfile" --build-arg "$arg" \
    --label "dlperf.inputs-hash=$hash" --label "org.opencontainers.image.base.name=$from" . >&2
  new_id="$(docker image inspect --format '{{.Id}}' "$tag")"
  if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
    docker image rm "$old_id" >/dev/null 2>&1 || say "(kept the previous $tag ${old_id:7:12}: still in use)"
  fi
  say "built $tag in $(( $(date +%s) - t0 )) s"
}

for which in "${WHICH[@]}"; do
  case "$which" in
    controller) build dlperf/slurm-controller:22.05 "$BASE" controller.Dockerfile "BASE_IMAGE=$BASE" ;;
    torch) build dlperf/slurm-node-torch:cpu dlperf/pytorch-reference:cpu node.Dockerfile \
             "NODE_IMAGE=dlperf/pytorch-reference:cpu" ;;
    mxnet) build dlperf/slurm-node-mxnet:cpu dlperf/ngc-mxnet:cpu node.Dockerfile "NODE_IMAGE=dlperf/ngc-mxnet:cpu" ;;
  esac
done
