"""VALUE text → tensors: the forms of --at / --grad / --tangent, seeded generators, limits."""

from __future__ import annotations

import pytest
import torch

from gradscope.errors import UsageError
from gradscope.inputs.text import parse_value, random_value
from gradscope.option_text import MAX_ELEMENTS


@pytest.mark.parametrize("text, expected", [
    ("1.5", 1.5),
    ("-2", -2.0),
    ("1,2,3", [1.0, 2.0, 3.0]),
    ("1e-4,-1", [1e-4, -1.0]),
    ("[[1,2],[3,4]]", [[1.0, 2.0], [3.0, 4.0]]),
    ("[1]", [1.0]),
    ("ones(2)", [1.0, 1.0]),
    ("zeros(1,2)", [[0.0, 0.0]]),
    ("linspace(0,1,3)", [0.0, 0.5, 1.0]),
    ("arange(3)", [0.0, 1.0, 2.0]),
])
def test_literal_and_deterministic_forms(text, expected):
    value = parse_value(text, "--at x")
    assert value.tensor.dtype == torch.float64
    assert value.tensor.tolist() == expected


def test_random_generators_are_seeded_per_name():
    a = parse_value("randn(2,6)", "--at x", seed=0, name="x").tensor
    b = parse_value("randn(2,6)", "--at x", seed=0, name="x").tensor
    c = parse_value("randn(2,6)", "--at y", seed=0, name="y").tensor
    assert a.shape == (2, 6) and torch.equal(a, b) and not torch.equal(a, c)
    u = parse_value("uniform(2,3,100)", "--at x", seed=1, name="x")
    assert float(u.tensor.min()) >= 2 and float(u.tensor.max()) <= 3
    assert u.origin.startswith("uniform(2,3,100): 2 + 1 * torch.rand(100, generator=torch.")
    r = parse_value("rand(50)", "--at x").tensor
    assert float(r.min()) >= 0 and float(r.max()) < 1


@pytest.mark.parametrize("text, fragment", [
    ("", "empty value"),
    ("nan", "NaN and infinity"),
    ("1,inf", "NaN and infinity"),
    ("[1,[2]]", "ragged"),
    ("[[1,2],[3]]", "ragged"),
    ("[]", "empty"),
    ("randn(100000,100000)", "more than the limit"),
    ("randn(2,0)", "size 0"),
    ("randn(-1)", "whole numbers"),
    ("randn(1.5)", "whole numbers"),
    ("uniform(1,0,3)", "lo < hi"),
    ("uniform(0,1)", "lo < hi and a shape"),
    ("linspace(0,1)", "three numbers"),
    ("arange(1,2)", "one whole number"),
    ("evil(3)", "unknown generator"),
    ("randn(x)", "plain numbers"),
    ("__import__('os')", "unknown generator"),
    ("'abc'", "cannot read"),
    ("1e999", "too large"),
    ("{1: 2}", "cannot read"),
    ("1,,2", "cannot read"),
    ("randn(" + ",".join(["2"] * 9) + ")", "at most 8 dimensions"),
])
def test_bad_values(text, fragment):
    with pytest.raises(UsageError) as info:
        parse_value(text, "--at x")
    assert fragment in str(info.value) and "--at x" in str(info.value)


def test_limit_is_checked_before_allocation():
    with pytest.raises(UsageError, match=f"{MAX_ELEMENTS:,}"):
        parse_value("zeros(20000001)", "--grad")


def test_random_value_respects_domain():
    v = random_value((1000,), 0, "c", (0.1, 2.0))
    assert float(v.tensor.min()) >= 0.1 and float(v.tensor.max()) <= 2.0
    scalar = random_value((), 0, "c", (0.1, 2.0))
    assert scalar.tensor.shape == () and 0.1 <= float(scalar.tensor) <= 2.0
    plain = random_value((3,), 0, "x", None)
    assert plain.origin.startswith("spread(3): ") and plain.tensor.tolist() != [0.0, 0.0, 0.0]


def test_every_seeded_generator_says_the_plain_torch_call_that_makes_its_values():
    for text in ("spread(3,4)", "randn(2,3)", "rand(5)", "uniform(-2,3,4)", "randint(0,7,6)"):
        value = parse_value(text, "--at x", seed=3, name="x")
        call = value.origin.split(": ", 1)[1]
        made = eval(call, {"torch": torch})  # our own text: plain torch, as a user runs it
        assert torch.equal(made.to(torch.float64), value.tensor), text


def test_spread_reaches_both_signs_zero_and_past_saturation():
    values = random_value((25,), 0, "x", None).tensor
    assert float(values.min()) < -6 and float(values.max()) > 6  # past relu6, tanh, sigmoid
    assert (values == 0).sum() == 1 and (values < 0).sum() == 12 == (values > 0).sum()
    assert sorted(values.tolist()) == sorted((-values).tolist())  # an even grid, both signs
    other = random_value((25,), 1, "x", None).tensor
    assert sorted(other.tolist()) == sorted(values.tolist()) and not torch.equal(other, values)
    assert float(random_value((25,), 0, "x", None, spread=1.37).tensor.max()) == 1.37


def test_torch_spelled_generators_are_the_same_generators():
    ours = parse_value("randn(2,5)", "--at x", seed=3, name="x").tensor
    torchs = parse_value("torch.randn(2,5)", "--at x", seed=3, name="x").tensor
    assert torch.equal(ours, torchs)
    with pytest.raises(UsageError, match="unknown generator"):
        parse_value("numpy.randn(2,5)", "--at x")
