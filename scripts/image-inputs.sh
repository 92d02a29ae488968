# shellcheck shell=bash
# Sourced by the image build scripts (scripts/build-images.sh, scripts/build-cpu-images.sh,
# docker/airflow/build.sh): an image is rebuilt only when its inputs changed. The hash of its inputs is
# stored on the image as the label dlperf.inputs-hash (docker build --label), and compared the next time.

# inputs_hash BASE_IMAGE EXTRA PATH...: 16 hex digits over the base image's id, the line EXTRA (build
# arguments; '' for none) and the names and contents of every file under PATH... (Python caches left out).
inputs_hash() {
  local base="$1" extra="$2"
  shift 2
  {
    echo "base=$(docker image inspect --format '{{.Id}}' "$base")"
    if [ -n "$extra" ]; then echo "$extra"; fi
    find "$@" -type f -not -path '*/__pycache__/*' -not -name '*.py[co]' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}

# built_from IMAGE: the inputs hash IMAGE was built from ('' when there is no such image).
built_from() {
  docker image inspect --format '{{ index .Config.Labels "dlperf.inputs-hash" }}' "$1" 2>/dev/null || true
}
