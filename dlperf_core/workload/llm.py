"""A decoder-only transformer in the Llama style, written by hand (torch only): RMSNorm, rotary position
embeddings, SwiGLU feed-forward, causal attention through ``scaled_dot_product_attention``, an untied output
head. Sizes from ``tiny`` (CPU, CI) to ``1b`` (one GPU).

FLOPs per token (the figure the logs state and MFU uses), for a sequence of ``seq_len`` tokens:

    6 * N  +  12 * n_layers * d_model * seq_len

* ``N`` = the parameters that multiply: every weight except the token embedding table (a lookup, no FLOPs),
  the untied output head included. 6 = 2 FLOPs per multiply-accumulate x 3 (forward, and backward for the
  activations and the weights).
* the attention term: per layer and token, QK^T and the weighted sum of V are 2 x seq_len x d_model
  multiply-accumulates forward (full, not causal-halved: what Kaplan et al. and the PaLM paper count), so 2 x
  2 x 3 x seq_len x d_model = 12 x seq_len x d_model FLOPs per layer in training.

``num_parameters`` and ``flops_per_token`` are analytic (``llm_config.py``, no torch); tests/core/workload/test_llm.py
checks the count against the built model's parameters.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING or __package__ not in (None, ""):  # a module of dlperf_core.workload (as mypy reads it)
    from .llm_config import SIZES, LlmConfig, flops_per_token, num_parameters
else:  # imported from a script next to it (the workload folder copied alone)
    sys.path.insert(0, str(Path(__file__).absolute().parent))
    from llm_config import SIZES, LlmConfig, flops_per_token, num_parameters

__all__ = ["SIZES", "Llm", "LlmConfig", "flops_per_token", "num_parameters"]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (x.float() * scale).type_as(x) * self.weight


def rotary_tables(head_dim: int, seq_len: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, (seq_len, head_dim / 2)."""
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of ``x`` (batch, heads, seq, head_dim) by the position's angles."""
    x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    return out.type_as(x)


class Attention(nn.Module):
    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.q = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.k = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.v = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.o = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = (proj(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2) for proj in (self.q, self.k, self.v))
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        result: torch.Tensor = self.o(out.transpose(1, 2).reshape(b, s, d))  # modules' calls are untyped (Any)
        return result


class SwiGLU(nn.Module):
    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=False)
        self.w3 = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=False)
        self.w2 = nn.Linear(cfg.ffn_hidden, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self.w2(F.silu(self.w1(x)) * self.w3(x))
        return result


class Block(nn.Module):
    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.attention_norm, self.attention = RMSNorm(cfg.d_model), Attention(cfg)
        self.ffn_norm, self.ffn = RMSNorm(cfg.d_model), SwiGLU(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        result: torch.Tensor = x + self.ffn(self.ffn_norm(x))
        return result


class Llm(nn.Module):
    """Token ids (batch, seq) -> next-token logits (batch, seq, vocab)."""

    cos: torch.Tensor  # the rotary tables: buffers (register_buffer), not attributes
    sin: torch.Tensor

    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        cos, sin = rotary_tables(cfg.head_dim, cfg.seq_len)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for name, p in self.named_parameters():
            if p.ndim == 2:  # GPT-2 style init; the residual outputs scaled by depth
                std = 0.02 / math.sqrt(2 * cfg.n_layers) if name.endswith(("o.weight", "w2.weight")) else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        s = tokens.shape[1]
        x = self.embed(tokens)
        cos, sin = self.cos[:s], self.sin[:s]
        for block in self.blocks:
            x = block(x, cos, sin)
        logits: torch.Tensor = self.head(self.norm(x))
        return logits
