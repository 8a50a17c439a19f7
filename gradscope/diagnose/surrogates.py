"""Surrogate gradients, found by behaviour and by declaration, and what they look like.

An element is `surrogate` where the forward is flat (finite differences zero, no jump in the
stencil) and autograd is not zero: a straight-through estimator, a spiking surrogate, a
pass-through clamp, a hard Gumbel-softmax, whatever code made it (verdict/judge.py marks them).
The user may also declare that a backward departs from the derivative on purpose (`--surrogate`,
or `__gradscope_surrogate__` on a Function, function or module): its mismatches become
`surrogate`, with the relation they follow named. This module finds the declarations in the
autograd graph and writes the diagnostic.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from gradscope.markers import marker_of
from gradscope.options import ANY_INPUT
from gradscope.report.model import Diagnostic
from gradscope.tensors import grad_nodes


def marked_inputs(output: torch.Tensor, leaves: Mapping[str, torch.Tensor]) -> dict[str, str]:
    """Inputs whose gradient flows through a custom Function whose class carries the marker:
    {input: "ClassName: reason"}. Read from the autograd graph, so a marked Function called
    anywhere inside the user's code counts, and only the inputs behind it are declared."""
    by_id = {id(t): n for n, t in leaves.items()}
    found: dict[str, str] = {}
    for node in grad_nodes(output.grad_fn):
        cls = getattr(node, "_forward_cls", None)
        mark = marker_of(cls)
        if mark is None:
            continue
        for below in grad_nodes(node):  # the leaves (AccumulateGrad) behind the marked one
            variable = getattr(below, "variable", None)
            if variable is not None and id(variable) in by_id:
                found.setdefault(by_id[id(variable)], f"{cls.__name__}: {mark}")
    return found


def declared(option: tuple[str, ...], names: tuple[str, ...], target_marker: str | None,
             graph_marks: Mapping[str, str]) -> dict[str, str]:
    """{input: why} from --surrogate (names, or ANY_INPUT: every input), the target's own
    marker and the marked Functions in its graph."""
    out: dict[str, str] = dict(graph_marks)
    if target_marker is not None:
        out.update({n: target_marker for n in names})
    for name in option:
        for n in (names if name == ANY_INPUT else (name,)):
            out[n] = "declared with --surrogate"
    return out


def shape_of(grad: torch.Tensor, values: torch.Tensor, mask: torch.Tensor,
             flat: torch.Tensor | None) -> str:
    """What the surrogate looks like at the elements under `mask` (autograd for a ones
    upstream where the target is elementwise): identity, scaled, gated, or a bump."""
    g = grad.detach().double().reshape(-1)[mask.reshape(-1)]
    x = values.detach().double().reshape(-1)[mask.reshape(-1)]
    if g.numel() == 0:
        return "it appears under the random upstreams and in the Jacobian only"
    gated = ""
    if flat is not None and g.numel() and values.shape == grad.shape:
        off = flat.reshape(-1) & (grad.detach().reshape(-1) == 0)
        outside = values.detach().double().reshape(-1)[off]
        lo, hi = float(x.min()), float(x.max())
        if outside.numel() and bool(((outside < lo) | (outside > hi)).all()):
            gated = f", and 0 outside [{lo:.3g}, {hi:.3g}] (gated, like hardtanh's derivative)"
    lo_g, hi_g = float(g.min()), float(g.max())
    if hi_g - lo_g <= 1e-6 * max(1.0, abs(hi_g)):
        if abs(hi_g - 1.0) <= 1e-6:
            return "identity: straight-through, the gradient passes unchanged" + gated
        return f"straight-through scaled by {hi_g:.4g}" + gated
    if values.shape == grad.shape and g.numel() >= 3 and _peaked(x, g.abs()):
        peak = x[int(g.abs().argmax())]
        return (f"a smooth bump, largest ({hi_g:.3g}) near {float(peak):.3g} and smaller "
                f"away from it (a sigmoid-derivative-like surrogate){gated}")
    return f"it varies from {lo_g:.3g} to {hi_g:.3g}{gated}"


def _peaked(x: torch.Tensor, g: torch.Tensor, most: int = 2000) -> bool:
    """Whether g falls off with the distance from its peak (a bump): at least 80 % of the
    pairs are ordered that way (a rank agreement, robust to a peak between two samples)."""
    x, g = x[:most], g[:most]
    distance = (x - x[int(g.argmax())]).abs()
    closer = distance.unsqueeze(0) < distance.unsqueeze(1)  # [i, j]: j closer than i
    larger = g.unsqueeze(0) >= g.unsqueeze(1)  # [i, j]: g_j >= g_i
    pairs = int(closer.sum())
    return pairs > 0 and float((closer & larger).sum()) / pairs >= 0.8


def diagnostic(target: str, counts: Mapping[str, int], shapes: Mapping[str, str],
               declared_by: Mapping[str, str], relations: Mapping[str, str]) -> Diagnostic:
    """One `surrogate_gradient` diagnostic for every input with surrogate elements."""
    names = sorted(n for n in set(counts) | set(declared_by) if counts.get(n))
    parts = []
    found = [n for n in names if n not in declared_by]
    if found:
        parts.append(
            f"the forward is flat in {', '.join(found)} (finite differences are zero there, "
            "with no jump in the stencil) while autograd passes gradient on: a surrogate "
            "gradient (" + "; ".join(f"{n}: {shapes.get(n, '')}" for n in found) + ")")
    for n in names:
        if n in declared_by:
            how = relations.get(n, "")
            parts.append(f"{n}: a declared surrogate ({declared_by[n]})"
                         + (f"; {how}" if how else ""))
    message = ". ".join(parts) + (". Deliberate in quantisation-aware training, spiking "
                                  "networks and relaxations; not counted as a mismatch")
    return Diagnostic(
        kind="surrogate_gradient", op="backward", where=target, inputs=names,
        count=sum(counts.get(n, 0) for n in names), message=message,
        hint=("if no surrogate was intended, the gradient should be zero where the forward is "
              "flat (as torch.round's is); --fail-on warning turns this into a failure"))

