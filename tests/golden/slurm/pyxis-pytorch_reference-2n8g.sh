#!/bin/bash
#SBATCH --job-name=dlperf-07e648b54d-0000-r0
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --exclusive
#SBATCH --partition=gpu
#SBATCH --account=bench
#SBATCH --qos=normal
#SBATCH --constraint=a100
#SBATCH --time=2-00:00:00
#SBATCH --output=/lustre/dlperf/dlperf-07e648b54d-0000-r0/batch.log
#SBATCH --error=/lustre/dlperf/dlperf-07e648b54d-0000-r0/batch.log
# dlperf dlperf-07e648b54d-0000-r0: pytorch_reference/resnet50_v1.5/fp32/b8/2n8g+args=54f96faf repeat 0
# 2 node(s), software pyxis; node i runs launch i ($SLURM_NODEID)
set -euo pipefail
JOB_DIR=/lustre/dlperf/dlperf-07e648b54d-0000-r0

if [ "${1:-}" = --node ]; then  # one node's launch, as srun starts it on every node
  # the node's environment, as dlperf probes it (where the case's software is), before its launch
  timeout 120 sh "$JOB_DIR/probe.sh" > "$JOB_DIR/probe$SLURM_NODEID.txt" 2>&1 || true
  case "$SLURM_NODEID" in
  0)  # slot0: launcher
    export DLPERF_SUITE_SETTING=on
    export NCCL_SOCKET_IFNAME=ib0
    export PYTHONUNBUFFERED=1
    exec python3 -m torch.distributed.run --nnodes 2 --nproc_per_node 8 --node_rank 0 --master_addr "${DLPERF_NODE0_ADDR}" --master_port 31360 /opt/dlperf/workload/train.py --batch-size 8 --precision fp32 --warmup-iterations 2 --iterations 5 --image-size 32
    ;;
  1)  # slot1: launcher
    export DLPERF_SUITE_SETTING=on
    export NCCL_SOCKET_IFNAME=ib0
    export PYTHONUNBUFFERED=1
    exec python3 -m torch.distributed.run --nnodes 2 --nproc_per_node 8 --node_rank 1 --master_addr "${DLPERF_NODE0_ADDR}" --master_port 31360 /opt/dlperf/workload/train.py --batch-size 8 --precision fp32 --warmup-iterations 2 --iterations 5 --image-size 32
    ;;
  esac
  echo "dlperf: no launch for node $SLURM_NODEID" >&2
  exit 1
fi

mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
export DLPERF_NODE0_ADDR="${hosts[0]}"
export DLPERF_NODE1_ADDR="${hosts[1]}"
echo "dlperf: job $SLURM_JOB_ID on ${hosts[*]}"
srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --whole --kill-on-bad-exit=1 --output=/lustre/dlperf/dlperf-07e648b54d-0000-r0/node%n.log '--container-image=nvcr.io#nvidia/pytorch:24.01-py3' --container-mounts=/lustre/dlperf/dlperf-07e648b54d-0000-r0:/lustre/dlperf/dlperf-07e648b54d-0000-r0,/lustre/imagenet:/data/imagenet:ro bash /lustre/dlperf/dlperf-07e648b54d-0000-r0/batch.sh --node
