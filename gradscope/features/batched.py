"""Batched evaluations that disagreed with plain calls: finite differences' vmap batches (a
custom Function's own `vmap` rule runs instead of its forward) or autograd's batched backward
(vmap over the upstream). Each shortcut was compared once with a plain call at the same point
(engines/fd/batcher.py, engines/autograd.py); where they disagreed the plain calls decided, and
this feature says what the disagreement is — the batched rule computes something else than the
plain call, which is no wrong backward — naming the Functions in the graph that carry a vmap
rule of their own. A warning: evidence about the batched rule, not about the gradient checked
(under --fail-on warning it fails the run)."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.features.base import Context, Diagnosis, Feature
from gradscope.report.model import Diagnostic
from gradscope.tensors import grad_nodes
from gradscope.usercode import def_location


def vmap_rules(output: torch.Tensor) -> list[str]:
    """`Class.vmap (file.py:LINE)` of each custom Function in the graph of `output` that
    defines a vmap rule of its own, in the order first met."""
    found: list[str] = []
    for node in grad_nodes(getattr(output, "grad_fn", None)):
        cls = getattr(node, "_forward_cls", None)
        owner = next((k for k in getattr(cls, "__mro__", ())
                      if "vmap" in vars(k) and k is not torch.autograd.Function), None)
        if cls is None or owner is None or owner.__module__.startswith("torch."):
            continue
        where = def_location(inspect_vmap(cls))
        label = f"{cls.__name__}.vmap" + (f" ({where})" if where else "")
        if label not in found:
            found.append(label)
    return found


def inspect_vmap(cls: type) -> Any:
    rule = getattr(cls, "vmap", None)
    return getattr(rule, "__func__", rule)


class Batched(Feature[None]):
    name = "batched"

    def diagnose(self, ctx: Context, verdict: Any, said: Any) -> Diagnosis:
        evidence = ctx.evidence
        finite = evidence.finite
        found = [why for why in (getattr(getattr(finite, "fd", None), "batched_apart", None),
                                 evidence.backward.engine.batched_apart) if why]
        if not found:
            return Diagnosis()
        rules = vmap_rules(evidence.backward.engine.output)
        named = f": {', '.join(rules)} computes another value batched than forward does " \
            "unbatched" if rules else ""
        return Diagnosis((Diagnostic(
            kind="batched_differs", op=rules[0] if rules else "vmap",
            where=ctx.prepared.target.text, inputs=[], count=1,
            message=f"{'; '.join(found)}{named}. The plain calls decided the verdict; a batched "
                    "rule that disagrees with them is no wrong backward, and it is what vmap "
                    "and torch.func transforms of this code would compute",
            hint="make the Function's vmap staticmethod return, batch by batch, what forward "
                 "returns (or set generate_vmap_rule = True and drop it)" if rules else
                 "an op's batching rule computes another value than its plain call here: "
                 "compare torch.func.vmap of the target with a loop of calls"),))


FEATURE = Batched()
