"""Value partitions: the simplest predicate that holds exactly where elements disagree, with
its threshold read from the gap the values leave, and none where none separates them."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from gradscope.explain.partitions import find

X = (torch.arange(25, dtype=torch.float64) - 12) * 0.53
ALL = torch.ones(25, dtype=torch.bool)


def _text(wrong: torch.Tensor, judged: torch.Tensor = ALL, **variables) -> str | None:
    found = find(wrong, judged, variables or {"x": X})
    return found.said if found else None


def test_thresholds_are_the_simplest_number_in_the_gap():
    assert _text(X < 0) == "x < 0"
    assert _text(X <= 0) == "x ≤ 0"
    assert _text(X > 0) == "x > 0" and _text(X >= 0) == "x ≥ 0"
    assert _text(X.abs() > 1) == "|x| > 1" and _text(X.abs() < 1) == "|x| < 1"
    assert _text(X > 2.2) == "x > 2.4"  # nothing simple between 2.12 and 2.65: the midpoint
    assert _text(X == 0) == "x == 0"


def test_a_side_of_fewer_than_three_elements_draws_no_line_but_the_exact_zeros():
    # a sign error everywhere, right only at the one zero (where the term vanishes): "x ≠ 0"
    # would be fitted to that one element; a one-element flip at −0.9 likewise "x < −0.9"
    assert _text(X != 0) is None
    assert _text(X.min() == X) is None and _text(X < -5.5) is None
    assert _text(X < -5) == "x < −5"  # (three elements: a rule)
    thrice = torch.cat([X, X, X])  # (three zeros: the right side is a rule's)
    assert _text(thrice != 0, torch.ones(75, dtype=torch.bool), x=thrice) == "x ≠ 0"


def test_only_judged_elements_count():
    judged = X != 0  # the exact zero was at a kink, not judged
    assert _text((X <= 0) & judged, judged) == "x < 0"


def test_nothing_when_nothing_or_everything_disagrees():
    assert _text(torch.zeros(25, dtype=torch.bool)) is None
    assert _text(ALL) is None


def test_masks_and_inputs_of_another_shape():
    mask = (torch.arange(25) % 2).double()
    assert _text(mask == 1, x=X, m=mask) == "m ≠ 0"
    assert _text(X < 0, x=X, b=torch.ones(3)) == "x < 0"  # b cannot draw it: not broadcast


@given(st.lists(st.booleans(), min_size=25, max_size=25))
def test_a_predicate_found_holds_exactly(flags):
    wrong = torch.tensor(flags)
    found = find(wrong, ALL, {"x": X})
    if found is None:
        return
    name, op, t = found.text.split(" ")
    values = X.abs() if name.startswith("|") else X
    t = float(t.replace("\u2212", "-"))
    holds = {"<": values < t, "≤": values <= t, ">": values > t, "≥": values >= t,
             "==": values == t, "≠": values != t}[op]
    assert torch.equal(holds, wrong)
