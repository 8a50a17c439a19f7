"""The Function a failing surrogate comes from. Where the forward is flat and the backward is
not, the run's surrogate checks judge the surrogate (checked in place, such a call is no
culprit: its flat forward has no derivative to depart from); where those checks find it against
the forward (its rise at a coarse scale points the other way, a scale far off), the Functions
whose calls were flat where their backward passed gradient on are where it comes from, and are
named with the finding — one Function certainly, several as the candidates they are; none
where a Function or hook checked in place is wrong (that one is the culprit, and may be what
makes the surrogate look inconsistent)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gradscope.explain import relations
from gradscope.features.inplace.culprits import ClassCheck
from gradscope.features.inplace.hooks import HookCheck
from gradscope.report.model import Diagnostic


def culprits(checks: Sequence[ClassCheck | HookCheck], inconsistent: Mapping[str, int],
             explained: Mapping[str, relations.Relation]) -> list[Diagnostic]:
    """A culprit per Function class that gave a surrogate, where the surrogate checks found
    the surrogate of the failing inputs `inconsistent` (name → mismatching elements) against
    the forward."""
    sources = [c for c in checks if isinstance(c, ClassCheck) and c.surrogate and not c.wrong]
    if not sources or not inconsistent or any(c.wrong for c in checks):
        return []  # (a Function or hook wrong in place explains the failure: it is named)
    first = next(iter(inconsistent))
    relation = explained.get(first)
    how = relation.text if relation is not None else "its surrogate fails the coarse-scale check"
    among = "" if len(sources) == 1 else f", one of {len(sources)} Functions that give one"
    return [Diagnostic(
        kind="culprit", op=c.label, where=c.where, inputs=list(inconsistent),
        count=sum(inconsistent.values()),
        message=(f"{c.label} gives the surrogate gradient (its forward is flat where its "
                 f"backward passes gradient on{among}), and the surrogate checks find it "
                 f"against the forward: {first}: {how}"),
        hint=("a surrogate should follow the forward's rise at a coarse scale (a "
              "straight-through estimator passes the gradient on unchanged): check its sign "
              "and scale; declare it with --surrogate NAME if the form is deliberate"),
        relation=relation.kind if relation else None,
        factor=relation.factor if relation else None,
        summary=f"{c.label}: its surrogate gradient is against the forward ({how})")
        for c in sources]
