"""A Llama-shaped model of about 10⁹ parameters (vocab 32000, width 2048, 18 layers, SwiGLU,
tied embedding, RMSNorm as a custom Function; llama.py), float32, random weights: 4 GB at
import. GRADSCOPE_LLAMA_LAYERS builds a shallower one of the same width (benchmarks/models.py
measures bytes per parameter on it); GRADSCOPE_LLAMA_OFF=1 plants the RMSNorm bug (the
weight's gradient from the unnormalised input), GRADSCOPE_LLAMA_OFF=slip the other one (x's
gradient without its projection term: no parameter receives it directly)."""

import os

import torch
from llama import Config, Llama, RMSNormFunction, RMSNormOff, RMSNormSlip, lm_loss

NORMS = {"1": RMSNormOff, "slip": RMSNormSlip}
torch.manual_seed(0)
model = Llama(Config.one_b(int(os.environ.get("GRADSCOPE_LLAMA_LAYERS", "18"))),
              NORMS.get(os.environ.get("GRADSCOPE_LLAMA_OFF", ""), RMSNormFunction))


def loss(tokens: torch.Tensor) -> torch.Tensor:
    return lm_loss(model, tokens)
