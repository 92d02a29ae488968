#!/usr/bin/env bash
# ensure-docker.sh: make sure a Docker engine answers `docker info`. Idempotent.
#
#   1. installs `docker.io` with apt-get if the docker client or dockerd is missing;
#   2. starts `dockerd` in the background (logging to $DLPERF_DOCKERD_LOG) if `docker info` fails
#      and no dockerd process is running yet;
#   3. waits up to $DLPERF_DOCKER_WAIT seconds (default 60) for `docker info`, else fails with the log tail.
#
# Safe to run many times and concurrently with itself (a lock serialises the start).
# Needs root (or sudo) only when it has to install or start something.
set -euo pipefail

LOG="${DLPERF_DOCKERD_LOG:-/var/log/dlperf-dockerd.log}"
WAIT="${DLPERF_DOCKER_WAIT:-60}"

say() { echo "[ensure-docker] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo -n); fi
fi

docker_ok() { docker info >/dev/null 2>&1; }

# Fast path: nothing to do.
if command -v docker >/dev/null 2>&1 && docker_ok; then
  exit 0
fi

# 1. Install the engine if missing.
if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || die "docker/dockerd missing and apt-get not available: install Docker by hand"
  say "installing docker.io with apt-get"
  # With its recommends (cgroupfs-mount, apparmor, ...), as checked on these machines.
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=l apt-get install -y -qq docker.io >/dev/null
fi
command -v dockerd >/dev/null 2>&1 || die "dockerd still not found after installing docker.io"

# A remote engine (DOCKER_HOST=tcp://..., ssh://...) is not ours to start.
case "${DOCKER_HOST:-}" in
  ""|unix://*) ;;
  *) docker_ok || die "DOCKER_HOST=$DOCKER_HOST does not answer; not starting a local dockerd for a remote host" ;;
esac

# 2. Start dockerd unless one is already running (it may just be slow to answer).
dockerd_running() { pgrep -x dockerd >/dev/null 2>&1; }
if ! docker_ok; then
  LOCK="${TMPDIR:-/tmp}/dlperf-ensure-docker.lock"
  exec 9>"$LOCK"
  if command -v flock >/dev/null 2>&1; then flock -w "$WAIT" 9 || die "timed out waiting for $LOCK"; fi
  if ! docker_ok && ! dockerd_running; then
    mkdir -p "$(dirname "$LOG")" 2>/dev/null || true
    { : >>"$LOG"; } 2>/dev/null || LOG="${TMPDIR:-/tmp}/dlperf-dockerd.log"
    say "starting dockerd in the background (log: $LOG)"
    # setsid + nohup: dockerd must outlive this script and its session. Close every inherited fd above 2
    # first, or dockerd would hold our lock (and any lock of a caller) for as long as it runs.
    (
      for f in /proc/"$BASHPID"/fd/*; do
        fd="${f##*/}"
        if [ "$fd" -gt 2 ]; then exec {fd}>&- 2>/dev/null || true; fi
      done
      exec "${SUDO[@]}" setsid nohup dockerd >>"$LOG" 2>&1 </dev/null
    ) &
  elif ! docker_ok; then
    say "dockerd is running but not answering yet; waiting"
  fi
fi

# 3. Wait for it to answer.
deadline=$(( $(date +%s) + WAIT ))
until docker_ok; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    say "docker info did not answer within ${WAIT}s. Last lines of $LOG:"
    tail -n 20 "$LOG" >&2 2>/dev/null || true
    say "docker info says: $(docker info 2>&1 >/dev/null | tail -n 3)"
    if [ "$(id -u)" -ne 0 ]; then say "hint: not root; is this user in the 'docker' group?"; fi
    die "Docker engine not available"
  fi
  sleep 1
done
say "docker engine ready ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
