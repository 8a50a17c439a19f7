"""Gradient flow through the backward graph: which node ate the gradient, and where it came from.

One extra forward and backward: every `grad_fn` node reachable from the output gets a hook that
records the gradient arriving (w.r.t. its output) and the gradients it passes on (w.r.t. its
inputs). A node that receives a non-zero gradient and passes on only zeros is a *vanishing
point*; a saturating op (clamp, relu, hardtanh, threshold, max-pool) that blocks part of it is
*saturation*; a node that receives finite values and passes on NaN/inf is where the gradient
became undefined. Each node is mapped back to its source: the expression span (`round(x)`) for
expressions, the user's `file:line` (from anomaly mode's recorded forward traceback) for code,
and for a model the module it ran in. What the findings mean is `findings.py`'s business.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gradscope.expr.ops import BY_GRAD_FN
from gradscope.targets.base import BranchSite, Sourced
from gradscope.tensors import all_finite, as_leaves, grad_nodes, own_node, through_own
from gradscope.usercode import backward_location, place


@dataclass
class GradientStats:
    """How much gradient a tensor carries."""

    numel: int
    nonzero: int  # elements not 0 (not `counted`: 0 for none, 1 for some)
    nonfinite: int
    norm: float | None  # L2 norm; only the graph command shows it, so only it computes it
    counted: bool = True

    @property
    def finite(self) -> bool:
        return self.nonfinite == 0

    @classmethod
    def of(cls, t: torch.Tensor | None, norm: bool = False, count: bool = True
           ) -> GradientStats | None:
        """`count`: how many elements are nonzero (else only whether any is: a hook's pass
        over each gradient of a graph of millions of elements is one aminmax, which tells
        both that and whether every element is finite)."""
        if t is None:
            return None
        d = t.detach()
        if d.layout != torch.strided:  # a sparse gradient (to_sparse's backward): its values
            d = d.to_dense()
        if not d.numel():
            return cls(0, 0, 0, 0.0)
        l2 = float(torch.linalg.vector_norm(d, dtype=torch.float64)) if norm else None
        if not count and d.is_floating_point():  # (complex has no aminmax)
            low, high = (float(v) for v in torch.aminmax(d))  # (NaN: both are)
            if math.isfinite(low) and math.isfinite(high):
                nonzero = int(low != 0 or high != 0)
                return cls(d.numel(), nonzero, 0, l2, counted=nonzero == 0)
        nonfinite = 0 if all_finite(d) else int((~torch.isfinite(d)).sum())
        return cls(d.numel(), int(torch.count_nonzero(d)), nonfinite, l2)


@dataclass
class FlowNode:
    id: int
    name: str  # grad_fn class name, e.g. RoundBackward0
    op: str  # catalogue op or the grad_fn name without Backward
    kind: str  # vanishing | saturation | passes | leaf | other
    where: str  # expression span, user file:line, or ""
    children: list[int] = field(default_factory=list)
    leaf: str | None = None  # input name, for AccumulateGrad
    shape: tuple[int, ...] | None = None
    received: GradientStats | None = None
    passed: list[GradientStats | None] = field(default_factory=list)
    status: str = ""  # vanishing | saturating | nan | ""
    blocked: torch.Tensor | None = None  # elements whose gradient this node zeroed
    grad: torch.Tensor | None = None  # gradient w.r.t. the node's output (the intermediate)
    module: str | None = None  # the module path it ran in (models; "" the top level)
    passing: torch.Tensor | None = None  # a saturating op's elements that pass a gradient

    def label(self) -> str:
        return self.where or self.op


@dataclass
class Flow:
    nodes: dict[int, FlowNode]
    root: int | None
    # forward NaN introductions: (op, where, inputs below, count, module or None)
    forward_nan: list[tuple[str, str, tuple[str, ...], int, str | None]] = field(
        default_factory=list)
    entered: list[str] = field(default_factory=list)  # models: module paths in forward order
    branches: list[BranchSite] = field(default_factory=list)  # what the forward branched on

    def walk(self) -> list[FlowNode]:
        """Nodes in backward order (root first), each once."""
        order, seen, stack = [], set(), [self.root] if self.root is not None else []
        while stack:
            nid = stack.pop(0)
            if nid in seen:
                continue
            seen.add(nid)
            order.append(self.nodes[nid])
            stack.extend(self.nodes[nid].children)
        return order


def _base_name(name: str) -> str:
    return re.sub(r"\d+$", "", name.split("::")[-1])


def _classify(name: str) -> tuple[str, str]:
    base = _base_name(name)
    row = BY_GRAD_FN.get(base)
    if row is not None and row.flow is not None:
        return row.name, row.flow
    if base == "AccumulateGrad":
        return "leaf", "leaf"
    op = base[:-len("Backward")] if base.endswith("Backward") else base
    return op.lower() or name, "other"


GRADSCOPE = str(Path(__file__).resolve().parents[1])
# gradscope's frames that only pass a user's op through (the watched forward's mode)
PASSING = str(Path(__file__).resolve().parents[1] / "targets" / "scopes.py")


def _user_frame(node: Any, ours: tuple[str, ...]) -> str:
    """The innermost frame of the user's code where the node was made (anomaly mode's
    record); none when gradscope itself made it (a Function target's apply: no frame above
    it is the user's, whatever called gradscope)."""
    cls = getattr(node, "_forward_cls", None)
    if isinstance(cls, type):  # a custom Function: its backward is where its gradient comes
        where = backward_location(cls)
        return f"{cls.__name__}.backward ({where})" if where else cls.__name__
    frames = node.metadata.get("traceback_") if hasattr(node, "metadata") else None
    if not frames:
        return ""
    for frame in reversed(frames):
        match = re.search(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', frame)
        if match and match.group(1).startswith(GRADSCOPE) and match.group(1) != PASSING:
            return ""
        if match and not match.group(1).startswith(ours):
            path, line, _, code = match.groups()  # (a notebook cell as its tracebacks
            return f"{place(path, int(line))}: {code.strip()}"  # name it, not its temp file)
    return ""


SourcedForward = Callable[[Mapping[str, torch.Tensor]], Sourced]


def trace(forward: SourcedForward, values: Mapping[str, torch.Tensor], upstream: torch.Tensor,
          anomaly: bool = False, ours: tuple[str, ...] = (), keep_grads: bool = False,
          norms: bool = False,
          seen_grads: Callable[[dict[str, torch.Tensor | None]], None] | None = None) -> Flow:
    """Run forward (with anomaly mode for user code, to learn file:line) and backward once,
    hooking every node of the graph (`norms`: also each gradient's L2 norm, for display).
    `seen_grads` is handed the inputs' gradients this backward made (None: unused), before
    they are dropped."""
    # (sharing the values' storage, as every evaluation's leaves do: a clone is one more copy
    # of a model's parameters, a gigabyte at GPT-2's size)
    leaves = as_leaves(values)
    if anomaly:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # anomaly mode warns that it is slow
            with torch.autograd.set_detect_anomaly(True, check_nan=False):
                seen = forward(leaves)
    else:
        seen = forward(leaves)
    tracer = Tracer(seen, leaves, anomaly=anomaly, ours=ours, keep_grads=keep_grads,
                    norms=norms)
    try:
        if seen.output.requires_grad:
            found = torch.autograd.grad(seen.output, list(leaves.values()), upstream,
                                        allow_unused=True)
            if seen_grads is not None:
                seen_grads(dict(zip(leaves, found, strict=True)))
            del found  # (a model's gradients: a copy of the model, not kept past its reader)
    finally:
        traced = tracer.finish()
    return traced


class Tracer:
    """Hooks on every node of an existing graph: the next backward through it (a user's
    `y.backward(v)` included; the hooks only look) records the flow, `finish` judges it."""

    def __init__(self, seen: Sourced, leaves: Mapping[str, torch.Tensor], *,
                 anomaly: bool = False, ours: tuple[str, ...] = (), keep_grads: bool = False,
                 norms: bool = False) -> None:
        names = {id(t): n for n, t in leaves.items()}
        out = seen.output
        self.nodes: dict[int, FlowNode] = {}
        self.handles: list[Any] = []
        # every node's Python object, held: torch makes a new one (at another address, so
        # with another id) for a node whose object died, and children are named by id
        self.held: list[Any] = []
        top = out.grad_fn  # (one object: each read of grad_fn may make a new one)
        self.root = id(top) if top is not None else None
        self.forward_nan = list(seen.forward_nan)
        self.entered = list(seen.entered)
        self.branches = list(seen.branches)
        self.held.append(top)
        for fn in grad_nodes(top):
            if own_node(fn):  # (gradscope's copy of an input: looked through)
                self.held.append(fn)
                continue
            op, kind = _classify(fn.name())
            src_op, text = seen.where.get(id(fn), (None, ""))
            node = FlowNode(id(fn), fn.name().split("::")[-1], src_op or op, kind,
                            text or (_user_frame(fn, ours) if anomaly else ""),
                            module=seen.modules.get(id(fn)))
            if kind == "leaf":
                node.leaf = names.get(id(fn.variable), "?")
                node.where = node.leaf
            children = through_own([c for c, _ in fn.next_functions if c is not None])
            self.held += [fn, *children]
            node.children = [id(c) for c in children]
            self.nodes[id(fn)] = node
            if kind != "leaf":
                self.handles.append(fn.register_hook(_recorder(node, keep_grads, norms)))

    def finish(self) -> Flow:
        for h in self.handles:
            h.remove()
        self.handles = []
        for node in self.nodes.values():
            _judge(node)
        return Flow(self.nodes, self.root, self.forward_nan, self.entered, self.branches)


def _recorder(node: FlowNode, keep_grads: bool, norms: bool):
    def hook(grad_inputs, grad_outputs):
        received = grad_outputs[0] if grad_outputs else None
        if keep_grads and received is not None:
            node.grad = received.detach().clone()
        node.shape = tuple(received.shape) if received is not None else None
        # (a count of nonzero elements is shown by the graph command, and read for a node
        # that passes no gradient on: only then is it counted)
        node.passed = [GradientStats.of(g, norms, count=norms) for g in grad_inputs]
        stopped = all(p is None or p.nonzero == 0 for p in node.passed)
        node.received = GradientStats.of(received, norms, count=norms or stopped)
        first = grad_inputs[0] if grad_inputs else None
        # only a saturating op is judged on which elements it blocked
        if node.kind == "saturation" and received is not None and first is not None \
                and first.shape == received.shape:
            node.blocked = (received != 0) & (first == 0)
            node.passing = first != 0
    return hook


def _judge(node: FlowNode) -> None:
    r = node.received
    if r is None:
        return
    passed = [p for p in node.passed if p is not None]
    if r.finite and any(not p.finite for p in passed):
        node.status = "nan"
    elif r.nonzero and (not passed or all(p.nonzero == 0 for p in passed)) and node.kind in (
            "vanishing", "other", "saturation"):
        node.status = "vanishing"
    elif node.kind == "saturation" and node.blocked is not None and bool(node.blocked.any()):
        node.status = "saturating"


def inputs_below(flow: Flow, node: FlowNode) -> list[str]:
    found, stack, seen = set(), list(node.children), set()
    while stack:
        nid = stack.pop()
        if nid in seen:
            continue
        seen.add(nid)
        child = flow.nodes[nid]
        if child.leaf:
            found.add(child.leaf)
        stack.extend(child.children)
    return sorted(found)


def vanishing_inputs(flow: Flow, catalogue_only: bool = False) -> set[str]:
    """Inputs below a vanishing point; with `catalogue_only`, below a known piecewise-constant
    op (round, floor, ...) only, whose zero gradient is never the true derivative."""
    found: set[str] = set()
    for node in flow.walk():
        if node.status == "vanishing" and (node.kind == "vanishing" or not catalogue_only):
            found.update(inputs_below(flow, node))
    return found
