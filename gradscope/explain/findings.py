"""What a traced gradient flow means, as diagnostics: where the gradient vanishes (and which
tensors it starves), which elements a saturating op blocks (in a model: which layers leave
units dead for the batch), and where NaN or infinity appears, forward or backward. Every
finding of a model names the module it happens in."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from gradscope.evidence.flow import Flow, FlowNode, inputs_below
from gradscope.expr.ops import KNOWN
from gradscope.report.build import mask_indices
from gradscope.report.model import Diagnostic
from gradscope.report.modules import grouped

SATURATED = 0.9  # a model's saturating op is reported from this blocked fraction (or dead units)
ONE_SIDED_HINT = "give inputs that reach the other side: --at NAME=… with values across it"


def one_sided(flow: Flow, names: list[str], chosen: list[str]) -> list[Diagnostic]:
    """A warning for each branch site every element took the same side of: a bug on the side
    no element reached would go unseen. `chosen`: the inputs whose values gradscope chose."""
    why = (f" (the values gradscope chose for {', '.join(chosen)} spread over ±6.37, and this "
           "branch's threshold lies beyond them), or a wider spread: --at NAME=spread(N)"
           if chosen else " (the values given all lie on one side)")
    out = []
    for site in flow.branches:
        if not site.one_sided:
            continue
        taken = next(label for label, n in site.sides if n)
        others = [label for label, n in site.sides if not n]
        missed = f" (never {', '.join(others)})" if others else ""
        out.append(Diagnostic(
            kind="one_sided_branch", op=site.op, where=site.where, inputs=list(names),
            count=site.elements,
            message=(f"every element took the same side of `{site.where}`: {taken} "
                     f"({site.elements:,} of {site.elements:,}){missed}; its other side was "
                     "never reached, so a wrong gradient there would go unseen"),
            hint=ONE_SIDED_HINT + why))
    return out


def diagnostics(flow: Flow, values: Mapping[str, torch.Tensor],
                confirmed: set[str] | None = None,
                grads: Mapping[str, torch.Tensor] | None = None) -> list[Diagnostic]:
    """The catalogue's verdicts on the traced flow. A vanishing point is reported when the op
    is a known piecewise-constant one, or when the function is confirmed not to be constant in
    an input below it (`confirmed`); `grads` (autograd's) tell which inputs it starves."""
    out: list[Diagnostic] = []
    zero = zero_gradients(grads)  # once: every finding below may name the starved inputs
    for node in flow.walk():
        inputs = inputs_below(flow, node)
        if node.status == "vanishing" and (node.kind == "vanishing"
                                           or set(inputs) & (confirmed or set())):
            out.append(_vanishing(node, inputs, zero))
        elif node.kind == "saturation" and node.blocked is not None \
                and node.status in ("saturating", "vanishing") and bool(node.blocked.any()):
            found = _saturation(node, inputs, values, zero)
            out += [found] if found is not None else []
        elif node.status == "nan":
            out.append(_backward_nan(node, inputs))
    for op, where, inputs, count, module in flow.forward_nan:
        place = _place(op, module, where, where)
        out.append(Diagnostic(
            kind="nan", op=op, where=where, inputs=list(inputs), count=count, module=module,
            message=(f"the forward of {place} produced NaN or infinity at {count} element(s) "
                     "from finite inputs: the function is undefined there"
                     + (", and everything after it inherits it" if module is not None else "")),
            hint="keep inputs inside the op's domain (log and sqrt need x > 0)"))
    return out


def _module(path: str | None) -> str:
    return path or "the top level"


def _place(op: str, module: str | None, where: str, label: str) -> str:
    """`round(x)` (the label) for an expression; `round` in blocks.1 (stack.py:86: …) in a
    model."""
    if module is None:
        return f"`{label}`"
    return f"`{op}` in {_module(module)}" + (f" ({where})" if where else "")


def _node_place(node: FlowNode) -> str:
    return _place(node.op, node.module, node.where, node.label())


def _hint(op: str, flow: str) -> str | None:
    """The op row's hint for what it does to the gradient (`flow`): a straight-through
    estimator for a vanishing op, a smoother alternative for a saturating one."""
    row = KNOWN.get(op)
    return row.hint if row is not None and row.flow == flow else None


def zero_gradients(grads: Mapping[str, torch.Tensor] | None) -> frozenset[str] | None:
    """The inputs whose whole gradient is exactly zero (None: gradients not known)."""
    if grads is None:
        return None
    return frozenset(n for n, g in grads.items() if not bool(torch.count_nonzero(g)))


def starved(inputs: list[str], zero: frozenset[str] | None) -> list[str] | None:
    """The inputs among `inputs` whose whole gradient is zero (None: not known)."""
    return None if zero is None else [n for n in inputs if n in zero]


def _vanishing(node: FlowNode, inputs: list[str], zero: frozenset[str] | None) -> Diagnostic:
    snippet = _hint(node.op, "vanishing")
    hint = (f"to let gradient through, use a straight-through estimator: `{snippet}` "
            "(or a custom autograd.Function whose backward returns grad_output)"
            if snippet else "this op's backward returns zeros; check that this is "
                            "intended, or replace it with a differentiable surrogate")
    count = node.received.nonzero if node.received else 0
    cut = starved(inputs, zero)
    if cut is None or set(cut) == set(inputs):
        what = f"the gradient of {grouped(inputs) or 'its inputs'} vanishes here"
    else:
        rest = [n for n in inputs if n not in cut]
        what = (f"{grouped(cut)} get no gradient at all (every path from them to the output "
                "passes here); " if cut else "the gradient of ") + \
            f"{grouped(rest)} {'lose' if cut else 'loses'} the part that passes here"
    return Diagnostic(
        kind="vanishing_gradient", op=node.op, where=node.label(), inputs=inputs, count=count,
        module=node.module,
        message=(f"{_node_place(node)} ({node.name}) receives a non-zero gradient ({count} "
                 f"element(s)) and passes on only zeros: {what}"),
        hint=hint)


def unit_dim(shape: tuple[int, ...]) -> int | None:
    """The dim that holds a layer's units: channels (dim 1) of 4-D and 5-D activations,
    features (the last dim) otherwise; None for a scalar."""
    if not shape:
        return None
    return 1 if len(shape) in (4, 5) else len(shape) - 1


def dead_units(node: FlowNode) -> tuple[torch.Tensor, int] | None:
    """The units (along `unit_dim`) none of whose elements passes a gradient though some
    received one, and that dim."""
    if node.blocked is None or node.passing is None:
        return None
    dim = unit_dim(tuple(node.blocked.shape))
    if dim is None:
        return None
    others = [d for d in range(node.blocked.dim()) if d != dim]
    blocked = node.blocked.any(dim=others) if others else node.blocked
    passing = node.passing.any(dim=others) if others else node.passing
    return blocked & ~passing, dim


def _saturation(node: FlowNode, inputs: list[str], values: Mapping[str, torch.Tensor],
                zero: frozenset[str] | None) -> Diagnostic | None:
    blocked, passing = node.blocked, node.passing  # the recorder sets both together
    assert blocked is not None and passing is not None
    count, total = int(blocked.sum()), blocked.numel()
    own_hint = _hint(node.op, "saturation")
    hint = own_hint or "these elements receive no gradient"
    if node.module is None:
        key = _index_key(blocked, inputs, values, node)
        return Diagnostic(
            kind="saturation", op=node.op, where=node.label(), inputs=inputs, count=count,
            message=(f"{_node_place(node)} passes no gradient for {count} of {total} "
                     "element(s): they are saturated (outside the op's linear range)"),
            hint=hint, indices={key: mask_indices(blocked)})
    dead, dim = dead_units(node) or (None, None)
    n_dead = int(dead.sum()) if dead is not None else 0
    # counted among the elements that receive a gradient (a max-pool after it passes one in 4)
    receiving = int((blocked | passing).sum())
    if not n_dead and count < SATURATED * receiving:
        return None  # ordinary for a relu layer: half its elements blocked, every unit alive
    message = (f"{_node_place(node)} passes no gradient for {count} of the {receiving} "
               f"element(s) that receive one ({count / max(receiving, 1):.0%} saturated)")
    indices = None
    if dead is not None and n_dead:
        cut = starved(inputs, zero) or []
        message += (f"; {n_dead} of {dead.numel()} unit(s) (dim {dim}) are dead for this "
                    "batch: none of their elements passes a gradient"
                    + (f", and {grouped(cut)} get no gradient at all" if cut else ""))
        indices = {f"{_module(node.module)} dead units": mask_indices(dead)}
        if own_hint is None:
            hint = ("dead units come back with a smaller learning rate, another "
                    "initialisation of the layer before, or a leaky activation")
    return Diagnostic(kind="saturation", op=node.op, where=node.label(), inputs=inputs,
                      count=count, module=node.module, message=message, hint=hint,
                      indices=indices)


def _backward_nan(node: FlowNode, inputs: list[str]) -> Diagnostic:
    bad = sum(p.nonfinite for p in node.passed if p is not None)
    return Diagnostic(
        kind="nan", op=node.op, where=node.label(), inputs=inputs, count=bad,
        module=node.module,
        message=(f"the backward of {_node_place(node)} ({node.name}) turns a finite gradient into "
                 "NaN or infinity: its derivative is infinite or undefined at these inputs "
                 "(e.g. sqrt or log at 0, pow with a fractional exponent at 0)"),
        hint="keep the input away from that point (e.g. sqrt(x + eps)) or clamp it")


def _index_key(blocked: torch.Tensor, inputs: list[str], values: Mapping[str, torch.Tensor],
               node: FlowNode) -> str:
    for name in inputs:
        if name in values and tuple(values[name].shape) == tuple(blocked.shape):
            return name
    return node.label()
