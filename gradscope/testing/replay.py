"""torch's fast-mode comparison, replayed with public calls — asked where gradscope's own
projection disagrees and its per-element check would cost far more than torch's gradcheck, so
that torch's verdict decides (the drop-in is never worse than torch): instead of torch's whole
gradcheck (its first forward, its plumbing backwards, which the drop-in does natively anyway),
only what its fast mode compares, computed as it computes it —

* its vectors: a fresh `torch.Generator()` (torch's own, default seed) draws, per checked input,
  u = rand(numel) / ‖·‖ in the input's dtype, then per differentiable output v likewise;
* its numerical vᵀJu: the central difference at the call's step along each input's u alone,
  dotted with v; its analytical one: Jᵀv by a backward of the first forward's graph, dotted
  with u — twice, the second within nondet_tol of the first (torch's reentrancy check);
* its tolerance: |a − n| ≤ atol·Σu·Σv + rtol·|n| (torch's allclose with its adjusted atol).

A replay that agrees with torch's answer is still a shortcut (rule 3): it speaks only with a
margin (within a quarter of the bound: our evaluations may round otherwise than torch's), and
it decides only after it agreed with torch's own gradcheck once in this process; where it ever
disagrees, torch's own gradcheck decides from then on. Anything unusual (a complex, sparse or
oddly laid-out tensor, `masked`, an empty input or output, a graph that serves one backward)
is torch's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.testing.call import GradcheckCall, unusual_layout

MARGIN = 0.25  # of torch's bound: nearer than this, torch's own gradcheck is asked


@dataclass
class _Proof:
    """Whether the replay agreed with torch's own gradcheck (None: not yet asked): the one
    thing the process remembers between calls."""

    agreed: bool | None = None


PROOF = _Proof()


def torch_passes(call: GradcheckCall, kw: dict[str, Any], asked: Callable[[], bool]) -> bool:
    """Whether torch's gradcheck passes the call's Jacobian in fast mode: by the replay where
    it has proven itself and passes with margin, else by `asked` (torch's own gradcheck)."""
    if PROOF.agreed is False or not passes(call, kw):
        return asked()
    if PROOF.agreed is None:
        PROOF.agreed = asked()  # (the first time: torch's own verdict decides, and proves it)
        return PROOF.agreed
    return True


def passes(call: GradcheckCall, kw: dict[str, Any]) -> bool:
    """True where torch's fast-mode comparison passes the call with margin; False where it
    fails, nears its bound, or cannot be replayed."""
    if not _replayable(call, kw):
        return False
    gen = torch.Generator()
    leaves = call.tensors()
    us = [_vector(x, gen) for x in leaves]
    outs = call.wrapped_outputs()
    vs = [_vector(o, gen) for o in outs]
    analytical = _analytical(outs, leaves, us, vs, kw["nondet_tol"])
    if analytical is None:
        return False
    for i, u in enumerate(us):
        numerical = _numerical(call, i, u, vs, kw["eps"])
        for j, v in enumerate(vs):
            a, n = analytical[j][i], numerical[j]
            bound = kw["atol"] * float(u.sum()) * float(v.sum()) + kw["rtol"] * abs(n)
            if not abs(a - n) <= MARGIN * bound:  # (NaN: torch's)
                return False
    return True


def _replayable(call: GradcheckCall, kw: dict[str, Any]) -> bool:
    tensors = [*(call.args[i] for i in call.checked), *call.wrapped_outputs()]  # (as given)
    return not (kw["masked"] or call.complex or call.empty or call.single_use) and all(
        t.layout == torch.strided and not unusual_layout(t) for t in tensors)


def _vector(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """torch's draw for x: uniform over [0, 1) in float32 on the CPU, cast, normalised."""
    vec = torch.rand(x.numel(), generator=gen).to(dtype=x.dtype, device=x.device)
    vec /= vec.norm()
    return vec


def _analytical(outs: list[torch.Tensor], leaves: list[torch.Tensor], us: list[torch.Tensor],
                vs: list[torch.Tensor], nondet_tol: float) -> list[list[float]] | None:
    """vᵀJu per (output, input) by backward, taken twice as torch takes it (None: the two
    differ beyond nondet_tol — torch's gradcheck fails that — or backward refused)."""
    rows = []
    for out, v in zip(outs, vs, strict=True):
        try:
            once, again = (torch.autograd.grad(out, leaves, v.reshape(out.shape),
                                               retain_graph=True, allow_unused=True)
                           for _ in range(2))
        except RuntimeError:
            return None
        row = []
        for g1, g2, x, u in zip(once, again, leaves, us, strict=True):
            g1 = torch.zeros_like(x) if g1 is None else g1
            g2 = torch.zeros_like(x) if g2 is None else g2
            if g1.shape != x.shape or not float((g1 - g2).abs().max()) <= nondet_tol:
                return None
            row.append(float(g1.to(x.dtype).reshape(-1).dot(u)))
        rows.append(row)
    return rows


def _numerical(call: GradcheckCall, i: int, u: torch.Tensor, vs: list[torch.Tensor],
               eps: float) -> list[float]:
    """vᵀJu per output for input i alone: (f(x + eps·u) − f(x − eps·u)) / 2eps, dotted with v."""
    x = call.args[call.checked[i]].detach()
    delta = eps * u.reshape(x.shape)
    minus, plus = _outputs(call, i, x - delta), _outputs(call, i, x + delta)
    return [float((v * ((b - a) / (2 * eps)).reshape(-1)).sum())
            for a, b, v in zip(minus, plus, vs, strict=True)]


def _outputs(call: GradcheckCall, i: int, moved: torch.Tensor) -> list[torch.Tensor]:
    """func's differentiable outputs with checked input i moved, the others as given."""
    tensors = [t.detach() for t in call.tensors()]
    tensors[i] = moved
    with torch.no_grad():
        out = call.func(*call.arguments(tensors))
    outs = [out] if call.single else list(out)
    return [outs[k] for k in call.outputs]
