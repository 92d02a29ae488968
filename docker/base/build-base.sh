#!/usr/bin/env bash
# build-base.sh: build the local Debian base image (default dlperf/debian-base:bookworm) from nothing.
#
# No container registry is reachable, so `FROM debian:bookworm` cannot be pulled: this makes the
# equivalent with `debootstrap --variant=minbase bookworm` and `docker import`.
#
# Usage: docker/base/build-base.sh [--force] [--name IMAGE]
#   --force        rebuild even if the image exists
#   --name IMAGE   image name (default: $DLPERF_BASE_IMAGE or dlperf/debian-base:bookworm)
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian), DEBIAN_SUITE (default bookworm),
#              DEBIAN_SECURITY_MIRROR (default http://deb.debian.org/debian-security).
# Needs root (debootstrap creates device nodes and chroots). Works from any cwd.
set -euo pipefail

NAME="${DLPERF_BASE_IMAGE:-dlperf/debian-base:bookworm}"
SUITE="${DEBIAN_SUITE:-bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
FORCE=0

while [ $# -gt 0 ]; do
  case "$1" in
    --force) FORCE=1 ;;
    --name) NAME="${2:?--name needs a value}"; shift ;;
    --name=*) NAME="${1#--name=}" ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "build-base.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

say() { echo "[build-base] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

"$REPO/scripts/ensure-docker.sh"

if [ "$FORCE" -eq 0 ] && docker image inspect "$NAME" >/dev/null 2>&1; then
  say "$NAME exists; skipping (use --force to rebuild)"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "debootstrap needs root"

missing=()
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
if [ "${#missing[@]}" -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "need ${missing[*]} and apt-get is not available"
  say "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

WORK="$(mktemp -d "${TMPDIR:-/var/tmp}/dlperf-base.XXXXXX")"
ROOTFS="$WORK/rootfs"
cleanup() {
  # debootstrap mounts proc/sys (and may bind /dev) inside the target: unmount them (deepest first)
  # before deleting, and never let rm cross into another file system.
  local m
  awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r | while IFS= read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s)
say "debootstrap --variant=minbase $SUITE from $MIRROR (log: $WORK/debootstrap.log while it runs)"
if ! debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
      "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
  tail -n 30 "$WORK/debootstrap.log" >&2
  [ -f "$ROOTFS/debootstrap/debootstrap.log" ] && tail -n 30 "$ROOTFS/debootstrap/debootstrap.log" >&2
  die "debootstrap failed"
fi
t1=$(date +%s)
say "debootstrap done in $((t1 - t0)) s"

# Make it behave like the official slim Debian images.
cat >"$ROOTFS/etc/apt/sources.list" <<SOURCES
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
SOURCES
cat >"$ROOTFS/etc/apt/apt.conf.d/docker-clean" <<'CONF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CONF
cat >"$ROOTFS/etc/apt/apt.conf.d/docker-no-recommends" <<'CONF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
CONF
cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/docker-nodoc" <<'CONF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CONF
# Apply the same exclusions to what debootstrap already unpacked (about 45 MB).
find "$ROOTFS/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find "$ROOTFS/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
find "$ROOTFS/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} + 2>/dev/null || true
rm -rf "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/*
# Files that belong to the container runtime, not the image.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/tmp/* \
       "$ROOTFS"/var/log/*.log "$ROOTFS"/var/log/apt/* "$ROOTFS/debootstrap"
: >"$ROOTFS/etc/hostname"
: >"$ROOTFS/etc/resolv.conf"
echo "uninitialized" >"$ROOTFS/etc/machine-id" 2>/dev/null || true

old_id="$(docker image inspect --format '{{.Id}}' "$NAME" 2>/dev/null || true)"
created="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "importing as $NAME"
tar --numeric-owner --xattrs -C "$ROOTFS" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  --change "LABEL org.opencontainers.image.title=\"dlperf Debian $SUITE base\"" \
  --change "LABEL org.opencontainers.image.description=\"debootstrap --variant=minbase $SUITE, made locally (no registry reachable)\"" \
  --change "LABEL org.opencontainers.image.created=\"$created\"" \
  --change "LABEL org.opencontainers.image.vendor=dlperf" \
  --message "debootstrap --variant=minbase $SUITE $MIRROR" \
  - "$NAME" >/dev/null
t2=$(date +%s)
new_id="$(docker image inspect --format '{{.Id}}' "$NAME")"
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
  # The replaced image is now untagged; drop it unless something still uses it.
  docker image rm "$old_id" >/dev/null 2>&1 || true
fi
size="$(docker image inspect --format '{{.Size}}' "$NAME")"
say "built $NAME ($((size / 1024 / 1024)) MiB) in $((t2 - t0)) s (debootstrap $((t1 - t0)) s, import $((t2 - t1)) s)"
