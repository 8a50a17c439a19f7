"""--order 2: the output is the first-order VJP, so its backward is double backward."""

from __future__ import annotations

import pytest
import torch

from gradscope.errors import UsageError
from gradscope.inputs.bind import Upstream
from gradscope.inputs.text import InputValue
from gradscope.targets import SecondOrderTarget, resolve
from gradscope.targets.base import Target


def _upstream(t: torch.Tensor) -> Upstream:
    return Upstream(InputValue(t.to(torch.float64), "given"))


def test_the_output_is_the_vjp_concatenated_over_inputs():
    target = SecondOrderTarget(resolve("x * x * y"), _upstream(torch.tensor([1.0, 2.0])))
    x, y = torch.tensor([1.0, 3.0], dtype=torch.float64), torch.tensor([2.0, 5.0],
                                                                        dtype=torch.float64)
    out = target.forward({"x": x, "y": y})
    v = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert torch.allclose(out, torch.cat([2 * x * y * v, x * x * v]))
    assert target.kind == "expression (order 2)" and isinstance(target, Target)
    assert target.traced_around is None and target.elementwise_inputs == set()
    assert not target.readable and not target.checks_backward and target.flow_source() is None
    assert target.symbolic().startswith("--order 2")


def test_an_inner_upstream_of_the_wrong_shape_is_refused():
    target = SecondOrderTarget(resolve("x * 2"), _upstream(torch.ones(3)))
    with pytest.raises(UsageError, match=r"--grad has shape \(3,\) but the output has shape"):
        target.forward({"x": torch.ones(2, dtype=torch.float64)})
