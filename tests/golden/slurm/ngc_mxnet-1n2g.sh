#!/bin/bash
#SBATCH --job-name=dlperf-07e648b54d-0000-r0
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --partition=debug
#SBATCH --time=00:30:00
#SBATCH --output=/shared/dlperf/dlperf-07e648b54d-0000-r0/batch.log
#SBATCH --error=/shared/dlperf/dlperf-07e648b54d-0000-r0/batch.log
# dlperf dlperf-07e648b54d-0000-r0: ngc_mxnet/resnet50_v1.5/fp32/b8/1n2g+args=d8af154c repeat 0
# 1 node(s), software none; node i runs launch i ($SLURM_NODEID)
set -euo pipefail
JOB_DIR=/shared/dlperf/dlperf-07e648b54d-0000-r0

if [ "${1:-}" = --node ]; then  # one node's launch, as srun starts it on every node
  # the node's environment, as dlperf probes it (where the case's software is), before its launch
  timeout 120 sh "$JOB_DIR/probe.sh" > "$JOB_DIR/probe$SLURM_NODEID.txt" 2>&1 || true
  case "$SLURM_NODEID" in
  0)  # slot0: launcher
    export DLPERF_SUITE_SETTING=on
    export DMLC_PS_ROOT_PORT=31360
    export DMLC_PS_ROOT_URI="${DLPERF_NODE0_ADDR}"
    export GLOO_SOCKET_IFNAME=eth0
    export PYTHONUNBUFFERED=1
    export OMPI_MCA_plm=rsh
    export OMPI_MCA_ras='^slurm'
    exec bash -c "set -e
cd /workspace/rn50
exec mpirun --allow-run-as-root --tag-output -np 2 -H '${DLPERF_NODE0_ADDR}:2' --bind-to none --map-by slot -x DLPERF_SUITE_SETTING -x DMLC_PS_ROOT_PORT -x DMLC_PS_ROOT_URI -x GLOO_SOCKET_IFNAME -x PYTHONUNBUFFERED -x PATH /workspace/rn50/mpi-dmlc.sh python /workspace/rn50/train.py --arch resnetv15 --num-layers 50 --mode train --kv-store dist_sync --batch-size 16 --dtype float32 --input-layout NCHW --conv-layout NCHW --batchnorm-layout NCHW --pooling-layout NCHW --num-epochs 1 --benchmark-iters 7 --disp-batches 1 --no-metrics --data-backend synthetic"
    ;;
  esac
  echo "dlperf: no launch for node $SLURM_NODEID" >&2
  exit 1
fi

# the inventory's setup (the nodes inherit its environment)
export PATH=/opt/venv/bin:$PATH
mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
export DLPERF_NODE0_ADDR="${hosts[0]}"
echo "dlperf: job $SLURM_JOB_ID on ${hosts[*]}"
srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --whole --kill-on-bad-exit=1 --output=/shared/dlperf/dlperf-07e648b54d-0000-r0/node%n.log bash /shared/dlperf/dlperf-07e648b54d-0000-r0/batch.sh --node
