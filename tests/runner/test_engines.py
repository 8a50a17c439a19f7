"""The engine step: each engine's result, or the reason it has none."""

from __future__ import annotations

from gradscope.options import Options, Request
from gradscope.runner import engines, prepare
from tests.paths import DATA


def _run(target: str, **options):
    request = Request("check", target, Options(**options))
    target_, bound = prepare(request)
    backward = engines.autograd(target_, bound, keep_grads=False)
    return target_, bound, backward


def test_expressions_get_all_three_engines():
    target, bound, backward = _run("sin(x) * y", at={"x": "1,2", "y": "3,4"})
    assert backward.grads is not None and backward.flow is not None
    symbolic = engines.symbolic(target, bound.exact, backward.upstream)
    assert symbolic.engine is not None and symbolic.skipped is None
    differences = engines.finite_differences(target, bound, Options(), None)
    assert set(differences.estimates) == {"x", "y"} and not differences.skipped


def test_python_code_and_order_two_say_why_there_is_no_symbolic_column():
    target, bound, backward = _run(f"{DATA}/functions.py:floor_plus")
    assert "Python code has no symbolic form" in engines.symbolic(
        target, bound.exact, backward.upstream).skipped
    target, bound, backward = _run("x ** 3", order=2)
    assert engines.symbolic(target, bound.exact, backward.upstream).skipped.startswith(
        "--order 2")


def test_a_refused_backward_is_a_diagnostic_not_a_crash():
    _, _, backward = _run(f"{DATA}/backwards.py:WrongShape", shape={"*": (2, 3)})
    assert backward.grads is None and backward.failure.kind == "backward_shape"


def test_sampled_inputs_get_a_note():
    target, bound, _ = _run("sum(sin(x))", shape={"*": (300,)})
    differences = engines.finite_differences(target, bound, Options(max_fd=100, sample=20), None)
    assert differences.estimates["x"].mode == "sampled"
    assert any("20 of 300 elements of x" in n for n in differences.notes)
