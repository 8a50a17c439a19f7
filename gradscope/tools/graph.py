"""`gradscope graph`: the backward graph with the gradient flowing through every node, on the
runner's inputs and the gradient-flow trace; a plain dataclass that renders as a rich Tree,
JSON or Graphviz DOT (render/graph.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from gradscope._version import __version__
from gradscope.compare.tolerance import Tolerance
from gradscope.engines.fd.policy import DEFAULT_EPS
from gradscope.errors import UsageError
from gradscope.evidence import flow
from gradscope.evidence.backward import switched_off
from gradscope.explain import findings
from gradscope.features.inplace import culprits
from gradscope.options import Request
from gradscope.report import kinds
from gradscope.report.model import Diagnostic
from gradscope.runner import prepare, seeded
from gradscope.tensors import as_leaves
from gradscope.usercode import OURS, contained, user_code


@dataclass
class GraphNode:
    id: int
    name: str
    op: str
    where: str
    kind: str
    status: str
    shape: list[int] | None
    received: dict[str, Any] | None
    passed: list[dict[str, Any] | None]
    children: list[int]
    leaf: str | None = None
    module: str | None = None  # models: the module path it ran in ("" the top level)


@dataclass
class GraphReport:
    target: str
    target_kind: str
    root: int | None
    nodes: list[GraphNode]
    diagnostics: list[Diagnostic]
    schema: str = kinds.GRAPH
    version: str = __version__

    @property
    def passed(self) -> bool:
        return not any(n.status for n in self.nodes)

    def _repr_svg_(self) -> str:
        """The picture where only SVG is shown (Jupyter prefers `_repr_html_`)."""
        return self.plot().svg

    def _repr_html_(self) -> str:
        """The picture in a notebook cell, scaled to its width."""
        return self.plot()._repr_html_()

    def plot(self) -> Any:
        """The backward graph as a Picture (`--svg`'s drawing)."""
        from gradscope.render import graph_picture

        return graph_picture(self)

    def save(self, path: str | Path) -> Path:
        """Write the picture (.svg), Graphviz DOT (.dot) or the data (.json)."""
        suffix = Path(path).suffix.lower()
        if suffix in (".dot", ".json"):
            from gradscope.render.graph import dot
            from gradscope.render.json import dumps

            text = dot(self) if suffix == ".dot" else dumps(self) + "\n"
            Path(path).write_text(text, encoding="utf-8")
            return Path(path)
        if suffix != ".svg":
            raise UsageError(f"a backward graph saves to .svg, .dot or .json, not "
                             f"{Path(path).name!r}")
        return self.plot().save(path)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {"schema": data.pop("schema"), "version": data.pop("version"), **data}


@contained("graph")
def graph(request: Request) -> GraphReport:
    """The backward graph of the target at the request's inputs, with gradient flow."""
    with seeded(request.options.seed):
        return _graph(request)


def _graph(request: Request) -> GraphReport:
    prepared = prepare(request)
    target, cast = prepared.target, prepared.bound.cast
    with torch.enable_grad():  # an ordinary call (a forward that registers a hook needs it)
        out = target.forward(as_leaves({n: v.clone() for n, v in cast.items()}))
    if not out.requires_grad:  # no graph to draw
        raise switched_off(target) or UsageError(
            "the output does not depend differentiably on any input (only through "
            "comparisons or constants): it has no backward graph")
    upstream = prepared.bound.upstream.tensor_for(out)
    source = target.flow_source()
    if source is None:
        raise UsageError("gradscope graph shows a first-order backward graph; --order 2 has "
                         "none of its own")
    with user_code("backward"):
        traced = flow.trace(source.forward, cast, upstream.detach(), anomaly=source.anomaly,
                            ours=OURS, norms=True)
    walked = list(traced.walk())
    number = {n.id: k for k, n in enumerate(walked)}  # ids in walk order, not addresses:
    nodes = [GraphNode(number[n.id], n.name, n.op, n.label(), n.kind, n.status,  # the same
                       list(n.shape) if n.shape is not None else None,  # graph twice gives
                       asdict(n.received) if n.received else None,  # the same JSON and DOT
                       [asdict(p) if p else None for p in n.passed],
                       [number[c] for c in n.children if c in number], n.leaf,
                       n.module if n.leaf is None else None)
             for n in walked]
    found = findings.diagnostics(traced, cast, set(target.names))
    with user_code("backward"):
        wrong = _in_place(prepared, upstream.detach())
    nodes = [replace(n, status=WRONG) if not n.status and _is_wrong(n, wrong) else n
             for n in nodes]
    return GraphReport(target.text, target.kind, number.get(traced.root, 0), nodes,
                       [*found, *culprits.diagnostics(wrong)])


WRONG = "wrong"  # a node status: its custom backward departs from its forward's derivative


def _in_place(prepared: Any, upstream: torch.Tensor) -> list[Any]:
    """The in-place check `check` runs on every custom Function and hook of the run (each
    call's backward against finite differences of its own forward): the graph names the ones
    whose backward is wrong. --plain leaves it out, as the check does."""
    target, options = prepared.target, prepared.options
    if not target.runs_user_code or options.plain:
        return []
    tol = Tolerance.for_dtype(options.dtype, options.rtol, options.atol)
    found = culprits.check_in_place(target.forward, prepared.bound.cast, upstream, tol,
                                    options.eps or DEFAULT_EPS, options.max_fd, options.sample,
                                    options.seed)
    return [c for c in found if c.wrong]


def _is_wrong(node: GraphNode, wrong: list[Any]) -> bool:
    """A custom Function's node whose class the in-place check found wrong."""
    for check in wrong:
        cls = getattr(check, "cls", None)
        if cls is not None and (node.where == check.label
                                or node.name == f"{cls.__name__}Backward"):
            return True
    return False
