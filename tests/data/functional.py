"""Targets built with torch.func: made by grad, calling vmap/jacrev/functional_call inside,
per-sample gradients; a Function inside vmap whose backward is twice too large."""

import torch
from torch.func import functional_call, grad, jacrev, vmap


def loss(x):
    return (x.sin() * x).sum()


grad_loss = grad(loss)


def per_row(x):
    return vmap(lambda r: (r * r).sum().sqrt())(x)


def jac_norm(x):
    return jacrev(lambda t: t.sin() * t.cos())(x).sum(0)


net = torch.nn.Linear(3, 2).double()
params = {k: v.detach() for k, v in net.named_parameters()}


def model_loss(w, x):
    return functional_call(net, {"weight": w, "bias": params["bias"]}, (x,)).square().sum()


def per_sample_grads(w, x):
    return vmap(grad(model_loss), in_dims=(None, 0))(w, x.unsqueeze(1)).sum(0)


class HalfSqrt(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x.sqrt()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g / y  # should be g / (2 y)


def row_norms_bug(x):
    return vmap(lambda r: HalfSqrt.apply((r * r).sum()))(x)
