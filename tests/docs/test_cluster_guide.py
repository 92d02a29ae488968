"""docs/cluster-guide.md ("Point dlperf at your cluster") says what the code does: its inventory loads and plans the
guide's suite at two nodes under torchrun and under mpirun, every ``dlperf`` command it shows parses, its datasets
table gives each adapter's own defaults, the ``.env`` variables it sets are the deployment's, and the warning and
the error it quotes are the ones planning and the DAG's parse print.

The guide's commands run on two stand-in nodes with a Celery worker each in tests/e2e/test_compose_e2e.py, on the
deployment that test makes by following docs/deploy.md."""

from __future__ import annotations

import re
import shlex

import pytest
import yaml

from dlperf_airflow.schedule import ScheduleError, parse_schedule
from dlperf_cli.main import build_parser
from dlperf_core.cluster.inventory import load_inventory
from dlperf_core.frameworks import get_adapter
from dlperf_core.plan.cases import plan_suite
from dlperf_core.plan.suite import load_suite
from dlperf_core.plan.trigger import unchecked_by_preflight
from helpers import REPO

GUIDE = REPO / "docs" / "cluster-guide.md"
TEXT = GUIDE.read_text()
SUITE = REPO / "suites" / "cluster-check.yaml"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```", TEXT, flags=re.M | re.S)


def test_the_guide_is_on_the_site():
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    assert {"Your cluster": "cluster-guide.md"} in nav


def test_its_inventory_plans_the_check_suite_at_two_nodes_under_torchrun_and_mpirun(tmp_path):
    inventory_text = blocks("yaml")[0]
    path = tmp_path / "my-cluster.yaml"
    path.write_text(inventory_text)
    inventory = load_inventory(path)
    assert [n.name for n in inventory.nodes] == ["gpu-node-0", "gpu-node-1"]
    assert all(n.ssh is not None and n.queue == n.name for n in inventory.nodes)  # preflighted, a worker each
    assert unchecked_by_preflight(inventory.nodes, inventory.name) is None
    runs = plan_suite(load_suite(SUITE), inventory)
    launchers = {r.case.framework: get_adapter(r.case.framework).launcher for r in runs}
    assert launchers == {"pytorch_reference": "per_node", "pytorch_reference_mpi": "mpirun"}
    assert {r.case.topology for r in runs} == {"2n1g"}
    assert "--inventory inventories/my-cluster.yaml" in TEXT


def command_lines() -> list[list[str]]:
    """Every ``dlperf ...`` the guide runs (up to a pipe), as argv after ``dlperf``."""
    found = []
    for block in blocks("bash") + blocks("text"):
        for line in block.replace("\\\n", " ").splitlines():
            match = re.search(r"(?:^|\.venv/bin/|airflow-cli )dlperf (\S.*)", line.split("|")[0].strip())
            if match:
                found.append(shlex.split(match.group(1)))
    return found


def test_every_dlperf_command_it_shows_parses():
    lines = command_lines()
    assert [argv[0] for argv in lines] == ["commands", "commands", "cluster"]
    for argv in lines:
        build_parser().parse_args(argv)  # an unknown subcommand or flag exits (SystemExit fails the test)


@pytest.mark.parametrize(
    ("framework", "option"),
    [("ngc_pytorch", "data_dir"), ("ngc_mxnet", "data_root"), ("mindspore", "dataset_path"), ("oneflow", "data_dir")],
)
def test_the_datasets_table_gives_each_adapters_default_path(framework, option):
    row = next(line for line in TEXT.splitlines() if line.startswith(f"| `{framework}` |"))
    default = get_adapter(framework).option_defaults[option]
    assert f"`{default}` (`{option}`" in row


def test_the_synthetic_switches_it_names_are_options_the_adapters_take():
    assert "synthetic" in get_adapter("ngc_pytorch").option_choices["data_backend"]
    assert "synthetic" in get_adapter("ngc_mxnet").option_choices["data_backend"]
    assert get_adapter("oneflow").option_defaults["data_part_num"] == 44
    assert "`data_part_num: 44`" in TEXT and "part-00043" in TEXT
    assert "data_dir" in get_adapter("oneflow").option_defaults  # empty: no --train_data_dir, OneFlow's synthetic


def test_the_env_variables_it_sets_are_the_deployments():
    example = (REPO / ".env.example").read_text()
    documented = set(re.findall(r"^([A-Z0-9_]+)=", example, re.M))
    set_here = {name for block in blocks("text") for name in re.findall(r"(?:^|\s)([A-Z][A-Z0-9_]+)=", block)}
    assert {"DLPERF_CLUSTER_INVENTORY", "DLPERF_SCHEDULE", "DLPERF_NODE_QUEUE"} <= set_here
    assert set_here <= documented, set_here - documented


def test_the_warning_and_the_error_it_quotes_are_the_codes(tmp_path):
    path = tmp_path / "bare.yaml"
    inventory = yaml.safe_load(blocks("yaml")[0])
    for node in inventory["nodes"]:
        del node["ssh"]
    path.write_text(yaml.safe_dump(inventory))
    bare = load_inventory(path)
    warning = unchecked_by_preflight(bare.nodes, bare.name)
    quoted = re.search(r"\(`(preflight will not check [^`]*?), \.\.\.`\)", TEXT)
    assert quoted and warning and warning.startswith(quoted.group(1))

    schedule = re.search(r"\s+".join(["is", "none", "of", "these"]), TEXT)
    assert schedule
    quoted_error = re.search(r"\(`(\[dlperf\] schedule .*?) \.\.\.`\)", TEXT[schedule.start() :], flags=re.S)
    assert quoted_error
    with pytest.raises(ScheduleError) as refused:
        parse_schedule("61 2 * * *")
    assert str(refused.value).startswith(re.sub(r"\s+", " ", quoted_error.group(1)))
    schedule_line = next(b for b in blocks("text") if b.startswith("DLPERF_SCHEDULE="))
    assert parse_schedule(schedule_line.split("=", 1)[1]) == "30 1 * * 1-5"
