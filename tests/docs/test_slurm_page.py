"""docs/slurm.md ("A cluster run by Slurm") says what the code does: it is on the site; its table of the ``slurm:``
block has every field of SlurmSettings with its default, no other; the slot fields it says are refused are the
code's; its table of end states gives the reasons end_reason writes for the recorded outputs; the srun lines it quotes
are the golden batch scripts'; its example inventory is inventories/example-slurm.yaml, which loads and plans on the
slurm runtime; the per-node refusal it quotes is planning's; every test it names exists, every path it names is
there, and the test cluster's settings it gives are docker/slurm/slurm.conf's."""

from __future__ import annotations

import inspect
import re

import pytest
import yaml

from dlperf_core.cluster.inventory import SLOT_REFUSED, SlurmSettings, load_inventory
from dlperf_core.errors import ConfigError
from dlperf_core.plan.defaults import DeploymentDefaults
from dlperf_core.plan.trigger import plan_trigger, resolve_trigger
from dlperf_core.run.runtime.slurm_jobs import END_STATES, SlurmJob, end_reason, parse_job_state
from helpers import REPO

PAGE = REPO / "docs" / "slurm.md"
TEXT = PAGE.read_text()
EXAMPLE = REPO / "inventories" / "example-slurm.yaml"
DATA = REPO / "tests" / "data" / "slurm"
GOLDEN = REPO / "tests" / "golden" / "slurm"


def prose() -> str:
    """The page with the line breaks of its paragraphs joined (a quote may wrap) and its list indents removed."""
    return re.sub(r"\s*\n\s*", " ", TEXT)


def table(heading: str) -> list[list[str]]:
    """The rows (cells stripped) of the first table after ``heading``."""
    rest = TEXT[TEXT.index(heading) :]
    rows = []
    for line in rest[rest.index("\n|") + 1 :].splitlines():
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[2:]  # without the header and the rule


def test_the_page_is_on_the_site_and_linked_where_runtimes_and_inventories_are():
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    assert {"Slurm": "slurm.md"} in nav
    for page in ("index.md", "suites.md", "cluster-guide.md", "operations.md"):
        assert "(slurm.md)" in (REPO / "docs" / page).read_text(), page
    assert "(docs/slurm.md)" in (REPO / "README.md").read_text()


def test_the_field_table_is_slurm_settings():
    rows = table("## The inventory's `slurm:` block")
    fields = {row[0].strip("`"): row[1] for row in rows}
    assert list(fields) == list(SlurmSettings.model_fields), "the table's fields, in the code's order"
    for name, said in fields.items():
        info = SlurmSettings.model_fields[name]
        if said == "required":
            assert info.is_required(), name
            continue
        assert not info.is_required(), name
        default = info.get_default()
        if said.startswith("none"):  # None: the cluster's or the case's
            assert default is None, (name, default)
        elif said.startswith("`[]`"):
            assert default == (), (name, default)
        else:
            value = yaml.safe_load(re.match(r"`([^`]*)`", said)[1])
            assert value == default, (name, said, default)


def test_the_refused_slot_fields_are_the_codes():
    said = re.search(r"only a host of dlperf's own has: (.*?) \(each named in the refusal\)", prose())
    assert said, "the page no longer lists the refused slot fields"
    assert re.findall(r"`(\w+)`", said[1]) == list(SLOT_REFUSED)


STATES = {  # a row's first cell -> the job it is about
    "`FAILED`": "scontrol-failed.txt",
    "`FAILED` by a signal": "scontrol-failed-signal.txt",
    "`TIMEOUT`": "scontrol-timeout.txt",
    "`NODE_FAIL`": "scontrol-node-fail.txt",
    "`OUT_OF_MEMORY`": "scontrol-oom.txt",
    "`PREEMPTED`": "scontrol-preempted.txt",
    "`CANCELLED`": "scontrol-cancelled.txt",
    "`BOOT_FAIL`": "scontrol-boot-fail.txt",
    "`DEADLINE`": "scontrol-deadline.txt",
    "`COMPLETED`, `ExitCode=0:0`": "scontrol-completed.txt",
    "`COMPLETED`, another exit code": SlurmJob(job_id="7", state="COMPLETED", exit_code=3, signal=0),
    "any other end": SlurmJob(job_id="7", state="SPECIAL_EXIT"),
}


def test_the_end_state_table_is_what_end_reason_writes():
    rows = table("### How a job's end becomes the case's result")
    assert [row[0] for row in rows] == [
        "`COMPLETED`, `ExitCode=0:0`",
        "`COMPLETED`, another exit code",
        *[k for k in STATES if k.startswith("`") and not k.startswith("`COMPLETED`")],
        "any other end",
    ]
    assert {re.match(r"`(\w+)`", row[0])[1] for row in rows[:-1]} == END_STATES
    for first, said in rows:
        source = STATES[first]
        job = parse_job_state((DATA / source).read_text()) if isinstance(source, str) else source
        reason = end_reason(job)
        if reason is None:
            assert said.startswith("none"), first
        else:
            assert said == f"`{reason}`", (first, said, reason)


def test_the_srun_lines_it_quotes_are_the_golden_scripts():
    section = TEXT[TEXT.index("### The three kinds of software") : TEXT.index("## What the login node needs")]
    quoted = re.findall(r"\(`([\w.-]+\.sh)`\).*?^```\n(srun .*?)\n```", section, flags=re.M | re.S)
    assert [name for name, _ in quoted] == [
        "pytorch_reference-2n1g.sh",
        "pyxis-pytorch_reference-2n8g.sh",
        "apptainer-ngc_mxnet-2n8g.sh",
    ]
    for name, line in quoted:
        script = (GOLDEN / name).read_text()
        job = re.search(r"^JOB_DIR=(\S+)$", script, flags=re.M)[1]
        assert line.replace("<job>", job) in script.splitlines(), name


def test_the_example_inventory_is_the_file_and_plans_on_the_slurm_runtime(monkeypatch):
    monkeypatch.setenv("DLPERF_HOME", str(REPO))
    (block,) = re.findall(r"^```yaml\n(.*?)^```", TEXT, flags=re.M | re.S)
    assert yaml.safe_load(block) == yaml.safe_load(EXAMPLE.read_text())
    inventory = load_inventory(EXAMPLE)
    assert inventory.runtime == "slurm" and inventory.slurm is not None
    assert inventory.slurm.software_kind == "pyxis" and inventory.slurm.time_limit_s == 3600
    assert [n.address for n in inventory.nodes] == [f"$DLPERF_NODE{i}_ADDR" for i in range(4)]
    resolved = resolve_trigger({"suite": "suites/smoke.yaml", "inventory": str(EXAMPLE)}, DeploymentDefaults())
    plan = plan_trigger(resolved)
    assert plan.cases and {planned.runtime for planned in plan.cases} == {"slurm"}


def test_the_per_node_refusal_it_quotes_is_plannings():
    params = {"suite": "tests/data/node-sweep-suite.yaml", "inventory": str(EXAMPLE)}
    with pytest.raises(ConfigError) as refused:
        plan_trigger(resolve_trigger(params, DeploymentDefaults()))
    quote = re.search(r'Planning says: "(.*?)"', prose())[1]
    pattern = re.escape(quote).replace(re.escape("(...)"), r"\(.*?\)")
    assert re.search(pattern, str(refused.value)), (quote, str(refused.value))


def test_every_test_it_names_exists():
    names = set(re.findall(r"`(test_\w+)`", TEXT))
    assert len(names) > 20
    defined = {
        m
        for path in (REPO / "tests").rglob("test_*.py")
        for m in re.findall(r"^def (test_\w+)", path.read_text(), re.M)
    }
    assert sorted(names - defined) == []


def test_every_path_it_names_is_there():
    paths = set(re.findall(r"`((?:tests|dlperf_core|plugins|docker|inventories|dags|bench|docs)/[\w./*-]+)`", TEXT))
    missing = [p for p in sorted(paths) if not any(REPO.glob(p.rstrip("/")))]
    assert missing == []


def test_the_test_clusters_settings_and_the_waits_limits_are_the_codes():
    conf = (REPO / "docker" / "slurm" / "slurm.conf").read_text()
    for setting in ("KillWait=5", "MinJobAge=300", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none"):
        assert re.search(rf"^{re.escape(setting)}$", conf, flags=re.M), setting
        assert f"`{setting}`" in TEXT or setting.replace("=", "` ") in TEXT or setting.split("=")[0] in TEXT
    assert "AccountingStorageType=accounting_storage/none" in conf and "no slurmdbd" in TEXT
    from dlperf_airflow.slurm_trigger import DRAINED_LOOKS, SlurmJobTrigger

    unreachable = inspect.signature(SlurmJobTrigger).parameters["unreachable_s"].default
    assert f"longer than {unreachable:.0f} s" in prose() and DRAINED_LOOKS == 2 and "two looks in a row" in TEXT
