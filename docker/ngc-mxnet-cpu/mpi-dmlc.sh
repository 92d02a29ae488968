#!/bin/bash
# mpi-dmlc.sh: run one MXNet dist_sync worker per Open MPI rank (the CPU stand-in for DLE's Horovod ranks).
#
#   mpirun -np N ... -x DMLC_PS_ROOT_URI -x DMLC_PS_ROOT_PORT ... /workspace/rn50/mpi-dmlc.sh python train.py ...
#
# What it does, and nothing more:
#   * DMLC_PS_ROOT_URI (node 0's address, a hostname is resolved to its IPv4 address) and DMLC_PS_ROOT_PORT
#     come from the launch environment; DMLC_NUM_WORKER = OMPI_COMM_WORLD_SIZE, DMLC_NUM_SERVER = 1.
#   * Rank 0 (OMPI_COMM_WORLD_RANK=0, on node 0) first starts MXNet's ps-lite scheduler and its one server
#     in the background: `python -c 'import mxnet'` with DMLC_ROLE=scheduler / server (MXNet runs the
#     role's loop at import and exits when the workers finish).
#   * Every rank then runs the command with DMLC_ROLE=worker and exits with its status. Rank 0 then waits up
#     to 30 s for its scheduler and server to end (they end by themselves once every worker has finalized),
#     then kills what is left; on a failed worker or on SIGTERM/SIGINT it kills them at once.
# Without Open MPI variables it runs the command as a single worker (rank 0 of 1).
set -u
rank="${OMPI_COMM_WORLD_RANK:-0}"
size="${OMPI_COMM_WORLD_SIZE:-1}"
: "${DMLC_PS_ROOT_URI:=127.0.0.1}"
: "${DMLC_PS_ROOT_PORT:=9091}"
root_ip="$(getent ahostsv4 "$DMLC_PS_ROOT_URI" | awk 'NR == 1 { print $1 }')"
if [ -z "$root_ip" ]; then
  echo "mpi-dmlc.sh: cannot resolve DMLC_PS_ROOT_URI=$DMLC_PS_ROOT_URI" >&2
  exit 2
fi
export DMLC_PS_ROOT_URI="$root_ip" DMLC_PS_ROOT_PORT DMLC_NUM_WORKER="$size" DMLC_NUM_SERVER=1

helpers=()
stop_helpers() {
  [ "${#helpers[@]}" -gt 0 ] && kill "${helpers[@]}" 2>/dev/null
  helpers=()
}
trap 'stop_helpers; exit 143' TERM
trap 'stop_helpers; exit 130' INT

if [ "$rank" = 0 ]; then
  DMLC_ROLE=scheduler python -c 'import mxnet' &
  helpers+=($!)
  DMLC_ROLE=server python -c 'import mxnet' &
  helpers+=($!)
  echo "mpi-dmlc.sh: rank 0 started the ps-lite scheduler and server at $DMLC_PS_ROOT_URI:$DMLC_PS_ROOT_PORT" \
    "for $size worker(s)" >&2
fi

DMLC_ROLE=worker "$@" &
worker=$!
wait "$worker"
rc=$?
if [ "$rank" = 0 ] && [ "${#helpers[@]}" -gt 0 ]; then
  if [ "$rc" = 0 ]; then
    for _ in $(seq 1 30); do
      alive=0
      for pid in "${helpers[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
      [ "$alive" = 0 ] && break
      sleep 1
    done
  fi
  stop_helpers
  wait 2>/dev/null
fi
exit "$rc"
