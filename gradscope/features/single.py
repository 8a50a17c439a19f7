"""--compare-single (with --nproc): the ranks' output and gradients beside the same target run
in one process at the same values (targets/distributed/single.py). A difference is evidence
about the target the user named — the distributed code computes another function than the
single-process one — and fails the run (`single_differs`); what could not be compared is said
in a note."""

from __future__ import annotations

from dataclasses import dataclass

from gradscope.features.base import Context, Findings
from gradscope.report.model import Diagnostic


@dataclass(frozen=True)
class SingleFacts:
    findings: tuple[Diagnostic, ...]
    notes: tuple[str, ...]


class CompareSingle(Findings["SingleFacts"]):
    name = "compare single"

    def facts(self, ctx: Context) -> SingleFacts | None:
        prepared, back = ctx.prepared, ctx.evidence.backward
        ranks = prepared.target.ranks()
        if not prepared.options.compare_single or back.grads is None or ranks is None:
            return None
        from gradscope.targets.distributed.single import compare_single

        found = compare_single(ranks, dict(prepared.bound.cast),  # type: ignore[arg-type]
                               back.upstream, back.engine.output.detach(), dict(back.grads),
                               ctx.evidence.tol.rtol, ctx.evidence.tol.atol)
        notes = []
        if found.incomparable:
            notes.append("--compare-single: nothing compared: at world size 1 the target "
                         "builds other values or shapes for " + ", ".join(found.incomparable[:6])
                         + ("" if len(found.incomparable) <= 6 else " …")
                         + " (shards seeded per rank?), so it computes another function")
        if found.compared and not found.differing:
            notes.append("--compare-single: the same at world size 1: "
                         + ", ".join(found.compared[:8]))
        findings = tuple(_diagnostic(a.name, a.apart, a.scale, a.factor)
                         for a in found.differing)
        return SingleFacts(findings, tuple(notes))


def _diagnostic(name: str, apart: float, scale: float, factor: float | None) -> Diagnostic:
    what = "the output" if name == "output" else f"{name}'s gradient"
    times = f"; the ranks' is {factor:.4g} × one process's" if factor is not None else ""
    return Diagnostic(
        "single_differs", "", "world size 1", [] if name == "output" else [name], 1,
        f"{what} differs from the same target's in one process by up to {apart:.6g} "
        f"(largest there {scale:.6g}){times}: the ranks compute another function than one "
        "process",
        "a collective missing or doubled in forward, or a shard split differently from the "
        "whole: compare the forward at --nproc 1 and 2")


FEATURE = CompareSingle()
