"""A Llama-shaped decoder (token embedding tied to the head, pre-norm blocks with rotary causal
attention and a SwiGLU MLP, RMSNorm as a custom autograd Function), built at any size from a
config — with a correct RMSNorm, or one whose backward takes the weight's gradient from the
unnormalised input (a planted bug). `Config.one_b()` is a ~10⁹-parameter shape (vocab 32000,
width 2048, 18 layers; llama_1b.py builds it); the tests use the tiny one. Weights are random
(nothing is downloaded); token ids are data (`--const`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


class RMSNormFunction(torch.autograd.Function):
    """y = x / rms(x) · w over the last dimension, with a hand-written backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return x * rstd * weight

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight, rstd = ctx.saved_tensors
        xhat = x * rstd
        gw = grad * weight
        dx = rstd * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
        dweight = (grad * xhat).reshape(-1, x.shape[-1]).sum(0)
        return dx, dweight, None


class RMSNormOff(RMSNormFunction):
    """The weight's gradient taken from x instead of x / rms(x): the kind of slip a fused
    kernel's hand-written backward makes."""

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x = ctx.saved_tensors[0]
        dx, _, _ = RMSNormFunction.backward(ctx, grad)
        return dx, (grad * x).reshape(-1, x.shape[-1]).sum(0), None


class RMSNormSlip(RMSNormFunction):
    """x's gradient without its projection term (rstd · weight · grad alone): the weight's
    gradient is right, and no tensor of the model receives what is wrong directly."""

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        _, weight, rstd = ctx.saved_tensors
        _, dweight, _ = RMSNormFunction.backward(ctx, grad)
        return rstd * grad * weight, dweight, None


@dataclass(frozen=True)
class Config:
    vocab: int = 32000
    layers: int = 18
    heads: int = 16
    width: int = 2048
    hidden: int = 5632
    context: int = 2048

    @classmethod
    def one_b(cls, layers: int = 18) -> Config:
        return cls(layers=layers)


class RMSNorm(nn.Module):
    def __init__(self, width: int, norm: type[RMSNormFunction], eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.norm, self.eps = norm, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm.apply(x, self.weight, self.eps)


def rotary(q: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding over the last dimension (pairs of halves)."""
    half = q.shape[-1] // 2
    freq = 10000.0 ** (-torch.arange(half, dtype=q.dtype, device=q.device) / half)
    angle = positions.to(q.dtype)[:, None] * freq[None, :]
    cos, sin = angle.cos(), angle.sin()
    a, b = q[..., :half], q[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class Block(nn.Module):
    def __init__(self, cfg: Config, norm: type[RMSNormFunction]) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.attn_norm = RMSNorm(cfg.width, norm)
        self.wq = nn.Linear(cfg.width, cfg.width, bias=False)
        self.wk = nn.Linear(cfg.width, cfg.width, bias=False)
        self.wv = nn.Linear(cfg.width, cfg.width, bias=False)
        self.wo = nn.Linear(cfg.width, cfg.width, bias=False)
        self.mlp_norm = RMSNorm(cfg.width, norm)
        self.gate = nn.Linear(cfg.width, cfg.hidden, bias=False)
        self.up = nn.Linear(cfg.width, cfg.hidden, bias=False)
        self.down = nn.Linear(cfg.hidden, cfg.width, bias=False)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        positions = torch.arange(t, device=x.device)
        q, k, v = (w(x).view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))
        q, k = rotary(q, positions), rotary(k, positions)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attn_norm(x))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, cfg: Config, norm: type[RMSNormFunction] = RMSNormFunction) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg, norm) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.width, norm)
        self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)
        self.head.weight = self.embed.weight  # tied
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.layers)
                                if name.endswith(("wo.weight", "down.weight")) else 0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def lm_loss(model: Llama, tokens: torch.Tensor) -> torch.Tensor:
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


TINY = Config(vocab=61, layers=2, heads=2, width=16, hidden=40, context=16)
torch.manual_seed(0)
tiny = Llama(TINY)
torch.manual_seed(0)
tiny_off = Llama(TINY, RMSNormOff)
torch.manual_seed(0)
tiny_slip = Llama(TINY, RMSNormSlip)


def tiny_loss(tokens: torch.Tensor) -> torch.Tensor:
    return lm_loss(tiny, tokens)


def tiny_off_loss(tokens: torch.Tensor) -> torch.Tensor:
    return lm_loss(tiny_off, tokens)


def tiny_slip_loss(tokens: torch.Tensor) -> torch.Tensor:
    return lm_loss(tiny_slip, tokens)
