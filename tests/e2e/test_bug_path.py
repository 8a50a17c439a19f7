"""The bug path with default inputs (no --at): a backward wrong on one branch only fails, its
correct twin passes; each case has a negative (what must not be excused or reported)."""

from __future__ import annotations

import pytest

import gradscope
from gradscope.report.headline import headline
from tests.paths import DATA

BRANCHES = f"{DATA}/branches.py"


@pytest.mark.parametrize("name", ["LeakySwishBug", "SoftClip", "WideCube", "SincBug"])
def test_a_backward_wrong_on_one_branch_fails_with_default_inputs(name):
    report = gradscope.check(f"{BRANCHES}:{name}")
    assert not report.passed and report.failures


@pytest.mark.parametrize("name", ["LeakySwish", "Sinc"])
def test_its_correct_twin_passes_with_default_inputs(name):
    report = gradscope.check(f"{BRANCHES}:{name}")
    assert report.passed, report.failures


def test_the_kink_of_user_code_is_found_from_its_values_not_reported_as_a_bug():
    # LeakySwish's slope jumps at the exact zero among the default inputs: no branch id tells
    # (user code), the stencil's second differences do
    (x,) = gradscope.check(f"{BRANCHES}:LeakySwish").inputs
    assert x.status_counts == {"ok": 24, "nondifferentiable": 1}
    (buggy,) = gradscope.check(f"{BRANCHES}:LeakySwishBug").inputs
    assert buggy.status_counts["mismatch"] == 12  # every x < 0: not excused as kinks


@pytest.mark.parametrize("name, words", [
    ("RoundSTETwice", "a straight-through gradient of 2 integrates to 1.96× the forward's rise"),
    ("SignSTEWideWindow", "gated to [−3, 3] integrates to 3× the forward's rise"),
    ("SpikeFlipped", "a surrogate gradient against the forward: it cancels itself out"),
    ("spikes_counted_flipped", "against the forward"),
    ("rounded_running_total_twice", "integrates to 1.96×"),
])
def test_a_surrogate_inconsistent_with_its_forward_fails_and_says_how(name, words):
    report = gradscope.check(f"{BRANCHES}:{name}")
    assert not report.passed and words in headline(report), report.to_text()
    (pattern,) = [d for d in report.diagnostics if d.kind == "mismatch_pattern"]
    assert pattern.relation == "surrogate"


@pytest.mark.parametrize("name, words", [
    ("RoundSTE", "identity: straight-through"), ("detach_round", "identity: straight-through"),
    ("SignSTE", "gated to [−1, 1]"), ("Spike", "smooth bump"), ("SpikeAtan", "0.984×"),
    ("spikes_counted", "coarse scale"), ("rounded_running_total", "coarse scale"),
])
def test_a_consistent_surrogate_passes_named_with_its_coarse_scale_ratio(name, words):
    report = gradscope.check(f"{BRANCHES}:{name}")
    assert report.passed, report.to_text()
    (said,) = [d.message for d in report.diagnostics if d.kind == "surrogate_gradient"]
    assert words in said and "coarse scale: over [−12.7, 12.7] it integrates to" in said


def test_a_declared_surrogate_is_excused_with_its_ratio_reported():
    report = gradscope.check(f"{BRANCHES}:RoundSTETwice", surrogate=True)
    assert report.passed
    assert not [d for d in report.diagnostics if d.kind == "mismatch_pattern"]


def test_a_declared_intended_form_passes_only_where_the_backward_matches_it():
    (check,) = [c for c in gradscope.check(f"{BRANCHES}:SignSTEDeclared").upstream_checks
                if "intended" in c.label]
    assert check.passed
    wide = gradscope.check(f"{BRANCHES}:SignSTEWideDeclared")
    assert not wide.passed and "against its intended surrogate" in headline(wide)
    # the same from the command line, as an expression over the inputs
    assert gradscope.check(f"{BRANCHES}:Spike", surrogate="mem=mem/(1+25*abs(mem))").passed
    assert not gradscope.check(f"{BRANCHES}:Spike", surrogate="mem=sigmoid(4*mem)").passed


@pytest.mark.parametrize("name, words", [
    ("LeakySwishBug", "wrong exactly where x < 0 (12 of 24 element(s)), where autograd = 10 ×"),
    ("SoftClip", "wrong exactly where |x| > 1"),
    ("WideCube", "wrong exactly where |x| > 1 (22 of 25 element(s)), where autograd = 0.5 ×"),
])
def test_the_branch_a_bug_lies_in_is_named_by_value(name, words):
    report = gradscope.check(f"{BRANCHES}:{name}")
    assert words in headline(report)


def test_a_forgotten_scale_is_read_as_the_users_own_number():
    report = gradscope.check(f"{BRANCHES}:scaled_matmul", shape={"x": (3, 4), "w": (4, 2)},
                             arg={"scale": 2.0})
    (x, _) = [d for d in report.diagnostics if d.kind == "mismatch_pattern"]
    assert "2 being scale (--arg scale=2.0)" in x.message
    assert "several readings fit" in x.message  # 2 is also the output's dim 1: said so
    wide = gradscope.check(f"{BRANCHES}:scaled_matmul", shape={"x": (3, 4), "w": (4, 5)},
                           arg={"scale": 2.0})
    (x, _) = [d for d in wide.diagnostics if d.kind == "mismatch_pattern"]
    assert "0.5 = 1/2, 2 being scale (--arg scale=2.0): a factor of it missing" in x.message


CULPRITS = f"{DATA}/culprits.py"


def test_a_model_with_one_wrong_function_names_it_and_its_line():
    report = gradscope.check(f"{CULPRITS}:BuggyNet", shape={"x": (4, 6)})
    (culprit,) = [d for d in report.diagnostics if d.kind == "culprit"]
    assert culprit.op == "BuggyLeakyReLU.backward (culprits.py:42)"
    assert headline(report).startswith("BuggyLeakyReLU.backward (culprits.py:42), for its "
                                       "argument x: wrong exactly where x < 0")
    assert "0.5 × the derivative" in headline(report)


@pytest.mark.parametrize("name", ["Net", "QuantizedNet"])
def test_no_function_is_named_where_none_is_wrong(name):
    report = gradscope.check(f"{CULPRITS}:{name}", shape={"x": (4, 6)})
    assert report.passed
    assert not [d for d in report.diagnostics if d.kind == "culprit"]


def test_a_hook_is_named_where_it_is_wrong_and_its_correct_functions_are_not():
    report = gradscope.check(f"{CULPRITS}:HookedNet", shape={"x": (4, 6)})
    assert not report.passed
    (culprit,) = [d for d in report.diagnostics if d.kind == "culprit"]
    assert culprit.op.startswith("gradient hook HookedNet.forward.<locals>.<lambda> "
                                 "(culprits.py:")
    assert "2 × what it was given" in culprit.message


HOOKED = f"{DATA}/hooked.py"


@pytest.mark.parametrize("name,line", [("param_bad", 28), ("module_bad", 35), ("pre_bad", 42),
                                       ("param_loss", 28)])
def test_a_hook_registered_in_init_is_placed_at_the_line_that_registered_it(name, line):
    # registered before any check ran: on a parameter (lost on a copy unless carried), as a
    # module's backward hook or pre-hook (torch's identity Function it hangs on is not blamed)
    report = gradscope.check(f"{HOOKED}:{name}", x="randn(3,4)")
    assert not report.passed
    (culprit,) = [d for d in report.diagnostics if d.kind == "culprit"]
    assert culprit.op.endswith(f".<locals>.<lambda> (hooked.py:{line})"), culprit.op
    assert "0.5 × what it was given" in culprit.message


@pytest.mark.parametrize("name", ["param_ok", "module_ok", "pre_ok"])
def test_a_hook_registered_in_init_that_leaves_the_gradient_passes(name):
    report = gradscope.check(f"{HOOKED}:{name}", x="randn(3,4)")
    assert report.passed, report.failures
    (row,) = [c for c in report.upstream_checks if "gradient hook" in c.label]
    assert row.result == "ok" and "hooked.py:" in row.label


def test_a_declared_hook_is_a_surrogate_and_an_undeclared_input_still_fails():
    declared = gradscope.check(f"{HOOKED}:param_bad", x="randn(3,4)", surrogate=["fc1.weight"])
    assert declared.passed
    assert {i.name: i.status for i in declared.inputs}["fc1.weight"] == "surrogate"
    other = gradscope.check(f"{HOOKED}:param_bad", x="randn(3,4)", surrogate=["fc2.weight"])
    assert not other.passed


def test_a_correct_function_lists_the_branches_it_exercised():
    report = gradscope.check(f"{BRANCHES}:LeakySwish")
    (site,) = report.branches
    assert site["where"].endswith("return torch.where(x < 0, 0.1 * x * s, x * s)")
    assert site["sides"] == {"true": 12, "false": 13} and not site["one_sided"]
    assert "branches reached" in report.to_text()
    assert not [d for d in report.diagnostics if d.kind == "one_sided_branch"]


def test_a_branch_only_one_side_of_which_was_reached_is_a_warning_that_says_how():
    report = gradscope.check(f"{BRANCHES}:LeakySwishBug", x="0.5,1,2")  # all x ≥ 0
    assert report.passed  # the values given never reach the bug…
    (warning,) = [d for d in report.diagnostics if d.kind == "one_sided_branch"]
    assert "torch.where(x < 0" in warning.message and "false (3 of 3)" in warning.message
    assert "--at NAME=" in warning.hint and "the values given all lie on one side" in warning.hint
    assert not gradscope.check(f"{BRANCHES}:LeakySwishBug", x="0.5,1,2",
                               fail_on="warning").passed  # …which --fail-on warning catches
    # an expression's kink beyond the default spread: named by its argument's values
    far = gradscope.check("relu(x - 8)")
    (warning,) = [d for d in far.diagnostics if d.kind == "one_sided_branch"]
    assert "`relu(x - 8)`: x - 8 in [−14.4, −1.63] (25 of 25)" in warning.message
    assert "spread over ±6.37" in warning.hint
    assert not [d for d in gradscope.check("relu(x)", x="2").diagnostics
                if d.kind == "one_sided_branch"]  # one element: no claim


@pytest.mark.slow
def test_a_spiking_layer_passes_as_surrogates_and_its_flipped_twin_fails():
    report = gradscope.check(f"{BRANCHES}:LIF")
    assert report.passed and {i.status for i in report.inputs} == {"surrogate"}
    flipped = gradscope.check(f"{BRANCHES}:LIFFlipped")
    assert not flipped.passed and "against the forward" in headline(flipped)


def test_a_gradient_undefined_only_at_exact_zeros_says_where():
    report = gradscope.check(f"{BRANCHES}:SincBug")
    assert not report.passed
    assert headline(report).startswith("NaN or inf at the given inputs in x, exactly where "
                                       "x == 0")
    (nan,) = [d for d in report.diagnostics if d.kind == "nan"]
    assert nan.op.startswith("SincBug.backward (branches.py:") or "SincBug.backward" in nan.where


def test_tiny_gradients_of_smooth_inputs_are_ok_not_surrogates():
    for dtype in ("float64", "float32"):
        report = gradscope.check("sum(x)*1e4 + 1e-9*sum(w*w)", shape={"x": (5,), "w": (5,)},
                                 dtype=dtype)
        assert report.passed and [i.status for i in report.inputs] == ["ok", "ok"]
        assert not [d for d in report.diagnostics if d.kind == "surrogate_gradient"]


PADDED = f"{DATA}/padded.py"
PAD_IDS = {"ids": "[0,2,3,0,5]"}  # the padding index 0 looked up twice


@pytest.mark.parametrize("name", ["Untied", "Tied", "scaled"])
def test_torchs_documented_departures_pass_and_are_named(name):
    report = gradscope.check(f"{PADDED}:{name}", const=PAD_IDS)
    assert report.passed, report.failures
    (found,) = [d for d in report.diagnostics if d.kind == "documented_departure"]
    assert found.inputs == ["emb.weight"] and found.count == 3  # one row, and only it
    assert {i.name: i.status for i in report.inputs}["emb.weight"] == "surrogate"


def test_a_functional_padded_lookup_on_an_input_passes():
    report = gradscope.check(f"{PADDED}:functional", shape={"w": "6,3"}, const=PAD_IDS)
    assert report.passed and report.inputs[0].status_counts == {"ok": 15, "surrogate": 3}


@pytest.mark.parametrize("name, wrong", [
    # a bug downstream of the lookup: row 0 is wrong with padding undone too
    ("PaddedWithBug", 12), ("DoubledLookup", 12),
    # a hook zeroing row 0 as padding would, with no padding_idx: nothing of torch's departs
    ("ZeroRow", 3),
])
def test_a_departure_never_excuses_a_bug(name, wrong):
    report = gradscope.check(f"{PADDED}:{name}", const=PAD_IDS)
    assert not report.passed
    assert {i.name: i.status_counts.get("mismatch", 0) for i in report.inputs}[
        "emb.weight"] == wrong
    assert not [d for d in report.diagnostics if d.kind == "documented_departure"]


@pytest.mark.slow
def test_at_scale_the_projections_agree_with_the_departure_undone_and_a_bug_still_fails():
    ids = {"ids": "[0,2,3,0,5,7,0]"}
    passing = gradscope.check(f"{PADDED}:Large", const=ids)
    assert passing.passed and "departures undone" in passing.coverage
    assert any(d.kind == "documented_departure" for d in passing.diagnostics)
    failing = gradscope.check(f"{PADDED}:large_bad", const=ids)
    assert not failing.passed
    assert not any(d.kind == "documented_departure" for d in failing.diagnostics)
    assert any(c.result == "mismatch" for c in failing.upstream_checks
               if "every tensor at once" in c.label)


SYMMETRIC = f"{DATA}/symmetric.py"
SPD = {"a": "[[2,0.5,0.1],[0.5,1.5,0.3],[0.1,0.3,1]]"}


@pytest.mark.parametrize("name", ["eigenvalues", "factor"])
def test_a_symmetric_inputs_gradient_is_torchs_documented_departure(name):
    report = gradscope.check(f"{SYMMETRIC}:{name}", at=SPD)
    assert report.passed, report.failures
    (found,) = [d for d in report.diagnostics if d.kind == "documented_departure"]
    assert "triangle" in found.message


def test_the_symmetric_departure_never_excuses_a_doubled_backward():
    report = gradscope.check(f"{SYMMETRIC}:doubled", at=SPD)
    assert not report.passed
    assert report.inputs[0].status_counts.get("mismatch", 0) >= 3  # the diagonal at least
    assert not [d for d in report.diagnostics if d.kind == "documented_departure"]
