#!/usr/bin/env bash
# build-images.sh: build the dlperf images locally (no registry is reachable).
#
#   1. scripts/ensure-docker.sh                  (install/start the engine if needed)
#   2. docker/base/build-base.sh                 (dlperf/debian-base:bookworm; skipped if present)
#   3. fill docker/pytorch-reference/wheels/     (torch wheel + host CA bundle; gitignored)
#   4. docker build -t dlperf/pytorch-reference:cpu -f docker/pytorch-reference/Dockerfile .   (repo root)
#
# Step 4 is skipped when the image exists and carries the same `dlperf.inputs-hash` label (a hash of the
# Dockerfile, .dockerignore, the workload files, the wheels folder, the base image id and the build args).
#
# Usage: scripts/build-images.sh [--compose] [--force] [--force-base]
#   --compose      only what docker-compose.yaml runs: the base, the reference image (the nightly's smoke suite
#                  trains in it), dlperf's Airflow image, and PostgreSQL/Redis (scripts/build-service-images.sh:
#                  pulled, or built from Debian's packages where no registry answers); not the framework CPU
#                  images of `make demo-seeds` (9 GB)
#   --force        rebuild the reference image (and the base, if it is the local one) even if up to date
#   --force-base   rebuild the local base image (the reference image follows: its base changed)
# Environment:
#   TAG            image to build (default dlperf/pytorch-reference:cpu)
#   DLPERF_BASE_IMAGE  name of the locally built Debian base (default dlperf/debian-base:bookworm)
#   BASE_IMAGE     base for the reference image (default: that local base, built if missing).
#                  Any other value (e.g. nvcr.io/nvidia/pytorch:24.12-py3) is used as is and must already be
#                  present or pullable; torch is then taken from it when it has one (GPU build).
#   TORCH_VERSION  torch wheel to put in the build context (default 2.13.0)
#   INSTALL_TORCH  auto|yes|no (default auto), PIP_PACKAGES (default numpy): passed to docker build
#   CA_BUNDLE      CA bundle copied into the image (default /etc/ssl/certs/ca-certificates.crt)
set -euo pipefail

FORCE=0
FORCE_BASE=0
COMPOSE_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --compose) COMPOSE_ONLY=1 ;;
    --force) FORCE=1; FORCE_BASE=1 ;;
    --force-base) FORCE_BASE=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "build-images.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

LOCAL_BASE="${DLPERF_BASE_IMAGE:-dlperf/debian-base:bookworm}"
TAG="${TAG:-dlperf/pytorch-reference:cpu}"
BASE_IMAGE="${BASE_IMAGE:-$LOCAL_BASE}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
INSTALL_TORCH="${INSTALL_TORCH:-auto}"
PIP_PACKAGES="${PIP_PACKAGES-numpy}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
DOCKERFILE="docker/pytorch-reference/Dockerfile"
WHEELS="docker/pytorch-reference/wheels"

say() { echo "[build-images] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

T_ALL=$(now)

# One build at a time on this machine (tests and people may call this concurrently).
LOCK="${TMPDIR:-/tmp}/dlperf-build-images.lock"
exec 8>"$LOCK"
if command -v flock >/dev/null 2>&1 && ! flock -n 8; then
  say "another build-images.sh is running; waiting for it"
  flock 8
fi

# 1. Engine.
t=$(now)
"$REPO/scripts/ensure-docker.sh"
say "docker engine: $(since "$t") s"

# 2. Base image.
t=$(now)
if [ "$BASE_IMAGE" = "$LOCAL_BASE" ]; then
  base_args=()
  [ "$FORCE_BASE" -eq 1 ] && base_args+=(--force)
  "$REPO/docker/base/build-base.sh" --name "$LOCAL_BASE" "${base_args[@]}"
else
  docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || docker pull "$BASE_IMAGE" \
    || die "base image $BASE_IMAGE is neither present nor pullable (no registry here: load it with docker load)"
fi
say "base image $BASE_IMAGE: $(since "$t") s"

# 3. Build-context inputs: the torch wheel and the CA bundle.
t=$(now)
mkdir -p "$WHEELS"
[ -f "$CA_BUNDLE" ] || die "CA bundle $CA_BUNDLE not found (set CA_BUNDLE)"
cmp -s "$CA_BUNDLE" "$WHEELS/ca-certificates.crt" || cp "$CA_BUNDLE" "$WHEELS/ca-certificates.crt"
have_wheel() { compgen -G "$WHEELS/torch-${TORCH_VERSION}[-+]*.whl" >/dev/null; }
need_wheel=1
[ "$INSTALL_TORCH" = no ] && need_wheel=0
if [ "$INSTALL_TORCH" = auto ] && [ "$BASE_IMAGE" != "$LOCAL_BASE" ] \
   && docker run --rm --entrypoint python3 "$BASE_IMAGE" -c 'import torch' >/dev/null 2>&1; then
  say "$BASE_IMAGE already has torch: no wheel needed"
  need_wheel=0
fi
if [ "$need_wheel" -eq 1 ] && ! have_wheel; then
  # Other torch versions would be installed too: keep only the wanted one.
  rm -f "$WHEELS"/torch-*.whl
  PY="$(command -v python3 || command -v python)" || die "python3 needed to run pip download"
  say "pip download torch==$TORCH_VERSION into $WHEELS"
  if ! "$PY" -m pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
        -d "$WHEELS" "torch==$TORCH_VERSION"; then
    die "could not get a torch $TORCH_VERSION wheel (cp311, manylinux x86_64)"
  fi
  have_wheel || die "pip download left no torch-$TORCH_VERSION wheel in $WHEELS"
fi
say "wheels folder ($(cd "$WHEELS" && echo *)): $(since "$t") s"

# 4. Reference image, unless up to date.
# shellcheck source=scripts/image-inputs.sh
. "$REPO/scripts/image-inputs.sh"
# every file that goes into the image, and the build arguments
inputs_hash="$(inputs_hash "$BASE_IMAGE" "args=INSTALL_TORCH=$INSTALL_TORCH PIP_PACKAGES=$PIP_PACKAGES" \
  "$DOCKERFILE" .dockerignore "$WHEELS" dlperf_core/workload)"
current="$(built_from "$TAG")"
if [ "$FORCE" -eq 0 ] && [ "$current" = "$inputs_hash" ]; then
  say "$TAG is up to date (inputs $inputs_hash); skipping (use --force to rebuild)"
else
  say "building $TAG from $BASE_IMAGE (inputs $inputs_hash, was ${current:-none})"
  t=$(now)
  build_args=(
    --build-arg "BASE_IMAGE=$BASE_IMAGE"
    --build-arg "INSTALL_TORCH=$INSTALL_TORCH"
    --build-arg "PIP_PACKAGES=$PIP_PACKAGES"
    --label "dlperf.inputs-hash=$inputs_hash"
    --label "org.opencontainers.image.base.name=$BASE_IMAGE"
    --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  )
  [ "$FORCE" -eq 1 ] && build_args+=(--no-cache)
  # No buildx on these machines: the classic builder is used (its deprecation notice is harmless).
  # The builder stage is tagged too (TAG-builder): it keeps the layer cache for the next build, and the
  # one it replaces can be removed instead of piling up as an untagged 1.3 GB image.
  for target in builder final; do
    if [ "$target" = builder ]; then name="$TAG-builder"; target_args=(--target builder); else name="$TAG"; target_args=(); fi
    old_id="$(docker image inspect --format '{{.Id}}' "$name" 2>/dev/null || true)"
    docker build --pull=false --force-rm -t "$name" -f "$DOCKERFILE" "${target_args[@]}" "${build_args[@]}" .
    new_id="$(docker image inspect --format '{{.Id}}' "$name")"
    if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
      # The replaced image is untagged now; drop it unless a container still uses it.
      docker image rm "$old_id" >/dev/null 2>&1 || say "(kept the previous $name ${old_id:7:12}: still in use)"
    fi
  done
  say "image build: $(since "$t") s"
fi
size="$(docker image inspect --format '{{.Size}}' "$TAG")"
# (tail: an NGC base's entrypoint prints a banner first)
say "$TAG: $((size / 1024 / 1024)) MiB, torch $(docker run --rm "$TAG" 2>/dev/null | tail -n 1 || echo '?')"

# 5. dlperf's Airflow image (docker-compose.yaml), from the local base, same up-to-date rule:
#    docker/airflow/build.sh. BUILD_AIRFLOW_IMAGE=auto (default: only when the base is the local one,
#    i.e. not on a GPU node building an NGC-based image) | yes | no.
BUILD_AIRFLOW_IMAGE="${BUILD_AIRFLOW_IMAGE:-auto}"
if [ "$BUILD_AIRFLOW_IMAGE" = yes ] || { [ "$BUILD_AIRFLOW_IMAGE" = auto ] && [ "$BASE_IMAGE" = "$LOCAL_BASE" ]; }; then
  t=$(now)
  airflow_args=()
  [ "$FORCE" -eq 1 ] && airflow_args+=(--force)
  docker image inspect "$LOCAL_BASE" >/dev/null 2>&1 || "$REPO/docker/base/build-base.sh" --name "$LOCAL_BASE"
  AIRFLOW_BASE_IMAGE="$LOCAL_BASE" "$REPO/docker/airflow/build.sh" "${airflow_args[@]}"
  say "airflow image: $(since "$t") s"
fi
# 5b. The PostgreSQL and Redis images of docker-compose.yaml (pulled, else built from Debian's packages).
if [ "$BASE_IMAGE" = "$LOCAL_BASE" ]; then
  t=$(now)
  service_args=()
  [ "$FORCE" -eq 1 ] && service_args+=(--force)
  DLPERF_BASE_IMAGE="$LOCAL_BASE" "$REPO/scripts/build-service-images.sh" "${service_args[@]}"
  say "postgres and redis images: $(since "$t") s"
fi
# 6. The seed frameworks' CPU images (docker/*/image.env: MindSpore, MXNet, Paddle, OneFlow), from the local
#    Debian bases, same up-to-date rule: scripts/build-cpu-images.sh. BUILD_CPU_IMAGES=auto (default: only
#    when the base is the local one) | yes | no.
BUILD_CPU_IMAGES="${BUILD_CPU_IMAGES:-auto}"
[ "$COMPOSE_ONLY" -eq 1 ] && BUILD_CPU_IMAGES=no
if [ "$BUILD_CPU_IMAGES" = yes ] || { [ "$BUILD_CPU_IMAGES" = auto ] && [ "$BASE_IMAGE" = "$LOCAL_BASE" ]; }; then
  t=$(now)
  cpu_args=()
  [ "$FORCE" -eq 1 ] && cpu_args+=(--force)
  "$REPO/scripts/build-cpu-images.sh" "${cpu_args[@]}"
  say "framework CPU images: $(since "$t") s"
fi
say "total: $(since "$T_ALL") s"
