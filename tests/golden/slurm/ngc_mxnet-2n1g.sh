#!/bin/bash
#SBATCH --job-name=dlperf-07e648b54d-0000-r0
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --partition=debug
#SBATCH --time=00:30:00
#SBATCH --output=/shared/dlperf/dlperf-07e648b54d-0000-r0/batch.log
#SBATCH --error=/shared/dlperf/dlperf-07e648b54d-0000-r0/batch.log
# dlperf dlperf-07e648b54d-0000-r0: ngc_mxnet/resnet50_v1.5/fp32/b8/2n1g+args=d8af154c repeat 0
# 2 node(s), software none; node i runs launch i ($SLURM_NODEID)
set -euo pipefail
JOB_DIR=/shared/dlperf/dlperf-07e648b54d-0000-r0

if [ "${1:-}" = --node ]; then  # one node's launch, as srun starts it on every node
  # the node's environment, as dlperf probes it (where the case's software is), before its launch
  timeout 120 sh "$JOB_DIR/probe.sh" > "$JOB_DIR/probe$SLURM_NODEID.txt" 2>&1 || true
  case "$SLURM_NODEID" in
  0)  # slot0: launcher
    mkdir -p "$(dirname /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/id_ed25519)" && cp "$JOB_DIR"/files/0-id_ed25519 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/id_ed25519 && chmod 600 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/id_ed25519
    mkdir -p "$(dirname /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/authorized_keys)" && cp "$JOB_DIR"/files/1-authorized_keys /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/authorized_keys && chmod 644 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/authorized_keys
    mkdir -p "$(dirname /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/host_ed25519)" && cp "$JOB_DIR"/files/2-host_ed25519 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/host_ed25519 && chmod 600 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/host_ed25519
    mkdir -p "$(dirname /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/known_hosts)" && cp "$JOB_DIR"/files/3-known_hosts /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/known_hosts && chmod 644 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/known_hosts
    export DLPERF_SUITE_SETTING=on
    export DMLC_PS_ROOT_PORT=31360
    export DMLC_PS_ROOT_URI="${DLPERF_NODE0_ADDR}"
    export GLOO_SOCKET_IFNAME=eth0
    export PYTHONUNBUFFERED=1
    export OMPI_MCA_plm=rsh
    export OMPI_MCA_ras='^slurm'
    rc=0
    bash -c "set -e
cd /workspace/rn50
for h in '${DLPERF_NODE1_ADDR}'; do ok=0; for i in \$(seq 1 120); do if ssh -p 2222 -i /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/id_ed25519 -o UserKnownHostsFile=/tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=5 \"\$h\" true 2>/dev/null; then ok=1; break; fi; sleep 1; done; if [ \$ok != 1 ]; then echo \"dlperf: sshd on \$h did not answer within 120 s\" >&2; exit 97; fi; done; echo \"dlperf: ssh to every node works\"
exec mpirun --allow-run-as-root --tag-output -np 2 -H '${DLPERF_NODE0_ADDR}:1,${DLPERF_NODE1_ADDR}:1' --bind-to none --map-by slot -mca plm_rsh_args '-p 2222 -i /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/id_ed25519 -o UserKnownHostsFile=/tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=5' -x DLPERF_SUITE_SETTING -x DMLC_PS_ROOT_PORT -x DMLC_PS_ROOT_URI -x GLOO_SOCKET_IFNAME -x PYTHONUNBUFFERED -x PATH bash -c 'if [ -r /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/environment ]; then . /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/environment; fi; exec \"\$@\"' dlperf-rank /workspace/rn50/mpi-dmlc.sh python /workspace/rn50/train.py --arch resnetv15 --num-layers 50 --mode train --kv-store dist_sync --batch-size 16 --dtype float32 --input-layout NCHW --conv-layout NCHW --batchnorm-layout NCHW --pooling-layout NCHW --num-epochs 1 --benchmark-iters 7 --disp-batches 1 --no-metrics --data-backend synthetic" || rc=$?
    touch "$JOB_DIR/launcher.done"
    rm -rf /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0; exit "$rc"
    ;;
  1)  # slot1: sshd
    mkdir -p "$(dirname /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/id_ed25519)" && cp "$JOB_DIR"/files/0-id_ed25519 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/id_ed25519 && chmod 600 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/id_ed25519
    mkdir -p "$(dirname /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/authorized_keys)" && cp "$JOB_DIR"/files/1-authorized_keys /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/authorized_keys && chmod 644 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/authorized_keys
    mkdir -p "$(dirname /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/host_ed25519)" && cp "$JOB_DIR"/files/2-host_ed25519 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/host_ed25519 && chmod 600 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/host_ed25519
    mkdir -p "$(dirname /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/known_hosts)" && cp "$JOB_DIR"/files/3-known_hosts /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/known_hosts && chmod 644 /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/known_hosts
    export DLPERF_SUITE_SETTING=on
    export DMLC_PS_ROOT_PORT=31360
    export DMLC_PS_ROOT_URI="${DLPERF_NODE0_ADDR}"
    export GLOO_SOCKET_IFNAME=eth0
    export PYTHONUNBUFFERED=1
    bash -c '(unset PWD OLDPWD SHLVL _; export -p) > /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/environment && exec /usr/sbin/sshd -D -e -p 2222 -o HostKey=/tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/host_ed25519 -o AuthorizedKeysFile=/tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0/authorized_keys -o PermitRootLogin=prohibit-password -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no -o StrictModes=no -o UsePAM=no -o PidFile=none' &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      if [ -e "$JOB_DIR/launcher.done" ]; then kill "$pid"; wait "$pid" || true; rm -rf /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0; exit 0; fi
      sleep 1
    done
    echo "dlperf: node 1: its sshd ended before the launcher finished" >&2
    rm -rf /tmp/dlperf-ssh-dlperf-07e648b54d-0000-r0; exit 1
    ;;
  esac
  echo "dlperf: no launch for node $SLURM_NODEID" >&2
  exit 1
fi

# the inventory's setup (the nodes inherit its environment)
export PATH=/opt/venv/bin:$PATH
mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
export DLPERF_NODE0_ADDR="${hosts[0]}"
export DLPERF_NODE1_ADDR="${hosts[1]}"
echo "dlperf: job $SLURM_JOB_ID on ${hosts[*]}"
rm -f "$JOB_DIR/launcher.done"
srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --whole --kill-on-bad-exit=1 --output=/shared/dlperf/dlperf-07e648b54d-0000-r0/node%n.log bash /shared/dlperf/dlperf-07e648b54d-0000-r0/batch.sh --node
