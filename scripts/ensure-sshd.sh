#!/usr/bin/env bash
# ensure-sshd.sh: make sure the OpenSSH server binary (/usr/sbin/sshd) and ssh-keygen are installed.
#
# Only installs (apt-get install openssh-server) when missing. It does NOT start, configure or enable the
# system sshd: the preflight tests start their own sshd on a loopback port, with a per-test host key,
# authorized key and config in a temporary folder (tests/airflow_plugin/test_ssh_preflight.py). Idempotent; needs root only
# when it has to install.
set -euo pipefail
# shellcheck source=scripts/lib/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt-install.sh"

apt_install ensure-sshd '[ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null 2>&1' openssh-server
echo "[ensure-sshd] sshd: $(/usr/sbin/sshd -V 2>&1 | head -n 1 || true)" >&2
