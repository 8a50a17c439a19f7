"""A custom op target: torch.library.opcheck's checks beside the gradient check.

opcheck tests what a gradient check cannot see and torch.compile relies on: the schema says
what the op mutates and aliases (`test_schema`), the autograd registration covers the op's
tensor inputs (`test_autograd_registration`), the fake (meta) implementation gives the real
output's shapes and strides (`test_faketensor`), and the op traces and runs under
AOTAutograd with dynamic shapes (`test_aot_dispatch_dynamic`). Each is a named check of the run
on the op the user named, at the check's own inputs; one that fails fails the run, with
opcheck's finding in one line."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gradscope.features.base import Context, Diagnosis, Feature, Interim
from gradscope.report.model import Diagnostic, NamedCheck
from gradscope.report.status import Status

# what each of opcheck's tests is about, in the report's words
ABOUT = {"test_schema": "the schema (mutations, aliasing)",
         "test_autograd_registration": "the autograd registration",
         "test_faketensor": "the fake (meta) implementation",
         "test_aot_dispatch_dynamic": "AOTAutograd dispatch (dynamic shapes)"}


@dataclass(frozen=True)
class OpChecks:
    op: str
    results: tuple[tuple[str, str | None], ...]  # (test, None: passed, else its finding)


class OpcheckFeature(Feature["OpChecks"]):
    name = "opcheck"

    def facts(self, ctx: Context) -> OpChecks | None:
        prepared = ctx.prepared
        cast = {n: t for n, t in prepared.bound.cast.items() if n in prepared.target.names}
        if prepared.target.op_call(cast) is None:  # not a custom op: no copies of the inputs
            return None
        leaves = {n: t.detach().clone().requires_grad_(t.is_floating_point() or t.is_complex())
                  for n, t in cast.items()}
        call = prepared.target.op_call(leaves)
        assert call is not None
        op, args, kwargs = call
        found = torch.library.opcheck(op, args, kwargs, raise_exception=False)
        results = tuple((test, None if outcome == "SUCCESS" else _finding(outcome))
                        for test, outcome in found.items())
        return OpChecks(str(getattr(op, "_name", op)), results)

    def checks(self, ctx: Context, decided: Interim) -> list[NamedCheck]:
        facts = ctx.of(self)
        if facts is None:
            return []
        # (a test of the op's registration: no number compared, no element apart)
        return [NamedCheck(f"opcheck {test}", Status.OK if why is None else Status.FAILED)
                for test, why in facts.results]

    def diagnose(self, ctx: Context, verdict: object, said: object) -> Diagnosis:
        facts = ctx.of(self)
        if facts is None:
            return Diagnosis()
        failed = tuple(Diagnostic(
            "opcheck", "", f"opcheck {test}", [], 1,
            f"torch.library.opcheck's {test} fails for {facts.op} ({ABOUT.get(test, test)}): "
            f"{why}", "torch.library.opcheck's docs say what each test needs: a fake "
            "implementation (register_fake), a schema that names what the op mutates, an "
            "autograd formula (register_autograd) for every tensor input")
            for test, why in facts.results if why is not None)
        return Diagnosis(failed)


def _finding(outcome: object) -> str:
    """opcheck's exception in one line: its type and first line."""
    first = (str(outcome).strip().splitlines() or [""])[0][:240]
    return f"{type(outcome).__name__}: {first}" if isinstance(outcome, BaseException) \
        else first


FEATURE = OpcheckFeature()
