"""Targets built with torch.func are checked as torch's gradcheck checks them: made by
`grad`, calling vmap/jacrev/functional_call inside, per-sample gradients; `--order 2` of a
grad-made function is the Hessian-vector check; a wrong backward inside vmap fails."""

from __future__ import annotations

import pytest
import torch

import gradscope
from tests.paths import DATA

FUNCS = f"{DATA}/functional.py"


@pytest.mark.parametrize("name, shapes", [
    ("grad_loss", {"x": (4, 3)}),
    ("per_row", {"x": (4, 3)}),
    ("jac_norm", {"x": (5,)}),
    ("per_sample_grads", {"w": (2, 3), "x": (5, 3)})])
def test_torch_func_built_targets_pass(name, shapes):
    report = gradscope.check(f"{FUNCS}:{name}", shape=shapes)
    assert report.passed, report.to_text()
    fn = getattr(__import__("importlib").import_module("tests.data.functional"), name)
    args = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes.values()]
    assert torch.autograd.gradcheck(fn, args)  # (torch's verdict is the same)


def test_order_two_of_a_grad_made_function_is_the_hessian_check():
    report = gradscope.check(f"{FUNCS}:grad_loss", shape={"x": (4,)}, order=2)
    assert report.passed and report.target_kind.endswith("(order 2)")


def test_a_wrong_backward_inside_vmap_fails_with_its_factor():
    report = gradscope.check(f"{FUNCS}:row_norms_bug", shape={"x": (4, 3)})
    assert not report.passed
    assert any("2 × the derivative" in d.message for d in report.diagnostics)
