"""Sequence, graph and routing models the way public code writes them, small (10k–30k
parameters), random weights: an LSTM language model (int tokens, `nn.LSTM`), a two-layer GCN
(Kipf & Welling, a row-normalised directed adjacency as data), a Mixtral-style mixture of
experts (top-2 routing with `torch.where`, SwiGLU experts) and a ViT (patch convolution, class
token, `nn.MultiheadAttention`). Each has a correct loss and one with a planted bug:

* LSTM: a gradient hook meant to clip that halves the gradient of the hidden states;
* GCN: a custom sparse-style matmul whose backward forgets to transpose the adjacency;
* MoE: the router's weights detached before they scale the experts' outputs;
* ViT: a custom softmax whose backward is 1 % off.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from zoo_conv import twins


class LSTMLM(nn.Module):
    def __init__(self, vocab: int = 50, width: int = 32, halve_hook: bool = False) -> None:
        super().__init__()
        self.halve_hook = halve_hook
        self.embed = nn.Embedding(vocab, width)
        self.lstm = nn.LSTM(width, width, batch_first=True)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.embed(tokens))
        if self.halve_hook and h.requires_grad:
            h.register_hook(lambda g: g * 0.5)  # meant as g.clamp(-0.5, 0.5)
        return self.head(h)


class AdjMatmul(torch.autograd.Function):
    """adj @ h with a hand-written backward; adj is data."""

    @staticmethod
    def forward(ctx, adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(adj)
        return adj @ h

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (adj,) = ctx.saved_tensors
        return None, adj.t() @ grad


class UntransposedAdjMatmul(AdjMatmul):
    """The same whose backward uses adj where adjᵀ belonged (right for symmetric graphs only)."""

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (adj,) = ctx.saved_tensors
        return None, adj @ grad


class GCN(nn.Module):
    def __init__(self, features: int = 48, hidden: int = 96, classes: int = 12,
                 matmul=AdjMatmul) -> None:
        super().__init__()
        self.matmul = matmul
        self.w1 = nn.Linear(features, hidden)
        self.w2 = nn.Linear(hidden, hidden)
        self.w3 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.matmul.apply(adj, self.w1(x)))
        h = F.dropout(F.relu(self.matmul.apply(adj, self.w2(h))), 0.5, self.training)
        return self.matmul.apply(adj, self.w3(h))


class Expert(nn.Module):
    """Mixtral's expert: w2(silu(w1 x) * w3 x)."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(width, hidden, bias=False)
        self.w2 = nn.Linear(hidden, width, bias=False)
        self.w3 = nn.Linear(width, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    """Mixtral's sparse block: softmax router, top-2, renormalised weights, each expert run on
    the tokens routed to it (`torch.where`, `index_add_`)."""

    def __init__(self, width: int = 32, hidden: int = 48, experts: int = 4,
                 detach_router: bool = False) -> None:
        super().__init__()
        self.detach_router = detach_router
        self.norm = nn.LayerNorm(width)
        self.gate = nn.Linear(width, experts, bias=False)
        self.experts = nn.ModuleList(Expert(width, hidden) for _ in range(experts))
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        h = self.norm(x).view(-1, width)
        weights = F.softmax(self.gate(h), dim=1)
        weights, chosen = torch.topk(weights, 2, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        if self.detach_router:
            weights = weights.detach()
        out = torch.zeros_like(h)
        mask = F.one_hot(chosen, num_classes=len(self.experts)).permute(2, 1, 0)
        for i, expert in enumerate(self.experts):
            slot, token = torch.where(mask[i])
            if token.numel():
                y = expert(h[token]) * weights[token, slot, None]
                out = out.index_add(0, token, y)
        return self.head(x + out.view(batch, seq, width))


class Softmax(torch.autograd.Function):
    """softmax over the last dim with a hand-written backward."""

    scale = 1.0

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = torch.softmax(x, dim=-1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(-1, keepdim=True))


class OffSoftmax(Softmax):
    """The same, 1 % off."""

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return Softmax.backward(ctx, grad) * 1.01


class Attention(nn.Module):
    def __init__(self, width: int, heads: int, softmax) -> None:
        super().__init__()
        self.heads, self.softmax = heads, softmax
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        att = self.softmax.apply(q @ k.transpose(-2, -1) / (c // self.heads) ** 0.5)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class ViTBlock(nn.Module):
    def __init__(self, width: int, heads: int, softmax) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads, softmax)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(),
                                 nn.Linear(2 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, softmax=Softmax, width: int = 24, depth: int = 2, classes: int = 10,
                 patch: int = 4, image: int = 16) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, width, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, width) * 0.02)
        self.blocks = nn.Sequential(*(ViTBlock(width, 4, softmax) for _ in range(depth)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


lstm, lstm_bad = twins(LSTMLM, lambda: LSTMLM(halve_hook=True))
gcn, gcn_bad = twins(GCN, lambda: GCN(matmul=UntransposedAdjMatmul))
moe, moe_bad = twins(MoE, lambda: MoE(detach_router=True))
vit, vit_bad = twins(ViT, lambda: ViT(OffSoftmax))


def _next_token(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def lstm_loss(tokens: torch.Tensor) -> torch.Tensor:
    """tokens: ints in [0, 50) (`--const`)."""
    return _next_token(lstm, tokens)


def lstm_bad_loss(tokens: torch.Tensor) -> torch.Tensor:
    return _next_token(lstm_bad, tokens)


def _node_classes(model: nn.Module, x: torch.Tensor, adj: torch.Tensor,
                  labels: torch.Tensor) -> torch.Tensor:
    adj = adj.abs() / adj.abs().sum(1, keepdim=True)  # row-normalised, directed
    return F.cross_entropy(model(x, adj), labels)


def gcn_loss(x: torch.Tensor, adj: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """x: node features (nodes, 48); adj: (nodes, nodes) data; labels: ints in [0, 12)."""
    return _node_classes(gcn, x, adj, labels)


def gcn_bad_loss(x: torch.Tensor, adj: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return _node_classes(gcn_bad, x, adj, labels)


def moe_loss(x: torch.Tensor) -> torch.Tensor:
    """x: (N, T, 32)."""
    return moe(x).pow(2).mean()


def moe_bad_loss(x: torch.Tensor) -> torch.Tensor:
    return moe_bad(x).pow(2).mean()


def vit_loss(x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """x: images (N, 3, 16, 16); labels: ints in [0, 10)."""
    return F.cross_entropy(vit(x), labels)


def vit_bad_loss(x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(vit_bad(x), labels)
