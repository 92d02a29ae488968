"""A clean bill of health per GPU before a case (issue 36): the checks over what NVML says of each of its GPUs, and
what a case run does with their findings.

Before a case starts, each of **its** GPUs (the inventory's first ``gpus_per_node`` of each node,
:meth:`~dlperf_core.cluster.inventory.Node.case_gpu_ids`) is read through NVML
(:mod:`dlperf_core.cluster.nvml_readings`) and checked (:data:`CHECKS`, in this order):

========================  ===============================================  ========  ==========================
check                     what NVML says                                   limit     a failure
========================  ===============================================  ========  ==========================
gpu                       the GPU is there, by the inventory's index/UUID  found     refuses
compute_processes         processes with a compute context on it           0         refuses
memory_used               memory in use (MiB)                              < 1024    refuses
persistence_mode          persistence mode                                 on        refuses
ecc_uncorrected           uncorrected ECC errors since the driver loaded   0         refuses
row_remap_pending         a row remap waiting for a reset                  none      refuses
row_remap_failure         a row remap that failed (no spare row)           none      refuses
retired_pages_pending     a page waiting to be retired at the next reset   none      refuses
power_limit               power limit against its default                  default   is **flagged**, never refuses
pcie_link_width           PCIe link width against its maximum              maximum   refuses
pcie_link_gen_under_load  PCIe link generation in the measured window      maximum   refuses (after the run)
========================  ===============================================  ========  ==========================

A reading NVML answers ``NotSupported`` for (no ECC on a consumer GPU, no row remapping before Ampere, no page
retirement after it) is a finding of its own, ``not supported``: neither a pass nor a failure, it changes nothing.
Another NVML error on a reading is a flag (the check could not be made), and so is a node where NVML cannot start
at all (``nvml``: no driver library there). An idle GPU downshifts its PCIe link, so its generation is judged
under load: the highest generation the sampler saw (:mod:`dlperf_core.cluster.gpu_sampling`) in the measured window
must be the maximum NVML says this GPU and this system allow, else the finding comes after the case ran and makes
its result failed (``refuse``) or flagged (``flag``).

The suite's ``health`` setting decides what a refusing finding does: ``refuse`` (the default) fails the case before
any training, with a reason naming the node, the GPU, the check and its value
(``gpu health: node0 GPU 1 (GPU-3f0c...): compute_processes 2, wanted 0``); ``flag`` runs it and keeps the finding.
Either way every finding is stored with the result (``gpu_health_snapshots``, migration 0013) and shown in the
reports and on the results page. On nodes without GPUs (``accelerator: cpu``) there is nothing to read: the
snapshot says ``no_gpus`` and the case runs.

Everything here but :func:`read_here` and :func:`main` is pure: functions of typed readings. Where the readings are
taken is the runtime's business (:mod:`dlperf_core.cluster.gpu_health_probe`: in-process on the worker for the local
runtime, a one-shot container of the case's image on the node for the docker runtime). On a node, by hand::

    python -m dlperf_core.cluster.gpu_health --gpus 0,1          # the findings, one line each
    python -m dlperf_core.cluster.gpu_health --gpus 0,1 --json   # the readings, as the gate takes them
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import TypeAdapter, ValidationError

from dlperf_core.cluster.clock_events import GpuWindow
from dlperf_core.cluster.inventory import Node
from dlperf_core.cluster.nvml_readings import GpuReadings, NodeReadings, read_node, to_json

HealthPolicy = Literal["refuse", "flag"]
HEALTH_POLICIES: tuple[str, ...] = ("refuse", "flag")
"""What a refusing finding does to its case (the suite's ``health``): fail it before training, or run it flagged."""

Outcome = Literal["refuse", "flag", "not supported"]
"""What a finding is: a failed check that refuses the case (under ``health: refuse``), one that only flags it, or a
reading NVML does not support on this GPU (neither)."""

VERDICTS: tuple[str, ...] = ("ok", "flagged", "refused", "no_gpus")
"""A case's health in one word (``gpu_health_snapshots.verdict``): no finding but ``not supported`` ones; some
finding flags it (or refuses under ``health: flag``); a finding refused it; no GPU to check."""

IDLE_MEMORY_MB = 1024.0
"""Memory in use (MiB) at or above which a GPU is not idle. NVML's memory information counts what the driver
reserves on a GPU as used (NVML's v2 memory struct reports it apart), so an idle GPU is not at 0; a process with a
CUDA context on the GPU holds hundreds of MiB and a training job GiBs. 1 GiB lies between; not measured on a GPU
here (none was lent): a site whose idle GPUs show more raises it."""

POWER_TOLERANCE_W = 0.5
"""A power limit this close to its default (W) is the default (NVML reports milliwatts)."""


@dataclass(frozen=True)
class CheckSpec:
    """One check: its name, what NVML says, its limit and what a failure does (the table above; the docs quote it)."""

    name: str
    reads: str
    limit: str
    on_failure: Literal["refuse", "flag"]


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("gpu", "the GPU is there, by the inventory's index or UUID", "found", "refuse"),
    CheckSpec("nvml", "NVML starts on the node (the driver's library)", "starts", "flag"),
    CheckSpec("compute_processes", "processes with a compute context on the GPU", "0", "refuse"),
    CheckSpec("memory_used", "memory in use", f"< {IDLE_MEMORY_MB:g} MiB", "refuse"),
    CheckSpec("persistence_mode", "persistence mode", "on", "refuse"),
    CheckSpec("ecc_uncorrected", "uncorrected ECC errors since the driver loaded (volatile counter)", "0", "refuse"),
    CheckSpec("row_remap_pending", "a row remap waiting for the next GPU reset", "none", "refuse"),
    CheckSpec("row_remap_failure", "a row remap that failed (no spare row left)", "none", "refuse"),
    CheckSpec("retired_pages_pending", "a page waiting to be retired at the next GPU reset", "none", "refuse"),
    CheckSpec("power_limit", "the power limit against its default", "the default", "flag"),
    CheckSpec("pcie_link_width", "the PCIe link width against its maximum", "the maximum", "refuse"),
    CheckSpec(
        "pcie_link_gen_under_load",
        "the highest PCIe link generation sampled in the measured window against its maximum",
        "the maximum",
        "refuse",
    ),
)
"""Every check, in the order the findings come."""


@dataclass(frozen=True)
class Finding:
    """A check that did not pass: where (node, the GPU as the inventory names it, its UUID), which check, the
    value read and the limit, and what it does."""

    node: str
    gpu: str  # "" for a finding about the node (nvml)
    uuid: str | None
    check: str
    value: str
    limit: str
    outcome: Outcome

    @property
    def where(self) -> str:
        if not self.gpu:
            return self.node
        uuid = f" ({self.uuid})" if self.uuid and self.uuid != self.gpu else ""
        return f"{self.node} GPU {self.gpu}{uuid}"

    def line(self) -> str:
        """``node0 GPU 1 (GPU-3f0c...): compute_processes 2, wanted 0``; a flag or a reading NVML does not support
        says so in brackets."""
        if self.outcome == "not supported":
            return f"{self.where}: {self.check} not supported"
        mark = "" if self.outcome == "refuse" else f" [{self.outcome}]"
        return f"{self.where}: {self.check} {self.value}, wanted {self.limit}{mark}"


def _limit(check: str) -> str:
    return next(c.limit for c in CHECKS if c.name == check)


def _unread(node: str, r: GpuReadings, check: str, readings: Sequence[str]) -> Finding:
    """The finding of a check whose reading is missing: NVML does not support it, or could not read it."""
    for name in readings:
        if name in r.unsupported:
            return Finding(node, r.gpu, r.uuid, check, "not supported", _limit(check), "not supported")
    why = next((r.errors[n] for n in readings if n in r.errors), "no answer")
    return Finding(node, r.gpu, r.uuid, check, f"unreadable ({why})", _limit(check), "flag")


def check_gpu(node: str, r: GpuReadings) -> list[Finding]:
    """The findings of one GPU's readings taken before a case (every check but the one under load); [] when it is
    healthy."""
    if "handle" in r.errors:
        return [Finding(node, r.gpu, None, "gpu", f"not found by NVML ({r.errors['handle']})", "found", "refuse")]
    out: list[Finding] = []

    def fail(check: str, value: str, outcome: Outcome = "refuse", limit: str | None = None) -> None:
        out.append(Finding(node, r.gpu, r.uuid, check, value, limit or _limit(check), outcome))

    def known(check: str, value: object, *readings: str) -> bool:
        if value is None:
            out.append(_unread(node, r, check, readings or (check,)))
            return False
        return True

    if known("compute_processes", r.compute_processes) and r.compute_processes:
        fail("compute_processes", str(r.compute_processes))
    if known("memory_used", r.memory_used_mb, "memory") and (r.memory_used_mb or 0) >= IDLE_MEMORY_MB:
        fail("memory_used", f"{r.memory_used_mb:.0f} MiB")
    if known("persistence_mode", r.persistence_mode) and not r.persistence_mode:
        fail("persistence_mode", "off")
    if known("ecc_uncorrected", r.ecc_uncorrected_volatile) and r.ecc_uncorrected_volatile:
        fail("ecc_uncorrected", str(r.ecc_uncorrected_volatile))
    if known("row_remap_pending", r.row_remap_pending, "row_remap") and r.row_remap_pending:
        fail("row_remap_pending", "pending")
    if known("row_remap_failure", r.row_remap_failure, "row_remap") and r.row_remap_failure:
        fail("row_remap_failure", "failed")
    if known("retired_pages_pending", r.retired_pages_pending) and r.retired_pages_pending:
        fail("retired_pages_pending", "pending")
    if (
        known("power_limit", r.power_limit_w, "power_limit")
        and known("power_limit", r.power_default_limit_w, "power_default_limit")
        and abs((r.power_limit_w or 0) - (r.power_default_limit_w or 0)) > POWER_TOLERANCE_W
    ):
        fail("power_limit", f"{r.power_limit_w:g} W", "flag", f"the default {r.power_default_limit_w:g} W")
    if (
        known("pcie_link_width", r.pcie_link_width)
        and known("pcie_link_width", r.pcie_link_width_max, "pcie_link_width_max")
        and (r.pcie_link_width or 0) < (r.pcie_link_width_max or 0)
    ):
        fail("pcie_link_width", f"x{r.pcie_link_width}", limit=f"x{r.pcie_link_width_max}")
    return _once(out)


def _once(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` with each (check, outcome) of a GPU once (a check of two readings NVML supports neither of)."""
    seen: dict[tuple[str, str, str, str], Finding] = {}
    for f in findings:
        seen.setdefault((f.node, f.gpu, f.check, f.outcome), f)
    return list(seen.values())


def check_node(readings: NodeReadings) -> list[Finding]:
    """The findings of one node's readings: NVML that did not start, else each GPU's."""
    if readings.error is not None:
        return [Finding(readings.node, "", None, "nvml", f"unreadable ({readings.error})", "starts", "flag")]
    return [f for gpu in readings.gpus for f in check_gpu(readings.node, gpu)]


def check_under_load(nodes: Sequence[NodeReadings], windows: Iterable[GpuWindow]) -> list[Finding]:
    """``pcie_link_gen_under_load`` of every GPU sampled in the measured window (``windows``: GPUs by the index they
    were sampled by, which is NVML's index where the readings were taken): its highest generation there against the
    maximum NVML read before the case. A GPU without a generation in its samples (an nvidia-smi without the field)
    or without a maximum is ``not supported``."""
    by_index = {(n.node, g.index): g for n in nodes for g in n.gpus if g.index is not None}
    out = []
    for w in windows:
        g = by_index.get((w.node, w.gpu))
        if g is None:
            continue
        if w.pcie_gen_max is None or g.pcie_link_gen_max is None:
            limit = "the maximum" if g.pcie_link_gen_max is None else f"Gen{g.pcie_link_gen_max}"
            out.append(
                Finding(w.node, g.gpu, g.uuid, "pcie_link_gen_under_load", "not sampled", limit, "not supported")
            )
        elif w.pcie_gen_max < g.pcie_link_gen_max:
            out.append(
                Finding(
                    w.node,
                    g.gpu,
                    g.uuid,
                    "pcie_link_gen_under_load",
                    f"Gen{w.pcie_gen_max}",
                    f"Gen{g.pcie_link_gen_max}",
                    "refuse",
                )
            )
    return out


@dataclass(frozen=True)
class GpuHealth:
    """The health snapshot of one case run: every node's readings, taken just before it started, the findings, and
    the policy they were judged under (the suite's ``health``)."""

    policy: HealthPolicy = "refuse"
    nodes: tuple[NodeReadings, ...] = ()
    findings: tuple[Finding, ...] = ()

    @property
    def gpus(self) -> int:
        """How many GPUs were read."""
        return sum(len(n.gpus) for n in self.nodes)

    @property
    def checked_at(self) -> float | None:
        """When the first node was read (unix time), None when none was."""
        times = [n.taken_at for n in self.nodes if n.taken_at is not None]
        return min(times) if times else None

    @property
    def failed(self) -> tuple[Finding, ...]:
        """The findings that refuse or flag (not the readings NVML does not support)."""
        return tuple(f for f in self.findings if f.outcome != "not supported")

    @property
    def verdict(self) -> str:
        """One of :data:`VERDICTS`."""
        if self.policy == "refuse" and any(f.outcome == "refuse" for f in self.findings):
            return "refused"
        if self.failed:
            return "flagged"
        if not self.gpus and not any(n.error for n in self.nodes):
            return "no_gpus"
        return "ok"

    @property
    def refusal(self) -> str | None:
        """Why the case is refused (``gpu health: <finding>; ...``, the refusing findings), None when it is not."""
        if self.verdict != "refused":
            return None
        return "gpu health: " + "; ".join(f.line() for f in self.findings if f.outcome == "refuse")

    @property
    def summary(self) -> str | None:
        """Every finding in one line (``; ``-joined), None when there is none."""
        return "; ".join(f.line() for f in self.findings) or None

    def with_findings(self, more: Iterable[Finding]) -> GpuHealth:
        return replace(self, findings=(*self.findings, *more))


def merged(parts: Iterable[GpuHealth], policy: HealthPolicy = "refuse") -> GpuHealth:
    """One case's snapshot from its nodes' (node routing: each node's task read its own node)."""
    parts = list(parts)
    return GpuHealth(
        parts[0].policy if parts else policy,
        tuple(n for p in parts for n in p.nodes),
        tuple(f for p in parts for f in p.findings),
    )


def judge(nodes: Sequence[NodeReadings], policy: HealthPolicy = "refuse") -> GpuHealth:
    """The snapshot of readings taken before a case (pure)."""
    return GpuHealth(policy, tuple(nodes), tuple(f for n in nodes for f in check_node(n)))


ReadGpus = Callable[[Node, tuple[str, ...]], NodeReadings]
"""Reads some GPUs of a node (the inventory's ids) where NVML is: (node, GPU ids) -> its readings."""


def case_gpus(node: Node, gpus_per_node: int) -> tuple[str, ...]:
    """The GPUs a case with ``gpus_per_node`` devices per node has on ``node``; none on a CPU node."""
    return node.case_gpu_ids(gpus_per_node) if node.accelerator == "nvidia" else ()


def read_case_node(node: Node, gpus: tuple[str, ...], read: ReadGpus) -> NodeReadings:
    """``node``'s readings of ``gpus`` by ``read``; a node without them has none (``no_gpus``), and a reader that
    raised is the node's error (never raises)."""
    if not gpus:
        return NodeReadings(node.name, taken_at=time.time())
    try:
        got = read(node, gpus)
    except Exception as exc:  # noqa: BLE001 - a probe that cannot run flags the case (nvml), it does not stop the run
        return NodeReadings(node.name, error=f"probe failed: {type(exc).__name__}: {exc}", taken_at=time.time())
    return replace(got, node=node.name)


def gate(nodes: Sequence[Node], gpus_per_node: int, read: ReadGpus, policy: HealthPolicy = "refuse") -> GpuHealth:
    """The health of a case's GPUs on ``nodes`` (each node's first ``gpus_per_node``), read by ``read``, judged."""
    return judge([read_case_node(n, case_gpus(n, gpus_per_node), read) for n in nodes], policy)


_NODE_READINGS: TypeAdapter[NodeReadings] = TypeAdapter(NodeReadings)


def readings_of_output(node: str, output: str) -> NodeReadings:
    """The readings a probe printed (its last line that is JSON: :func:`~dlperf_core.cluster.nvml_readings.main`);
    the node's error when it printed none."""
    for line in reversed(output.strip().splitlines()):
        try:
            return replace(_NODE_READINGS.validate_python(json.loads(line)), node=node)
        except (ValueError, ValidationError):
            continue
    last = output.strip().splitlines()[-1][:300] if output.strip() else "no output"
    return NodeReadings(node, error=f"the probe printed no readings: {last}", taken_at=time.time())


def named_as_case(readings: NodeReadings, gpus: tuple[str, ...]) -> NodeReadings:
    """Readings taken in a container (its GPUs numbered from 0) named by the inventory's ids of the case's GPUs
    ``gpus``: by UUID where the inventory names UUIDs, else in order, the container's index order being the host's
    (both count in PCI bus order). Readings of as many GPUs as ``gpus`` are expected; else they keep their names."""
    if len(readings.gpus) != len(gpus):
        return readings
    if all(not g.isdigit() for g in gpus):
        by_uuid = {g.uuid: g for g in readings.gpus}
        if all(g in by_uuid for g in gpus):
            return replace(readings, gpus=tuple(replace(by_uuid[g], gpu=g) for g in gpus))
        return readings
    ordered = sorted(readings.gpus, key=lambda g: (g.index is None, g.index or 0))
    names = sorted(gpus, key=lambda g: (not g.isdigit(), int(g) if g.isdigit() else 0))
    return replace(readings, gpus=tuple(replace(g, gpu=name) for g, name in zip(ordered, names)))


def read_here(node: Node, gpus: tuple[str, ...]) -> NodeReadings:
    """``gpus`` of this machine through nvidia-ml-py in this process (the local runtime: every node is this
    machine), named ``node``'s. Without nvidia-ml-py, or NVML, the node's error says so."""
    return read_named(node.name, gpus)


def read_named(name: str, gpus: tuple[str, ...]) -> NodeReadings:
    """:func:`read_here` for the node called ``name``."""
    try:
        import pynvml  # nvidia-ml-py: imported where it reads, so the core imports without it
    except ImportError as exc:
        return NodeReadings(name, error=f"nvidia-ml-py is not installed ({exc})", taken_at=time.time())
    return read_node(pynvml, gpus, name)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dlperf_core.cluster.gpu_health [--gpus 0,1] [--json] [--policy refuse|flag]``: this machine's
    GPUs through NVML: the readings as JSON, or the findings; exit status 1 when the case would be refused."""
    parser = argparse.ArgumentParser(
        prog="python -m dlperf_core.cluster.gpu_health", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--gpus", default="", help="GPU indexes or UUIDs, comma-separated (default: every GPU)")
    parser.add_argument("--node", default="localhost", help="the node's name in what is printed")
    parser.add_argument("--json", action="store_true", help="print the readings as JSON (what the gate takes)")
    parser.add_argument("--policy", choices=HEALTH_POLICIES, default="refuse")
    args = parser.parse_args(argv)
    gpus = tuple(g.strip() for g in args.gpus.split(",") if g.strip())
    readings = read_named(args.node, gpus)
    if args.json:
        print(to_json(readings))
        return 0
    health = judge([readings], args.policy)
    print(f"{args.node}: {health.verdict} ({health.gpus} GPUs read)")
    for finding in health.findings:
        print(f"  {finding.line()}")
    return 1 if health.verdict == "refused" else 0


if __name__ == "__main__":
    sys.exit(main())
