"""A nanoGPT-style GPT-2 (token and position embeddings, pre-norm blocks with causal attention,
a tied language-model head), built at any size from a config, with one custom autograd
Function in its MLP — correct, with a planted 1 % error, or with a gradient hook that halves
what flows into a layer. `GPT.small()` is GPT-2 small's shape (124M parameters: gpt_small.py);
the tests use the tiny one. Weights are random (nothing is downloaded); token ids are data
(`--const`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


class TanhGELU(torch.autograd.Function):
    """GELU's tanh form with a hand-written backward, old style (ctx in forward)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        inner = 0.7978845608028654 * (x + 0.044715 * x**3)
        t = torch.tanh(inner)
        slope = 0.7978845608028654 * (1 + 3 * 0.044715 * x**2)
        return grad * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * slope)


class OffGELU(TanhGELU):
    """The same GELU whose backward is 1 % off where the input is positive."""

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        right = TanhGELU.backward(ctx, grad)
        return torch.where(x > 0, right * 1.01, right)


@dataclass(frozen=True)
class Config:
    vocab: int = 50257
    context: int = 1024
    layers: int = 12
    heads: int = 12
    width: int = 768


class Block(nn.Module):
    def __init__(self, cfg: Config, gelu: type[torch.autograd.Function]) -> None:
        super().__init__()
        self.heads, self.gelu = cfg.heads, gelu
        self.ln_1 = nn.LayerNorm(cfg.width)
        self.c_attn = nn.Linear(cfg.width, 3 * cfg.width)
        self.c_proj = nn.Linear(cfg.width, cfg.width)
        self.ln_2 = nn.LayerNorm(cfg.width)
        self.c_fc = nn.Linear(cfg.width, 4 * cfg.width)
        self.mlp_proj = nn.Linear(4 * cfg.width, cfg.width)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(self.gelu.apply(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, cfg: Config, gelu: type[torch.autograd.Function] = TanhGELU) -> None:
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab, cfg.width)
        self.wpe = nn.Embedding(cfg.context, cfg.width)
        self.h = nn.ModuleList(Block(cfg, gelu) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.width)
        self.lm_head = nn.Linear(cfg.width, cfg.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2's are
        for name, p in self.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.layers)
                                if name.endswith("proj.weight") else 0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    @classmethod
    def small(cls, gelu: type[torch.autograd.Function] = TanhGELU) -> GPT:
        torch.manual_seed(0)
        return cls(Config(), gelu)


def lm_loss(model: GPT, tokens: torch.Tensor) -> torch.Tensor:
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


TINY = Config(vocab=97, context=16, layers=2, heads=2, width=16)
torch.manual_seed(0)
tiny = GPT(TINY)
torch.manual_seed(0)
tiny_off = GPT(TINY, OffGELU)


def tiny_loss(tokens: torch.Tensor) -> torch.Tensor:
    return lm_loss(tiny, tokens)


def tiny_off_loss(tokens: torch.Tensor) -> torch.Tensor:
    return lm_loss(tiny_off, tokens)


torch.manual_seed(0)
tiny_hooked = GPT(TINY)
tiny_hooked.h[1].c_fc.weight.register_hook(lambda g: g * 0.5)  # a hook that halves a gradient


def tiny_hooked_loss(tokens: torch.Tensor) -> torch.Tensor:
    return lm_loss(tiny_hooked, tokens)


class DetachedBlock(Block):
    """Attention reads a detached copy of its normalised input: the gradient through ln_1
    (and everything before it on that path) loses the attention term — no custom Function,
    so only the model's own finite differences can see it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln_1(x).detach())
        return x + self.mlp_proj(self.gelu.apply(self.c_fc(self.ln_2(x))))


torch.manual_seed(0)
tiny_detached = GPT(TINY)
tiny_detached.h[1] = DetachedBlock(TINY, TanhGELU)


def tiny_detached_loss(tokens: torch.Tensor) -> torch.Tensor:
    return lm_loss(tiny_detached, tokens)
