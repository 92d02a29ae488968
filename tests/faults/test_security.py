"""Security checks as tests: no secret in the repository or the images, every SQL statement binds its
values, containers are never privileged. (The results API's authentication and the analysts' read-only
role are tested against the real servers in tests/airflow_plugin/test_results_api.py and
tests/core/storage/test_schema_views.py;
secret masking in a real DAG run's output is checked in tests/faults/test_concurrent_runs.py.)"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import subprocess
from pathlib import Path

import pytest

from e2e_helpers import docker_output
from helpers import REPO, docker_available, image_present

# ------------------------------------------------------------------ secrets in the repository

PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----\s*\n[A-Za-z0-9+/=]{20,}")
URL_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@'\"]+:([^@\s/'\"]+)@")
TOKENS = {
    "AWS access key": re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36}\b"),
    "Slack token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "Google API key": re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
}
ASSIGNED_PASSWORD = re.compile(r"(?im)^\s*([A-Z0-9_]*(PASSWORD|SECRET|TOKEN|FERNET_KEY)[A-Z0-9_]*)\s*[=:]\s*(\S+)\s*$")
PLACEHOLDERS = re.compile(r"^(change-me|\$\{?[A-Za-z_][A-Za-z0-9_:?-]*\}?|\*+|<[^>]+>|\"\"|''|)$")
FAKE_TEST_PASSWORDS = {"pw", "secret", "other"}  # literal fakes in tests/ (no server accepts them)
CONFIG_SUFFIXES = {".env", ".example", ".cfg", ".ini", ".yaml", ".yml", ".toml", ".conf", ".json"}


def repository_files() -> list[Path]:
    """Tracked files plus new ones not ignored: what a commit would contain."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    return [REPO / p for p in out.decode().split("\0") if p and (REPO / p).is_file()]


def secret_findings(path: Path, text: str) -> list[str]:
    rel = path.relative_to(REPO).as_posix()
    found = [f"{rel}: private key" for _ in PRIVATE_KEY.finditer(text)]
    for m in URL_PASSWORD.finditer(text):
        password = m.group(1)
        if PLACEHOLDERS.match(password) or (rel.startswith("tests/") and password in FAKE_TEST_PASSWORDS):
            continue
        found.append(f"{rel}: password in URL {m.group(0)[:40]}...")
    found += [f"{rel}: {name}" for name, rx in TOKENS.items() if rx.search(text)]
    if path.suffix in CONFIG_SUFFIXES or path.name.startswith(".env"):
        for m in ASSIGNED_PASSWORD.finditer(text):
            name, value = m.group(1), m.group(3).strip("\"'")
            if name.upper().endswith(("_FILE", "_PATH")):
                continue  # names where the secret lives, not the secret
            if not PLACEHOLDERS.match(value):
                found.append(f"{rel}: {name} has a value")
    return found


def test_scanner_catches_planted_secrets():
    """The scanner itself can fail: each kind of secret planted in a sample is found."""
    key = "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
    samples = {
        "a.py": key,
        "b.py": "URL = 'postgresql://dlperf:" + "hunter2@db/dlperf'",
        "c.md": "token AKIA" + "ABCDEFGHIJKLMNOP",
        ".env": "DLPERF_DB_PASSWORD=" + "hunter2\n",
    }
    for name, text in samples.items():
        assert secret_findings(REPO / name, text), name
    assert secret_findings(REPO / ".env", "DLPERF_DB_PASSWORD=change-me\nX_TOKEN=${X_TOKEN}\nPASSWORDS_FILE=/x\n") == []


def test_no_secret_in_the_repository(fault):
    rec = fault(
        "security",
        "no secret in the repository",
        "scan of every tracked/new file: private keys, passwords in URLs, cloud/GitHub/Slack tokens, "
        "password/secret/token settings with a value",
        "no finding (placeholders such as change-me only)",
    )
    files = repository_files()
    findings = []
    for path in files:
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        findings += secret_findings(path, data.decode("utf-8", errors="replace"))
    assert findings == [], findings
    rec.observed = f"{len(files)} files scanned, 0 findings"


IMAGES = ("dlperf/pytorch-reference:cpu",)
SECRET_ENV = re.compile(r"(PASSWORD|SECRET|TOKEN|PRIVATE|FERNET|API_KEY)", re.I)


@pytest.mark.docker
@pytest.mark.skipif(not docker_available(), reason="no Docker engine answers (make test starts one)")
def test_no_secret_in_the_images(fault):
    rec = fault(
        "security",
        "no secret in the images",
        "docker image inspect (Env, Labels) and docker history (build commands) of the images built here",
        "no secret-like variable with a value, no password in a build step",
    )
    checked = []
    for image in IMAGES:
        if not image_present(image):
            continue
        config = json.loads(docker_output("image", "inspect", image))[0]["Config"]
        env = [e for e in config.get("Env") or [] if SECRET_ENV.search(e.split("=", 1)[0])]
        assert env == [], f"{image}: {env}"
        history = docker_output("history", "--no-trunc", "--format", "{{.CreatedBy}}", image)
        findings = secret_findings(REPO / "image-history.txt", history)
        assert findings == [], f"{image}: {findings}"
        checked.append(image)
    if not checked:
        pytest.skip("no dlperf image built (make images)")
    rec.observed = (
        f"{', '.join(checked)}: no secret-like variable, no secret in {len(history.splitlines())} build steps"
    )


# ------------------------------------------------------------------ SQL binds its values

SQL_CALLS = {"text", "execute", "exec_driver_sql", "executescript", "executemany"}
SAFE_INTERPOLATIONS = {
    (
        "dlperf_core/storage/engine.py",
        "mode",
    ): "SQLite BEGIN mode: write_transaction's own constant (IMMEDIATE) or DEFERRED, never input",
}


def _constant(expr: ast.AST) -> bool:
    """A literal, an UPPER_CASE module constant, or a choice between such (``A if pg else B``)."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Name):
        return expr.id.isupper()
    if isinstance(expr, ast.IfExp):
        return _constant(expr.body) and _constant(expr.orelse)
    return False


def _call_name(node: ast.Call) -> str | None:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _quoted_names(func: ast.AST) -> set[str]:
    """Names a function assigns from identifier quoting: ``x = quote(...)`` / ``a, b = quote(..), quote(..)``."""
    names = set()
    for node in ast.walk(func):
        if not isinstance(node, ast.Assign):
            continue
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        targets = node.targets[0].elts if isinstance(node.targets[0], ast.Tuple) else [node.targets[0]]
        for target, value in zip(targets, values):
            if isinstance(target, ast.Name) and isinstance(value, ast.Call) and _call_name(value) == "quote":
                names.add(target.id)
    return names


def _constant_loop_names(tree: ast.Module) -> set[str]:
    """Loop variables over a module-level UPPER_CASE constant (e.g. ``for view in VIEWS``)."""
    return {
        node.target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.For)
        and isinstance(node.target, ast.Name)
        and isinstance(node.iter, ast.Name)
        and node.iter.id.isupper()
    }


def unbound_sql(path: Path) -> list[str]:
    """SQL built by formatting values into the text, with anything not provably an identifier/constant."""
    rel = path.relative_to(REPO).as_posix()
    tree = ast.parse(path.read_text(), filename=rel)
    constant_loops = _constant_loop_names(tree)
    problems = []
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for func in [tree, *functions]:
        quoted = _quoted_names(func) if func is not tree else set()
        body = (
            func.body
            if func is not tree
            else [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        )
        for node in (n for stmt in body for n in ast.walk(stmt)):
            if not (isinstance(node, ast.Call) and _call_name(node) in SQL_CALLS and node.args):
                continue
            sql = node.args[0]
            where = f"{rel}:{node.lineno}"
            if isinstance(sql, ast.BinOp) and isinstance(sql.op, ast.Mod):
                problems.append(f"{where}: % formatting in SQL")
            elif isinstance(sql, ast.Call) and isinstance(sql.func, ast.Attribute) and sql.func.attr == "format":
                args = [*sql.args, *(k.value for k in sql.keywords)]
                if not (_constant(sql.func.value) and all(_constant(a) for a in args)):
                    problems.append(f"{where}: str.format in SQL")
            elif isinstance(sql, ast.JoinedStr):
                for part in sql.values:
                    if not isinstance(part, ast.FormattedValue):
                        continue
                    name = part.value.id if isinstance(part.value, ast.Name) else None
                    ok = (
                        _constant(part.value)
                        or name is not None
                        and (name in quoted or name in constant_loops or (rel, name) in SAFE_INTERPOLATIONS)
                    )
                    if not ok:
                        problems.append(f"{where}: f-string puts {ast.unparse(part.value)!r} into SQL")
    return sorted(set(problems))


def test_scanner_catches_formatted_sql():
    sample = REPO / "dlperf_core" / "_sample_for_scan.py"
    src = (
        "def f(conn, name, quote):\n"
        "    q = quote(name)\n"
        '    conn.execute(text(f"GRANT SELECT ON t TO {q}"))\n'  # quoted identifier: fine
        "    conn.execute(text(f\"SELECT * FROM t WHERE name = '{name}'\"))\n"  # a value: refused
        '    conn.execute(text("SELECT * FROM t WHERE id = %s" % name))\n'
        "    conn.execute(TEMPLATE.format(night=A if q else B))\n"  # constants only: fine
        "    conn.execute(TEMPLATE.format(night=name))\n"
    )
    try:
        sample.write_text(src)
        problems = unbound_sql(sample)
    finally:
        sample.unlink()
    assert problems == [
        "dlperf_core/_sample_for_scan.py:4: f-string puts 'name' into SQL",
        "dlperf_core/_sample_for_scan.py:5: % formatting in SQL",
        "dlperf_core/_sample_for_scan.py:7: str.format in SQL",
    ]


def test_every_sql_statement_binds_its_values(fault):
    rec = fault(
        "security",
        "every SQL statement binds its parameters",
        "AST scan of dlperf_core, dlperf_cli, plugins, dags: text()/execute()/exec_driver_sql() whose SQL is "
        "an f-string, % or .format()",
        "only quoted identifiers (DDL cannot bind them) or module constants "
        "are formatted in; every value is a bound parameter or a SQLAlchemy expression",
    )
    files = [p for d in ("dlperf_core", "dlperf_cli", "plugins", "dags") for p in (REPO / d).rglob("*.py")]
    problems = [p for f in files for p in unbound_sql(f)]
    assert problems == [], problems
    rec.observed = f"{len(files)} modules scanned, 0 statements with formatted-in values"


# ------------------------------------------------------------------ containers are not privileged


def test_containers_are_never_privileged(fault):
    rec = fault(
        "security",
        "containers privileged only where needed (never)",
        "ContainerSpec fields; the Docker host config built for a GPU + InfiniBand + memlock node; "
        "a scan of the code for 'privileged'",
        "no privileged flag anywhere; InfiniBand through the /dev/infiniband device and IPC_LOCK",
    )
    docker = pytest.importorskip("docker")
    from dlperf_airflow.docker_runtime import host_config_for
    from dlperf_core.cluster.container import container_spec_for
    from dlperf_core.cluster.inventory import Node
    from dlperf_core.model import ContainerSpec

    assert not [f.name for f in dataclasses.fields(ContainerSpec) if "privileged" in f.name.lower()]
    node = Node(
        name="gpu0",
        address="10.0.0.10",
        gpus=8,
        accelerator="nvidia",
        docker_url="tcp://10.0.0.10:2376",
        network="host",
        infiniband=True,
        memlock=True,
    )
    spec = container_spec_for(node, name="c", image="i", command=("true",), environment={}, labels={})
    config = host_config_for(docker.APIClient(base_url="tcp://127.0.0.1:9", version="1.41"), spec)  # no daemon used
    assert not config.get("Privileged")
    assert config["Devices"] == [
        {"PathOnHost": "/dev/infiniband", "PathInContainer": "/dev/infiniband", "CgroupPermissions": "rwm"}
    ]
    assert config["CapAdd"] == ["IPC_LOCK"]
    code = [
        p
        for d in ("dlperf_core", "plugins", "dags", "docker")
        for p in (REPO / d).rglob("*")
        if p.is_file()
        and p.suffix in (".py", ".yaml", ".yml", "")
        and "privileged" in p.read_text(errors="ignore").lower().replace("nosuperuser", "")
    ]
    assert code == [], f"'privileged' appears in {code}"
    rec.observed = (
        f"host config for an 8-GPU InfiniBand node: Privileged unset, Devices /dev/infiniband (rwm), "
        f"CapAdd {config['CapAdd']}, GPUs by device request; 'privileged' nowhere in the code"
    )
