"""Per-case-run SSH keys for mpirun frameworks: made in memory, put into the case's containers, gone with them.

One client key (authorized on every node of the case) and one host key (pinned in known_hosts with a
wildcard, so host key checking stays strict without trust-on-first-use). Nothing is written on the
controller, stored in XCom or baked into an image. When each node's task starts its own container (node
routing, :mod:`dlperf_core.run.runtime.gang`), every node makes its own keys and only the public halves travel.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@dataclass(frozen=True)
class ContainerFile:
    """A file the runtime puts into a container before it starts."""

    path: str  # absolute path in the container
    content: bytes
    mode: int = 0o600

    def __repr__(self) -> str:  # never print key material
        return f"ContainerFile({self.path!r}, {len(self.content)} bytes, mode={oct(self.mode)})"


def _keypair(comment: str) -> tuple[bytes, bytes]:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public + f" {comment}\n".encode()


@dataclass(frozen=True)
class NodeKeys:
    """One node's own keys for a case run: a client key (to reach its peers) and a host key (its sshd)."""

    client_private: bytes
    client_public: bytes
    host_private: bytes
    host_public: bytes

    def __repr__(self) -> str:  # never print key material
        return "NodeKeys(...)"


def node_keys(comment: str) -> NodeKeys:
    client_private, client_public = _keypair(comment)
    host_private, host_public = _keypair(f"{comment}-host")
    return NodeKeys(client_private, client_public, host_private, host_public)


def mesh_files(
    ssh_dir: str, mine: NodeKeys, client_publics: list[bytes], host_publics: list[bytes]
) -> tuple[ContainerFile, ...]:
    """A container's ssh files: its own private keys, every node's client key authorized, every node's host
    key pinned in known_hosts with a wildcard (strict host key checking, no trust-on-first-use)."""
    known = b"".join(b"* " + b" ".join(pub.split()[:2]) + b"\n" for pub in host_publics)
    return (
        ContainerFile(f"{ssh_dir}/id_ed25519", mine.client_private),
        ContainerFile(f"{ssh_dir}/authorized_keys", b"".join(client_publics), 0o644),
        ContainerFile(f"{ssh_dir}/host_ed25519", mine.host_private),
        ContainerFile(f"{ssh_dir}/known_hosts", known, 0o644),
    )


def case_ssh_files(ssh_dir: str, comment: str = "dlperf-case") -> tuple[ContainerFile, ...]:
    """Fresh keys for one case run, as the files every container of the case gets under ``ssh_dir``."""
    keys = node_keys(comment)
    return mesh_files(ssh_dir, keys, [keys.client_public], [keys.host_public])
