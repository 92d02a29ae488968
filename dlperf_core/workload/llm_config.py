"""The shapes and the arithmetic of dlperf's Llama-style decoder (``llm.py``), without torch: the sizes a suite
names, the parameter count and the FLOPs per token that the logs state and MFU uses. See ``llm.py``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LlmConfig:
    """Shape of the model: vocabulary, width, depth, heads, SwiGLU hidden size, sequence length."""

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    ffn_hidden: int
    seq_len: int

    def __post_init__(self) -> None:
        if min(self.vocab_size, self.d_model, self.n_layers, self.n_heads, self.ffn_hidden, self.seq_len) < 1:
            raise ValueError(f"every size must be >= 1: {self}")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"d_model {self.d_model} must split into {self.n_heads} heads of an even size")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


#: The sizes a suite names (``model: llm_tiny`` ... ``llm_1b``): tiny trains in seconds on a CPU; 1b is about
#: 0.94 billion parameters, the size measured on one H100 in ../shared/reallogs/h100_reference/PROVENANCE.md.
SIZES: dict[str, LlmConfig] = {
    "tiny": LlmConfig(vocab_size=512, d_model=64, n_layers=2, n_heads=4, ffn_hidden=176, seq_len=64),
    "125m": LlmConfig(vocab_size=32000, d_model=768, n_layers=12, n_heads=12, ffn_hidden=2048, seq_len=1024),
    "1b": LlmConfig(vocab_size=32000, d_model=2048, n_layers=16, n_heads=16, ffn_hidden=5504, seq_len=2048),
}


def num_parameters(cfg: LlmConfig, *, embedding: bool = True) -> int:
    """Parameters of the model (``embedding=False``: without the token embedding table)."""
    d = cfg.d_model
    per_layer = 4 * d * d + 3 * d * cfg.ffn_hidden + 2 * d  # q, k, v, o; w1, w3, w2; two RMSNorm weights
    head = d * cfg.vocab_size + d  # output projection and the final RMSNorm
    return cfg.n_layers * per_layer + head + (cfg.vocab_size * d if embedding else 0)


def flops_per_token(cfg: LlmConfig) -> int:
    """Training FLOPs of one token: 6 x (parameters that multiply) + 12 x layers x d_model x seq_len."""
    return 6 * num_parameters(cfg, embedding=False) + 12 * cfg.n_layers * cfg.d_model * cfg.seq_len
