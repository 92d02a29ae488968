# shellcheck shell=bash
# apt-install.sh: sourced by the ensure-*.sh scripts that install a Debian package when it is missing.
#
#   apt_install TAG CHECK PACKAGE...
#
# Installs PACKAGE... with apt-get unless the command CHECK (evaluated) already succeeds, then checks CHECK
# again. Refuses with a clear error without apt-get or root. Holds one machine-wide lock
# ($TMPDIR/dlperf-apt.lock) so that parallel ensure scripts do not fight over dpkg, waits up to 5 min for
# dpkg's own lock, and installs with a policy-rc.d that forbids starting services: a package such as
# openssh-server or docker-registry must not start (or restart) a system service; the tests start their own.
apt_install() {
  local tag=$1 check=$2
  shift 2
  eval "$check" && return 0
  command -v apt-get >/dev/null 2>&1 || { echo "[$tag] ERROR: need $*, and apt-get is not available" >&2; return 1; }
  [ "$(id -u)" -eq 0 ] || { echo "[$tag] ERROR: installing $* needs root" >&2; return 1; }
  exec 9>"${TMPDIR:-/tmp}/dlperf-apt.lock"
  command -v flock >/dev/null 2>&1 && flock 9
  if ! eval "$check"; then
    echo "[$tag] installing $* with apt-get" >&2
    local policy=/usr/sbin/policy-rc.d made_policy=0 status=0
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
    fi
    {
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
          --no-install-recommends "$@" >/dev/null
    } || status=$?
    [ "$made_policy" -eq 1 ] && rm -f "$policy"
    [ "$status" -eq 0 ] || { echo "[$tag] ERROR: apt-get install $* failed ($status)" >&2; return "$status"; }
  fi
  exec 9>&-
  eval "$check" || { echo "[$tag] ERROR: still missing after apt-get install $*" >&2; return 1; }
}
