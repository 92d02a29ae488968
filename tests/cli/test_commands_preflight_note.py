"""`dlperf commands` (the dry run of a suite) says, on stderr, which nodes preflight could not check when the suite
runs on the docker runtime (dlperf_core.plan.trigger.unchecked_by_preflight), as planning a run of it would."""

from __future__ import annotations

import yaml

from dlperf_cli.main import main
from helpers import REPO

ARGS = ["commands", "suites/seeds.yaml", "--framework", "ngc_pytorch", "--precision", "fp32", "--topology", "2n8g"]


def test_commands_warns_about_the_used_nodes_without_ssh(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    example = yaml.safe_load((REPO / "inventories/example-cluster.yaml").read_text())
    for node in example["nodes"]:
        node.pop("ssh")
    bare = tmp_path / "no-ssh.yaml"
    bare.write_text(yaml.safe_dump(example))

    assert main([*ARGS, "--inventory", str(bare)]) == 0
    out, err = capsys.readouterr()
    assert "## node 1: gpu-node-1" in out  # the commands themselves, as without the warning
    assert err.strip() == (
        "warning: preflight will not check nodes gpu-node-0, gpu-node-1 of inventory example-4n8g: they have no ssh "
        "block, and preflight reaches a node over SSH only, so Docker, the GPUs and their driver, InfiniBand, the "
        "data paths, free disk and the images are not checked before the cases start there (a sick node fails its "
        "cases instead). Give each node ssh: {user, key_file, host_key} (docs/cluster-guide.md)"
    )

    assert main([*ARGS, "--inventory", "inventories/example-cluster.yaml"]) == 0
    out_ssh, err_ssh = capsys.readouterr()
    assert err_ssh == "" and out_ssh == out
