"""Requests: option validation and the inputs `prepare` builds (sizes bounded up front)."""

from __future__ import annotations

import pytest
import torch

from gradscope.errors import UsageError
from gradscope.inputs.bind import Request, prepare, upstream_for, validate, value_of


@pytest.mark.parametrize("change, fragment", [
    ({"command": "hessian"}, "unknown command"),
    ({"dtype": "float8"}, "unknown dtype"),
    ({"eps": 0.5}, r"--eps must be in \(0, 0.1\]"),
    ({"rtol": float("nan")}, "--rtol must be a finite number"),
    ({"sample": 0}, "--max-fd and --sample must be at least 1"),
    ({"order": 3}, "--order must be 1 or 2"),
])
def test_validate_names_the_option_and_what_is_allowed(change, fragment):
    with pytest.raises(UsageError, match=fragment):
        validate(Request(**{"command": "check", "target": "x", **change}))


def test_prepare_builds_seeded_inputs_in_the_domain_and_casts_them():
    request = Request("check", "log(c) * x", shapes={"c": (4,)}, dtype="float32", seed=3)
    target, grad, values, cast = prepare(request)
    assert target.names == ("c", "x") and grad is None
    assert values["c"].tensor.shape == (4,) and bool((values["c"].tensor > 0).all())
    assert values["x"].tensor.shape == (3,)  # the default shape
    assert all(t.dtype == torch.float32 for t in cast.values())
    again = prepare(Request("check", "log(c) * x", shapes={"c": (4,)}, dtype="float32", seed=3))
    assert torch.equal(again[3]["c"], cast["c"])


def test_sizes_are_bounded_before_anything_is_allocated():
    with pytest.raises(UsageError, match="the limit is 10"):
        prepare(Request("check", "x * y", shapes={"x": (6,), "y": (6,)}, max_elements_total=10))
    with pytest.raises(UsageError, match="more than the limit"):
        value_of(torch.zeros(11), "--at x", 0, "x", limit=10)


def test_given_tensors_must_be_finite_and_real():
    with pytest.raises(UsageError, match="NaN and infinity are not allowed"):
        value_of(torch.tensor([1.0, float("inf")]), "--at x", 0, "x")
    with pytest.raises(UsageError, match="not supported"):
        value_of(torch.tensor([True]), "--at x", 0, "x")


def test_upstream_must_match_the_output_shape():
    out = torch.zeros(2, 3)
    assert torch.equal(upstream_for(None, out), torch.ones(2, 3))
    grad = value_of("1,2,3", "--grad", 0, ":grad")
    with pytest.raises(UsageError, match=r"--grad has shape \(3,\) but the output has shape "
                                         r"\(2, 3\)"):
        upstream_for(grad, out)
