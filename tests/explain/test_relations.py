"""Each relation between autograd and its reference, on arrays built to follow it (and ones
that follow none), and the readings of factors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gradscope.compare.tolerance import Tolerance
from gradscope.explain import relations
from gradscope.explain.relations import Arrays, find, number, sizes_of
from gradscope.report.status import MISMATCH, OK

TOL = Tolerance(1e-6, 1e-9)
SIZES = sizes_of((4, 2), {"x": (4, 3), "w": (2, 3)})


def arrays(ag: torch.Tensor, ref: torch.Tensor) -> Arrays:
    diff = (ag - ref).abs() > TOL.atol + TOL.rtol * ref.abs()
    status = torch.where(diff, MISMATCH, OK).to(torch.int8)
    return Arrays(ag, ref, None, status)


def ref(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def test_factor_a_batch_size_is_read_as_a_mean():
    r = ref(2, 3)
    rel = find("w", arrays(0.25 * r, r), TOL, SIZES)
    assert (rel.kind, rel.factor) == ("factor", 0.25)
    assert "1/4" in rel.message and "dim 0 of the output" in rel.message


def test_sign_flip_and_reversal():
    r = ref(5)
    assert "sign is flipped" in find("x", arrays(-r, r), TOL, SIZES).message
    rel = find("x", arrays(-0.5 * r, r), TOL, SIZES)
    assert rel.text.startswith("autograd = \u22120.5 ×") and "gradient-reversal" in rel.reading


@given(st.floats(0.05, 20).filter(lambda c: abs(c - 1) > 0.01), st.booleans())
def test_any_constant_factor_is_found(c, negative):
    c = -c if negative else c
    r = ref(3, 4) + 0.5 * torch.sign(ref(3, 4))  # clearly nonzero everywhere
    rel = find("x", arrays(c * r, r), TOL, SIZES)
    assert rel.kind == "factor" and abs(rel.factor - c) <= 1e-6 * abs(c)


def test_zero_transposed_permuted_additive_swapped():
    r = ref(3, 3)
    assert find("x", arrays(torch.zeros(3, 3, dtype=torch.float64), r), TOL, SIZES).kind == \
        "zero"
    assert find("x", arrays(r.t().clone(), r), TOL, SIZES).kind == "transposed"
    assert find("x", arrays(r + 2.0, r), TOL, SIZES).text.endswith("+ 2 at every element")
    a, b = ref(4), 2 * ref(4) + 1
    others = {"a": arrays(b, a), "b": arrays(a, b)}
    rel = find("a", others["a"], TOL, SIZES, others)
    assert rel.kind == "swapped" and "derivative for b" in rel.text


def test_permuted_axes():
    cube = ref(2, 2, 2)
    rel = find("x", arrays(cube.permute(2, 0, 1).contiguous(), cube), TOL, SIZES)
    assert rel.kind == "permuted" and "(2, 0, 1)" in rel.text


def test_a_disagreement_in_one_row_is_located():
    r = ref(3, 4)
    ag = r.clone()
    ag[2] = 3 * r[2]
    rel = find("x", arrays(ag, r), TOL, SIZES)
    assert rel.kind == "subset" and "index 2 of dim 0" in rel.text and "3 ×" in rel.text
    assert "rows" in rel.reading


def test_elements_of_a_vector_are_located_without_a_story_of_rows():
    r = ref(6)
    ag = r.clone()
    ag[[0, 2]] = 3 * r[[0, 2]]
    rel = find("x", arrays(ag, r), TOL, SIZES)
    assert rel.kind == "subset" and "index 0, 2 of dim 0" in rel.text and rel.reading == ""


def test_no_relation_for_noise_and_no_factor_for_a_zero_reference():
    r = ref(6)
    noise = r + torch.randn(6, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    rel = find("x", arrays(noise, r), TOL, SIZES)
    assert rel is None or rel.kind not in ("factor", "additive")
    zero_ref = torch.zeros(4, dtype=torch.float64)
    ag = torch.tensor([0.0, 0.0, 0.0, 0.7], dtype=torch.float64)
    assert find("x", arrays(ag, zero_ref), TOL, SIZES).kind != "factor"


def test_one_element_is_a_ratio_not_a_pattern():
    rel = find("s", arrays(torch.tensor([0.3], dtype=torch.float64),
                           torch.tensor([1.2], dtype=torch.float64)), TOL, SIZES)
    assert rel.kind == "factor" and "one element" in rel.text


def test_ignored_elements():
    r = ref(4)
    ag = r.clone()
    ag[:2] = 1.0
    zero_ref = r.clone()
    zero_ref[:2] = 0.0
    ignored = torch.tensor([True, True, False, False])
    rel = find("x", arrays(ag, zero_ref), TOL, SIZES, ignored=ignored)
    assert rel.kind == "ignored" and "ignores x at 2 element(s)" in rel.text


def test_number_uses_a_true_minus_and_sizes_name_dims():
    assert number(-0.5) == "\u22120.5" and number(3.0) == "3"
    assert number(1.0005) == "1.0005" and number(0.9995) == "0.9995"  # told from 1
    assert relations.sizes_of((8,), {"x": (8, 5)}) == {
        "the size of dim 0 of the output": 8, "the size of dim 1 of x": 5}


X = (torch.arange(25, dtype=torch.float64) - 12) * 0.53  # an exact zero in the middle


def _branch_bug(where: torch.Tensor, factor: float = 10.0) -> Arrays:
    r = torch.cos(X) + 2.0
    return arrays(torch.where(where, factor * r, r), r)


def test_a_value_partition_comes_before_an_index_partition():
    # x is sorted, so x < 0 is also "index 0..11 of dim 0": the values say which it is
    rel = find("x", _branch_bug(X < 0), TOL, SIZES, variables={"x": X})
    assert rel.kind == "partition" and "wrong exactly where x < 0 (12 of 25" in rel.text
    assert "autograd = 10 × the derivative" in rel.text
    without = find("x", _branch_bug(X < 0), TOL, SIZES)  # no values given: indices only
    assert without.kind == "subset"


def test_partitions_by_magnitude_exact_zeros_and_masks():
    assert "|x| > 1" in find("x", _branch_bug(X.abs() > 1), TOL, SIZES, variables={"x": X}).text
    assert "x == 0" in find("x", _branch_bug(X == 0), TOL, SIZES, variables={"x": X}).text
    mask = (torch.arange(25) % 3 == 0).double()  # a mask input: its own partition
    rel = find("x", _branch_bug(mask == 1), TOL, SIZES, variables={"x": X, "m": mask})
    assert "m ≠ 0" in rel.text


def test_a_partition_several_inputs_draw_says_so():
    other = -X  # y > 0 exactly where x < 0
    rel = find("x", _branch_bug(X < 0), TOL, SIZES, variables={"x": X, "y": other})
    assert "x < 0 (or, the values cannot tell, y > 0)" in rel.text


def test_no_partition_where_none_separates_the_elements():
    scattered = torch.zeros(25, dtype=torch.bool)
    scattered[[1, 5, 6, 13, 20]] = True  # no threshold on x draws these
    rel = find("x", _branch_bug(scattered), TOL, SIZES, variables={"x": X})
    assert rel.kind != "partition"
    everywhere = find("x", _branch_bug(X == X), TOL, SIZES, variables={"x": X})
    assert everywhere.kind == "factor"  # all wrong: a factor, no partition


def test_a_factor_read_as_the_users_number_and_several_readings_named():
    r = ref(4, 2)
    numbers = {"scale (--arg scale=2.0)": 2.0}
    rel = find("w", arrays(0.5 * r, r), TOL, {"the size of dim 1 of the output": 2}, None,
               None, None, numbers)
    assert "several readings fit" in rel.reading and "scale (--arg scale=2.0)" in rel.reading
    assert "dim 1 of the output" in rel.reading
    alone = find("w", arrays(r / 2.5, r), TOL, SIZES, None, None, None,
                 {"the constant 2.5 in ops.py:3": 2.5})
    assert alone.reading.startswith("0.4 = 1/2.5, 2.5 being the constant 2.5 in ops.py:3")
    assert "several" not in alone.reading


def test_no_reading_where_no_number_fits():
    r = ref(4, 2)
    rel = find("w", arrays(0.37 * r, r), TOL, SIZES, None, None, None, {"k": 3.0})
    assert rel.kind == "factor" and rel.reading == ""


def test_a_gradient_rolled_or_shifted_along_a_dim_is_named_so():
    ref = torch.arange(1.0, 13.0, dtype=torch.float64).reshape(4, 3)
    rolled = find("x", arrays(ref.roll(1, 0), ref), TOL, {})
    assert rolled.kind == "shifted" and "rolled by 1 along dim 0" in rolled.text
    shifted = ref.roll(-1, 1)
    shifted[:, -1] = 0
    found = find("x", arrays(shifted, ref), TOL, {})
    assert found.kind == "shifted" and "shifted by -1 along dim 1" in found.text
    assert find("x", arrays(ref * 2, ref), TOL, {}).kind == "factor"  # (not a shift)


def test_one_element_off_is_named_by_its_full_index_and_how():
    r = ref(4, 3)
    ag = r.clone()
    ag[1, 2] = -ag[1, 2]
    found = find("x", arrays(ag, r), TOL, {})
    assert "one element, [1, 2]" in found.text and "(the opposite sign)" in found.text


def test_a_part_said_wrong_is_tested_on_the_rest_before_agrees_elsewhere_is_said():
    # 1.5 × everywhere, but a loose bound (autocast's measured widening) lets most elements
    # through: the factor read on the elements beyond it holds on the others too — the error
    # is everywhere, not "in index … only; autograd agrees elsewhere"
    r = ref(4, 8)
    noise = torch.randn(4, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ag = 1.5 * r * (1 + 0.02 * noise)  # bfloat16's rounding: no exact factor at every element
    loose = (ag - r).abs() > 0.45 * r.abs().max()
    status = torch.where(loose, MISMATCH, OK).to(torch.int8)
    assert 0 < int(loose.sum()) < r.numel()
    rel = find("w", Arrays(ag, r, None, status), TOL, SIZES)
    assert rel.kind == "factor" and "at every element" in rel.text
    assert "agrees elsewhere" not in rel.text and "which hid it there" in rel.text
    # where the others do agree (a row wrong alone) the subset is said as before
    ag = r.clone()
    ag[1] = 1.5 * r[1]
    ag[2] += 1e-10  # round-off, no factor
    rel = find("w", arrays(ag, r), TOL, SIZES)
    assert rel.kind == "subset" and "index 1 of dim 0 only" in rel.text


def test_a_shift_is_not_said_where_a_factor_reads_the_numbers():
    r = ref(4, 8)
    ag = 1.5 * r
    wide = Tolerance(1e-6, 1e-9)
    err = torch.full_like(r, 0.3 * float(r.abs().max()))  # a bound loose enough for any shift
    status = torch.full(r.shape, MISMATCH, dtype=torch.int8)
    rel = find("w", Arrays(ag, r, err, status), wide, SIZES)
    assert rel is None or rel.kind != "additive"


def test_a_common_factor_is_said_only_where_it_holds_on_the_elements_it_was_not_fitted_to():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(64, generator=g, dtype=torch.float64)
    noise = 1 + 0.004 * torch.randn(64, generator=g, dtype=torch.float64)  # bf16 rounding
    assert relations.common_factor(ref * 1.05 * noise, ref, 0.0156) == pytest.approx(1.05,
                                                                                     rel=1e-2)
    assert relations.common_factor(ref * noise, ref, 0.0156) is None  # rounding alone
    assert relations.common_factor(ref * 1.01, ref, 0.0156) is None  # within two units
    half = ref.clone()
    half[::2] *= 1.05  # the even elements only: the fit there predicts nothing of the odd
    assert relations.common_factor(half, ref, 0.0156) is None
    assert relations.common_factor(ref[:3] * 2, ref[:3], 0.0156) is None  # too few
