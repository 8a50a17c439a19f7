"""Per-element statuses and dtype tolerances — including the checks that must fail — and the named
checks (each names itself, passes on a right gradient and fails on a wrong one)."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gradscope
from gradscope.compare.elements import compare as compare_answers
from gradscope.compare.tolerance import DEFAULT_TOLERANCES, Tolerance
from gradscope.engines.base import Answer
from gradscope.report.status import (
    ELEMENT,
    MISMATCH,
    NONDIFFERENTIABLE,
    OK,
    UNCHECKED,
    UNDEFINED,
)
from gradscope.rng import seed_for
from tests.paths import DATA


def _t(*v):
    return torch.tensor(v, dtype=torch.float64)


def compare(ag, sym, fd, err, kink, tol, checked=None):
    """The symbolic engine's answer (exact) and finite differences' (with an error bound)."""
    answers = [Answer(sym)] if sym is not None else []
    answers += [Answer(fd, err, checked=checked)] if fd is not None else []
    return compare_answers(ag, answers, tol, kink)


TOL = Tolerance.for_dtype("float64")


def test_agreement_is_ok():
    c = compare(_t(1, 2), _t(1, 2), _t(1 + 1e-12, 2), _t(1e-12, 1e-12), None, TOL)
    assert c.status.tolist() == [OK, OK] and c.worst() == "ok"
    assert c.max_abs_error() < 2e-12


def test_symbolic_disagreement_is_a_mismatch():
    c = compare(_t(1, 2), _t(1, 2.5), None, None, None, TOL)
    assert c.status.tolist() == [OK, MISMATCH] and c.worst() == "mismatch"
    assert c.max_abs_error() == 0.5


def test_finite_difference_disagreement_beyond_its_error_is_a_mismatch():
    c = compare(_t(1.0), None, _t(1.01), _t(1e-6), None, TOL)
    assert c.status.tolist() == [MISMATCH]


def test_finite_difference_error_estimate_widens_the_tolerance():
    c = compare(_t(1.0), None, _t(1.01), _t(0.01), None, TOL)
    assert c.status.tolist() == [OK]


def test_kink_overrides_mismatch_and_nan_overrides_all():
    c = compare(_t(0, 1, float("nan")), _t(0, 1, 0), _t(0.5, 1, 0), _t(0, 0, 0),
                torch.tensor([True, False, True]), TOL)
    assert c.status.tolist() == [NONDIFFERENTIABLE, OK, UNDEFINED]
    assert c.counts() == {"ok": 1, "nondifferentiable": 1, "undefined": 1}
    assert c.worst() == "undefined"
    assert c.max_abs_error() == 0.0  # only judged elements count


def test_tolerances_follow_dtype_and_overrides():
    assert set(DEFAULT_TOLERANCES) == {"float64", "float32", "float16", "bfloat16"}
    rtols = [DEFAULT_TOLERANCES[d][0] for d in ("float64", "float32", "float16", "bfloat16")]
    assert rtols == sorted(rtols)
    t = Tolerance.for_dtype("float32", rtol=0.5)
    assert t.rtol == 0.5 and t.atol == DEFAULT_TOLERANCES["float32"][1]


def test_float32_error_passes_in_float32_but_not_in_float64():
    ag = _t(1.0 + 1e-5)
    assert compare(ag, _t(1.0), None, None, None, Tolerance.for_dtype("float32")).worst() == "ok"
    assert compare(ag, _t(1.0), None, None, None, TOL).worst() == "mismatch"


# ---------------------------------------------------------------- against a naive reference
def _naive(ag, sym, fd, err, kink, tol):
    """compare() element by element in plain Python: the definition the fast passes keep."""
    status, error = [], []
    for i, a in enumerate(ag):
        refs = [(r[i], None) for r in (sym,) if r is not None]
        refs += [(fd[i], err[i])] if fd is not None else []
        defined, bad, worst = True, False, 0.0
        for ref, slack in refs:
            diff = abs(a - ref)
            if not math.isfinite(diff):
                defined = False
                continue
            limit = tol.atol + tol.rtol * abs(ref) + (3.0 * slack if slack is not None else 0.0)
            bad |= diff > limit
            worst = max(worst, diff)
        code = MISMATCH if bad else OK
        if kink is not None and kink[i]:
            code = NONDIFFERENTIABLE
        if not defined:
            code = UNDEFINED
        status.append(code)
        error.append(worst)
    return status, error


_number = st.one_of(st.floats(-10, 10), st.sampled_from([0.0, 1e308, -1e308, math.inf,
                                                           -math.inf, math.nan]))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8).flatmap(lambda n: st.tuples(
    st.lists(_number, min_size=n, max_size=n),
    st.none() | st.lists(_number, min_size=n, max_size=n),
    st.none() | st.lists(_number, min_size=n, max_size=n),
    st.lists(st.floats(0, 1e-3), min_size=n, max_size=n),
    st.none() | st.lists(st.booleans(), min_size=n, max_size=n))))
def test_compare_matches_the_elementwise_definition(case):
    ag, sym, fd, err, kink = case
    c = compare(torch.tensor(ag, dtype=torch.float64),
                None if sym is None else torch.tensor(sym, dtype=torch.float64),
                None if fd is None else torch.tensor(fd, dtype=torch.float64),
                torch.tensor(err, dtype=torch.float64) if fd is not None else None,
                None if kink is None else torch.tensor(kink), TOL)
    if sym is None and fd is None:
        assert all(s in (UNCHECKED, UNDEFINED) for s in c.status.tolist())
        return
    status, error = _naive(ag, sym, fd, err, kink, TOL)
    assert c.status.tolist() == status
    assert c.error.tolist() == error
    assert c.counts() == {ELEMENT[k].value: status.count(k) for k in set(status)}


def test_a_sample_judges_its_elements_and_leaves_the_others_unchecked():
    checked = torch.tensor([True, False, True])
    c = compare(_t(1, 2, 3), None, _t(1, 99, 4), _t(0, 0, 0), None, TOL, checked)
    assert c.status.tolist() == [OK, UNCHECKED, MISMATCH]
    with_symbolic = compare(_t(1, 2, 3), _t(1, 2.5, 3), _t(1, 99, 3), _t(0, 0, 0), None, TOL,
                            checked)
    assert with_symbolic.status.tolist() == [OK, MISMATCH, OK]  # the exact engine judges all


def test_any_number_of_references_each_can_find_a_mismatch():
    third = Answer(_t(1, 2.5))  # a new engine is one more answer in the list
    c = compare_answers(_t(1, 2), [Answer(_t(1, 2)), Answer(_t(1, 2), _t(0, 0)), third], TOL)
    assert c.status.tolist() == [OK, MISMATCH] and c.max_abs_error() == 0.5


def test_a_half_precision_atol_is_relative_to_the_tensors_largest_reference():
    ref = torch.tensor([1.5, 0.11], dtype=torch.float64)
    ag = torch.tensor([1.5, 0.1144], dtype=torch.float64)  # off by 3 float16 ulps of 1.5
    half = Tolerance.for_dtype("float16")
    assert compare_answers(ag, [Answer(ref, None)], half).counts() == {"ok": 2}
    fixed = Tolerance(half.rtol, half.atol)  # the same numbers, not scaled: a mismatch
    assert compare_answers(ag, [Answer(ref, None)], fixed).counts() == {"ok": 1, "mismatch": 1}


# ------------------------------------------------------------------ named checks
def test_check_names_its_extra_verdicts():
    report = gradscope.check("sin(x) * y", x="0.1,0.2", y="1,2")
    labels = [c.label for c in report.upstream_checks]
    assert labels == [f"random upstream #1 (uniform(-1,1), seed {seed_for(0, ':upstream0')})",
                      f"random upstream #2 (uniform(-1,1), seed {seed_for(0, ':upstream1')})",
                      "full Jacobian"]
    assert all(c.passed for c in report.upstream_checks)
    assert len(set(labels)) == len(labels)  # each names the upstream it used


def test_a_random_upstream_catches_a_backward_a_ones_upstream_hides():
    report = gradscope.check(f"{DATA}/backwards.py:BlindSquare", x="linspace(1,2,5)")
    assert report.inputs[0].status == "ok"  # ones upstream: right
    assert not report.upstream_checks[0].passed and not report.passed


def test_projections_cover_the_elements_a_sample_missed():
    report = gradscope.check(f"{DATA}/backwards.py:WrongAtLast", x="randn(200)", max_fd=50,
                             sample=5)
    projections = [c for c in report.upstream_checks if c.label.startswith("random projection")]
    assert len(projections) == 3 and projections[0].label.endswith("(all 200 elements)")
    assert not all(c.passed for c in projections)


def test_a_sparse_sample_is_judged_at_its_elements_as_the_masked_way_judges_it(monkeypatch):
    from gradscope.compare import elements as module

    torch.manual_seed(0)
    autograd = torch.randn(6, 50, dtype=torch.float64)
    values = torch.full((6, 50), float("nan"), dtype=torch.float64)
    error = torch.zeros(6, 50, dtype=torch.float64)
    checked = torch.zeros(6, 50, dtype=torch.bool)
    checked[1, 3] = checked[4, 7] = checked[5, 49] = True
    values[checked] = autograd[checked]
    values[4, 7] += 1.0  # one wrong among the three sampled
    autograd[2, 2] = float("nan")  # undefined outside the sample stays undefined
    kink = torch.zeros((), dtype=torch.bool).expand(6, 50)
    sample = Answer(values, error, kink, checked)
    sparse = module.compare(autograd, [sample], TOL)
    monkeypatch.setattr(module, "SPARSE", 0)  # (never sparse: the masked, whole-tensor way)
    whole = module.compare(autograd, [sample], TOL)
    assert torch.equal(sparse.status, whole.status) and torch.equal(sparse.error, whole.error)
    from gradscope.report.status import Status

    assert sparse.counts()[Status.MISMATCH] == 1 and sparse.counts()[Status.OK] == 2


def test_a_kink_element_outside_its_interval_is_remarked_a_mismatch():
    from gradscope.compare.elements import Comparison
    from gradscope.report.status import ELEMENT, Status

    codes = {s: k for k, s in enumerate(ELEMENT)}
    status = torch.tensor([codes[Status.NONDIFFERENTIABLE], codes[Status.OK],
                           codes[Status.NONDIFFERENTIABLE]], dtype=torch.int8)
    cmp = Comparison(status, torch.zeros(3))
    out = cmp.at_kink(torch.tensor([0, 1]), torch.tensor([2.5, 9.0]))
    # (only a kink element is re-marked: an ok one keeps its status and error)
    assert out.counts() == {"mismatch": 1, "ok": 1, "nondifferentiable": 1}
    assert out.error.tolist() == [2.5, 0.0, 0.0]
