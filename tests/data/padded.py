"""Embeddings with torch's documented departures from the derivative (padding_idx,
scale_grad_by_freq), correct and with bugs that such a departure must never excuse. Every model
takes int64 token ids (`--const ids=[0,2,3,0,5]`: the padding index 0 is looked up twice)."""

import torch
import torch.nn.functional as F
from torch import nn


class Untied(nn.Module):
    """A padded lookup into a small head: row 0 gets no gradient through the lookup."""

    def __init__(self, padding_idx: int | None = 0, scale: bool = False) -> None:
        super().__init__()
        self.emb = nn.Embedding(6, 3, padding_idx=padding_idx, scale_grad_by_freq=scale)
        self.head = nn.Linear(3, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.emb(ids))).sum()


class Tied(nn.Module):
    """BERT's MLM head in miniature: the padded embedding's weight is the output layer too."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(6, 3, padding_idx=0)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.emb(ids))
        return (h @ self.emb.weight.T).logsumexp(-1).sum()


class HalfTanh(torch.autograd.Function):
    """tanh whose backward forgets half of the gradient: a bug."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return 0.5 * g * (1 - y * y)  # the bug: half the derivative


class PaddedWithBug(Untied):
    """The padded lookup, then a custom tanh with a wrong backward: every weight is wrong."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(HalfTanh.apply(self.emb(ids))).sum()


class DoubledLookup(Untied):
    """A hook doubles the lookup's gradient: row 0's derivative is wrong too, so undoing
    padding_idx does not make autograd agree there."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        looked = self.emb(ids)
        if looked.requires_grad:
            looked.register_hook(lambda g: 2 * g)
        return self.head(torch.tanh(looked)).sum()


class ZeroRow(nn.Module):
    """No padding_idx, but a parameter hook zeroes row 0's gradient as padding would: a bug
    that looks like torch's departure and is not one."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(6, 3)
        self.head = nn.Linear(3, 2)
        self.emb.weight.register_hook(_zero_row)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.emb(ids))).sum()


def _zero_row(g: torch.Tensor) -> torch.Tensor:
    g = g.clone()
    g[0] = 0
    return g


def functional(w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """F.embedding with padding_idx given by keyword, on a weight that is an input."""
    return torch.sin(F.embedding(ids, w, padding_idx=0)).sum()


def bag(w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """An embedding bag leaves the padding index out of its forward too: no departure."""
    return torch.sin(F.embedding_bag(ids.reshape(1, -1), w, padding_idx=0)).sum()


class Large(nn.Module):
    """A vocabulary large enough to be checked at scale (a seeded sample per element, the rest
    by projections); `bug`: the custom tanh with half the derivative."""

    def __init__(self, vocab: int = 12000, bug: bool = False) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, 4, padding_idx=0)
        self.head = nn.Linear(4, 3)
        self.bug = bug

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids)
        h = HalfTanh.apply(h) if self.bug else torch.tanh(h)
        return self.head(h).logsumexp(-1).sum()


scaled = Untied(padding_idx=None, scale=True)
large_bad = Large(bug=True)
