#!/bin/bash
#SBATCH --job-name=dlperf-07e648b54d-0000-r0
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --partition=debug
#SBATCH --time=00:30:00
#SBATCH --output=/shared/dlperf/dlperf-07e648b54d-0000-r0/batch.log
#SBATCH --error=/shared/dlperf/dlperf-07e648b54d-0000-r0/batch.log
# dlperf dlperf-07e648b54d-0000-r0: pytorch_reference/resnet50_v1.5/fp32/b8/1n1g+args=54f96faf repeat 0
# 1 node(s), software none; node i runs launch i ($SLURM_NODEID)
set -euo pipefail
JOB_DIR=/shared/dlperf/dlperf-07e648b54d-0000-r0

if [ "${1:-}" = --node ]; then  # one node's launch, as srun starts it on every node
  # the node's environment, as dlperf probes it (where the case's software is), before its launch
  timeout 120 sh "$JOB_DIR/probe.sh" > "$JOB_DIR/probe$SLURM_NODEID.txt" 2>&1 || true
  case "$SLURM_NODEID" in
  0)  # slot0: launcher
    export DLPERF_SUITE_SETTING=on
    export GLOO_SOCKET_IFNAME=eth0
    export PYTHONUNBUFFERED=1
    exec python3 -m torch.distributed.run --nnodes 1 --nproc_per_node 1 --node_rank 0 --master_addr "${DLPERF_NODE0_ADDR}" --master_port 31360 /opt/dlperf/workload/train.py --batch-size 8 --precision fp32 --warmup-iterations 2 --iterations 5 --image-size 32
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
