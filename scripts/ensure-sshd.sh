#!/usr/bin/env bash
# ensure-sshd.sh: make sure the OpenSSH server binary (/usr/sbin/sshd) and ssh-keygen are installed.
#
# Only installs (apt-get install openssh-server) when missing. It does NOT start, configure or enable the
# system sshd: the preflight tests start their own sshd on a loopback port, with a per-test host key,
# authorized key and config in a temporary folder (tests/test_preflight.py). Idempotent; needs root only
# when it has to install.
set -euo pipefail
say() { echo "[ensure-sshd] $*" >&2; }

if [ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null 2>&1; then
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || { say "ERROR: need openssh-server and apt-get is not available"; exit 1; }
[ "$(id -u)" -eq 0 ] || { say "ERROR: installing openssh-server needs root"; exit 1; }
LOCK="${TMPDIR:-/tmp}/dlperf-apt.lock"
exec 9>"$LOCK"
command -v flock >/dev/null 2>&1 && flock 9
if [ ! -x /usr/sbin/sshd ]; then
  say "installing openssh-server with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  # policy-rc.d 101: the package must not start (or restart) the system sshd.
  policy=/usr/sbin/policy-rc.d
  restore_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; restore_policy=1
  fi
  trap '[ "$restore_policy" -eq 1 ] && rm -f "$policy"' EXIT
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends openssh-server >/dev/null
fi
[ -x /usr/sbin/sshd ] || { say "ERROR: /usr/sbin/sshd still missing after apt-get install"; exit 1; }
say "sshd: $(/usr/sbin/sshd -V 2>&1 | head -n 1 || true)"
