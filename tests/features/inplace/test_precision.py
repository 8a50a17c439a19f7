"""A call judged at the precision it computed in: bfloat16's tolerance where its gradient from
above is bfloat16, the run's widened by a unit where only its answer was rounded to one, and a
common factor within that tolerance found only where it holds on a fresh gradient too."""

from __future__ import annotations

import pytest
import torch

from gradscope.compare.tolerance import Tolerance
from gradscope.explain.relations import Arrays
from gradscope.features.inplace.calls import FunctionCall
from gradscope.features.inplace.precision import computed_in, factor, judged_at
from gradscope.report.status import Status

F32 = Tolerance.for_dtype("float32")


def _call(received: torch.dtype, returned: torch.dtype) -> FunctionCall:
    return FunctionCall(object, (torch.ones(3, dtype=returned),), {}, None,
                        received=(torch.ones(3, dtype=received),),
                        returned=(torch.ones(3, dtype=returned),))


def test_the_tolerance_follows_what_the_call_computed_in():
    half = _call(torch.bfloat16, torch.bfloat16)
    assert computed_in(half) == torch.bfloat16
    assert judged_at(half, F32) == Tolerance.for_dtype("bfloat16")
    # cast_inputs=torch.float32: computed in float32, its answer cast to a bfloat16 argument's
    cast = _call(torch.float32, torch.bfloat16)
    assert computed_in(cast) is None and computed_in(cast, "any") == torch.bfloat16
    assert judged_at(cast, F32).rtol == pytest.approx(torch.finfo(torch.bfloat16).eps)
    assert judged_at(_call(torch.float32, torch.float32), F32) == F32


def _arrays(ag: torch.Tensor, ref: torch.Tensor) -> Arrays:
    return Arrays(ag, ref, torch.zeros_like(ref), torch.full(ref.shape, Status.OK.code,
                                                             dtype=torch.int8))


def test_a_common_factor_is_a_finding_only_where_a_fresh_gradient_finds_it_again():
    g = torch.Generator().manual_seed(1)
    ref = torch.randn(32, generator=g, dtype=torch.float64)
    off = {"x": (_arrays(ref * 1.05, ref), 0)}
    half = _call(torch.bfloat16, torch.bfloat16)
    name, relation, count = factor(half, off, lambda: off)
    assert name == "x" and relation.factor == pytest.approx(1.05) and count == 32
    other = {"x": (_arrays(ref * 1.0, ref), 0)}  # (a bottleneck's rounding moves with it)
    assert factor(half, off, lambda: other) is None
    assert factor(_call(torch.float32, torch.float32), off, lambda: off) is None
