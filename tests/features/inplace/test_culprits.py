"""Each custom Function checked in place: the wrong one named with its backward's file and line
and how it is wrong; a correct one, a surrogate and a bug outside any Function never named."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.compare.tolerance import Tolerance
from gradscope.features.inplace.culprits import find
from gradscope.usercode import backward_location as location
from tests.data import branches, culprits
from tests.paths import DATA

TOL = Tolerance(1e-6, 1e-9)
X = (torch.arange(9, dtype=torch.float64) - 4) * 0.7


def _find(forward, values, upstream=None):
    out = forward(values)
    v = torch.ones_like(out) if upstream is None else upstream
    return find(forward, values, v, TOL, 1e-4, 2000, 200, 0)


def test_the_wrong_function_is_named_with_its_line_and_how():
    def forward(v):
        return branches.LeakySwishBug.apply(branches.Sinc.apply(v["x"]) * 3 - 2)

    (found,) = _find(forward, {"x": X})
    where = location(branches.LeakySwishBug)
    assert found.kind == "culprit" and found.op == f"LeakySwishBug.backward ({where})"
    assert found.where.startswith("branches.py:") and found.relation == "partition"
    assert "wrong exactly where x < 0" in found.message and "10 × the derivative" in found.message


def test_correct_functions_and_surrogates_are_never_named():
    def forward(v):
        return branches.LeakySwish.apply(branches.RoundSTE.apply(v["x"]) + branches.Sinc.apply(
            v["x"]))

    assert _find(forward, {"x": X}) == []


def test_a_bug_outside_any_function_names_none():
    net = culprits.HookedNet().double()
    params = dict(net.named_parameters())

    def forward(v):
        return torch.func.functional_call(net, {k: v[k] for k in params}, (v["x"],))

    values = {**{k: p.detach() for k, p in params.items()},
              "x": torch.randn(3, 6, dtype=torch.float64)}
    assert _find(forward, values) == []


def test_the_upstream_each_call_received_is_used():
    # the Function sits under a scale of 5: checked with the gradient it really got
    def forward(v):
        return 5 * branches.WideCube.apply(v["x"])

    (found,) = _find(forward, {"x": X})
    assert "|x| > 1" in found.message and "0.5 × the derivative" in found.message


def test_location_of_a_backward():
    assert location(culprits.BuggyLeakyReLU) == "culprits.py:42"
    assert location(int) == ""


def test_a_function_used_through_its_second_output_is_checked_with_that_upstream():
    # (the first output received no gradient: the second's must not be read as the first's)
    right = gradscope.check(f"{DATA}/culprits.py:second_output", at={"x": "randn(5)"})
    assert right.passed, right.to_text()
    assert not [d for d in right.diagnostics if d.kind in ("culprit", "inner_departure")]
    wrong = gradscope.check(f"{DATA}/culprits.py:second_output_bug", at={"x": "randn(5)"})
    assert not wrong.passed
    (culprit,) = [d for d in wrong.diagnostics if d.kind == "culprit"]
    assert culprit.op.startswith("TwoOutputsBug.backward") and culprit.factor == 1.5


def test_the_return_at_fault_is_named_where_a_backward_has_several():
    report = gradscope.check(f"{DATA}/seed_layers.py:two_returns")
    (found,) = [d for d in report.diagnostics if d.kind == "culprit"]
    lines = (DATA / "seed_layers.py").read_text().splitlines()
    bad = next(i for i, text in enumerate(lines, 1) if "# the bug, on this path only" in text)
    assert f"(returning at seed_layers.py:{bad})" in found.message
    assert f"returning at seed_layers.py:{bad}" in report.to_text()


def test_a_backward_with_one_return_names_no_returning_line():
    report = gradscope.check(f"{DATA}/seed_layers.py:combo")
    found = [d for d in report.diagnostics if d.kind == "culprit"]
    assert found and not any("returning at" in d.message for d in found)


def test_the_return_at_fault_is_named_through_once_differentiable():
    report = gradscope.check(f"{DATA}/seed_layers.py:two_returns_once")
    (found,) = [d for d in report.diagnostics if d.kind == "culprit"]
    lines = (DATA / "seed_layers.py").read_text().splitlines()
    bad = next(i for i, text in enumerate(lines, 1) if "# the bug, wrapped" in text)
    assert f"(returning at seed_layers.py:{bad})" in found.message


@pytest.mark.slow
def test_small_activations_are_differenced_with_an_error_estimate_before_blame():
    # a Llama-shaped model's RMSNorm sees activations of about 0.01, beside which the step
    # (1e-4) is large: a two-point difference's truncation error there is no departure — the
    # correct RMSNorm is no note, and the wrong one is blamed for the argument it is wrong for
    from tests.data import llama

    tokens = "randint(0,61,(2,9))"
    right = gradscope.check(f"{DATA}/llama.py:tiny_loss", const={"tokens": tokens})
    assert right.passed and not [d for d in right.diagnostics if d.kind == "inner_departure"]
    wrong = gradscope.check(f"{DATA}/llama.py:tiny_off_loss", const={"tokens": tokens})
    (found,) = [d for d in wrong.diagnostics if d.kind == "culprit"]
    assert found.op == f"RMSNormOff.backward ({location(llama.RMSNormOff)})"
    assert found.inputs == ["weight"]


def test_a_dispatcher_ops_c_kernel_is_the_culprit_and_a_right_one_passes():
    from tests.features.inplace.test_calls import _cpp_ops

    _cpp_ops()
    report = gradscope.check(f"{DATA / 'cpp_ops.py'}:uses_wrong")
    assert not report.passed
    (found,) = [d for d in report.diagnostics if d.kind == "culprit"]
    assert found.op == "the autograd kernel of dispatcher op gradscope_cpp::scaled_sin_bug"
    assert found.where == "gradscope_cpp::scaled_sin_bug" and found.factor == pytest.approx(1.5)
    right = gradscope.check(f"{DATA / 'cpp_ops.py'}:uses_right")
    assert right.passed and any("dispatcher op gradscope_cpp::scaled_sin checked in place"
                                in c.label for c in right.upstream_checks)


@pytest.mark.parametrize("name", ["row_norms_bug", "nested_bug", "both"])
def test_a_function_inside_vmap_is_named_with_its_own_backwards_line(name):
    from tests.data import vmapped

    x = torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(3, 4)
    (found,) = _find(lambda v: getattr(vmapped, name)(v["x"]), {"x": x})
    assert found.op == f"RootBug.backward ({location(vmapped.RootBug)})"
    assert found.factor == pytest.approx(2.0)


def test_a_function_inside_vmap_wrong_for_an_unbatched_argument_is_named():
    from tests.data import vmapped

    values = {"x": torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(3, 4),
              "w": torch.linspace(0.5, 2, 4, dtype=torch.float64)}
    (found,) = _find(lambda v: vmapped.shared_weight_bug(v["x"], v["w"]), values)
    assert found.op.startswith("RootBug.backward (vmapped.py:")


@pytest.mark.parametrize("name", ["row_norms", "nested"])
def test_a_right_function_inside_vmap_is_never_named(name):
    from tests.data import vmapped

    x = torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(3, 4)
    assert _find(lambda v: getattr(vmapped, name)(v["x"]), {"x": x}) == []


def test_a_wrong_backward_a_ones_upstream_cannot_see_is_named_by_another():
    from tests.data import normalised

    x = torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(3, 4)
    (found,) = _find(lambda v: normalised.attend_bug(v["x"]), {"x": x})
    assert found.op == f"RowSoftmaxBug.backward ({location(normalised.RowSoftmaxBug)})"
    assert found.factor == pytest.approx(1.5)
    assert _find(lambda v: normalised.attend(v["x"]), {"x": x}) == []


def test_a_function_the_inputs_saturate_is_said_so_and_one_they_do_not_is_not():
    # a steep soft rank at widely spread values: every comparison saturates, backward and
    # derivative are ~0 at every element, so even a backward off by 0.2 passes — said so
    wide = {"x": "linspace(-6,6,25)"}
    for target in ("steep_rank_loss", "steep_rank_off_loss"):
        report = gradscope.check(f"{DATA}/saturating.py:{target}", at=wide)
        assert report.passed  # (what the evidence shows: nothing wrong where it looked)
        (said,) = [d for d in report.diagnostics if d.kind == "saturation"]
        assert "the inputs saturate it" in said.message and "--at" in said.hint
        # exercised where it is active (its arguments scaled down): said how it is there
        assert "with its arguments scaled by 0.1, where it is active" in said.message
        if target == "steep_rank_off_loss":
            assert "its backward is wrong for its argument x: autograd = 0.2 ×" in said.message
            assert said.factor == pytest.approx(0.2)
        else:
            assert "its backward agrees with its forward" in said.message
    # at moderate values it is active: the wrong one is named, the right one says nothing
    moderate = {"x": "linspace(-0.02,0.02,6)"}
    right = gradscope.check(f"{DATA}/saturating.py:steep_rank_loss", at=moderate)
    assert right.passed and not [d for d in right.diagnostics if d.kind == "saturation"]
    wrong = gradscope.check(f"{DATA}/saturating.py:steep_rank_off_loss", at=moderate)
    assert not wrong.passed
    assert any(d.kind == "culprit" and "SteepRankOff.backward" in d.op
               for d in wrong.diagnostics)


@pytest.mark.parametrize("cls, wrong", [(culprits.RowNorm, False), (culprits.RowNormBug, True)])
def test_an_old_style_function_is_differenced_batched_in_place(cls, wrong):
    # torch.func refuses a Function without setup_context; in place its forward's values are
    # computed batched with a stand-in ctx (a plain call first proves the batch), not one
    # call per element — and a wrong backward is still named, a right one never
    x = torch.randn(6, 40, dtype=torch.float64, generator=torch.Generator().manual_seed(1))

    def forward(v):
        return cls.apply(v["x"]).pow(2).mul(torch.arange(40.0, dtype=torch.float64)).sum()

    culprits.RowNorm.forwards = 0
    found = _find(forward, {"x": x})
    assert culprits.RowNorm.forwards < 40  # (one call per element: 240 and more)
    assert [d.op.split(" ")[0] for d in found] == (["RowNormBug.backward"] if wrong else [])


def test_an_old_style_function_vmap_cannot_batch_is_differenced_call_by_call():
    # the batched stand-in does not fit a forward that reads `.item()`: vmap raises, and the
    # plain calls decide — the wrong backward is still named
    x = torch.randn(2, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))

    def forward(v):
        return culprits.ItemScaledBug.apply(v["x"]).sum()

    found = _find(forward, {"x": x})
    assert [d.op.split(" ")[0] for d in found] == ["ItemScaledBug.backward"]


def test_a_place_is_said_only_where_a_fresh_draw_finds_it_too():
    # RowNormBug's first row gets a zero gradient from above, so the call's own comparison
    # sees it wrong in rows 1 and 2 only; a seeded random gradient shows every row wrong:
    # counts, no rule
    loose = gradscope.check(f"{DATA}/culprits.py:rows_weighted_bug", at={"x": "randn(3,4)"})
    (culprit,) = [d for d in loose.diagnostics if d.kind == "culprit"]
    assert "8 element(s) disagree" in culprit.message and "lies in" not in culprit.message
    # the twin, wrong in its first row alone: every draw finds that row, and it is said
    held = gradscope.check(f"{DATA}/culprits.py:rows_weighted_first_bug",
                           at={"x": "randn(3,4)"})
    (culprit,) = [d for d in held.diagnostics if d.kind == "culprit"]
    assert "the disagreement lies in index 0 of dim 0 only" in culprit.message
    assert culprit.factor == pytest.approx(2.0)


SORTED = "-2.5,-2,-1.5,-1,-0.6,-0.3,0.3,0.6,1,1.5,2,2.5"


def test_a_value_partition_is_said_only_where_the_call_at_fresh_values_follows_it():
    # wrong in its first half by position: on sorted inputs that half is the negative one,
    # and "x < 0" separates it exactly — at the call's arguments moved by half their spread
    # the same positions are wrong, not the negative values: counts, no rule
    coincidence = gradscope.check(f"{DATA}/culprits.py:first_half_bug", at={"x": SORTED})
    (culprit,) = [d for d in coincidence.diagnostics if d.kind == "culprit"]
    assert "6 element(s) disagree" in culprit.message and "exactly where" not in culprit.message
    # the target's own relation too: its input moved by half its spread, compared again
    assert not any("exactly where" in d.message for d in coincidence.diagnostics)
    # a case of backward taken by value (hard-swish's middle piece): it holds there too
    by_value = gradscope.check(f"{DATA}/culprits.py:hard_swish_bug", shape={"x": (4, 6)})
    (culprit,) = [d for d in by_value.diagnostics if d.kind == "culprit"]
    assert "wrong exactly where |x| < 3" in culprit.message
    assert any(d.kind == "mismatch_pattern" and "wrong exactly where |x| < 3" in d.message
               for d in by_value.diagnostics)
    from gradscope.explain import partitions

    x = torch.tensor([-4.0, -1.0, 0.0, 2.0, 5.0])
    assert partitions.holds("|x| < 3", {"x": x}).tolist() == [False, True, True, True, False]
    assert partitions.holds("x \u2265 \u22121.5", {"x": x}).tolist() == [False, True, True,
                                                                          True, True]
    assert partitions.holds("y < 0", {"x": x}) is None


def test_an_argument_the_forward_reads_another_way_is_not_compared_and_not_called_ok():
    # the residual's parameter reaches the bisection through the callable; perturbing the
    # argument passed beside it moves nothing, so the check in place cannot judge it
    for target, passed in (("root_loss", True), ("root_bug_loss", False)):
        report = gradscope.check(f"{DATA}/implicit.py:{target}", shape={"theta": (4,)})
        assert report.passed is passed
        (row,) = [c for c in report.upstream_checks if "checked in place" in c.label]
        assert "not compared: params, which its forward never reads" in row.label
        assert row.result == "inconclusive"
        culprits = [d for d in report.diagnostics if d.kind == "culprit"]
        # its gradient is the Function's answer alone (the one way into the graph): the
        # Function is named for it where it is wrong, and nothing is named where it is right
        assert len(culprits) == (0 if passed else 1), report.to_text()
    # the target's own comparison still finds the parameter's flipped sign
    assert report["fn.a"].status == "mismatch"
    (culprit,) = culprits
    assert culprit.message.startswith("RootFindBug.backward (implicit.py:")
    assert "for its argument params: fn.a's gradient is its answer alone" in culprit.message
    assert culprit.factor == pytest.approx(-1.0) and culprit.inputs == ["fn.a"]
