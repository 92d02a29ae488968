"""A real Slurm cluster (tests/slurm_cluster.py, docker/slurm/) does what ``runtime: slurm`` (issue 37) will ask of it,
through SSH to its login node as the cluster's user: sbatch, srun across two nodes, torchrun and mpirun under Slurm
with the frameworks' own software on the nodes, scancel, a drained node, a time limit.

One cluster for the module (about 10 s to start with its images built). Every job's script and output live in the
cluster's shared folder (/shared/jobs), read back over SFTP from the login node, as a runtime would.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator

import pytest

from helpers import docker_marks
from slurm_cluster import FRAMEWORK_IMAGES, KILL_WAIT_S, SlurmCluster, drained, module_cluster

pytestmark = [*docker_marks(FRAMEWORK_IMAGES["torch"]), *docker_marks(FRAMEWORK_IMAGES["mxnet"])[3:]]

LONG = os.environ.get("DLPERF_CHAOS") == "all"
SECONDS: dict[str, float] = {}


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    with module_cluster(SECONDS, "Slurm cluster") as started:
        yield started


@pytest.fixture(autouse=True)
def _timed(request: pytest.FixtureRequest) -> Iterator[None]:
    started = time.monotonic()
    yield
    SECONDS[request.node.name] = time.monotonic() - started


HOSTNAMES = """#!/bin/bash
set -eu
srun hostname
"""


def test_a_two_node_job_runs_a_task_on_each_node(cluster: SlurmCluster):
    job = cluster.submit(HOSTNAMES, "--nodes=2", "--ntasks-per-node=1", "--exclusive", name="hostnames")
    done = cluster.wait(job, "COMPLETED", timeout=60)
    assert done["ExitCode"] == "0:0" and done["NodeList"] == "torch[0-1]", done
    hosts = cluster.read(done["StdOut"]).split()
    assert sorted(hosts) == ["torch0", "torch1"], hosts
    assert done["StdOut"].startswith(f"{cluster.shared_dir}/jobs/")


def test_one_node_job_runs_two_tasks_on_one_node(cluster: SlurmCluster):
    """1n2g on the stand-in nodes: 2 tasks on one node (each node declares 2 CPUs, whatever the host has)."""
    script = "#!/bin/bash\nsrun bash -c 'echo \"$(hostname) task $SLURM_PROCID of $SLURM_NTASKS\"'\n"
    job = cluster.submit(script, "--nodes=1", "--ntasks-per-node=2", "--exclusive", name="1n2t")
    done = cluster.wait(job, "COMPLETED", timeout=60)
    lines = sorted(cluster.read(done["StdOut"]).splitlines())
    assert len(lines) == 2 and len({line.split()[0] for line in lines}) == 1, lines
    assert [line.split()[1:] for line in lines] == [["task", "0", "of", "2"], ["task", "1", "of", "2"]], lines


TORCHRUN = """#!/bin/bash
# dlperf's reference workload, 2 nodes x 1 rank, torchrun on every node started by srun (software: the node's own)
set -euo pipefail
export PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1
master=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
echo "master $master nodes $SLURM_JOB_NODELIST"
srun --kill-on-bad-exit=1 bash -c '
python -m torch.distributed.run --nnodes "$SLURM_NNODES" --nproc_per_node 1 --node_rank "$SLURM_NODEID" \\
  --master_addr "'"$master"'" --master_port 29500 /opt/dlperf/workload/train.py --batch-size 4 --precision fp32 \\
  --warmup-iterations 2 --iterations 4 --image-size 32 --width 8 --device cpu --threads 1
echo "torchrun on $(hostname) node $SLURM_NODEID exited $?"'
"""


def test_b_torchrun_trains_the_reference_workload_on_two_nodes(cluster: SlurmCluster):
    job = cluster.submit(TORCHRUN, "--nodes=2", "--ntasks-per-node=1", "--exclusive", name="torchrun")
    done = cluster.wait(job, "COMPLETED", timeout=240)
    log = cluster.read(done["StdOut"])
    assert "master torch0 nodes torch[0-1]" in log, log
    assert re.search(r"PARAMETER .* world_size : 2 ", log), log  # rank 0's DLLogger parameters
    assert re.search(r"^DLL .* - Summary: .*train\.total_ips : [\d.]+ img/s", log, re.M), log[-3000:]
    for node, host in enumerate(["torch0", "torch1"]):
        assert f"torchrun on {host} node {node} exited 0" in log, log


def _mxnet_script(launch: str) -> str:
    return f"""#!/bin/bash
# the NGC MXNet CPU image's /workspace/rn50 (dist_sync, ps-lite roles by mpi-dmlc.sh), one rank per node
set -euo pipefail
export PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1
export DMLC_PS_ROOT_URI=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1) DMLC_PS_ROOT_PORT=29600
cd /workspace/rn50
{launch} /workspace/rn50/mpi-dmlc.sh python /workspace/rn50/train.py --arch resnetv15 --num-layers 50 \\
  --mode train --kv-store dist_sync --batch-size 8 --dtype float32 --input-layout NCHW --conv-layout NCHW \\
  --batchnorm-layout NCHW --pooling-layout NCHW --num-epochs 1 --benchmark-iters 6 --disp-batches 1 --no-metrics \\
  --data-backend synthetic --image-shape 3,32,32 --num-classes 10
"""


MPIRUN = (
    "mpirun --mca plm slurm -np $SLURM_NTASKS --map-by ppr:1:node "
    "-x PATH -x PYTHONUNBUFFERED -x DMLC_PS_ROOT_URI -x DMLC_PS_ROOT_PORT"
)
"""mpirun as Slurm's: its daemons (orted) started by ``srun --mpi=none`` on the allocation's nodes (``plm slurm``,
forced here: no ssh, no hostfile, no key), one rank per node."""


def test_c_mpirun_under_slurm_trains_mxnet_on_two_nodes(cluster: SlurmCluster):
    """Debian's Open MPI 4.1.4 has Slurm support (plm/ras/ess slurm): mpirun inside the allocation reads the
    allocation and starts its daemons with srun."""
    job = cluster.submit(
        _mxnet_script(MPIRUN), "--nodes=2", "--ntasks-per-node=1", "--exclusive", name="mxnet", partition="mxnet"
    )
    done = cluster.wait(job, "COMPLETED", timeout=300)
    log = cluster.read(done["StdOut"])
    assert done["NodeList"] == "mxnet[0-1]", done
    assert "rank 0 started the ps-lite scheduler and server" in log and "for 2 worker(s)" in log, log[-3000:]
    assert re.search(r"Speed: [\d.]+ samples/sec", log), log[-3000:]


MPI_HELLO = r"""#!/bin/bash
# Open MPI ranks started by srun itself (no mpirun): MPI_Init reaches Slurm's PMIx (--mpi=pmix)
export PATH=/opt/venv/bin:$PATH
srun --mpi=pmix python -c '
import ctypes, socket
mpi = ctypes.CDLL("libmpi.so.40", mode=ctypes.RTLD_GLOBAL)
world = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(mpi, "ompi_mpi_comm_world")))
assert mpi.MPI_Init(None, None) == 0
rank, size = ctypes.c_int(), ctypes.c_int()
mpi.MPI_Comm_rank(world, ctypes.byref(rank)); mpi.MPI_Comm_size(world, ctypes.byref(size))
print(f"mpi rank {rank.value} of {size.value} on {socket.gethostname()}", flush=True)
mpi.MPI_Finalize()'
"""


def test_c_srun_mpi_pmix_starts_open_mpi_ranks(cluster: SlurmCluster):
    """srun alone starts Open MPI ranks with --mpi=pmix (Slurm's mpi/pmix_v4, Debian's PMIx 4.2, Open MPI's pmix
    ext3x). Not with --mpi=pmi2 or none: Debian's Open MPI has no Slurm PMI-1/PMI-2 components (MPI_Init aborts,
    "install PMI-2 ... build Open MPI using --with-pmi"). Python calls libmpi through ctypes: no compiler needed."""
    job = cluster.submit(MPI_HELLO, "--nodes=2", "--ntasks-per-node=1", "--exclusive", name="pmix", partition="mxnet")
    done = cluster.wait(job, "COMPLETED", timeout=120)
    lines = sorted(line for line in cluster.read(done["StdOut"]).splitlines() if line.startswith("mpi rank"))
    assert lines == ["mpi rank 0 of 2 on mxnet0", "mpi rank 1 of 2 on mxnet1"], cluster.read(done["StdOut"])


SLEEPER = "#!/bin/bash\necho started\nsrun sleep 600\n"


def test_d_scancel_ends_a_running_job_cancelled(cluster: SlurmCluster):
    job = cluster.submit(SLEEPER, "--nodes=2", "--ntasks-per-node=1", "--exclusive", name="cancel")
    cluster.wait(job, "RUNNING", timeout=60)
    cluster.run(f"scancel {job}")
    done = cluster.wait(job, "CANCELLED", timeout=30 + KILL_WAIT_S)
    assert done["JobState"] == "CANCELLED", done
    assert set(cluster.nodes().values()) == {"idle"}


def test_f_a_drained_node_keeps_a_two_node_job_pending_until_resumed(cluster: SlurmCluster):
    with drained(cluster, "torch1", "dlperf-test-drain"):
        assert cluster.node("torch1")["State"].startswith("IDLE+DRAIN"), cluster.node("torch1")
        job = cluster.submit(HOSTNAMES, "--nodes=2", "--ntasks-per-node=1", "--exclusive", name="drained")
        deadline = time.monotonic() + 30
        fields = cluster.job(job)
        while not (fields["JobState"] == "PENDING" and "torch1" in fields.get("Reason", "")):
            assert fields["JobState"] == "PENDING" and time.monotonic() < deadline, fields
            time.sleep(0.5)
            fields = cluster.job(job)
        assert fields["Reason"] == "ReqNodeNotAvail,_UnavailableNodes:torch1", fields  # Slurm 22.05's words
        time.sleep(3)
        assert cluster.job(job)["JobState"] == "PENDING"
    done = cluster.wait(job, "COMPLETED", timeout=90)
    assert sorted(cluster.read(done["StdOut"]).split()) == ["torch0", "torch1"]


@pytest.mark.skipif(not LONG, reason="runs in `make chaos` (DLPERF_CHAOS=all): a time limit costs 1-2 minutes")
def test_e_a_job_past_its_time_limit_ends_timeout(cluster: SlurmCluster):
    """--time=1: slurmctld's limit check (every 30 s) sends SIGTERM after the minute, SIGKILL KillWait (5 s) later."""
    job = cluster.submit(SLEEPER, "--nodes=1", "--ntasks-per-node=1", "--time=1", name="timeout")
    cluster.wait(job, "RUNNING", timeout=60)
    done = cluster.wait(job, "TIMEOUT", timeout=60 + 30 + KILL_WAIT_S + 30)
    assert done["JobState"] == "TIMEOUT" and done["TimeLimit"] == "00:01:00", done
