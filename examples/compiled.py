"""torch.compile examples for docs/modern.md: a function that compiles correctly, and one whose
compiled gradient is wrong on torch 2.13 (pytorch #185464: the decomposition of
multilabel_margin_loss ignores the -1 that ends a row of targets)."""

import torch
import torch.nn.functional as F

LABELS = torch.tensor([[0, 1, -1, -1, -1]])


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def margin(scores):
    return F.multilabel_margin_loss(scores, LABELS)
