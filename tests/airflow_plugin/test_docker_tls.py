"""The docker runtime on a real Docker Engine that accepts TLS only, pulling through the Docker provider's own
registry login.

Everything is made here, on loopback, and changes nothing on the host:

* a CA, a server certificate (127.0.0.1) and a client certificate (``cryptography``);
* a second ``dockerd`` listening only on ``tcp://127.0.0.1:<port>`` with ``--tlsverify``, with its own data
  root, exec root, pidfile and containerd namespace in a temporary folder, a bridge of its own (never the
  host's docker0) and no iptables rules; stopped (its bridge and folder removed) when the module ends;
* Debian's registry server (``docker-registry``, installed by ``scripts/ensure-registry.sh``) on
  ``https://127.0.0.1:<port>`` with an htpasswd (bcrypt) login; the engine takes a registry on 127.0.0.0/8
  as insecure (its own default), so no host-wide certificate folder is touched;
* a tiny image: the host's ``dash`` and the libraries it links, imported as a root filesystem (no base image
  or registry outside is needed), pushed to that registry and removed from the engine.

Then one case runs through :class:`DockerRuntime` on that engine, a node with the inventory's ``docker.tls`` (and
one whose engine connection ``dlperf_engine_<name>`` names the engine, its TLS files and its login instead):
with a registry login (the node's Airflow Docker connection, here in the ``AIRFLOW_CONN_*`` form: the
provider's ``DockerHook`` logs in itself and the image is pulled), and without one (an image the engine
holds). A wrong password is refused by the registry through the same login, and a client without TLS or
without a client certificate gets no answer from the engine. ``$REQUESTS_CA_BUNDLE`` is set throughout (as
on this machine and in dlperf's Airflow image): the engine's own CA must still verify it.
"""

from __future__ import annotations

import io
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dlperf_core.cluster.inventory import Inventory, Node
from dlperf_core.errors import ConfigError
from dlperf_core.model import CaseJob, ContainerSpec, NodeLaunch

docker = pytest.importorskip("docker")

DOCKERD = shutil.which("dockerd") or "/usr/sbin/dockerd"
REGISTRY = shutil.which("docker-registry") or "/usr/bin/docker-registry"
USER, PASSWORD = "bench", "registry-" + secrets.token_hex(8)
LABELS = {"dlperf.run_id": "tls-test", "dlperf.test": "docker-tls"}


def _missing() -> list[str]:
    missing = [] if os.geteuid() == 0 else ["root (to start a second dockerd)"]
    missing += [f"{p} (make services)" for p in (DOCKERD, REGISTRY) if not os.access(p, os.X_OK)]
    missing += [] if shutil.which("ip") else ["ip (iproute2: the engine's own bridge)"]
    return missing


# In CI nothing is skipped: a missing piece is a failure (scripts/ensure-*.sh install them).
pytestmark = [pytest.mark.docker]
if not os.environ.get("CI"):
    pytestmark.append(pytest.mark.skipif(bool(_missing()), reason=f"needs {', '.join(_missing())}"))


# --------------------------------------------------------------------------- certificates


def _make_pki(folder: Path) -> dict[str, str]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files in ``folder``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.now(UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def builder(subject: str, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        )

    def usage(*, ca: bool) -> x509.KeyUsage:
        return x509.KeyUsage(
            digital_signature=not ca,
            content_commitment=False,
            key_encipherment=False,
            data_encipherment=False,
            key_agreement=False,
            key_cert_sign=ca,
            crl_sign=ca,
            encipher_only=False,
            decipher_only=False,
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        builder("dlperf test CA", name("dlperf test CA"), ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage(ca=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    files = {}

    def write(stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None) -> None:
        (folder / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files[stem] = str(folder / f"{stem}.pem")
        if key is not None:
            pem = key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            (folder / f"{stem}-key.pem").write_bytes(pem)
            files[f"{stem}_key"] = str(folder / f"{stem}-key.pem")

    write("ca", ca, None)
    for stem, purpose, sans in (
        ("server", ExtendedKeyUsageOID.SERVER_AUTH, [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
        ("client", ExtendedKeyUsageOID.CLIENT_AUTH, []),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        leaf = (
            builder(f"dlperf test {stem}", ca.subject, key)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(usage(ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
            .add_extension(aki, critical=False)
        )
        if sans:
            leaf = leaf.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        write(stem, leaf.sign(ca_key, hashes.SHA256()), key)
    return files


# --------------------------------------------------------------------------- the engine and the registry


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, ready, proc: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if ready():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.2)
    pytest.fail(f"{what} did not answer within {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _unmount_below(root: Path) -> None:
    """Whatever the stopped engine left mounted under ``root`` (normally nothing), deepest first."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(root) or point.startswith(f"{root}/"):
            points.append(point)
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)


@dataclass(frozen=True)
class Setup:
    pki: dict[str, str]
    engine_url: str  # tcp://127.0.0.1:<port>: TLS only
    registry: str  # 127.0.0.1:<port>
    image: str  # in the registry only (removed from the engine)
    local_image: str  # on the engine only

    def tls_client(self):
        """A docker client of the test's own (not the runtime's) on the engine, with the client certificate."""
        tls = docker.tls.TLSConfig(
            client_cert=(self.pki["client"], self.pki["client_key"]), ca_cert=self.pki["ca"], verify=True
        )
        url = self.engine_url.replace("tcp://", "https://")
        client = docker.APIClient(base_url=url, tls=tls, version="1.41", timeout=60)  # Docker Engine 20.10
        client.trust_env = False  # its CA, not $REQUESTS_CA_BUNDLE's (docker/docker-py#2433; the runtime: EngineTls)
        return client


def _rootfs() -> bytes:
    """A root filesystem of the host's dash (as /bin/sh) and the libraries it links: an image without a base."""
    dash = os.path.realpath(shutil.which("dash") or "/bin/sh")
    paths = {"/bin/sh": dash}
    for line in subprocess.run(["ldd", dash], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        lib = parts[2] if "=>" in parts and len(parts) > 2 and parts[2].startswith("/") else parts[0]
        if lib.startswith("/"):
            paths[lib] = os.path.realpath(lib)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, real in paths.items():
            info = tar.gettarinfo(real, arcname=path.lstrip("/"))
            info.uid = info.gid = 0
            with Path(real).open("rb") as f:
                tar.addfile(info, f)
    return buf.getvalue()


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    if missing := _missing():
        pytest.fail(f"needs {', '.join(missing)}")
    # a short path: dockerd keeps its containerd socket under the exec root
    root = Path(tempfile.mkdtemp(prefix="dlperf-tls-", dir="/tmp"))
    procs: list[subprocess.Popen] = []
    bridges: list[str] = []
    try:
        (root / "pki").mkdir()
        pki = _make_pki(root / "pki")
        engine_port, registry_port = _free_port(), _free_port()
        engine_url, registry = f"tcp://127.0.0.1:{engine_port}", f"127.0.0.1:{registry_port}"

        # the registry: TLS (this CA's server certificate) and an htpasswd login (bcrypt, as it requires)
        import bcrypt

        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(prefix=b"2a")).decode()
        (root / "htpasswd").write_text(f"{USER}:{hashed}\n")
        config = {
            "version": 0.1,
            "log": {"level": "warn"},
            "storage": {"filesystem": {"rootdirectory": str(root / "registry")}},
            "http": {
                "addr": registry,
                "secret": secrets.token_hex(16),
                "tls": {"certificate": pki["server"], "key": pki["server_key"]},
            },
            "auth": {"htpasswd": {"realm": "dlperf-test", "path": str(root / "htpasswd")}},
        }
        (root / "registry.yml").write_text(json.dumps(config))  # JSON is YAML
        registry_log = root / "registry.log"
        with registry_log.open("wb") as out:
            procs.append(subprocess.Popen([REGISTRY, "serve", str(root / "registry.yml")], stdout=out, stderr=out))

        # the engine: TLS only, verifying client certificates; nothing of the host's engine shared
        (root / "daemon.json").write_text("{}")  # not /etc/docker/daemon.json
        bridge = f"dlptls{engine_port}"  # at most 15 characters, as Linux wants
        for ip in (["link", "add", bridge, "type", "bridge"], ["addr", "add", "10.251.77.1/24", "dev", bridge]):
            subprocess.run(["ip", *ip], check=True, capture_output=True, timeout=30)
        bridges.append(bridge)
        engine_log = root / "dockerd.log"
        command = [
            DOCKERD,
            f"--host={engine_url}",
            "--tlsverify",
            f"--tlscacert={pki['ca']}",
            f"--tlscert={pki['server']}",
            f"--tlskey={pki['server_key']}",
            f"--data-root={root / 'data'}",
            f"--exec-root={root / 'exec'}",
            f"--pidfile={root / 'dockerd.pid'}",
            f"--config-file={root / 'daemon.json'}",
            "--containerd-namespace=dlperf-tls-test",
            "--containerd-plugins-namespace=dlperf-tls-test-plugins",
            # its own bridge: `--bridge=none` would make this dockerd delete the host's docker0 (a dockerd without
            # a bridge removes the default bridge interface), breaking the host engine's bridge network
            f"--bridge={bridge}",
            "--iptables=false",
            "--ip-masq=false",
        ]
        with engine_log.open("wb") as out:
            procs.append(subprocess.Popen(command, stdout=out, stderr=out, start_new_session=True))

        import requests

        _wait(
            "the registry",
            lambda: requests.get(f"https://{registry}/v2/", verify=pki["ca"], timeout=2).status_code == 401,
            procs[0],
            registry_log,
        )
        made = Setup(pki, engine_url, registry, f"{registry}/dlperf/tls-probe:1", "dlperf/tls-local:1")
        client = made.tls_client()
        _wait("the TLS-only engine", client.ping, procs[1], engine_log)

        # the image: pushed with the login, then gone from the engine; a local-only copy under another name
        rootfs = _rootfs()
        repository, tag = made.image.rsplit(":", 1)
        client.import_image_from_data(rootfs, repository=repository, tag=tag)
        pushed = list(
            client.push(repository, tag, auth_config={"username": USER, "password": PASSWORD}, stream=True, decode=True)
        )
        assert not [p for p in pushed if "error" in p], pushed
        client.remove_image(made.image, force=True)
        # the registry wants the login: without one nothing comes (the engine, taking 127.0.0.1 as an insecure
        # registry, reports its last try, plain HTTP, so the message is not the registry's 401)
        with pytest.raises(docker.errors.APIError):
            client.pull(repository, tag)
        with pytest.raises(docker.errors.ImageNotFound):
            client.inspect_image(made.image)
        local_repository, local_tag = made.local_image.rsplit(":", 1)
        client.import_image_from_data(rootfs, repository=local_repository, tag=local_tag)
        client.close()
        yield made
    finally:
        for proc in reversed(procs):  # the engine first: it removes what it runs
            _stop(proc)
        for bridge in bridges:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True, timeout=30)
        _unmount_below(root)
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- the runtime on that engine


@pytest.fixture(autouse=True)
def _a_ca_bundle_in_the_environment(monkeypatch):
    """As on this machine and in dlperf's Airflow image: a CA bundle that does not know the engine's CA, which
    requests would put in place of the client's own (docker/docker-py#2433)."""
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", bundle)
    monkeypatch.setenv("CURL_CA_BUNDLE", bundle)


def _node(setup: Setup, name: str, **docker_fields) -> Node:
    tls = {"ca_cert": setup.pki["ca"], "client_cert": setup.pki["client"], "client_key": setup.pki["client_key"]}
    return Node(name=name, docker_url=setup.engine_url, docker={"tls": tls, **docker_fields})


def _login(monkeypatch, node: Node, registry: str, password: str) -> None:
    """The node's Airflow Docker connection: the provider's registry login (as `dlperf cluster sync` writes it)."""
    host, port = registry.rsplit(":", 1)
    conn = {"conn_type": "docker", "host": host, "port": int(port), "login": USER, "password": password}
    monkeypatch.setenv(f"AIRFLOW_CONN_{node.docker_conn_id.upper()}", json.dumps(conn))


def _case(node: Node, image: str, tmp_path: Path, label: str) -> CaseJob:
    spec = ContainerSpec(
        name=f"dlperf-tls-{label}-{secrets.token_hex(3)}",
        image=image,
        command=("sh", "-c", 'echo "case ran on $DLPERF_NODE over TLS"'),
        environment={"DLPERF_NODE": node.name},
        labels={**LABELS, "dlperf.node": node.name},
        network="host",
        hostname=None,
        gpu_ids=(),
        ipc_host=False,
    )
    launch = NodeLaunch(node, 0, spec.command)
    return CaseJob(label, (launch,), (spec,), tmp_path / label, timeout_s=60, watchdog_s=None)


def _run(node: Node, image: str, tmp_path: Path, label: str):
    from dlperf_airflow.docker_runtime import DockerRuntime

    runtime = DockerRuntime(Inventory(nodes=(node,)))
    job = _case(node, image, tmp_path, label)
    outcome = runtime.execute(job)
    return runtime, job, outcome


def test_a_case_pulls_through_the_providers_registry_login(setup, tmp_path, monkeypatch):
    node = _node(setup, "tlslogin", registry={"server": setup.registry, "username": USER})
    _login(monkeypatch, node, setup.registry, PASSWORD)

    runtime, job, outcome = _run(node, setup.image, tmp_path, "login")
    assert outcome.failure is None, outcome.failure
    assert [n.exit_code for n in outcome.nodes] == [0]
    assert Path(outcome.log_path).read_text() == "case ran on tlslogin over TLS\n"
    assert runtime.endpoint(node).conn_id == "dlperf_docker_tlslogin"
    # the image came from the registry: the engine reports its registry digest, and the result records it
    (spec,) = runtime.node_specs(job)
    assert spec.image.digest and spec.image.digest.startswith(f"{setup.registry}/dlperf/tls-probe@sha256:")
    assert runtime.cleanup(LABELS) == []  # the runtime removed its container


def test_a_case_without_a_registry_login(setup, tmp_path):
    node = _node(setup, "tlsplain")  # and no Airflow connection dlperf_docker_tlsplain
    runtime, job, outcome = _run(node, setup.local_image, tmp_path, "plain")
    assert outcome.failure is None, outcome.failure
    assert Path(outcome.log_path).read_text() == "case ran on tlsplain over TLS\n"
    assert runtime.endpoint(node).conn_id is None


def test_a_case_reaches_the_engine_its_engine_connection_names(setup, tmp_path, monkeypatch):
    """The inventory now says nothing of the engine (the local socket, no TLS, no login); the node's engine
    connection, as `dlperf cluster sync` wrote it for the TLS engine and its registry, is what the case uses, and
    the hook's Test pings that engine."""
    from dlperf_airflow.engine_hook import DockerEngineHook
    from dlperf_cli.cluster_cmd import ConnectionSpec

    synced = _node(setup, "tlsconn", registry={"server": setup.registry, "username": USER})
    spec = ConnectionSpec.engine_for_node(synced)
    engine_conn = {"conn_type": spec.conn_type, "host": spec.host, "extra": spec.extra}
    monkeypatch.setenv(f"AIRFLOW_CONN_{spec.conn_id.upper()}", json.dumps(engine_conn))
    _login(monkeypatch, synced, setup.registry, PASSWORD)
    bare = Node(name="tlsconn")
    runtime, job, outcome = _run(bare, setup.image, tmp_path, "conn")
    assert outcome.failure is None, outcome.failure
    assert Path(outcome.log_path).read_text() == "case ran on tlsconn over TLS\n"
    assert (runtime.endpoint(bare).base_url, runtime.endpoint(bare).conn_id) == (
        setup.engine_url,
        "dlperf_docker_tlsconn",
    )
    assert runtime.cleanup(LABELS) == []

    answered, said = DockerEngineHook(spec.conn_id).test_connection()
    assert answered and said.startswith("Docker Engine ") and said.endswith(" answered"), said
    # the same engine without the TLS client (plain TCP, said insecure): it does not answer, and the Test says so
    monkeypatch.setenv(f"AIRFLOW_CONN_{spec.conn_id.upper()}", json.dumps({**engine_conn, "extra": {"insecure": True}}))
    answered, said = DockerEngineHook(spec.conn_id).test_connection()
    assert not answered and "Failed to establish connection" in said, said  # the Docker provider's own words


def test_a_wrong_password_is_refused_by_the_registry(setup, tmp_path, monkeypatch):
    from dlperf_airflow.docker_runtime import endpoint_of

    node = _node(setup, "tlswrong", registry={"server": setup.registry, "username": USER})
    _login(monkeypatch, node, setup.registry, "not-the-password")
    with pytest.raises(docker.errors.APIError, match="401|unauthorized|Unauthorized"):
        endpoint_of(node).client()  # the hook's own login, through the engine, to the registry
    _, _, outcome = _run(node, setup.image, tmp_path, "wrong")
    assert outcome.failure and outcome.failure.startswith("could not start node tlswrong: APIError")

    # the inventory says the node has a registry, the connection is missing: said before any login
    monkeypatch.delenv(f"AIRFLOW_CONN_{node.docker_conn_id.upper()}")
    with pytest.raises(ConfigError, match="connection dlperf_docker_tlswrong that logs in to the registry does not"):
        endpoint_of(node).client()


def test_the_engine_answers_tls_clients_with_a_certificate_only(setup):
    import requests

    port = setup.engine_url.rsplit(":", 1)[1]
    plain = requests.get(f"http://127.0.0.1:{port}/_ping", timeout=5)  # plain HTTP: the engine speaks TLS only
    assert plain.status_code == 400 and "HTTPS server" in plain.text, (plain.status_code, plain.text)
    with pytest.raises((requests.exceptions.SSLError, requests.exceptions.ConnectionError)):  # no client cert
        requests.get(f"https://127.0.0.1:{port}/_ping", verify=setup.pki["ca"], timeout=5)
    client = setup.tls_client()
    try:
        assert client.ping()
    finally:
        client.close()
