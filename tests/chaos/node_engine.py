"""A stand-in node's own Docker Engine: a second ``dockerd`` on this machine, apart from the one that serves the
deployment (as a real GPU node's engine is), on a Unix socket of its own, with its own data root, exec root,
containerd namespace and bridge. Its data root stays in /tmp between runs, so that the image it runs is loaded
into it (``docker save | docker load``, a minute or two) only once per machine."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/tmp/dlperf-node-engine")  # short: dockerd keeps its containerd socket under the exec root
BRIDGE = "dlpnode0"
BRIDGE_ADDRESS = "10.251.78.1/24"
DOCKERD = shutil.which("dockerd") or "/usr/sbin/dockerd"


@dataclass
class NodeEngine:
    root: Path = ROOT
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"unix://{self.root / 'docker.sock'}"

    def docker(self, *args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        """The docker CLI on this engine."""
        return subprocess.run(["docker", "-H", self.url, *args], capture_output=True, text=True, timeout=timeout, **kw)

    def answers(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.docker("version", timeout=10).returncode == 0

    def start(self, timeout_s: float = 60) -> None:
        """Start the engine (again) and wait until it answers."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "daemon.json").write_text("{}")  # not /etc/docker/daemon.json
        if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode != 0:
            for ip in (["link", "add", BRIDGE, "type", "bridge"], ["addr", "add", BRIDGE_ADDRESS, "dev", BRIDGE]):
                subprocess.run(["ip", *ip], check=True, capture_output=True, timeout=30)
        command = [
            DOCKERD,
            f"--host={self.url}",
            f"--data-root={self.root / 'data'}",
            f"--exec-root={self.root / 'exec'}",
            f"--pidfile={self.root / 'dockerd.pid'}",
            f"--config-file={self.root / 'daemon.json'}",
            "--containerd-namespace=dlperf-node-engine",
            "--containerd-plugins-namespace=dlperf-node-engine-plugins",
            f"--bridge={BRIDGE}",  # not --bridge=none: that would delete the host engine's docker0
            "--iptables=false",
            "--ip-masq=false",
        ]
        with (self.root / "dockerd.log").open("ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=out, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not self.answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the node's engine did not start:\n{self.log()}")
            time.sleep(0.3)

    def stop(self) -> None:
        """Stop the engine as a node's going down does (SIGTERM: dockerd stops its containers and exits)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def log(self) -> str:
        path = self.root / "dockerd.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def ensure_image(self, image: str) -> None:
        """``image`` from the host's engine, loaded once (it stays in the data root)."""
        if self.docker("image", "inspect", image).returncode == 0:
            return
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = self.docker("load", timeout=900, stdin=save.stdout)
        save.wait(timeout=60)
        if load.returncode != 0 or save.returncode != 0:
            raise RuntimeError(f"could not load {image} into the node's engine: {load.stderr[-2000:]}")

    def containers(self, label: str) -> list[str]:
        out = self.docker("ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}", timeout=30)
        return out.stdout.split() if out.returncode == 0 else [f"(engine not answering: {out.stderr.strip()})"]

    def close(self) -> None:
        """Stop the engine and drop its bridge; the data root (and its image) stays for the next run."""
        self.stop()
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, timeout=30)
