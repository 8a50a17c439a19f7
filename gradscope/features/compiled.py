"""--compile BACKEND: the compiled target beside the eager one (targets/compiled.py runs it).

torch.compile changes the function a user trains with: a decomposition or a lowering may
compute another forward or another gradient than eager, with no error (pytorch's "silent
correctness" reports). The compiled output and the compiled gradient for every view's question
are compared element by element with eager's — the output with the check's tolerance, each
gradient also with the references the view holds, which say which side is right. A difference
is evidence about the target the user named, compiled as the user asked: it fails the run
(`compiled_differs`), naming the elements and the relation the difference follows (a factor, a
zero, the right values at other elements). Graph breaks and what dynamo compiled are notes and
the report's `compile` field; the compiled gradient is a column beside autograd's. Where dynamo
compiled nothing (disabled by the environment, every frame skipped), the compiled run was eager
again and compared nothing compiled: the run fails as inconclusive (`compiled_inconclusive`,
with the reason), unless the user accepted the fallback (--compile-fallback: a note)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch

from gradscope.compare.elements import compare
from gradscope.compare.tolerance import Tolerance
from gradscope.evidence.gather import View
from gradscope.explain import relations
from gradscope.features.base import Context, Findings
from gradscope.report import build
from gradscope.report.model import Column, Diagnostic, InputReport
from gradscope.report.status import MISMATCH, OK
from gradscope.targets.compiled import Compiled

LISTED = 4  # indices a finding names


@dataclass(frozen=True)
class CompiledFacts:
    findings: tuple[Diagnostic, ...]
    notes: tuple[str, ...]
    columns: dict[str, torch.Tensor]  # input → the compiled gradient for the table's question


class CompiledTarget(Findings["CompiledFacts"]):
    name = "compiled"
    # what dynamo did (backend, graphs, graph breaks and their reasons, recompiles, whether
    # it ran eagerly after all, seconds); left out without --compile
    fields: ClassVar[Mapping[str, Any]] = {"compile": None}

    def facts(self, ctx: Context) -> CompiledFacts | None:
        compiled = ctx.evidence.alongside
        if not isinstance(compiled, Compiled):
            return None
        tol, eager = ctx.evidence.tol, ctx.evidence.backward.engine.output
        findings = list(_forward(compiled, eager.detach(), tol))
        if compiled.why_eager and not compiled.accepted:
            findings.append(Diagnostic(
                "compiled_inconclusive", "", "compiled run", [], 1,
                f"--compile {compiled.stats.backend if compiled.stats else ''}: "
                f"{compiled.why_eager}; the compiled run was eager again, so no compiled "
                "output or gradient was compared",
                "unset the variable (or make the target's code compilable) to check the "
                "compiled gradient; pass --compile-fallback where running eagerly is fine"))
        if eager.requires_grad and not compiled.differentiable:
            findings.append(Diagnostic(
                "compiled_differs", "", "compiled forward", [], 1,
                "the compiled output carries no gradient (no grad_fn) where eager's does: "
                "backward through the compiled target gives nothing",
                "a graph that detached its output (a torch.no_grad or .detach() dynamo "
                "traced differently), or a backend that dropped autograd"))
        columns: dict[str, torch.Tensor] = {}
        for name in ctx.prepared.target.names:
            for view in ctx.evidence.views:
                got = _answer(compiled, view, name)
                if got is None:
                    continue
                if view is ctx.evidence.table:
                    columns[name] = got
                found = _gradient(ctx, view, name, got, tol)
                if found is not None:
                    findings.append(found)
                    break  # (one finding per input: the first view that shows it)
        return CompiledFacts(tuple(findings), _notes(compiled), columns)

    def reported(self, ctx: Context, inputs: Sequence[InputReport]) -> dict[str, Any]:
        compiled, facts = ctx.evidence.alongside, ctx.of(self)
        if compiled is None or facts is None or compiled.stats is None:
            return {}
        return {"compile": compiled.stats.to_dict(),
                "inputs": [_with_column(i, facts.columns.get(i.name)) for i in inputs]}


def _answer(compiled: Compiled, view: View, name: str) -> torch.Tensor | None:
    """The compiled answer to `view`'s question for `name`, shaped like autograd's (an unused
    input: zeros, which is what its gradient is)."""
    answers = compiled.answers.get(view.label)
    if answers is None or name not in answers:
        return None
    eager = view.autograd[name]
    got = answers[name]
    if got is None:
        return torch.zeros_like(eager)
    return got.reshape(eager.shape) if got.numel() == eager.numel() else None


def _apart(got: torch.Tensor, want: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """Where two answers to one question differ beyond the check's tolerance (NaN equals
    NaN: both undefined is no difference)."""
    got, want = got.double(), want.double().to(got.device)
    close = torch.isclose(got, want, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
    return ~close


def _forward(compiled: Compiled, eager: torch.Tensor, tol: Tolerance) -> list[Diagnostic]:
    out = compiled.output
    if out.shape != eager.shape:
        return [Diagnostic("compiled_differs", "", "compiled forward", [], 1,
                           f"the compiled output has shape {list(out.shape)} where eager's "
                           f"has {list(eager.shape)}", _HINT)]
    wrong = _apart(out, eager, tol)
    if not bool(wrong.any()):
        return []
    how = _relation("output", out, eager, wrong, tol)
    return [Diagnostic(
        "compiled_differs", "", "compiled forward", [], int(wrong.sum()),
        f"the compiled output differs from eager's at {int(wrong.sum())} of {wrong.numel()} "
        f"element(s){_where(wrong)}, by up to {_most(out, eager, wrong):.6g}{how}: the "
        "compiled target computes another function",
        _HINT, indices={"output": _indices(wrong)}, summary="compiled forward ≠ eager")]


def _gradient(ctx: Context, view: View, name: str, got: torch.Tensor, tol: Tolerance
              ) -> Diagnostic | None:
    eager = view.autograd[name]
    wrong = _apart(got, eager, tol)
    if not bool(wrong.any()):
        return None
    sides = _sides(view, name, got, eager, wrong, tol)
    how = _relation(name, got, eager, wrong, tol)
    question = "" if view is ctx.evidence.table else f" ({view.label})"
    shape = tuple(ctx.prepared.bound.cast[name].shape)
    where = _where(view.elements(wrong, shape) if view.jacobian else wrong)
    return Diagnostic(
        "compiled_differs", "", f"compiled gradient{question}", [name], int(wrong.sum()),
        f"the compiled gradient of {name} differs from eager autograd's at "
        f"{int(wrong.sum())} of {wrong.numel()} element(s){where}, by up to "
        f"{_most(got, eager, wrong):.6g}{how}{sides}",
        _HINT, indices={name: _indices(wrong)}, summary=f"compiled ∂/∂{name} ≠ eager")


def _sides(view: View, name: str, got: torch.Tensor, eager: torch.Tensor,
           wrong: torch.Tensor, tol: Tolerance) -> str:
    """Which answer the references side with where the two differ."""
    answers = list(view.answers.get(name, {}).values())
    if not answers:
        return ""
    theirs = compare(got, answers, tol).status.reshape(wrong.shape)[wrong]
    ours = compare(eager, answers, tol).status.reshape(wrong.shape)[wrong]
    compiled_ok, eager_ok = bool((theirs == OK).all()), bool((ours == OK).all())
    if eager_ok and not compiled_ok:
        return "; the references agree with eager: the compiled gradient is wrong"
    if compiled_ok and not eager_ok:
        return ("; the references agree with the compiled gradient: eager's is the one "
                "that departs (a custom backward the compiled graph does not use?)")
    return ""


def _relation(name: str, got: torch.Tensor, want: torch.Tensor, wrong: torch.Tensor,
              tol: Tolerance) -> str:
    """How the compiled answer relates to eager's where they differ."""
    got, want = got.double(), want.double().to(got.device)
    if bool((got[wrong] == 0).all()):
        return "; the compiled one is 0 there"
    if int(wrong.sum()) < 2:  # (one element relates to anything by some factor)
        return ""
    if _moved(got, want, wrong, tol):
        return ("; the same values at other elements: the compiled one puts them in the "
                "wrong places")
    factor = _factor(got[wrong], want[wrong], tol)
    if factor is not None:
        return f"; the compiled one is {relations.number(factor)} × eager's there"
    gap = (got - want)[wrong]
    if bool(torch.isclose(gap, gap[0].expand_as(gap), rtol=tol.rtol, atol=tol.atol).all()):
        shift = float(gap[0])
        return (f"; the compiled one is eager's {'+' if shift > 0 else '−'} "
                f"{relations.number(abs(shift))} there")
    status = torch.where(wrong, MISMATCH, OK).to(torch.int8)
    found = relations.find(name, relations.Arrays(got, want, None, status), tol, {})
    if found is not None and found.kind in ("shifted", "transposed", "permuted"):
        return f"; the compiled one is eager's {found.kind} ({found.text})"
    return ""


def _factor(got: torch.Tensor, want: torch.Tensor, tol: Tolerance) -> float | None:
    """c where got = c × want at every element (want nonzero there), else None."""
    if not bool((want != 0).all()) or not bool(torch.isfinite(got).all()):
        return None
    ratio = got / want
    c = float(ratio.median())
    return c if bool(torch.isclose(got, c * want, rtol=tol.rtol, atol=tol.atol).all()) else None


def _moved(got: torch.Tensor, want: torch.Tensor, wrong: torch.Tensor, tol: Tolerance
           ) -> bool:
    """The differing elements hold the same values, in other places."""
    a, b = got[wrong].sort().values, want[wrong].sort().values
    return bool(wrong.sum() > 1) and bool(torch.isclose(a, b, rtol=tol.rtol,
                                                        atol=tol.atol).all())


def _most(got: torch.Tensor, want: torch.Tensor, wrong: torch.Tensor) -> float:
    diff = (got.double() - want.double().to(got.device)).abs()[wrong]
    diff = diff[torch.isfinite(diff)]
    return float(diff.max()) if diff.numel() else float("inf")


def _indices(wrong: torch.Tensor) -> list[list[int]]:
    return [[int(i) for i in index] for index in torch.nonzero(wrong)[:LISTED * 4]]


def _where(wrong: torch.Tensor) -> str:
    listed = _indices(wrong)[:LISTED]
    if not listed or wrong.ndim == 0:
        return ""
    text = ", ".join("(" + ", ".join(map(str, i)) + ")" for i in listed)
    more = " …" if int(wrong.sum()) > LISTED else ""
    return f" ({text}{more})"


def _notes(compiled: Compiled) -> tuple[str, ...]:
    stats = compiled.stats
    if stats is None:
        return ()
    notes = [f"--compile {stats.backend}: {stats.graphs} graph(s) compiled, "
             f"{stats.graph_breaks} graph break(s), {stats.recompiles} recompile(s), "
             f"{stats.seconds:.2f} s; the compiled target was called {stats.calls} time(s), "
             "always in grad mode at the same inputs, one backward per upstream"]
    notes += [f"graph break: {reason}" for reason in stats.breaks]
    if stats.fell_back and compiled.accepted:
        notes.append(f"--compile {stats.backend}: {compiled.why_eager}; the compiled run is "
                     "eager's (accepted: --compile-fallback)")
    return tuple(notes)


def _with_column(item: InputReport, got: torch.Tensor | None) -> InputReport:
    """The input's report with the compiled gradient as a column after autograd's, for the
    same elements (a Jacobian's entries, where the table is one)."""
    if got is None:
        return item
    shape = item.jacobian_shape or item.shape
    idx = None
    if item.indices is not None:
        idx = torch.tensor([_flat(i, shape) for i in item.indices], dtype=torch.long)
    column = Column(build.pick(got.reshape(shape), idx), label="compiled")
    columns = dict(item.columns)
    first = next(iter(columns))
    ordered = {first: columns.pop(first), "compiled": column, **columns}
    return replace(item, columns=ordered)


def _flat(index: list[int], shape: list[int]) -> int:
    flat = 0
    for i, n in zip(index, shape, strict=True):
        flat = flat * n + i
    return flat


_HINT = ("compare the compiled graph with eager: run with TORCH_LOGS=aot_graphs, try "
         "--compile aot_eager (a decomposition: both differ) against inductor (a lowering: only "
         "inductor differs), and report it upstream with the elements named here")

FEATURE = CompiledTarget()
