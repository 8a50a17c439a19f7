"""The culprit for an input whose gradient is one Function's answer alone: passed to it as an
argument its forward never reads (a parameter the forward reaches through a callable, passed
beside it only so that backward can return its gradient), with no other way into the
output's graph (calls.py finds it: `extra["sole"]`). The check in place cannot compare such an
argument (perturbing it moves nothing), but where the target's own comparison finds that
input's gradient wrong, no other op could have made it so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gradscope.explain import relations
from gradscope.features.inplace.culprits import ClassCheck
from gradscope.features.inplace.hooks import HookCheck
from gradscope.report.model import Diagnostic


def culprits(checks: Sequence[ClassCheck | HookCheck], mismatched: Mapping[str, int],
            explained: Mapping[str, relations.Relation]) -> list[Diagnostic]:
    """A culprit per Function class whose unread argument carries a target input whose
    gradient is that Function's backward's answer alone (`ClassCheck.sole`) and disagrees
    (`mismatched`: input → mismatching elements): no other op could have made it wrong."""
    out = []
    for check in checks:
        if not isinstance(check, ClassCheck) or check.wrong:
            continue
        for argument, name in check.sole:
            if not mismatched.get(name):
                continue
            relation = explained.get(name)
            how = relation.text.replace(f"{name}: ", "") if relation is not None else \
                f"{mismatched[name]} element(s) disagree"
            said = (f" is wrong for its argument {argument}: {name}'s gradient is its answer "
                    f"alone (its forward never reads {argument}; {name} reaches it another "
                    "way, a callable or an attribute, and enters the gradient only through "
                    "this backward)")
            out.append(Diagnostic(
                kind="culprit", op=check.label, where=check.where, inputs=[name],
                count=mismatched[name], message=f"{check.label}{said}: {how}",
                hint=("return the gradient of what the forward computes with it, through "
                      "the callable or attribute it reaches the forward by"),
                relation=relation.kind if relation else None,
                factor=relation.factor if relation else None,
                summary=f"{check.label}, for its argument {argument} ({name}): {how}"))
    return out
