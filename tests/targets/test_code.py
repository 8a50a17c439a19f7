"""Python targets: loading, naming inputs, calling, and keeping the user's errors theirs."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

import gradscope
from gradscope.errors import TargetError, UsageError
from gradscope.targets import resolve
from gradscope.targets.loading import is_python_target
from tests.paths import EXAMPLES

SEEDS = f"{EXAMPLES}/seed_functions.py"
BUGGY = f"{EXAMPLES}/buggy_functions.py"


@pytest.mark.parametrize("text, yes", [("a.py:F", True), ("pkg.mod:F", True), ("mod:f", True),
                                       ("3*a + b", False), ("a.py:", False), (":F", False)])
def test_python_target_syntax(text, yes):
    assert is_python_target(text) is yes


def test_function_inputs_and_args():
    t = resolve(f"{SEEDS}:KillHead", args={"n": 2})
    assert t.kind == "autograd_function" and t.names == ("input",)


def test_module_parameters_become_inputs():
    t = resolve(f"{SEEDS}:MyLayer", init={"size": 2})
    assert t.kind == "module" and t.names == ("input", "mytensor")
    assert t.roles() == {"input": "input", "mytensor": "parameter"}
    assert t.parameters["mytensor"].shape == (2, 2)


def test_missing_name_lists_candidates():
    with pytest.raises(UsageError) as info:
        resolve(f"{SEEDS}:Nope")
    for name in ("AbsProd", "Clamp01", "KillHead", "MyLayer", "RoundSTE", "soft_threshold"):
        assert name in str(info.value)


def test_missing_file_and_module():
    with pytest.raises(UsageError, match="no such file"):
        resolve("no/such/file.py:F")
    with pytest.raises(UsageError, match="no module named"):
        resolve("no_such_pkg_xyz.mod:F")


def test_wrong_kind_of_name(tmp_path):
    path = tmp_path / "things.py"
    path.write_text("VALUE = 3\n")
    with pytest.raises(UsageError, match=r"expected a torch\.autograd\.Function"):
        resolve(f"{path}:VALUE")


def test_unknown_arg_name():
    with pytest.raises(UsageError, match="not a parameter"):
        resolve(f"{SEEDS}:KillHead", args={"m": 2})


def test_import_error_is_target_error_with_user_frames(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import torch\n\ndef helper():\n    raise ValueError('boom in user code')\n\n"
                    "helper()\n")
    with pytest.raises(TargetError) as info:
        resolve(f"{path}:f")
    message = str(info.value)
    assert "broken.py" in message and "ValueError: boom in user code" in message
    assert "gradscope/" not in message and "importlib" not in message


def test_seed_mylayer_as_written_gets_the_super_init_hint():
    with pytest.raises(TargetError) as info:
        resolve(f"{BUGGY}:MyLayer")
    message = str(info.value)
    assert "torch.tensor(3, 3)" in message and "super().__init__()" in message
    assert len(message.splitlines()) <= 8


def test_forward_raising_is_exit_3(tmp_path):
    path = tmp_path / "fwd.py"
    path.write_text("def f(x):\n    return x.nonexistent_method()\n")
    with pytest.raises(TargetError, match="AttributeError"):
        gradscope.check(f"{path}:f")


def test_backward_raising_is_exit_3(tmp_path):
    path = tmp_path / "bwd.py"
    path.write_text(textwrap.dedent("""
        import torch
        class F(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2
            @staticmethod
            def backward(ctx, g):
                raise RuntimeError("my backward is broken")
    """))
    with pytest.raises(TargetError, match="my backward is broken"):
        gradscope.check(f"{path}:F")


def test_tuple_output_is_refused(tmp_path):
    path = tmp_path / "tup.py"
    path.write_text("def f(x):\n    return x, x\n")
    with pytest.raises(UsageError, match="pick the output to check with --output-index"):
        gradscope.check(f"{path}:f")


def test_package_module_target(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text("def square(x):\n    return x * x\n")
    monkeypatch.chdir(tmp_path)
    report = gradscope.vjp("mypkg.ops:square", x="1,2")
    assert report.inputs[0].autograd == [2.0, 4.0] and report.target_kind == "function"
    sys.modules.pop("mypkg.ops", None)
    sys.modules.pop("mypkg", None)


def test_float64_failure_falls_back_to_run_dtype(tmp_path):
    path = tmp_path / "f32.py"
    path.write_text(textwrap.dedent("""
        import torch
        def f(x):
            if x.dtype != torch.float32:
                raise TypeError("float32 only")
            return torch.sin(x) * 2
    """))
    report = gradscope.check(f"{path}:f", dtype="float32")
    assert report.passed, report.to_text()
    assert any("ran in float32" in n for n in report.notes)


def test_module_instance_grad_is_left_alone():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from seed_functions import MyLayer
    finally:
        sys.path.pop(0)
    layer = MyLayer()
    layer(torch.ones(3)).sum().backward()
    before = layer.mytensor.grad.clone()
    report = gradscope.check(layer, torch.randn(3))
    assert report.passed and torch.equal(layer.mytensor.grad, before)
    assert any(".grad" in n for n in report.notes)


def test_target_failing_at_a_perturbed_point_skips_finite_differences(tmp_path):
    path = tmp_path / "edge.py"
    path.write_text("import torch\n\ndef f(x):\n"
                    "    if bool((x > 1).any()):\n"
                    "        raise ValueError('x must be <= 1')\n"
                    "    return x * 2\n")
    report = gradscope.check(f"{path}:f", x="1,0.5")
    (x,) = report.inputs
    assert x.finite_difference is None and "perturbed point" in x.finite_difference_skipped
    assert x.status == "inconclusive" and x.status_counts == {"unchecked": 2}
    assert not report.passed  # nothing was compared: never a pass


def test_missing_arg_gets_a_hint():
    with pytest.raises(TargetError) as info:
        gradscope.check(f"{SEEDS}:KillHead", input="randn(3,8)")
    assert "give non-tensor parameters with --arg" in str(info.value)
    assert "input, n" in str(info.value)
