"""Per-case-run SSH keys for mpirun frameworks: made in memory, put into the case's containers, gone with them.

One client key (authorized on every node of the case) and one host key (pinned in known_hosts with a
wildcard, so host key checking stays strict without trust-on-first-use). Nothing is written on the
controller, stored in XCom or baked into an image.
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


def case_ssh_files(ssh_dir: str, comment: str = "dlperf-case") -> tuple[ContainerFile, ...]:
    """Fresh keys for one case run, as the files every container of the case gets under ``ssh_dir``."""
    client_private, client_public = _keypair(comment)
    host_private, host_public = _keypair(f"{comment}-host")
    host_type, host_key = host_public.split()[:2]
    return (
        ContainerFile(f"{ssh_dir}/id_ed25519", client_private),
        ContainerFile(f"{ssh_dir}/authorized_keys", client_public, 0o644),
        ContainerFile(f"{ssh_dir}/host_ed25519", host_private),
        ContainerFile(f"{ssh_dir}/known_hosts", b"* " + host_type + b" " + host_key + b"\n", 0o644),
    )
