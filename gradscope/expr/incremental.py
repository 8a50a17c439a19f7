"""IR → finite-difference columns of one input, evaluated without materialising perturbed copies.

A dense finite-difference column perturbs one element of an input and evaluates the whole
expression again: for n elements, n evaluations of an n-element expression (gradcheck's
quadratic cost; vmap batches it but does the same work). Along the way, though, most values
differ from the base point in a single element: `sin(x + h·e_i)` is `sin(x)` except at i. This
evaluator runs a batch of B perturbations at once and keeps, per node, the cheapest exact form:

* `Unmoved`: the node does not depend on the moving input; its base value serves every column;
* `Single`: per column exactly one element differs from the base value: (position, new value),
  B numbers. Elementwise ops map it element by element; `sum`, `mean`, `logsumexp` and `norm`
  fold it into the base result incrementally, `max` and `min` compare it with the base slice's
  best and second best (over all dims: a `Batch` of scalars; over one dim: a `Single` again);
* `Batch`: anything else, stored densely as (B, *shape), the way vmap would.

So a loss such as `sum(sin(x)**2) * mean(cos(x))` costs O(1) per column instead of O(n). An op
that would need a `Single` and a `Batch` together (`x - mean(x)`), a `Single` that spreads
(broadcasting), a reduction of a changed element other than those, or a structural op (matmul,
softmax, ...) on a perturbed value is `Unsupported`:
the finite-difference engine then uses vmap for that input. Branch ids of kinky ops are compared
with the base point per column, as the traced evaluation does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.expr import ir
from gradscope.expr.ops import OPS, REDUCTION
from gradscope.tensors import all_finite, branch_changed


class Unsupported(Exception):
    """The expression needs the general batched evaluation for this input."""


@dataclass
class Unmoved:
    value: Any  # the base value (tensor) or a Python number


@dataclass
class Single:
    shape: tuple[int, ...]
    pos: torch.Tensor  # (B,) flat position of the one element that differs, per column
    new: torch.Tensor  # (B,) its value
    base: torch.Tensor  # the node's value at the base point


@dataclass
class Batch:
    shape: tuple[int, ...]
    data: torch.Tensor  # (B, *shape)


Carried = Unmoved | Single | Batch


class IncrementalColumns:
    """Columns of `name`: f(base with element pos[b] moved by delta[b]) for b in a batch."""

    def __init__(self, expr: ir.Expression, name: str, values: Mapping[str, torch.Tensor],
                 node_values: Mapping[int, torch.Tensor], sites: Mapping[int, int],
                 base_branches: list[torch.Tensor], moving: set[int]) -> None:
        self.expr = expr
        self.name = name
        self.values = values
        self.node_values = node_values  # base value of the op nodes needed, by id
        self.sites = sites  # id(node) → index of its branch id
        self.base_branches = base_branches
        self.width = 1  # largest per-column storage of any node (for batch sizing)
        self.moving = moving  # ids of the nodes that depend on `name`

    # ------------------------------------------------------------------ entry point
    def __call__(self, pos: torch.Tensor, delta: torch.Tensor
                 ) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
        """(outputs (B, *out_shape), {site: (B,) bool, branch differs from the base})."""
        x = self.values[self.name]
        b = pos.numel()
        changed: dict[int, torch.Tensor] = {}
        root = self._run(self.expr.root, pos, x.reshape(-1)[pos] + delta, changed)
        out = self._dense(root, b)
        return out, changed

    def _dense(self, v: Carried, b: int) -> torch.Tensor:
        if isinstance(v, Batch):
            return v.data
        if isinstance(v, Single):
            flat = v.base.reshape(-1)
            out = flat.expand(b, flat.numel()).clone()
            out[torch.arange(b, device=out.device), v.pos] = v.new.to(out.dtype)
            return out.reshape(b, *v.shape)
        base = torch.as_tensor(v.value)
        return base.expand(b, *base.shape).clone()

    # ------------------------------------------------------------------ nodes
    def _run(self, node: ir.Node, pos: torch.Tensor, moved: torch.Tensor,
             changed: dict[int, torch.Tensor]) -> Carried:
        if isinstance(node, ir.Var):
            x = self.values[node.name]
            if node.name != self.name:
                return Unmoved(x)
            return Single(tuple(x.shape), pos, moved, x)
        if isinstance(node, ir.Num | ir.Const):
            return Unmoved(float(node.value))
        assert isinstance(node, ir.Call)
        if id(node) not in self.moving:
            return Unmoved(self.node_values[id(node)])
        op = OPS[node.op]
        base = self.node_values[id(node)]
        params = node.kwargs
        if op.kind == REDUCTION:
            dim = params.get("dim")
            defaults = {p.name: p.default for p in op.params}
            if any(v != defaults[k] for k, v in params.items() if k != "dim") or not (
                    dim is None or isinstance(dim, int)):
                raise Unsupported(f"{node.op} with {params}")
            arg = self._run(node.args[0], pos, moved, changed)
            return self._reduce(node, op, arg, dim, base, changed)
        if not op.elementwise or node.names:
            raise Unsupported(f"{node.op} of a perturbed value")
        args = [self._argument(a, i in op.scalar_args, pos, moved, changed)
                for i, a in enumerate(node.args)]
        return self._elementwise(node, op, args, base, changed)

    def _argument(self, node: ir.Node, scalar: bool, pos: torch.Tensor, moved: torch.Tensor,
                  changed: dict[int, torch.Tensor]) -> Carried:
        if isinstance(node, ir.Num | ir.Const):
            if scalar:
                return Unmoved(float(node.value))
            dtype = self.values[self.name].dtype
            return Unmoved(torch.tensor(node.value, dtype=dtype, device=moved.device))
        return self._run(node, pos, moved, changed)

    def _elementwise(self, node: ir.Call, op: Any, args: list[Carried], base: torch.Tensor,
                     changed: dict[int, torch.Tensor]) -> Carried:
        shape = tuple(base.shape)
        singles = [a for a in args if isinstance(a, Single)]
        batches = [a for a in args if isinstance(a, Batch)]
        if singles and batches:
            raise Unsupported("a single changed element meets a whole changed tensor")
        site = self.sites.get(id(node))
        if singles:
            first = singles[0]
            if first.shape != shape or any(s.shape != shape or not torch.equal(s.pos, first.pos)
                                           for s in singles[1:]):
                raise Unsupported("broadcasting spreads a perturbed element")
            gathered = [a.new if isinstance(a, Single) else _gather(a.value, shape, first.pos)
                        for a in args]
            new = op.torch(*gathered, **node.kwargs)
            if site is not None:
                branch = op.branch(*gathered, **node.kwargs)
                changed[site] = branch_changed(branch, _gather(self.base_branches[site], shape,
                                                               first.pos))
            return Single(shape, first.pos, new, base)
        b = batches[0].data.shape[0]
        lifted = [_lift(a.data, a.shape, len(shape)) if isinstance(a, Batch) else a.value
                  for a in args]
        data = op.torch(*lifted, **node.kwargs)
        data = data.expand(b, *shape) if tuple(data.shape) != (b, *shape) else data
        self.width = max(self.width, base.numel())
        if site is not None:  # (a branch of constant arguments only has no batch dim)
            branch = torch.broadcast_to(op.branch(*lifted, **node.kwargs), (b, *shape))
            changed[site] = self._batch_changed(site, branch)
        return Batch(shape, data)

    def _reduce(self, node: ir.Call, op: Any, arg: Carried, dim: int | None, base: torch.Tensor,
                changed: dict[int, torch.Tensor]) -> Carried:
        site = self.sites.get(id(node))
        if isinstance(arg, Single) and op.extreme:
            return self._extreme(op.extreme > 0, arg, dim, site, changed)
        if isinstance(arg, Single):
            fold = op.incremental  # the row's fold of one changed element
            if fold is None or site is not None:
                raise Unsupported(f"{op.name} of a perturbed element")
            if not all_finite(base):  # inf - inf: only a full evaluation knows
                raise Unsupported(f"{op.name} of a non-finite value")
            old = arg.base.reshape(-1)[arg.pos]
            whole = dim is None or not arg.shape  # a 0-d tensor reduces over any dim to itself
            if whole:
                return Batch((), fold(base.reshape(()), old, arg.new, arg.base.numel()))
            d = dim % len(arg.shape)
            reduced = arg.shape[:d] + arg.shape[d + 1:]
            pos = _drop_axis(arg.pos, arg.shape, d)
            new = fold(base.reshape(-1)[pos], old, arg.new, arg.shape[d])
            return Single(reduced, pos, new, base)
        assert isinstance(arg, Batch)
        b = arg.data.shape[0]
        if dim is None or not arg.shape:  # a 0-d tensor reduces over any dim as over all
            data, kwargs = arg.data.reshape(b, -1), {"dim": 1}
        else:
            data, kwargs = arg.data, {"dim": dim + 1 if dim >= 0 else dim}
        out = op.torch(data, **kwargs)
        self.width = max(self.width, base.numel())
        if site is not None:
            branch = op.branch(data, **kwargs)
            changed[site] = self._batch_changed(site, branch)
        return Batch(tuple(base.shape), out)


    def _batch_changed(self, site: int, branch: torch.Tensor) -> torch.Tensor:
        """Per column of a batched branch id (B, ...): does any element differ from the base?"""
        base = self.base_branches[site].unsqueeze(0)
        return branch_changed(branch, base).reshape(branch.shape[0], -1).any(1)

    def _extreme(self, largest: bool, arg: Single, dim: int | None, site: int | None,
                 changed: dict[int, torch.Tensor]) -> Carried:
        """max/min with one changed element per column, from the base slice's best and second
        best (first occurrences, as torch's argmax/argmin): the new extreme and its index."""
        if not all_finite(arg.base):
            raise Unsupported("max/min over non-finite values")
        whole = dim is None or not arg.shape
        d = 0 if whole else dim % len(arg.shape)
        sign = 1.0 if largest else -1.0  # the largest of sign·x is the extreme
        # one row per reduced slice (rows in the order of the reduced shape)
        slices = (arg.base.reshape(1, -1) if whole
                  else arg.base.movedim(d, -1).reshape(-1, arg.shape[d])) * sign
        first = slices.argmax(1)
        best = slices.gather(1, first.unsqueeze(1)).squeeze(1)
        rest = slices.scatter(1, first.unsqueeze(1), float("-inf"))
        second_at = rest.argmax(1)
        second = rest.gather(1, second_at.unsqueeze(1)).squeeze(1)
        # each column's slice and its coordinate along the reduced dim
        if whole:
            s = torch.zeros_like(arg.pos)
            c = arg.pos
        else:
            inner = 1
            for size in arg.shape[d + 1:]:
                inner *= size
            s = _drop_axis(arg.pos, arg.shape, d)
            c = (arg.pos // inner) % arg.shape[d]
        v = arg.new * sign
        top, at = best[s], first[s]
        alt, alt_at = second[s], second_at[s]
        was_best = c == at
        other, other_at = torch.where(was_best, alt, top), torch.where(was_best, alt_at, at)
        # the moved element wins when above the best of the others, ties to the lower index
        wins = (v > other) | ((v == other) & (c < other_at))
        new = torch.where(wins, v, other) * sign
        index = torch.where(wins, c, other_at)
        if site is not None:
            changed[site] = index != at
        if whole:
            return Batch((), new)
        reduced = arg.shape[:d] + arg.shape[d + 1:]
        base = arg.base.amax(d) if largest else arg.base.amin(d)
        return Single(reduced, s, new.to(base.dtype), base)


def _gather(value: Any, shape: tuple[int, ...], pos: torch.Tensor) -> Any:
    """A constant's element at each column's position (a number stays a number)."""
    if not isinstance(value, torch.Tensor):
        return value
    return value.expand(shape).reshape(-1)[pos]


def _lift(data: torch.Tensor, shape: tuple[int, ...], ndim: int) -> torch.Tensor:
    """(B, *shape) → (B, 1, ..., *shape) with `ndim` dims after B, so that constants of the
    output's rank broadcast against it as they would against the unbatched value."""
    missing = ndim - len(shape)
    if missing <= 0:
        return data
    return data.reshape(data.shape[0], *([1] * missing), *shape)


def _drop_axis(pos: torch.Tensor, shape: tuple[int, ...], d: int) -> torch.Tensor:
    """Flat positions in `shape` → flat positions in `shape` without axis d."""
    inner = 1
    for s in shape[d + 1:]:
        inner *= s
    outer, rest = pos // (shape[d] * inner), pos % inner
    return outer * inner + rest
