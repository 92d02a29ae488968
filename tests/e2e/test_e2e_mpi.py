"""The mpirun path end to end on real containers: sshd with per-case keys on node 1, mpirun on node 0.

The MPI frameworks (NGC MXNet/Horovod, MindSpore) cannot run here (no GPU, no registry for their images), so
the reference workload is launched their way (``pytorch_reference_mpi``): the same runtime code puts fresh
keys into both containers, starts node 1's sshd first, node 0 checks ssh to it with strict host keys, then
mpirun starts one rank in each container; the case's containers are removed afterwards.
"""

from pathlib import Path

from dlperf_core.model import series_base
from e2e_helpers import run_suite
from helpers import dlperf_containers, docker_marks

IMAGE = "dlperf/pytorch-reference:cpu"
pytestmark = docker_marks(IMAGE)


def test_mpirun_across_two_container_nodes(tmp_path, pg_url):
    rows = run_suite(tmp_path, pg_url, "tests/data/mpi-suite.yaml", timeout=1200).results()
    assert sorted(map(series_base, rows["case_key"])) == [
        "pytorch_reference_mpi/resnet50_v1.5/fp32/b4/1n2g",
        "pytorch_reference_mpi/resnet50_v1.5/fp32/b4/2n1g",
    ]
    assert set(rows["status"]) == {"ok"}, rows[["case_key", "reason"]]
    assert (rows["throughput"] > 0).all()
    two_nodes = rows[rows["nodes"] == 2].iloc[0]
    node0_log = Path(two_nodes["log_path"]).read_text()
    assert "dlperf: ssh to every node works" in node0_log  # node 0 reached node 1's sshd before mpirun
    assert "[1,1]<" in node0_log or "[1,0]<" in node0_log  # mpirun's tagged output of the ranks
    node1_log = Path(two_nodes["log_path"]).with_name("node1.log").read_text()
    assert "Accepted publickey for root" in node1_log  # the per-case key, on node 1's sshd
    assert dlperf_containers() == []
