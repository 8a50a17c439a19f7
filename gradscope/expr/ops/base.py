"""The row type of the op table and the helpers that build rows.

One `Op` says everything gradscope knows about a function: how torch computes it, its sympy form
(whose derivative follows torch's convention at kinks), where its kinks, jumps or poles are, how
it folds constants, how a reduction takes in one changed element, which `grad_fn` nodes torch
builds for it and what gradient-flow analysis should call them. Nothing outside `expr/ops/`
names an op; everything else reads these fields.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.expr import ir

Tensor = torch.Tensor
ELEMENTWISE, REDUCTION, STRUCTURAL, COMPARE = "elementwise", "reduction", "structural", "compare"
KINK, JUMP, POLE = "kink", "jump", "pole or edge of the domain"
VANISHES, SATURATES, PASSES = "vanishing", "saturation", "passes"
MAX_EXPONENT = 1000.0  # constant exponents are bounded so constants never overflow


# Parameter kinds of a row's signature. Tensors are expression nodes; the others are static
# values torch takes as Python objects, parsed from constants in the text, never evaluated.
TENSOR, OPTIONAL, TENSORS = "tensor", "optional tensor", "tensors"
STATIC_KINDS = ("dim", "dims", "int", "ints", "shape", "float", "bool", "str", "index",
                "padding", "contraction", "floats", "sizes", "order")
REQUIRED = object()


@dataclass(frozen=True)
class OpParam:
    name: str
    kind: str  # TENSOR, OPTIONAL, TENSORS or one of STATIC_KINDS
    default: Any = REQUIRED  # a number for a TENSOR: filled in as a constant
    choices: tuple[str, ...] = ()  # the allowed strings of a "str" parameter
    star: bool = False  # takes the rest of the positional arguments (or one list of them)
    # a count's or an int's largest magnitude (`n: int<1024>`): what it makes is bounded
    limit: int | None = None

    @property
    def tensor(self) -> bool:
        return self.kind in (TENSOR, OPTIONAL, TENSORS)


def _integer(a: Any) -> bool:
    """Integer data (bool is a condition or a mask: torch takes it as it is)."""
    return isinstance(a, Tensor) and not a.is_floating_point() and a.dtype != torch.bool


def signature(text: str, **choices: tuple[str, ...]) -> tuple[OpParam, ...]:
    """Parse a row's signature, written as torch documents it:
    `"input, dim: dims = None, keepdim: bool = False"`. A bare name is a tensor, `name?` an
    optional tensor, `*name` the rest of the positional arguments (`*tensors` tensors, `*shape:
    shape` ints). Defaults are literals of gradscope's own text (`inf` allowed)."""
    params = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        head, _, default_text = item.partition("=")
        name, _, kind = head.partition(":")
        name, kind = name.strip(), kind.strip()
        limit = None
        if kind.endswith(">") and "<" in kind:  # `n: int<1024>`: at most 1024 in magnitude
            kind, _, bound = kind[:-1].partition("<")
            limit = int(bound)
        default: Any = REQUIRED
        if default_text.strip():
            raw = default_text.strip()
            default = {"inf": math.inf, "-inf": -math.inf}.get(raw) if "inf" in raw \
                else ast.literal_eval(raw)
        if name.endswith("?"):
            name, kind, default = name[:-1], OPTIONAL, None
        star = name.startswith("*")
        if kind == "list":
            kind = TENSORS
        if star:
            name, kind = name[1:], kind or TENSORS
        else:
            kind = kind or TENSOR
        assert kind in (TENSOR, OPTIONAL, TENSORS, *STATIC_KINDS), kind
        params.append(OpParam(name, kind, default, choices.get(name, ()), star, limit))
    return tuple(params)


@dataclass(frozen=True)
class Op:
    name: str
    kind: str
    arity: tuple[int, int]
    torch: Callable[..., Tensor]
    summary: str
    sympy: Callable[..., Any] | None = None
    # A piece id per element that changes exactly when a kink, jump or pole is crossed, and
    # what crossing it means (KINK, JUMP or POLE).
    branch: Callable[..., Tensor] | None = None
    kink: str | None = None
    # Which argument positions can move an element across the kink, given the arguments'
    # constant values (None where not constant): x**2 cannot kink, x/3 cannot. None: all.
    kink_args: Callable[[tuple[float | None, ...]], tuple[int, ...]] | None = None
    # Whether the call's static parameters give it a kink at all (norm: p <= 1 or inf only).
    kinks_if: Callable[[dict[str, Any]], bool] | None = None
    domain: tuple[float, float] | None = None
    symbol: str | None = None  # operator spelling, for operators
    takes_dim: bool = False
    # Argument positions torch takes as Python numbers when they are constants: its kernels
    # special-case them (torch.pow(x, 2) squares; with a 0-d tensor exponent it runs the
    # generic pow, twenty times slower).
    scalar_args: tuple[int, ...] = ()
    exponent_arg: int | None = None  # a constant here is bounded by MAX_EXPONENT
    condition_arg: int | None = None  # this argument is a comparison (where's condition)
    fold: Callable[..., float] | None = None  # the op on Python numbers (constant folding)
    # Reductions: the reduced value r with one element changed from old to new (n reduced
    # over), without recomputing; `extreme` +1/-1 for max/min (best and second best).
    incremental: Callable[[Tensor, Tensor, Tensor, int], Tensor] | None = None
    extreme: int = 0
    # Structural rows: closed-form adjoints on plain tensors, never autograd.
    vjp: Callable[..., list[Tensor]] | None = None
    jvp: Callable[..., Tensor] | None = None
    vjp_formula: Callable[..., list[Any]] | None = None
    # Gradient-flow analysis: torch's grad_fn names for this op (without the trailing digits),
    # what it does to the gradient (VANISHES, SATURATES, PASSES) and what to suggest.
    grad_fns: tuple[str, ...] = ()
    flow: str | None = None
    hint: str | None = None
    expression: bool = True  # callable in expressions (False: known to flow analysis only)
    # How an expression may call it: torch's parameters (None: `arity` positional tensors and,
    # with takes_dim, an optional dim), other names (`clip`, `linalg.det`), and the tensor
    # methods beyond those torch has under the row's names (`x.t()`).
    signature: tuple[OpParam, ...] | None = None
    # parameters of which torch needs at least one given, not None (clamp: min or max)
    one_of: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    # The same function written with other rows, for the symbolic engine (losses, layer_norm,
    # log_softmax ...): (argument nodes, static parameters) -> IR. Torch still runs the row.
    decompose: Callable[..., Any] | None = None
    # Tensor parameters that take integer data as it is (indices); others get floats. Of
    # those, the ones that take nothing else (gather's index).
    integer_args: tuple[str, ...] = ()
    integers_only: tuple[str, ...] = ()
    # Torch returns (values, indices) when these static parameters are given (max(x, 1)):
    # the expression means the values, and `.values` is accepted after it.
    values_when: tuple[str, ...] = ()
    # Torch returns a tuple (sort: values, indices; chunk: any number of parts): the fields'
    # names ("*" for a tuple of any length). The expression picks one with `[k]` or `.name`,
    # which reaches the torch function as the static parameter `_item`; the fields that are
    # not differentiable (indices) are named in `data_fields`.
    returns: tuple[str, ...] = ()
    data_fields: tuple[str, ...] = ()
    # On meta tensors (the size bound before anything is computed), where the output's size
    # depends on the data (masked_select, combinations): called like `torch`, it returns a
    # meta tensor as large as the output can be.
    bound: Callable[..., Tensor] | None = None
    # The row a call means when an argument that is static here is an expression instead:
    # max(x, y) is maximum(x, y), as in torch.
    otherwise: str | None = None

    @property
    def elementwise(self) -> bool:
        return self.kind in (ELEMENTWISE, COMPARE)

    @property
    def vanishing(self) -> bool:
        """The gradient is zero almost everywhere (piecewise constant)."""
        return self.flow == VANISHES

    # cached: apply() reads them at every evaluation of every node (finite differences too)
    @cached_property
    def params(self) -> tuple[OpParam, ...]:
        """The signature, with the default one of rows that give none."""
        if self.signature is not None:
            return self.signature
        lo, hi = self.arity
        if self.takes_dim:
            lo = hi = 1
        names = ("input", "other", "third")[:hi] if hi <= 3 else ()
        params = tuple(OpParam(n, TENSOR if i < lo else OPTIONAL) for i, n in enumerate(names))
        return params + ((OpParam("dim", "dim", None),) if self.takes_dim else ())

    @cached_property
    def tensor_params(self) -> tuple[OpParam, ...]:
        return tuple(p for p in self.params if p.tensor)

    def slots(self, args: Sequence[Any], names: Sequence[str]) -> list[Any]:
        """The positional tensor arguments of the row's functions (torch, vjp, jvp), from a
        call's arguments: missing optional tensors are None; variadic ones are spread."""
        if not names:
            return list(args)
        given = dict(zip(names, args, strict=True))
        return [given.get(p.name) for p in self.tensor_params]

    def unslot(self, values: Sequence[Any], names: Sequence[str]) -> list[Any]:
        """`slots` undone: one value per call argument."""
        if not names:
            return list(values)
        position = {p.name: i for i, p in enumerate(self.tensor_params)}
        return [values[position[n]] for n in names]

    def apply(self, args: Sequence[Any], names: Sequence[str], params: dict[str, Any],
              bound: bool = False) -> Any:
        """Run the row's torch function (`bound`: its bound) on a call's evaluated arguments.
        Integer data
        (--const) reaches only the parameters that take integers (class indices, gather's
        index); elsewhere it computes in the floating dtype of the other arguments, as a
        float tensor written with whole numbers would."""
        slots = self.slots(args, names)
        if self.integers_only:
            wrong = [n for n in self.floats_for_integers(slots) if n in self.integers_only]
            if wrong:
                raise UsageError(self.integers_hint(wrong[0]))
        if any(_integer(a) for a in slots):
            floats = [a.dtype for a in slots if isinstance(a, Tensor) and a.is_floating_point()]
            dtype = floats[0] if floats else torch.float64
            keep = {i for i, p in enumerate(self.tensor_params) if p.name in self.integer_args}
            slots = [a.to(dtype) if _integer(a) and i not in keep else a
                     for i, a in enumerate(slots)]
        return (self.bound if bound and self.bound is not None else self.torch)(*slots, **params)

    def floats_for_integers(self, slots: Sequence[Any]) -> list[str]:
        """The parameters that take integer data (indices) but got floating tensors."""
        return [p.name for p, a in zip(self.tensor_params, slots, strict=False)
                if p.name in self.integer_args and isinstance(a, Tensor)
                and a.is_floating_point()]

    def integers_hint(self, name: str) -> str:
        return (f"`{name}` of {self.name}() takes integers (indices): give it as data with "
                "--const NAME=VALUE (or an integer tensor)")

    def branch_ids(self, args: Sequence[Any], names: Sequence[str],
                   params: dict[str, Any]) -> Tensor:
        """The row's branch ids for a call's evaluated arguments."""
        assert self.branch is not None
        return self.branch(*self.slots(args, names), **params)

    def kinky_args(self, constants: tuple[float | None, ...]) -> tuple[int, ...]:
        """The argument positions whose dependence on an input can cross the kink."""
        if self.kink_args is None:
            return tuple(range(len(constants)))
        return self.kink_args(constants)


class Build:
    """Makes IR nodes for a decomposition, all at the decomposed call's span; at most
    MAX_BUILT of them (a count argument, diff's n or vander's N, sets how many: the symbolic
    engine steps aside past it)."""

    MAX_BUILT = 2000

    def __init__(self, node: ir.Call, rows: dict[str, Op]) -> None:
        self.span, self.rows = node.span, rows
        self.built = 0

    def num(self, value: float) -> ir.Num:
        return ir.Num(self.span, float(value), float(value).is_integer())

    def __call__(self, op: str, *args: ir.Node | float, **params: Any) -> ir.Call:
        self.built += 1
        if self.built > self.MAX_BUILT:
            raise ValueError(f"its decomposition would make more than {self.MAX_BUILT} "
                             "operations")
        nodes = tuple(a if isinstance(a, ir.Node) else self.num(a) for a in args)
        row = self.rows[op]
        full = {p.name: p.default for p in row.params
                if not p.tensor and p.default is not REQUIRED}
        full.update(params)
        return ir.Call(self.span, op, nodes, tuple(full.items()))

    def reduce(self, node: ir.Node, reduction: str) -> ir.Node:
        return node if reduction == "none" else self("mean" if reduction == "mean" else "sum",
                                                     node)


def given(args: Sequence[ir.Node], names: Sequence[str],
          default: Sequence[str] = ("input",)) -> dict[str, ir.Node]:
    """A decomposition's argument nodes by parameter name: the call's names where it has
    optional tensors, else `default` in order."""
    return dict(zip(names or default, args, strict=True))


def picked(fn: Callable[..., Any], positional: bool = False) -> Callable[..., Tensor]:
    """Torch's function answering with the part of its tuple the expression picked (the static
    parameter `_item`); `positional`: the other static parameters passed by position, where
    torch's overloads take no keywords (hsplit)."""
    def run(*tensors: Tensor, _item: int = 0, **p: Any) -> Tensor:
        return (fn(*tensors, *p.values()) if positional else fn(*tensors, **p))[_item]
    run.__name__ = getattr(fn, "__name__", "picked")
    return run


def written_as(base: str, **fixed: Any) -> Callable[..., ir.Node]:
    """The decomposition that calls row `base` with the call's own parameters (and `fixed`):
    another spelling of a row."""
    def decompose(b: Build, args: Sequence[ir.Node], p: dict, metas: Sequence[Tensor],
                  names: Sequence[str] = ()) -> ir.Node:
        return b(base, *args, **{**p, **fixed})
    return decompose


def decomposed(name: str, fn: Callable[..., Tensor], summary: str, sig: str,
               decompose: Callable[..., ir.Node], **kw: Any) -> Op:
    """A structural row the symbolic engine differentiates as written with other rows."""
    return structural(name, fn, summary, sig, decompose=decompose, **kw)


def structural(name: str, fn: Callable[..., Tensor], summary: str, sig: str,
               choices: dict[str, tuple[str, ...]] | None = None, **kw: Any) -> Op:
    """A structural row with a signature; its arity counts the required tensor arguments and
    all of them."""
    params = signature(sig, **(choices or {}))
    tensors = [p for p in params if p.tensor]
    required = sum(1 for p in tensors if p.default is REQUIRED)
    return Op(name, STRUCTURAL, (required, len(tensors)), fn, summary, signature=params, **kw)


def linear_jvp(fn: Callable[..., Tensor], linear: tuple[int, ...] | None = None) -> Callable:
    """The JVP of an op linear in the tensor arguments at `linear` (None: in all together):
    the op applied to the tangents there, to the values elsewhere."""
    def jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
        use = [t.expand_as(a) if (linear is None or i in linear) else a
               for i, (t, a) in enumerate(zip(ts, args, strict=True))]
        return fn(*use, **p)
    return jvp


def multilinear_jvp(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """The JVP of an op linear in each tensor argument separately (a product): the sum over
    arguments of the op with that argument replaced by its tangent."""
    def jvp(ts: Sequence[Tensor], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
        total = torch.zeros_like(out)
        for i, t in enumerate(ts):
            use = list(args)
            use[i] = t.expand_as(args[i])
            total = total + fn(*use, **p)
        return total
    return jvp


def elementwise(name: str, fn: Callable[..., Tensor], sym: Callable[..., Any], summary: str,
                arity: int = 1, **kw: Any) -> Op:
    return Op(name, ELEMENTWISE, (arity, arity), fn, summary, sympy=sym, **kw)


def straight_through(op: str) -> str:
    """The straight-through estimator of a piecewise-constant tensor method."""
    return f"x + (x.{op}() - x).detach()"


def bounded_pow(a: float, b: float) -> float:
    if abs(b) > MAX_EXPONENT:
        raise OverflowError
    return float(math.pow(a, b))


def whole_nonnegative(value: float | None) -> bool:
    """A constant whole number >= 0 (x**2 is smooth everywhere)."""
    return value is not None and value == value and value >= 0 and float(value).is_integer()
