"""One way to write numbers, indices and shapes in every text format."""

import math

from gradscope.render.cells import flat, fmt, index_of, index_text, shape_text


def test_numbers_and_non_finite_values():
    assert fmt(None) == "—" and fmt(1 / 3) == "0.333333" and fmt(1e-12) == "1e-12"
    assert (fmt(math.nan), fmt(math.inf), fmt(-math.inf)) == ("nan", "inf", "-inf")


def test_indices_and_nested_values():
    assert index_of(5, (2, 3)) == [1, 2] and index_text([1, 2]) == "1,2" and index_text([]) == "()"
    assert flat([[1, 2], [3, [4]]]) == [1, 2, 3, 4] and flat(5) == [5] and flat(None) == []
    assert shape_text([2, 3]) == "(2, 3)"
