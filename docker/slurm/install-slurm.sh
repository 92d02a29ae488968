#!/bin/sh
# install-slurm.sh ROLE: Debian bookworm's Slurm 22.05 and MUNGE in an image of dlperf's Slurm test cluster.
#   controller: slurmctld + the client commands + OpenSSH's server (the controller is also the login node)
#   node:       slurmd + the client commands (srun in a batch script runs on the job's first node)
# Also: the cluster's user `dlperf` (uid/gid 2000 on every image: jobs run as the submitting user's uid on the
# nodes), the daemons' folders, and the shared folder /shared (a Docker volume at run time).
# The host CA bundle (/tmp/slurm-setup/ca-certificates.crt, when the build copies one) is trusted first: the
# package registries are reachable only through it here.
set -eux
role="$1"
if [ -f /tmp/slurm-setup/ca-certificates.crt ]; then
  install -D -m 0644 /tmp/slurm-setup/ca-certificates.crt /usr/local/share/ca-certificates/dlperf-host-ca-bundle.crt
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
case "$role" in
  controller) pkgs="slurmctld slurm-client munge openssh-server openssh-client procps ca-certificates" ;;
  node) pkgs="slurmd slurm-client munge procps ca-certificates" ;;
  *) echo "install-slurm.sh: role must be controller or node, not $role" >&2; exit 2 ;;
esac
# shellcheck disable=SC2086
apt-get install -y --no-install-recommends $pkgs
update-ca-certificates || true
apt-get clean
rm -rf /var/lib/apt/lists/*
groupadd -g 2000 dlperf
useradd -m -u 2000 -g 2000 -s /bin/bash dlperf
# no password, but not locked: sshd (UsePAM no) refuses a locked account even with a key
usermod -p "*" dlperf
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm /run/munge /shared \
  /etc/dlperf-slurm
chown slurm:slurm /var/spool/slurmctld /var/log/slurm
chown munge:munge /run/munge
chown dlperf:dlperf /shared
# keys come at run time (tests/slurm_cluster.py copies them in before the container starts)
rm -f /etc/munge/munge.key /etc/ssh/ssh_host_*
if [ "$role" = controller ]; then mkdir -p /run/sshd; fi
# Slurm's mpi/pmix plugin dlopens the unversioned libpmix.so in PMIx's folder, which only libpmix-dev ships (with
# headers and more); the library itself is libpmix2's, already here with Open MPI: link the name to it
pmix=/usr/lib/x86_64-linux-gnu/pmix2/lib
if [ -e "$pmix/libpmix.so.2" ] && [ ! -e "$pmix/libpmix.so" ]; then ln -s libpmix.so.2 "$pmix/libpmix.so"; fi
rm -rf /tmp/slurm-setup
