"""The drop-in's checks of autograd's plumbing, done natively with public autograd calls: what
torch's gradcheck checks besides the Jacobian, each costing a backward or two, not a second
gradcheck —

* backward is multiplied by grad_output: zero upstream gradients give zero (or no) input
  gradients, of the inputs' dtype, device and size (`check_grad_dtypes` adds the dtype check
  of the ordinary VJP too);
* undefined upstream gradients (`check_undefined_grad`): every output's gradient undefined, and
  with several outputs each one's alone, must be handled and give zero or undefined input
  gradients — the case a custom Function with `ctx.set_materialize_grads(False)` meets;
* batched gradients (`check_batched_grad`): two upstream vectors through one backward with
  `is_grads_batched=True` (autograd's vmap over the backward) equal the two taken one at a time.

Forward-mode checks (`check_forward_ad`, `check_batched_forward_grad`) and `masked` are torch's
own gradcheck's, run only when asked for (gradscope.testing.gradcheck)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

from gradscope.testing.call import GradcheckCall

DOCS = 'see "Notes about undefined output gradients" in PyTorch\'s tools/autograd/derivatives.yaml'
PLUMBING_SEED = 0xB47C


class _Undefined(torch.autograd.Function):
    """The identity whose backward returns None: the node before it receives an undefined
    gradient, as torch's own check arranges with an internal node."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        return None


def _said(exc: BaseException) -> str:
    """`TypeError: its first line` (an exception may carry no message at all)."""
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"


def _zero_or_none(grads: Sequence[torch.Tensor | None]) -> bool:
    return all(g is None or bool(g.eq(0).all()) for g in grads)


def checks(call: GradcheckCall, batched: bool, undefined: bool, dtypes: bool) -> str | None:
    """The checks asked for, over one forward (each backward keeps its graph), or None."""
    outs = call.wrapped_outputs()
    return (multiplied_by_grad_output(call, dtypes, outs) or each_output_alone(call, outs)
            or (batched and batched_grads(call, outs))
            or (undefined and undefined_grads(call, outs)) or None)


def multiplied_by_grad_output(call: GradcheckCall, dtypes: bool,
                              outs: list[torch.Tensor] | None = None) -> str | None:
    """Zero upstream gradients give zero input gradients of the inputs' dtype, device, size."""
    leaves = call.tensors()
    outs = call.graph(outs)
    grads = torch.autograd.grad(outs, leaves, [torch.zeros_like(o) for o in outs],
                                retain_graph=not call.single_use, allow_unused=True)
    for name, g, x in zip(call.names, grads, leaves, strict=True):
        if g is None:
            continue
        if not bool(g.to_dense().eq(0).all()):
            return (f"backward not multiplied by grad_output: a zero upstream gradient gives "
                    f"a nonzero gradient for {name}")
        if g.dtype != x.dtype or g.device != x.device or g.shape != x.shape:
            return (f"the gradient of {name} is {g.dtype} {tuple(g.shape)} on {g.device}; the "
                    f"input is {x.dtype} {tuple(x.shape)} on {x.device}")
    if dtypes:
        return _vjp_dtypes(call)
    return None


def _vjp_dtypes(call: GradcheckCall) -> str | None:
    """A random upstream's input gradients have the inputs' dtypes and devices."""
    _, _, grads = call.random_vjp()
    for name, g, x in zip(call.names, grads, call.tensors(), strict=True):
        if g is not None and (g.dtype != x.dtype or g.device != x.device):
            return (f"the gradient of {name} is {g.dtype} on {g.device}; the input is "
                    f"{x.dtype} on {x.device} (check_grad_dtypes)")
    return None


def each_output_alone(call: GradcheckCall, outs: list[torch.Tensor]) -> str | None:
    """Several outputs: each one's VJP taken alone (the others' gradients undefined, as
    torch's gradcheck takes its Jacobian output by output) equals the same VJP taken with zero
    gradients for the others — which the Jacobian check compared with finite differences. A
    backward that returns zeros once another output's gradient is undefined fails here."""
    if len(outs) < 2:
        return None
    leaves = call.tensors()
    gen = torch.Generator().manual_seed(PLUMBING_SEED)
    retain = not call.single_use
    for k, out in enumerate(outs):
        v = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out)
        try:
            alone = _filled(torch.autograd.grad(call.graph(outs)[k], leaves, v,
                                                retain_graph=retain, allow_unused=True), leaves)
        except Exception as exc:  # the user's backward, whatever it raised
            return (f"backward fails when output {k}'s gradient is taken alone (the other "
                    f"outputs' gradients undefined: {_said(exc)}); {DOCS}")
        zeros = [v if j == k else torch.zeros_like(o) for j, o in enumerate(outs)]
        together = _filled(torch.autograd.grad(call.graph(outs), leaves, zeros,
                                               retain_graph=retain, allow_unused=True), leaves)
        for name, a, b in zip(call.names, alone, together, strict=True):
            # (the same sums in the same order, but for zeros: equal up to round-off)
            tol = float(torch.finfo(b.dtype).eps) ** 0.5 if b.is_floating_point() else 0.0
            if not torch.allclose(a, b, rtol=tol, atol=tol * float(b.abs().max())):
                return (f"the gradient of output {k} for {name} taken alone (the other "
                        f"outputs' gradients undefined) differs from the same with zero "
                        f"gradients for the others (by up to {float((a - b).abs().max()):.3g}):"
                        f" the backward mishandles undefined output gradients; {DOCS}")
    return None


def undefined_grads(call: GradcheckCall, outs: list[torch.Tensor] | None = None
                    ) -> str | None:
    """Backward with every output's gradient undefined, then (several outputs) each one's."""
    count = len(call.outputs)
    cases = [set(range(count))] + ([{k} for k in range(count)] if count > 1 else [])
    leaves = call.tensors()
    for undefined in cases:
        cut = [_Undefined.apply(o) if k in undefined else o
               for k, o in enumerate(call.graph(outs))]
        try:
            grads = torch.autograd.grad(cut, leaves, [torch.zeros_like(o) for o in cut],
                                        retain_graph=not call.single_use, allow_unused=True)
        except Exception as exc:  # the user's backward, whatever it raised
            which = "every output's gradient" if len(undefined) == count else \
                f"output {min(undefined)}'s gradient"
            return f"backward fails when {which} is undefined ({_said(exc)}); {DOCS}"
        if not _zero_or_none(grads):
            return ("backward gives nonzero input gradients when the output gradients are "
                    f"undefined or zero; {DOCS}")
    return None


def batched_grads(call: GradcheckCall, outs: list[torch.Tensor] | None = None) -> str | None:
    """Two upstream vectors at once (is_grads_batched) against one at a time, per output."""
    leaves = call.tensors()
    gen = torch.Generator().manual_seed(PLUMBING_SEED)
    retain = not call.single_use
    for k, out in enumerate(call.graph(outs)):
        vs = [torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out)
              for _ in range(2)]
        one_by_one = [_filled(torch.autograd.grad(call.graph(outs)[k], leaves, v,
                                                  retain_graph=retain, allow_unused=True),
                              leaves) for v in vs]
        expected = [torch.stack(shards) for shards in zip(*one_by_one, strict=True)]
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="There is a performance drop")
                got = _filled(torch.autograd.grad(call.graph(outs)[k], leaves,
                                                  torch.stack(vs), retain_graph=retain,
                                                  allow_unused=True,
                                                  is_grads_batched=True), leaves, batch=2)
        except RuntimeError as exc:
            return (f"batched gradients of output {k} fail ({_said(exc)}): the "
                    "backward is not vmap-compatible; pass check_batched_grad=False if that "
                    "is intended")
        for name, g, e in zip(call.names, got, expected, strict=True):
            if not torch.allclose(g, e):
                return (f"batched gradients of output {k} for {name} differ from the same "
                        f"gradients taken one at a time (by up to "
                        f"{float((g - e).abs().max()):.3g}): the backward's batching rule is "
                        "wrong")
    return None


def _filled(grads: Sequence[torch.Tensor | None], leaves: list[torch.Tensor],
            batch: int = 0) -> list[torch.Tensor]:
    """None gradients as zeros of the input's shape (with a batch dimension if batched)."""
    out = []
    for g, x in zip(grads, leaves, strict=True):
        if g is None:
            g = torch.zeros((batch, *x.shape) if batch else x.shape, dtype=x.dtype,
                            device=x.device)
        out.append(g.to_dense())
    return out
