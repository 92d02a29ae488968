"""Suites: the declarative description of what to benchmark, validated before any GPU time is spent.

A suite is a YAML file in ``suites/``::

    name: smoke
    runtime: local                  # local | docker (the DAG's trigger form may override it)
    inventory: ../inventories/local.yaml   # relative to the suite file
    repeats: 2
    warmup_iterations: 3
    measured_iterations: 10
    env: {NCCL_SOCKET_IFNAME: eth0}  # set on every rank (a benchmark's env: over it; an inventory node's: over both)
    health: refuse                  # a GPU that fails a health check refuses its case (flag: runs it, flagged)
    benchmarks:
      - framework: pytorch_reference
        model: resnet50_v1.5
        precisions: [fp32]
        batch_size_per_device: 8     # or {fp32: 128, amp: 256}, or a list to sweep
        max_batch_search: {start: 32, step: 32, limit: 512}   # optional, see dlperf_core/measure/maxbatch.py
        topologies: [1n1g, 1n2g, 2n1g]
        compile: [false, true]       # eager and torch.compile (PyTorch workloads only); default false
      - framework: pytorch_reference # a per-node sweep: 1 node x 8 GPUs on every node of the inventory, one
        model: resnet50_v1.5         # case each, pinned to its node (key .../1n8g+node=<name>+args=...); each
        topologies: [1n8g]           # node's figure is scored against its peers' (dlperf_core/measure/node_peers.py)
        per_node: true
        image: dlperf/pytorch-reference:cpu
        extra_args: [--image-size, "64", --width, "16"]

Every field a benchmark leaves out falls back to the suite's top-level value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from dlperf_core.cluster.gpu_health import HealthPolicy
from dlperf_core.cluster.inventory import ClusterEnv
from dlperf_core.errors import ConfigError, format_validation_error
from dlperf_core.measure.maxbatch import MaxBatchSearch
from dlperf_core.model import Topology

Precision = Literal["fp32", "tf32", "amp"]
RuntimeName = Literal["local", "docker"]


BatchSizes = int | tuple[int, ...] | dict[Precision, int | tuple[int, ...]] | None


def _compile_modes(value: Any) -> Any:
    """``compile: true`` -> (True,); ``compile: [false, true]`` -> both, eager first; None stays None."""
    if value is None:
        return None
    modes = [value] if isinstance(value, bool) else value
    if not isinstance(modes, (list, tuple)) or not modes or not all(isinstance(m, bool) for m in modes):
        raise ValueError(f"compile: give true, false or a list of them, got {value!r}")
    return tuple(sorted(set(modes)))


def _batches_at(value: BatchSizes, precision: str) -> tuple[int, ...]:
    """The batch sizes a ``batch_size_per_device`` field gives at ``precision``."""
    found = {str(k): v for k, v in value.items()}.get(precision) if isinstance(value, dict) else value
    if found is None:
        return ()
    return (found,) if isinstance(found, int) else tuple(found)


class FabricBenchmark(BaseModel):
    """``fabric_benchmark:`` in a suite (``fabric_probe:``, its older name, is read too): the fabric benchmark,
    an all-reduce bus bandwidth measurement (nccl-tests') at every topology of the suite's benchmarks, launched
    like them, stored in ``fabric_probes``; the regression detector reads it to tell a slower fabric from a slower
    framework."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min_bytes: int = Field(1 << 20, ge=4, description="smallest message (1 MiB)")
    max_bytes: int = Field(1 << 30, ge=4, description="largest message (1 GiB)")
    warmup: int = Field(5, ge=0, description="untimed all-reduces per size")
    iters: int = Field(20, ge=1, description="timed all-reduces per size")
    repeats: int | None = Field(None, ge=1, le=100, description="default: the suite's repeats")
    extra_args: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _sizes(self) -> FabricBenchmark:
        if self.min_bytes > self.max_bytes:
            raise ValueError(f"min_bytes {self.min_bytes} is larger than max_bytes {self.max_bytes}")
        return self


class Benchmark(BaseModel):
    """One framework x model entry of a suite, expanded over precisions, batch sizes and topologies."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    framework: str
    model: str
    precisions: tuple[Precision, ...] | None = None
    batch_size_per_device: BatchSizes = None
    topologies: tuple[Topology, ...] | None = None
    repeats: int | None = Field(None, ge=1, le=100)
    warmup_iterations: int | None = Field(None, ge=0)
    measured_iterations: int | None = Field(None, ge=1)
    image: str | None = None
    extra_args: tuple[str, ...] = ()
    options: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="adapter options, e.g. {loss_scale: static, data_backend: syntetic}"
    )
    max_batch_search: MaxBatchSearch | None = Field(
        None, description="also find the largest batch per device that fits (dlperf_core.measure.maxbatch)"
    )
    compile: tuple[bool, ...] | None = Field(
        None, description="run under torch.compile: true, false or [false, true] (both; PyTorch workloads only)"
    )
    env: ClusterEnv = Field(
        default_factory=dict, description="variables set on every rank, over the suite's (an inventory node's win)"
    )
    per_node: bool = Field(
        False,
        description="run each topology (1 node x G GPUs only) on every node of the inventory separately, one case per "
        "node pinned to it: a per-node sweep, whose figures name a node slower than its peers",
    )

    @field_validator("compile", mode="before")
    @classmethod
    def _compile(cls, value: Any) -> Any:
        return _compile_modes(value)

    @field_validator("per_node", mode="before")
    @classmethod
    def _per_node_flag(cls, value: Any) -> Any:
        if not isinstance(value, bool):  # pydantic would take "yes", 1 or "on" for true
            raise ValueError(f"give true or false, got {value!r}")  # noqa: TRY004 - reported by field
        return value

    @property
    def search_only(self) -> bool:
        """True when the benchmark only searches the max batch size and measures no cases."""
        return self.max_batch_search is not None and self.max_batch_search.only

    @model_validator(mode="before")
    @classmethod
    def _precision_alias(cls, value: Any) -> Any:
        if isinstance(value, dict) and "precision" in value:
            value = dict(value)
            single = value.pop("precision")
            if "precisions" in value:
                raise ValueError("give 'precision' or 'precisions', not both")
            value["precisions"] = [single] if isinstance(single, str) else single
        return value

    @field_validator("batch_size_per_device")
    @classmethod
    def _positive_batches(cls, value: Any) -> Any:
        def check(v: int | tuple[int, ...]) -> None:
            for b in (v,) if isinstance(v, int) else v:
                if b < 1:
                    raise ValueError(f"batch size must be at least 1, got {b}")

        if isinstance(value, dict):
            for v in value.values():
                check(v)
        elif value is not None:
            check(value)
        return value

    def batch_sizes(self, precision: str) -> tuple[int, ...]:
        """Batch sizes per device to run at ``precision`` (empty: the suite's default applies)."""
        return _batches_at(self.batch_size_per_device, precision)


class Suite(BaseModel):
    """A whole suite file: defaults plus the list of benchmarks."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    runtime: RuntimeName = "local"
    inventory: str | None = None
    repeats: int = Field(5, ge=1, le=100)
    warmup_iterations: int = Field(5, ge=0)
    measured_iterations: int = Field(100, ge=1)
    precisions: tuple[Precision, ...] = ("fp32",)
    batch_size_per_device: BatchSizes = None
    topologies: tuple[Topology, ...] = (Topology(nodes=1, gpus_per_node=1),)
    compile: tuple[bool, ...] = Field(
        (False,), description="default for benchmarks that do not say: true, false or [false, true]"
    )
    fabric_benchmark: FabricBenchmark | None = Field(
        None,
        validation_alias=AliasChoices("fabric_benchmark", "fabric_probe"),  # fabric_probe: the older key
        description="also measure the all-reduce bus bandwidth at every topology of the benchmarks",
    )
    timeout_s: float = Field(3600.0, gt=0, description="wall-clock limit of one case run")
    watchdog_s: float | None = Field(600.0, gt=0, description="fail a run whose log shows no progress this long")
    benchmarks: tuple[Benchmark, ...] = Field(min_length=1)
    env: ClusterEnv = Field(
        default_factory=dict,
        description="variables set on every rank of every case (the cluster's settings: NCCL_*, UCX_*, ...)",
    )
    health: HealthPolicy = Field(
        "refuse",
        description="what a GPU health check that fails before a case does (dlperf_core.cluster.gpu_health): "
        "refuse the case, or flag (run it and keep the finding)",
    )
    source: str = Field("<memory>", exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _one_fabric_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "fabric_benchmark" in data and "fabric_probe" in data:
            raise ValueError("give fabric_benchmark or its older name fabric_probe, not both")
        return data

    @field_validator("compile", mode="before")
    @classmethod
    def _compile(cls, value: Any) -> Any:
        return _compile_modes(value) if value is not None else (False,)

    @model_validator(mode="after")
    def _per_node_on_one_node(self) -> Suite:
        problems = [
            f"benchmarks[{i}].per_node: a per-node sweep runs 1 node x G GPUs on each node of the inventory; "
            f"topology {topo} spans {topo.nodes} nodes"
            + ("" if bench.topologies else " (the suite's topologies, which this benchmark leaves to the suite)")
            + ": give this benchmark 1-node topologies (e.g. [1n8g]) or leave per_node out"
            for i, bench in enumerate(self.benchmarks)
            if bench.per_node
            for topo in bench.topologies or self.topologies
            if topo.nodes > 1
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def env_for(self, bench: Benchmark) -> dict[str, str]:
        """The variables a case of ``bench`` sets on every rank: the suite's, then the benchmark's over them (an
        inventory node's ``env`` goes over both when the case is planned on its nodes)."""
        return {**self.env, **bench.env}

    def compile_modes_for(self, bench: Benchmark, can_compile: bool) -> tuple[bool, ...]:
        """Eager (False) and/or compiled (True) for ``bench``: its own, else the suite's where the framework
        can compile (``can_compile``: its adapter's), else eager."""
        if bench.compile is not None:
            return bench.compile
        return self.compile if can_compile else (False,)

    def default_batch_sizes(self, precision: str) -> tuple[int, ...]:
        return _batches_at(self.batch_size_per_device, precision)

    def batch_sizes_for(self, bench: Benchmark, precision: str, seed: int | None = None) -> tuple[int, ...]:
        """Batch sizes of ``bench`` at ``precision``: its own, else the suite's, else ``seed`` (the adapter's
        default, the seed report's batch)."""
        found = bench.batch_sizes(precision) or self.default_batch_sizes(precision)
        return found or ((seed,) if seed else ())

    def warmup_for(self, bench: Benchmark, adapter_default: int | None) -> int:
        """Warm-up iterations: the benchmark's, else the suite's if it set one, else the adapter's (the seed's)."""
        return self._iterations_for(bench, "warmup_iterations", adapter_default)

    def measured_for(self, bench: Benchmark, adapter_default: int | None) -> int:
        """Measured iterations, resolved like :meth:`warmup_for`."""
        return self._iterations_for(bench, "measured_iterations", adapter_default)

    def _iterations_for(
        self, bench: Benchmark, field: Literal["warmup_iterations", "measured_iterations"], adapter_default: int | None
    ) -> int:
        own: int | None = getattr(bench, field)
        if own is not None:
            return own
        if field in self.model_fields_set or adapter_default is None:
            suites: int = getattr(self, field)
            return suites
        return adapter_default

    def inventory_path(self) -> Path | None:
        """The inventory file, resolved against the suite file's folder."""
        if self.inventory is None:
            return None
        path = Path(self.inventory)
        return path if path.is_absolute() else (Path(self.source).parent / path).resolve()


def parse_suite(raw: Any, source: str = "<memory>") -> Suite:
    """Validate already-loaded YAML data; raise ConfigError naming ``source`` and each bad field."""
    if not isinstance(raw, dict):
        raise ConfigError(source, ["expected a mapping at the top level (name, benchmarks, ...)"])
    try:
        return Suite.model_validate({**raw, "source": source})
    except ValidationError as exc:
        raise ConfigError(source, format_validation_error(exc)) from None


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(str(path), ["file not found"]) from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), [f"cannot read: {exc}"]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [f"not valid YAML: {exc}"]) from None
    return parse_suite(raw, str(path))
