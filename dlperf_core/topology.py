"""Topologies: nodes x devices per node, written ``{nodes}n{gpus}g`` (1n1g ... 4n8g) as in the seeds' folders."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

_TOPOLOGY = re.compile(r"^(\d+)n(\d+)g$")


class Topology(BaseModel):
    """Nodes x devices per node, written ``{nodes}n{gpus}g`` as in the seeds' folders (1n1g ... 4n8g)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    nodes: int = Field(ge=1, le=1024)
    gpus_per_node: int = Field(ge=1, le=64)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            match = _TOPOLOGY.match(value.strip())
            if not match:
                raise ValueError(f"invalid topology {value!r}: expected like '1n8g' (nodes 'n' gpus-per-node 'g')")
            return {"nodes": int(match.group(1)), "gpus_per_node": int(match.group(2))}
        return value

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def __str__(self) -> str:
        return f"{self.nodes}n{self.gpus_per_node}g"
