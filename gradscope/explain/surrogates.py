"""Surrogate gradients, found by behaviour and by declaration, and what they look like.

An element is `surrogate` where the forward is flat (finite differences zero, no jump in the
stencil) and autograd is not zero: a straight-through estimator, a spiking surrogate, a
pass-through clamp, a hard Gumbel-softmax, whatever code made it (runner/judgement.py marks them).
The user may also declare that a backward departs from the derivative on purpose (`--surrogate`,
or `__gradscope_surrogate__` on a Function, function or module): its mismatches become
`surrogate`, with the relation they follow named. This module finds the declarations in the
autograd graph and writes the diagnostic.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

import torch

from gradscope.explain.coarse import AGAINST, SMOOTH, failing
from gradscope.explain.relations import Relation
from gradscope.explain.sweep import Coarse
from gradscope.markers import marker_of
from gradscope.options import ANY_INPUT, SurrogateDeclaration
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


def declared(option: SurrogateDeclaration, names: tuple[str, ...], target_marker: str | None,
             graph_marks: Mapping[str, str]) -> dict[str, str]:
    """{input: why} from --surrogate (names, or ANY_INPUT: every input), the target's own
    marker and the marked Functions in its graph."""
    out: dict[str, str] = dict(graph_marks)
    if target_marker is not None:
        out.update({n: target_marker for n in names})
    for name in option.names:
        form = option.forms.get(name)
        for n in (names if name == ANY_INPUT else (name,)):
            out[n] = f"declared with --surrogate {n}={form}" if form else \
                "declared with --surrogate"
    return out


def shape_of(grad: torch.Tensor, values: torch.Tensor, mask: torch.Tensor,
             flat: torch.Tensor | None, gated: str | None = None) -> str:
    """What the surrogate looks like at the elements under `mask` (autograd for a ones
    upstream where the target is elementwise): identity, scaled, gated, or a bump. `gated`:
    its gate as the coarse-scale sweep found it (', gated to [−1, 1]'), else read from the
    values at hand."""
    g = grad.detach().double().reshape(-1)[mask.reshape(-1)]
    x = values.detach().double().reshape(-1)[mask.reshape(-1)]
    if g.numel() == 0:
        return "it appears under the random upstreams and in the Jacobian only"
    if gated is None:
        gated = _gate_at_hand(grad, values, x, flat)
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


def _gate_at_hand(grad: torch.Tensor, values: torch.Tensor, x: torch.Tensor,
                  flat: torch.Tensor | None) -> str:
    """', zero outside the values at hand [a, b]' where every flat zero lies outside them."""
    if flat is None or values.shape != grad.shape:
        return ""
    off = flat.reshape(-1) & (grad.detach().reshape(-1) == 0)
    outside = values.detach().double().reshape(-1)[off]
    lo, hi = float(x.min()), float(x.max())
    if outside.numel() and bool(((outside < lo) | (outside > hi)).all()):
        return (f", and 0 at every value at hand outside [{lo:.3g}, {hi:.3g}] (gated, like "
                "hardtanh's derivative)")
    return ""


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
               declared_by: Mapping[str, str], relations: Mapping[str, str],
               astray: Collection[str] = ()) -> Diagnostic:
    """One `surrogate_gradient` diagnostic for every input with surrogate elements; `astray`:
    the declared ones whose intended form autograd does not follow (that check fails)."""
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
    failing = [n for n in names if n in astray]
    message = ". ".join(parts) + (". Deliberate in quantisation-aware training, spiking "
                                  "networks and relaxations; not counted as a mismatch")
    hint = ("if no surrogate was intended, the gradient should be zero where the forward is "
            "flat (as torch.round's is); --fail-on warning turns this into a failure")
    if failing:  # (the run fails on them: their intended form is what autograd must follow)
        message += (f", but {', '.join(failing)} fail{'s' if len(failing) == 1 else ''} "
                    "against the intended form declared for it")
        hint = ("make backward the declared intended form (the factor or shape above is how "
                "it departs), or declare the form it is meant to have")
    return Diagnostic(
        kind="surrogate_gradient", op="backward", where=target, inputs=names,
        count=sum(counts.get(n, 0) for n in names), message=message, hint=hint)



def _n(x: float) -> str:
    """A number in a sentence: three significant digits, a true minus sign."""
    return f"{x:.3g}".replace("-", "\u2212")


def _span(coarse: Coarse) -> str:
    return f"[{_n(coarse.low)}, {_n(coarse.high)}]"


def _line(coarse: Coarse, bad: torch.Tensor) -> int:
    """The line that stands for the failed ones: the one with the median ratio."""
    rows = torch.nonzero(bad).reshape(-1)
    ratios = coarse.reading.ratio[rows].nan_to_num(nan=0.0, posinf=1e300, neginf=-1e300)
    return int(rows[int(ratios.argsort()[len(rows) // 2])])


def gate(coarse: Coarse, line: int) -> str:
    """', gated to [−1, 1]' where the sweep placed a gate's edges on this line ('' else; an
    edge the range bounds is the range's)."""
    r = coarse.reading
    if not bool(r.gated[line]) or not bool(torch.isfinite(r.constant[line])):
        return ""
    lo, hi = float(coarse.edges[0][line]), float(coarse.edges[1][line])
    lo = lo if math.isfinite(lo) else float(r.lo[line])
    hi = hi if math.isfinite(hi) else float(r.hi[line])
    return f", gated to [{_n(lo)}, {_n(hi)}]"


def inconsistency(coarse: Coarse, verdicts: torch.Tensor) -> Relation | None:
    """How a surrogate that failed the coarse-scale check is wrong (None: none failed).
    `verdicts`: the lines' verdict codes that count (the others' set to CONSISTENT)."""
    bad = failing(verdicts)
    if not bool(bad.any()):
        return None
    r = coarse.reading
    line = _line(coarse, bad)
    rise, integral = float(r.rise[line]), float(r.integral[line])
    covers = int(bad.sum())
    lines = len(coarse.elements)
    where = (f"along each element over {_span(coarse)}" if coarse.together else
             f"along {lines} element(s), each moved alone over {_span(coarse)}"
             + (f" ({covers} of them fail)" if covers < lines else ""))
    if int(verdicts[line]) == SMOOTH:
        return Relation(
            "sloped", "not a surrogate: the forward is not piecewise constant",
            f"{where} the forward ramps between its flat stretches (within a tiny shift it "
            "moves by a sliver, a slope and not a jump): a surrogate stands in only for a "
            "step's zero derivative, so autograd is compared with the forward's own", covers)
    if int(verdicts[line]) == AGAINST:
        mass = float(r.mass[line])
        how = ("cancels itself out (its sign flips)" if abs(integral) < 0.5 * mass
               else "points the other way")
        total = "about 0" if abs(integral) < 1e-6 * mass else _n(integral)
        return Relation(
            "surrogate", f"a surrogate gradient against the forward: it {how}",
            f"{where} the forward only {'rises' if rise > 0 else 'falls'} (by "
            f"{_n(abs(rise))}) while the surrogate integrates to {total} (to {_n(mass)} in "
            "absolute value): a surrogate must push the way the forward steps", covers)
    c = float(r.constant[line])
    ratio = integral / rise if rise else math.inf
    times = f"{_n(ratio)}×" if math.isfinite(ratio) else "a multiple of"
    return Relation(
        "surrogate", f"a straight-through gradient of {_n(c)}{gate(coarse, line)} "
        f"integrates to {times} the forward's rise",
        f"{where} it integrates to {_n(integral)} where the forward rises {_n(rise)}: a "
        "straight-through estimator should integrate to about what the forward rises (its "
        "scale or its gate is off)", covers, ratio)


def consistency(coarse: Coarse, lines: torch.Tensor) -> str:
    """What the coarse-scale check found for the surrogate lines `lines` (bool per line)."""
    r = coarse.reading
    if not bool(lines.any()):
        return ""
    ratio = r.ratio[lines]
    ratio = ratio[torch.isfinite(ratio)]
    if not ratio.numel():
        return ""
    low, high = float(ratio.min()), float(ratio.max())
    span = _n(low) if high - low <= 0.01 * abs(high) else f"{_n(low)} to {_n(high)}"
    return f"coarse scale: over {_span(coarse)} it integrates to {span}× the forward's rise"
