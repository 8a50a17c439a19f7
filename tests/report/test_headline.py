"""The headline is written from the report's failures: the relation a mismatch follows, where a
model's wrong gradients start, what nothing was compared for, the failing custom-backward check,
a named check — and nothing for a pass."""

from __future__ import annotations

from dataclasses import replace

import gradscope
from gradscope.report.headline import MAX_CAUSES, causes, headline
from gradscope.report.model import Failure
from tests.paths import DATA


def test_a_pass_has_no_headline():
    assert headline(gradscope.check("x * 2", x="1,2")) == ""


def test_the_relation_a_mismatch_follows_leads():
    # no custom Function or hook to blame: the input's relation leads
    report = gradscope.check(f"{DATA}/inplace.py:half_detached", x="1,2,3")
    assert headline(report) == "x: autograd = 0.5 × the derivative at every element"


def test_a_hook_that_changes_the_gradient_leads():
    report = gradscope.check(f"{DATA}/culprits.py:HookedNet", x="randn(2,6)", only="x")
    assert headline(report).startswith("gradient hook HookedNet.forward.<locals>.<lambda> (")
    assert headline(report).endswith("changes the gradient it is given: what it returns = 2 × "
                                     "what it was given at every element")


def test_a_culprit_leads_in_place_of_the_inputs_it_explains():
    report = gradscope.check(f"{DATA}/corpus.py:SignFlip", x="0.5,1")
    assert headline(report) == ("SignFlip.backward (corpus.py:276), for its argument x: "
                                "autograd = −1 × the derivative at every element")


def test_a_failing_custom_backward_and_a_failing_named_check():
    report = gradscope.check(f"{DATA}/backwards.py:BlindSquare", x="linspace(1,2,5)")
    found = causes(report)
    assert found[0].startswith("nonlinear backward (") and found[0].endswith(" element(s))")
    assert any(c.startswith("random upstream #1") and c.endswith("mismatch(es) in x")
               for c in found)


def test_nothing_compared_and_a_nonfinite_output():
    report = gradscope.check(f"{DATA}/targets.py:forward_raises_when_perturbed", x="1,2")
    assert headline(report).startswith("x: inconclusive, nothing was compared (the target "
                                       "failed at a perturbed point")
    nan = gradscope.check("log(x)", x="-1,1")
    assert "NaN or inf at the given inputs in output" in headline(nan)


def test_many_causes_are_counted():
    report = gradscope.check("x * 2", x="1,2")
    failures = [Failure("mismatch", f"x{k}", 1) for k in range(MAX_CAUSES + 2)]
    many = replace(report, passed=False, failures=failures)
    assert headline(many).endswith("; and 2 more") and headline(many).count(";") == MAX_CAUSES


def test_a_check_in_place_is_said_once_by_its_culprit():
    # (a model whose inputs all pass within float32's tolerance, its Function wrong in place)
    report = gradscope.check(f"{DATA}/corpus.py:SignFlip", x="0.5,1")
    in_place = Failure("check", "SignFlip.backward (corpus.py:276) checked in place: 1 call(s)",
                       2)
    alone = replace(report, failures=[in_place])
    assert headline(alone) == ("SignFlip.backward (corpus.py:276), for its argument x: "
                               "autograd = −1 × the derivative at every element")
    nobody = replace(alone, diagnostics=[])
    assert headline(nobody) == in_place.subject + ": 2 mismatch(es)"


def test_several_findings_of_one_failing_kind_are_told_apart_by_their_summaries():
    import gradscope
    from tests.paths import DATA

    report = gradscope.check(f"{DATA}/compiled.py:multilabel_margin", compile="aot_eager",
                             at={"x": [[1.0, -1.0, 0.5, 0.3, -0.2]]})
    line = " ".join(report.to_text().split())
    assert "compiled differs: compiled forward ≠ eager (1 element(s))" in line
    assert "compiled differs: compiled ∂/∂x ≠ eager (3 element(s))" in line
