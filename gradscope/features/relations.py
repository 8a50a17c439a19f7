"""How a mismatch relates to the derivative (explain/relations.py): a factor, a transpose, a
missing term, a sign, a subset of elements drawn by value (explain/partitions.py), with the
user's own numbers read where a factor is one of them. Read from the first comparison that
showed the mismatch after the evidence's own explanations; a surrogate inconsistent at a
coarse scale is said by how it fails that check. Explains, never decides: the relations found
are this feature's value, read by the culprits and surrogates that name them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gradscope.compare.elements import compare
from gradscope.engines.autograd import AutogradEngine
from gradscope.engines.base import Answer
from gradscope.engines.fd import FiniteDifferences
from gradscope.engines.fd.policy import DEFAULT_EPS
from gradscope.explain import partitions, relations
from gradscope.features import surrogates
from gradscope.features.base import Context, Diagnosis, Feature
from gradscope.features.flow import variables
from gradscope.report.build import mask_indices
from gradscope.report.model import Diagnostic
from gradscope.report.status import Status
from gradscope.rng import generator


class Relations(Feature[None]):
    name = "relations"
    reads = (surrogates,)

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        if ctx.evidence.backward.grads is None:
            return Diagnosis()
        found = _found(ctx, verdict)
        declared = ctx.of(surrogates.FEATURE)
        declared = declared.declared if declared is not None else {}
        return Diagnosis(tuple(_pattern(ctx, verdict, n, rel) for n, rel in found.items()
                          if n not in declared), value=found)


FEATURE = Relations()


def _found(ctx: Context, verdict: Any) -> dict[str, relations.Relation]:
    """How each input that mismatched relates to its reference, where a simple relation
    holds (read from the first comparison that showed the mismatch)."""
    first: dict[str, relations.Arrays] = {}
    for seen in verdict.seen.values():
        if seen.reference is not None:
            first[seen.name] = relations.Arrays(seen.autograd, seen.reference, seen.error,
                                                seen.comparison.status)
    prepared = ctx.prepared
    output = ctx.evidence.backward.engine.output
    sizes = relations.sizes_of(tuple(output.shape), {n: tuple(prepared.bound.cast[n].shape)
                                                     for n in prepared.target.names})
    facts = ctx.of(surrogates.FEATURE)
    found = {}
    numbers = prepared.target.numbers()
    for name, arrays in first.items():
        rel = surrogates.inconsistency(ctx, name)
        if rel is None or rel.kind == "sloped":  # (a slope's own relation says more, if any)
            values = None if verdict.seen[name].jacobian else variables(ctx, name)
            ignored = facts.ignored.get(name) if facts is not None else None
            rel = relations.find(name, arrays, ctx.evidence.tol, sizes, first, ignored,
                                 values, numbers) or rel
        if rel is not None and relations.located(rel):
            rel = _held_elsewhere(ctx, verdict, name, rel, sizes, first, values, numbers)
        if rel is not None and rel.predicate is not None \
                and not _held_at_other_values(ctx, name, rel.predicate):
            rel = None  # (rule 4: a partition by value that fresh values refute)
        if rel is not None:
            found[name] = rel
    return found


def _held_elsewhere(ctx: Context, verdict: Any, name: str, rel: relations.Relation,
                    sizes: Mapping[str, int], first: Mapping[str, relations.Arrays],
                    values: Any, numbers: Any) -> relations.Relation | None:
    """`rel` where every other upstream's comparison of `name` (a seeded random one: data the
    rule was not fitted to) finds the same rule; None where one finds another or none (an
    upstream of ones picked those rows: the report then says counts, not a rule). A rule no
    other comparison tested is kept only where no upstream could have drawn it: a Jacobian's,
    or a scalar output's (any upstream scales its one gradient)."""
    seen = verdict.seen[name]
    tested = seen.jacobian or ctx.evidence.backward.engine.output.numel() == 1
    for view in ctx.evidence.views:
        cmp = view.raw.get(name)
        if view.jacobian or cmp is None or view.autograd.get(name) is seen.autograd:
            continue
        reference = view.reference(name)
        if reference is None:
            continue
        arrays = relations.Arrays(view.autograd[name], reference.values, reference.error,
                                  cmp.status)
        again = relations.find(name, arrays, ctx.evidence.tol, sizes, first, None, values,
                               numbers)
        if not relations.same_rule(again, rel):
            return None
        tested = True
    return rel if tested else None


# inputs past this many elements get no second comparison at other values: their value
# partitions are not said (counts are)
MAX_ELSEWHERE = 100_000


def _held_at_other_values(ctx: Context, name: str, predicate: str) -> bool:
    """Whether the value partition `predicate` of `name` holds at values it was not fitted
    to: `name` moved by half its spread (seeded), autograd's VJP there with the table's
    upstream beside finite differences' (refined where a two-point estimate disagrees), and
    exactly the elements the predicate names disagree. False where that comparison cannot be
    made (the target refuses the values, the input is past MAX_ELSEWHERE)."""
    prepared, back = ctx.prepared, ctx.evidence.backward
    cast = prepared.bound.cast
    x = cast[name]
    if x.numel() > MAX_ELSEWHERE or not x.is_floating_point() or back.grads is None:
        return False
    gen = generator(prepared.options.seed, f":elsewhere:{name}")
    moved = {**cast, name: partitions.elsewhere(x, gen)}
    forward = prepared.target.forward
    try:
        got = AutogradEngine(forward, moved).vjp(back.upstream, [name])[name]
        fd = FiniteDifferences(lambda vals: (forward({**moved, **vals}), []),
                               {name: moved[name]}, elementwise=set(), probe=True,
                               eps=prepared.options.eps or DEFAULT_EPS)
        v = back.upstream.double()
        est = fd.estimate(name)
        cmp = compare(got, [Answer(*est.vjp(v), est.kink, est.checked)], ctx.evidence.tol)
        wrong = cmp.status == Status.MISMATCH.code
        if bool(wrong.any()) and est.points is not None:
            est, _ = fd.refine(est, wrong.reshape(est.points.shape))
            cmp = compare(got, [Answer(*est.vjp(v), est.kink, est.checked)], ctx.evidence.tol)
    except Exception:  # (the target refuses those values: nothing held)
        return False
    return partitions.predicts(predicate, moved, cmp.status)


def _pattern(ctx: Context, verdict: Any, name: str, rel: relations.Relation) -> Diagnostic:
    """A `mismatch_pattern` diagnostic: the relation a mismatch follows, and what to do."""
    seen = verdict.seen[name]
    wrong = seen.comparison.status == Status.MISMATCH.code
    return Diagnostic(
        kind="mismatch_pattern", op=rel.kind, where=ctx.prepared.target.text, inputs=[name],
        count=rel.covers, message=f"{name}: {rel.message}", hint=relations.HINTS[rel.kind],
        relation=rel.kind, factor=rel.factor, summary=rel.text,
        indices=None if seen.jacobian else {name: mask_indices(wrong)})
