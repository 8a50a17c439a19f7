"""Whether a Function's departure reaches the target: the proof a note needs.

A custom Function whose backward departs from its own forward's derivative (culprits.py) is
only a note where the target's gradient would be the same with the derivative in its place —
a symmetrised gradient fed a symmetric matrix, a convention the next op projects away. That is
computed, not assumed from comparisons that may have had no power (three random projections
of a float32 model at 10⁹ parameters see nothing of a 1 % error):

* `departure` — per argument of one wrong call, the derivative's VJP minus what its backward
  returned, with the gradient the call got: full size where finite differences compared every
  element, else autograd of the Function's own `forward` (called as a plain function, its
  backward left out), trusted only where it agreed with the finite differences on every
  element they compared (rule 3). None: neither is there, so nothing is proven.
* `moved` — one more watched forward of the target keeps each wrong call's arguments with
  their graph; backward from those arguments with the departures as their gradients is what
  the target's gradient moves by (first order, every wrong call at once).

Moved beyond the target's tolerance: the departure is the target's error, and the run fails
naming the Function (rule 1: evidence about the target). Within it: a note, with its proof."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from gradscope.compare.elements import compare
from gradscope.compare.tolerance import Tolerance
from gradscope.engines.base import Answer
from gradscope.explain import relations
from gradscope.features.inplace.calls import FunctionCall, joined, wrapped
from gradscope.report.status import Status
from gradscope.targets.oldstyle import forward_itself
from gradscope.tensors import as_leaves, grad_nodes

if TYPE_CHECKING:
    from gradscope.features.inplace.culprits import ClassCheck

Departure = Mapping[str, torch.Tensor]  # per argument name: derivative's VJP − backward's


@dataclass(frozen=True)
class Reach:
    """What the target's gradient moves by with every wrong Function's derivative in place of
    its backward: per input, how many elements move beyond the tolerance (only those that
    do), and the largest move beside the tolerance; `unproven`: why it was not computed."""

    moved: Mapping[str, int]
    worst: float = 0.0
    unproven: str | None = None

    @property
    def reaches(self) -> bool:
        return self.unproven is None and bool(self.moved)


def departure(call: FunctionCall, names: Sequence[str], checked: Mapping[str, torch.Tensor],
              v: torch.Tensor, compared: Mapping[str, relations.Arrays], tol: Tolerance,
              every: bool = False) -> Departure | None:
    """Per argument compared, the derivative's VJP with `v` minus the backward's answer (0
    where the comparison found agreement or a kink; a flat forward's departure counted, since
    it reaches the target as any other; `every`: at every element judged, a common factor
    within the tolerance too); None where neither full finite differences nor a proven
    autograd of the forward give it at every element."""
    derived = _derivative(call, names, checked, v)
    out = {}
    for name, arrays in compared.items():
        judged = (arrays.status == Status.OK.code) | (arrays.status == Status.MISMATCH.code)
        wrong = judged if every else judged & _disagrees(arrays.autograd, arrays, judged, tol)
        agreed = judged & ~wrong
        own = derived.get(name) if derived is not None else None
        if own is not None and bool(judged.any()) and not bool(
                (judged & _disagrees(own, arrays, judged, tol)).any()):
            out[name] = torch.where(agreed, 0.0, own - arrays.autograd)
        elif not bool((arrays.status == Status.UNCHECKED.code).any()):
            out[name] = torch.where(wrong, arrays.reference - arrays.autograd, 0.0)
        else:
            return None
    return out


def _derivative(call: FunctionCall, names: Sequence[str], checked: Mapping[str, torch.Tensor],
                v: torch.Tensor) -> dict[str, torch.Tensor] | None:
    """autograd of the call's own forward (float64, at its arguments) with `v`; None where it
    has no graph, refuses, or reaches a custom Function or op (its backward would answer,
    perhaps the very one checked)."""
    leaves = {n: t.detach().clone().requires_grad_(True) for n, t in checked.items()}
    args = [leaves.get(names[i], a) for i, a in enumerate(call.args)]
    try:
        with torch.enable_grad():
            out = joined(forward_itself(call.cls)(*args, **call.kwargs))
            if out.grad_fn is None or out.shape != v.shape or _custom(out):
                return None
            grads = torch.autograd.grad(out, list(leaves.values()), v.to(out.dtype),
                                        allow_unused=True)
    except Exception:  # (a forward that refuses grad mode or a stand-in ctx: not proven)
        return None
    return {n: (g if g is not None else torch.zeros_like(leaves[n])).detach()
            for n, g in zip(leaves, grads, strict=True)}


def _custom(out: torch.Tensor) -> bool:
    """Whether `out`'s graph holds a custom Function's or op's node."""
    return any(getattr(node, "_forward_cls", None) is not None
               for node in grad_nodes(out.grad_fn))


def _disagrees(answer: torch.Tensor, arrays: relations.Arrays, judged: torch.Tensor,
               tol: Tolerance) -> torch.Tensor:
    """Where `answer` disagrees with the finite differences, among the elements they judged
    (a flat forward's too: those are ok in `arrays.status`, a surrogate's excuse)."""
    error = torch.where(judged, arrays.error, 0.0) if arrays.error is not None else None
    cmp = compare(answer.to(arrays.reference.dtype),
                  [Answer(torch.where(judged, arrays.reference, 0.0), error)], tol)
    return cmp.status == Status.MISMATCH.code


def moved(forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor],
          values: Mapping[str, torch.Tensor], checks: Sequence[ClassCheck],
          grads: Mapping[str, torch.Tensor], tol: Tolerance) -> Reach:
    """How far the target's gradient (`grads`, at `values`) moves with each wrong call's
    departure as the gradient of its arguments, judged at `tol`."""
    wrong = [(c.cls, w) for c in checks for w in c.wrong]
    if any(w.call is None or w.departure is None for _, w in wrong):
        return Reach({}, unproven="its derivative is known neither from finite differences "
                     "of every element nor from autograd of its forward")
    leaves = as_leaves(values)
    calls: list[FunctionCall] = []
    with torch.enable_grad(), wrapped(list(dict.fromkeys(c for c, _ in wrong)), calls,
                                      keep=lambda a: a):
        out = forward(leaves)
    try:
        pairs = _pairs(wrong, calls)
        if isinstance(pairs, str):
            return Reach({}, unproven=pairs)
        wanted = [n for n, t in leaves.items() if t.requires_grad and n in grads]
        if not pairs or not wanted:  # (no argument it departs in carries a gradient back)
            return Reach({})
        return _streamed(pairs, {n: leaves[n] for n in wanted}, grads, tol)
    finally:
        del out
        for c in calls:  # (the arguments hold the graph, and the graph the model's copy)
            c.args, c.node = (), None


def _pairs(wrong: Sequence[tuple[type, Any]], calls: Sequence[FunctionCall]
           ) -> list[tuple[torch.Tensor, torch.Tensor]] | str:
    """Each wrong call's arguments in the second forward, with its departure as their
    gradient; a reason where that forward did not repeat the call (then nothing is proven)."""
    by_class: dict[type, list[FunctionCall]] = {}
    for c in calls:
        by_class.setdefault(c.cls, []).append(c)
    pairs = []
    for cls, w in wrong:
        mine = by_class.get(cls, [])
        if w.index >= len(mine):
            return "a second forward did not make the same calls"
        names = w.names
        for i, (arg, kept) in enumerate(zip(mine[w.index].args, w.call.args, strict=False)):
            gap = w.departure.get(names[i]) if i < len(names) else None
            if gap is None or not isinstance(arg, torch.Tensor):
                continue
            if arg.shape != kept.shape or not torch.equal(arg.detach(), kept):
                return "a second forward gave it other arguments"
            if arg.requires_grad and bool(gap.ne(0).any()):
                pairs.append((arg, gap.to(arg.dtype).reshape(arg.shape)))
    return pairs


def _streamed(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]],
              leaves: Mapping[str, torch.Tensor], grads: Mapping[str, torch.Tensor],
              tol: Tolerance) -> Reach:
    """Backward from the wrong calls' arguments with their departures, each input's move
    judged as it arrives and dropped (a hook after its accumulation): one tensor's move at a
    time in memory, never a copy of a model's every gradient."""
    judged: dict[str, tuple[int, float]] = {}

    def hook(name: str) -> Callable[[torch.Tensor], None]:
        def judge(leaf: torch.Tensor) -> None:
            if leaf.grad is not None:
                judged[name] = _judged(leaf.grad, grads[name], tol)
            leaf.grad = None
        return judge

    handles = [t.register_post_accumulate_grad_hook(hook(n)) for n, t in leaves.items()]
    try:
        with torch.enable_grad():
            torch.autograd.backward([a for a, _ in pairs], [d for _, d in pairs],
                                    inputs=list(leaves.values()))
    finally:
        for h in handles:
            h.remove()
    return Reach({n: k for n, (k, _) in judged.items() if k},
                 max((w for _, w in judged.values()), default=0.0))


def _judged(move: torch.Tensor, grad: torch.Tensor, tol: Tolerance) -> tuple[int, float]:
    """How many elements of one input move beyond atol + rtol·|gradient|, and the largest
    move beside that bound."""
    g = grad.to(move.dtype)
    ratio = (move.abs() / (tol.atol_for(g) + tol.rtol * g.abs())).nan_to_num(0.0)
    return int((ratio > 1).sum()), float(ratio.max()) if ratio.numel() else 0.0
