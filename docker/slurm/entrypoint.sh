#!/bin/bash
# entrypoint.sh ROLE: start one container of dlperf's Slurm test cluster (tests/slurm_cluster.py starts them).
#
#   controller  MUNGE, sshd on port 22 (the login node: user dlperf, key authentication only), slurmctld in the
#               foreground (its log also on stdout: `docker logs`)
#   node        MUNGE, then slurmd in the foreground, configless (slurmd --conf-server: slurm.conf comes
#               from the controller), named after the container's hostname (torch0, mxnet1, ...)
#
# What it reads, copied in before the container starts (docker cp into /etc/dlperf-slurm/):
#   munge.key        the cluster's MUNGE key (the same on every container)
#   authorized_keys  (controller) the public key(s) that may log in as dlperf
#   ssh_host_ed25519_key (controller, optional) the login node's host key; made here when absent
# Environment: SLURM_CONTROLLER (default slurmctl), SLURM_CONTROLLER_WAIT_S (default 120).
set -euo pipefail
role="${1:?usage: entrypoint.sh controller|node}"
conf=/etc/dlperf-slurm
controller="${SLURM_CONTROLLER:-slurmctl}"
say() { echo "[dlperf-slurm $role $(hostname)] $*" >&2; }

[ -s "$conf/munge.key" ] || { say "no $conf/munge.key (copy the cluster's key in before starting)"; exit 2; }
install -o munge -g munge -m 0400 "$conf/munge.key" /etc/munge/munge.key
mkdir -p /run/munge /run/slurm /var/log/slurm
chown munge:munge /run/munge
runuser -u munge -- /usr/sbin/munged
# the shared folder (a Docker volume, the cluster's shared file system) belongs to the cluster's user
chown dlperf:dlperf /shared

case "$role" in
  controller)
    if [ -s "$conf/ssh_host_ed25519_key" ]; then
      install -m 0600 "$conf/ssh_host_ed25519_key" /etc/ssh/ssh_host_ed25519_key
      ssh-keygen -y -f /etc/ssh/ssh_host_ed25519_key >/etc/ssh/ssh_host_ed25519_key.pub
    else
      ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
    fi
    install -d -o dlperf -g dlperf -m 0700 /home/dlperf/.ssh
    if [ -s "$conf/authorized_keys" ]; then
      install -o dlperf -g dlperf -m 0600 "$conf/authorized_keys" /home/dlperf/.ssh/authorized_keys
    fi
    cat >/etc/ssh/sshd_config.d/dlperf-slurm.conf <<'SSHD'
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers dlperf
UsePAM no
SSHD
    mkdir -p /run/sshd
    /usr/sbin/sshd -E /var/log/sshd.log
    chown slurm:slurm /var/spool/slurmctld /var/log/slurm
    say "munged and sshd started; slurmctld in the foreground"
    exec /usr/sbin/slurmctld -D -i
    ;;
  node)
    # configless: slurmd fetches slurm.conf from slurmctld; wait until it answers on its port
    deadline=$(( $(date +%s) + ${SLURM_CONTROLLER_WAIT_S:-120} ))
    until (exec 3<>"/dev/tcp/$controller/6817") 2>/dev/null; do
      if [ "$(date +%s)" -ge "$deadline" ]; then say "slurmctld at $controller:6817 never answered"; exit 3; fi
      sleep 0.5
    done
    say "munged started; slurmd in the foreground (config from $controller)"
    exec /usr/sbin/slurmd -D -N "$(hostname)" --conf-server "$controller:6817"
    ;;
  *) say "unknown role $role"; exit 2 ;;
esac
