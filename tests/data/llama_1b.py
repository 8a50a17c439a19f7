"""A Llama-shaped model of about 10⁹ parameters (vocab 32000, width 2048, 18 layers, SwiGLU,
tied embedding, RMSNorm as a custom Function; llama.py), float32, random weights: 4 GB at
import. GRADSCOPE_LLAMA_LAYERS builds a shallower one of the same width (benchmarks/models.py
measures bytes per parameter on it); GRADSCOPE_LLAMA_OFF=1 plants the RMSNorm bug."""

import os

import torch
from llama import Config, Llama, RMSNormFunction, RMSNormOff, lm_loss

torch.manual_seed(0)
model = Llama(Config.one_b(int(os.environ.get("GRADSCOPE_LLAMA_LAYERS", "18"))),
              RMSNormOff if os.environ.get("GRADSCOPE_LLAMA_OFF") == "1" else RMSNormFunction)


def loss(tokens: torch.Tensor) -> torch.Tensor:
    return lm_loss(model, tokens)
