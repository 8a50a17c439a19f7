"""The status vocabulary: `Status`, which knows its word, its code in a per-element tensor, its
rank in the one order of severity, whether it fails a run, whether it is quiet (nothing to show
in a model's detail), whether an engine compared anything, and its colour.

A status is a `str` too, so a report's JSON and any comparison with its word (`"mismatch"`) stay
what they were; everything that ranks, fails or colours a status asks the member.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class Status(str, Enum):
    OK = "ok"
    NONDIFFERENTIABLE = "nondifferentiable"
    UNDEFINED = "undefined"
    MISMATCH = "mismatch"
    SURROGATE = "surrogate"
    VANISHING = "vanishing"
    # no reference engine covered the element (a sampled input of Python code): says nothing
    # bad, ranks below ok
    UNCHECKED = "unchecked"
    # an input none of whose elements any engine compared (never an element's status): it
    # fails, ranking just below a mismatch — a verdict that compared nothing is never a pass
    INCONCLUSIVE = "inconclusive"
    # a named check (a random upstream, the Jacobian) for which no engine compared anything
    NOT_RUN = "not run"
    # a named check that compares no numbers and did not pass (a torch.library.opcheck test)
    FAILED = "failed"

    # a str mixin: the word itself wherever it is printed, hashed or formatted
    __str__ = str.__str__
    __format__ = str.__format__
    __hash__ = str.__hash__

    @property
    def code(self) -> int:
        """The int8 code a per-element status tensor holds (element statuses only)."""
        return _CODES[self]

    @classmethod
    def of_code(cls, code: int) -> Status:
        return _BY_CODE[code]

    @classmethod
    def of(cls, word: str) -> Status:
        return cls(word)

    @property
    def rank(self) -> float:
        """Higher is worse: the one order every ranking of statuses reads."""
        return _RANK[self]

    @property
    def fails(self) -> bool:
        """An input with this status fails the run (whatever --fail-on says, but never)."""
        return self in (Status.MISMATCH, Status.INCONCLUSIVE, Status.FAILED)

    @property
    def quiet(self) -> bool:
        """Nothing to look at in a model's detail: agreed, excused or not compared."""
        return self in (Status.OK, Status.NONDIFFERENTIABLE, Status.UNCHECKED,
                        Status.SURROGATE, Status.VANISHING)

    @property
    def compared(self) -> bool:
        """An engine judged the element (as opposed to unchecked, undefined, at a kink)."""
        return self in (Status.OK, Status.MISMATCH, Status.SURROGATE, Status.VANISHING)

    @property
    def style(self) -> str:
        """The colour that repeats the word (never replaces it)."""
        return _STYLE[self]


# element statuses, by their code in per-element tensors
ELEMENT = (Status.OK, Status.NONDIFFERENTIABLE, Status.UNDEFINED, Status.MISMATCH,
           Status.SURROGATE, Status.VANISHING, Status.UNCHECKED)
_CODES = {s: k for k, s in enumerate(ELEMENT)}
_BY_CODE = dict(enumerate(ELEMENT))
OK, NONDIFFERENTIABLE, UNDEFINED, MISMATCH, SURROGATE, VANISHING, UNCHECKED = range(len(ELEMENT))
# worst first
SEVERITY = (Status.MISMATCH, Status.UNDEFINED, Status.NONDIFFERENTIABLE, Status.VANISHING,
            Status.SURROGATE, Status.OK, Status.UNCHECKED)
_RANK: dict[Status, float] = {s: len(SEVERITY) - 1 - k for k, s in enumerate(SEVERITY)}
_RANK[Status.INCONCLUSIVE] = _RANK[Status.MISMATCH] - 0.5
_RANK[Status.NOT_RUN] = -1
_RANK[Status.FAILED] = _RANK[Status.MISMATCH]
_STYLE = {Status.OK: "green", Status.MISMATCH: "bold red", Status.INCONCLUSIVE: "bold red",
          Status.UNDEFINED: "magenta", Status.NONDIFFERENTIABLE: "yellow",
          Status.VANISHING: "yellow", Status.SURROGATE: "cyan", Status.UNCHECKED: "dim",
          Status.NOT_RUN: "dim", Status.FAILED: "bold red"}


def worst(statuses: Iterable[Status | str]) -> Status:
    """The most severe of some statuses (ok for none)."""
    return max((Status(s) for s in statuses), key=lambda s: s.rank, default=Status.OK)


# diagnostics that are failures whatever --fail-on says (a custom backward that is wrong)
FAILING_KINDS = ("backward_arity", "backward_shape", "autograd_registration", "nonlinear_backward",
                 "nondeterministic_backward", "inplace_backward", "ranks_disagree",
                 "single_differs", "compiled_differs", "compiled_inconclusive",
                 "undeclared_mutation")
