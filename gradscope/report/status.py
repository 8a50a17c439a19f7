"""The per-element status vocabulary and the one order of severity.

Codes are what the comparison stores per element (int8 tensors); names are what reports and
renderers show. Every ranking of statuses (the worst status of an input, the worst elements of a
large tensor, the row order of a table) reads `SEVERITY`.
"""

from __future__ import annotations

from collections.abc import Iterable

OK, NONDIFFERENTIABLE, UNDEFINED, MISMATCH, SURROGATE, VANISHING, UNCHECKED = range(7)
STATUS_NAMES = {OK: "ok", NONDIFFERENTIABLE: "nondifferentiable", UNDEFINED: "undefined",
                MISMATCH: "mismatch", SURROGATE: "surrogate", VANISHING: "vanishing",
                UNCHECKED: "unchecked"}
# worst first; `unchecked` (no reference engine covered the element: a sampled input of Python
# code) says nothing bad and ranks below ok
SEVERITY = (MISMATCH, UNDEFINED, NONDIFFERENTIABLE, VANISHING, SURROGATE, OK, UNCHECKED)
# rank by code and by name: higher is worse
RANK_OF_CODE = {code: len(SEVERITY) - 1 - k for k, code in enumerate(SEVERITY)}
RANK = {STATUS_NAMES[code]: rank for code, rank in RANK_OF_CODE.items()}
# An input none of whose elements any engine compared is `inconclusive` (an input-level status,
# never an element's): it fails, ranking just below a mismatch.
INCONCLUSIVE = "inconclusive"
RANK[INCONCLUSIVE] = RANK["mismatch"] - 0.5
COMPARED = ("ok", "mismatch", "surrogate", "vanishing")  # element statuses that were judged


def worst(names: Iterable[str]) -> str:
    """The most severe of some status names ("ok" for none)."""
    return max(names, key=lambda n: RANK.get(n, -1), default="ok")

# diagnostics that are failures whatever --fail-on says (a custom backward that is wrong)
FAILING_KINDS = ("backward_arity", "backward_shape", "nonlinear_backward",
                 "nondeterministic_backward", "inplace_backward")
