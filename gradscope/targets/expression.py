"""An expression as a Target: it evaluates its IR in torch (for autograd), exposes the IR (for
the symbolic engine), and reports branch ids of its kinky ops plus which inputs enter
elementwise (for the finite-difference engine), all read from the op table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import torch

from gradscope.errors import UsageError
from gradscope.expr import ir
from gradscope.expr.incremental import IncrementalColumns
from gradscope.expr.ops import OPS
from gradscope.expr.ops.base import POLE
from gradscope.expr.parse import constant_value
from gradscope.expr.to_torch import MetaUnknown, evaluate
from gradscope.targets.base import BranchSite, FlowSource, Sizes, Sourced, SymbolicForm, Target
from gradscope.targets.branches import pieces
from gradscope.tensors import all_finite

# Finite differences keep subexpressions evaluated at the base point for reuse up to this
# many elements in all (512 MB in float64); past it every point is evaluated in full.
MAX_REUSED_ELEMENTS = 1 << 26


@dataclass(frozen=True)
class Branch:
    """A kinky op application in the expression: its op name and source text."""

    op: str
    where: str
    inputs: tuple[str, ...]


class ExpressionTarget(Target):
    """An expression: evaluated from its IR in torch, differentiated by sympy from the same IR,
    its kinks and elementwise structure read from the op table."""

    def __init__(self, text: str, expression: ir.Expression) -> None:
        super().__init__(text, "expression")
        self.expression = expression
        self._kinky: dict[tuple[int, int], bool] = {}
        self._sites: dict[int, int] = {}
        self._find_sites()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n in self.expression.inputs if n not in self.constants)

    def hold(self, constants: Mapping[str, torch.Tensor]) -> None:
        """Make these inputs data (--const): no longer inputs, their values fixed. The kink
        sites are found again: a site that only constants reach cannot kink."""
        self.constants = dict(constants)
        self._kinky.clear()
        self._find_sites()

    def _with(self, values: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
        return {**values, **self.constants} if self.constants else values

    @property
    def readable(self) -> bool:
        return True

    def symbolic(self) -> SymbolicForm:
        return SymbolicForm(self.expression, {n: c.detach() for n, c in self.constants.items()})

    def flow_source(self) -> FlowSource:
        return FlowSource(self.sourced, anomaly=False, watch_first=True)

    def forward(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return evaluate(self.expression, self._with(values))

    def _find_sites(self) -> None:
        """The kinky op applications in evaluation (post-)order: the order of traced()'s
        branch ids. A constant argument that decides the kink (x**2, x/3) leaves an op out."""
        order: list[ir.Call] = []

        def post(node: ir.Node) -> None:
            if isinstance(node, ir.Call):
                for arg in node.args:
                    post(arg)
                if OPS[node.op].branch is not None and self._can_kink(node):
                    order.append(node)

        post(self.expression.root)
        self._sites = {id(node): k for k, node in enumerate(order)}
        self.branch_sites = [Branch(node.op, self.expression.text(node),
                                    tuple(n for n in self.names if ir.depends_on(node, n)))
                             for node in order]

    def traced(self, values: Mapping[str, torch.Tensor], *,
               reuse: Mapping[int, torch.Tensor] | None = None,
               base_branches: list[torch.Tensor] | None = None
               ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Forward plus the branch id of every kinky op application (`branch_sites` order).
        `reuse` maps nodes to values computed before (their subtrees are not evaluated, and
        their branch ids are taken from `base_branches`)."""
        sites = self._sites
        branches: list = list(base_branches) if base_branches is not None else [None] * len(sites)

        def visit(node: ir.Call, args: list, out: torch.Tensor) -> None:
            k = sites.get(id(node))
            if k is not None:
                branches[k] = OPS[node.op].branch_ids(args, node.names, node.kwargs)

        out = evaluate(self.expression, self._with(values), visit=visit if sites else None,
                       reuse=reuse)
        return out, branches

    def traced_around(self, base: Mapping[str, torch.Tensor]):
        """traced(base); a factory of traced functions for points that differ from `base`
        in one input only: each reuses the subexpressions without that input, evaluated here
        once (finite differences move one input at a time; `3*a + log(c)` moving `a` need not
        recompute `log(c)`); and a factory of column evaluators for the dense inputs (None
        where memory forbids keeping every node's base value)."""
        deps = self._dependencies
        base = self._with(base)
        frontier: dict[str, set[int]] = {}
        for name in self.names:
            keep: set[int] = set()
            for node in self.expression.walk():
                if isinstance(node, ir.Call) and name in deps[id(node)]:
                    keep.update(id(a) for a in node.args
                                if isinstance(a, ir.Call) and name not in deps[id(a)])
            frontier[name] = keep
        wanted = set().union(*frontier.values()) if frontier else set()
        kept: dict[int, torch.Tensor] = {}
        # Dense inputs get column-wise evaluation, which needs the base value of every node on
        # their paths and of the constants those nodes take.
        dense = set(self.names) - self.elementwise_inputs
        needed: set[int] = set()
        for node in self.expression.walk():
            if isinstance(node, ir.Call) and deps[id(node)] & dense:
                needed.add(id(node))
                needed.update(id(a) for a in node.args)
        every: dict[int, torch.Tensor] | None = {} if dense else None
        sites = self._sites
        branches: list = [None] * len(sites)

        def visit(node: ir.Call, args: list, out: torch.Tensor) -> None:
            if id(node) in wanted:
                kept[id(node)] = out
            if every is not None and id(node) in needed:
                every[id(node)] = out
            k = sites.get(id(node))
            if k is not None:
                branches[k] = OPS[node.op].branch_ids(args, node.names, node.kwargs)

        out = evaluate(self.expression, base, visit=visit)
        if sum(t.numel() for t in kept.values()) > MAX_REUSED_ELEMENTS:
            kept, frontier = {}, {}  # memory first: every point is evaluated in full
        if every is not None and sum(t.numel() for t in every.values()) > MAX_REUSED_ELEMENTS:
            every = None

        def moving(name: str):
            reuse = {i: kept[i] for i in frontier.get(name, ()) if i in kept}
            if not reuse:
                return self.traced
            return lambda values: self.traced(values, reuse=reuse, base_branches=branches)

        def columns(name: str) -> IncrementalColumns | None:
            if every is None or name in self.elementwise_inputs:
                return None
            path = {i for i, names in deps.items() if name in names}
            return IncrementalColumns(self.expression, name, base, every, sites, branches, path)

        return out, branches, moving, columns

    @cached_property
    def _dependencies(self) -> dict[int, frozenset[str]]:
        """The inputs each node depends on, by node id (one pass, children first)."""
        deps: dict[int, frozenset[str]] = {}

        def visit(node: ir.Node) -> frozenset[str]:
            if isinstance(node, ir.Var):
                found = frozenset((node.name,))
            elif isinstance(node, ir.Call):
                found = frozenset().union(*(visit(a) for a in node.args))
            else:
                found = frozenset()
            deps[id(node)] = found
            return found

        visit(self.expression.root)
        return deps

    def sizes(self, shapes: Mapping[str, tuple[int, ...]]) -> Sizes:
        """The values the expression makes from inputs of these shapes (output and
        intermediates), found on meta tensors (shapes only, nothing allocated): the largest,
        with its source text and shape, and their sum. Sizes() where meta evaluation is not
        possible. An elementwise expression's values are all at most its inputs' broadcast:
        read from the shapes alone (meta kernels written in Python import torch._dynamo on
        their first call, 0.6 s of a small check's start)."""
        quick = self._elementwise_sizes(shapes)
        if quick is not None:
            return quick
        found = [0, "", (), 0]

        def visit(node: ir.Call, args: list, out: torch.Tensor) -> None:
            if not isinstance(out, torch.Tensor):
                return
            found[3] += out.numel()
            if out.numel() > found[0]:
                found[:3] = [out.numel(), self.expression.text(node), tuple(out.shape)]

        meta = {n: torch.empty(s, dtype=torch.float64, device="meta") for n, s in shapes.items()}
        meta.update({n: torch.empty(c.shape, dtype=c.dtype, device="meta")
                     for n, c in self.constants.items()})
        try:
            evaluate(self.expression, meta, visit=visit)
        except UsageError:
            raise
        except MetaUnknown:  # an op whose size only its data tells, without a bound
            return Sizes()
        except Exception:  # (torch's own meta kernels can fail otherwise: the real
            return Sizes()  # evaluation, which reports torch's error well, will tell)
        return Sizes(found[0], found[1], found[2], found[3])

    def _elementwise_sizes(self, shapes: Mapping[str, tuple[int, ...]]) -> Sizes | None:
        """Sizes of an elementwise expression: every value it makes is at most the broadcast of
        its inputs and constants (the sum bounded by one such value per call). None where it is
        not elementwise or the shapes do not broadcast (the meta evaluation says why)."""
        if not self.is_elementwise:
            return None
        try:
            shape = tuple(torch.broadcast_shapes(*shapes.values(), *(
                tuple(c.shape) for c in self.constants.values())))
        except RuntimeError:
            return None
        calls = sum(1 for n in self.expression.walk() if isinstance(n, ir.Call))
        count = math.prod(shape)
        return Sizes(count, self.expression.text(self.expression.root), shape,
                     count * max(1, calls))

    def sourced(self, values: Mapping[str, torch.Tensor]):
        """Forward that also maps each grad_fn to its op and source span, and notes the first
        ops whose output is NaN/inf from finite inputs (for the gradient-flow analysis)."""
        where: dict[int, tuple[str, str]] = {}
        keep: list = []  # the grad_fns `where`'s ids are of, alive while it is read
        forward_nan: list[tuple[str, str, tuple[str, ...], int, None]] = []
        branches: list[BranchSite] = []

        def visit(node: ir.Call, args: list, out: torch.Tensor) -> None:
            fn = out.grad_fn
            if fn is not None and id(fn) not in where:
                where[id(fn)] = (node.op, self.expression.text(node))
                keep.append(fn)
            if id(node) in self._sites:
                site = self._branch_site(node, args)
                if site is not None:
                    branches.append(site)
            tensors = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
            if out.is_floating_point() and not all_finite(out) and all(
                    all_finite(a) for a in tensors):
                bad = int((~torch.isfinite(out)).sum())
                inputs = tuple(n for n in self.names if ir.depends_on(node, n))
                forward_nan.append((node.op, self.expression.text(node), inputs, bad, None))

        out = evaluate(self.expression, self._with(values), visit=visit)
        return Sourced(out, where, forward_nan, keep=keep, branches=branches)

    def _branch_site(self, node: ir.Call, args: list) -> BranchSite | None:
        """Which piece of a kinky op each element of its first argument fell in, each piece
        named by the argument's values there (None: the op's pieces are not per element)."""
        first = args[0] if args else None
        if not isinstance(first, torch.Tensor) or OPS[node.op].kink == POLE:
            return None  # (a pole or a domain's edge is no branch with a side to test)
        ids = OPS[node.op].branch_ids(args, node.names, node.kwargs)
        if not isinstance(ids, torch.Tensor) or ids.shape != first.shape:
            return None
        text = self.expression.text(node.args[0])
        return BranchSite(self.expression.text(node), node.op,
                          pieces(ids.detach(), first.detach(), text))

    def _can_kink(self, node: ir.Call) -> bool:
        """False where the op's kink provably cannot be crossed: constant arguments decide it
        (the row's `kink_args`: x**2, x/3) or nothing in it depends on an input."""
        key = node.span
        gate = OPS[node.op].kinks_if
        if gate is not None and not gate(node.kwargs):
            return False
        if key not in self._kinky:
            positions = OPS[node.op].kinky_args(tuple(constant_value(a) for a in node.args))
            self._kinky[key] = any(ir.depends_on(node.args[k], n) for k in positions
                                   for n in self.names)
        return self._kinky[key]

    @property
    def elementwise_inputs(self) -> set[str]:
        """Inputs on which the output depends elementwise (through broadcasting only)."""
        return {n for n in self.names if n in self._elementwise}

    @cached_property
    def _elementwise(self) -> frozenset[str]:
        """Every name the expression reads elementwise, inputs and --const data alike (what
        --const holds changes which of them are inputs, never this)."""
        return frozenset(n for n in self.expression.inputs
                         if _elementwise_in(self.expression.root, n))

    @cached_property
    def is_elementwise(self) -> bool:
        return all(OPS[n.op].elementwise for n in self.expression.walk()
                   if isinstance(n, ir.Call))

    def numbers(self) -> dict[str, float]:
        """The numbers written in the expression (`3*a`: 3)."""
        out: dict[str, float] = {}
        for node in self.expression.walk():
            if isinstance(node, ir.Num) and node.value not in (0, 1, -1):
                out.setdefault(f"the {ir.show(node)} written in the expression", node.value)
        return out

    def domain(self, name: str) -> tuple[float, float] | None:
        """Where default random values for `name` should lie: the domain of the first op that
        takes `name` directly as an argument (log(c) → c > 0)."""
        for node in self.expression.walk():
            if isinstance(node, ir.Call) and OPS[node.op].domain is not None and any(
                    isinstance(a, ir.Var) and a.name == name for a in node.args):
                return OPS[node.op].domain
        return None


def _elementwise_in(node: ir.Node, name: str) -> bool:
    if not ir.depends_on(node, name):
        return True
    if isinstance(node, ir.Var):
        return True
    assert isinstance(node, ir.Call)
    if not OPS[node.op].elementwise:
        return False
    return all(_elementwise_in(a, name) for a in node.args)
