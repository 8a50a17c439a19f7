"""The Python API: keywords that name an option are options, the rest are inputs; the calls
return the same Report the CLI prints."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.api import request
from gradscope.errors import UsageError
from tests.paths import DATA, EXAMPLES, ROOT, load


def test_keywords_split_into_options_and_inputs():
    req = request("check", "x * y", (), {"x": "1,2", "y": torch.ones(2), "seed": 3, "grad": None})
    assert req.options.seed == 3 and req.options.grad is None
    assert set(req.options.at) == {"x", "y"}


def test_vjp_is_jvp_and_takes_a_tangent():
    assert gradscope.vjp is gradscope.jvp
    report = gradscope.jvp("x * 3", x="1,2", tangent="1,1")
    assert report.forward is not None and report.forward.autograd == [3.0, 3.0]


def test_a_callable_takes_positional_arguments():
    kill_head = load(EXAMPLES / "seed_functions.py", "KillHead")
    report = gradscope.check(kill_head, torch.randn(3, 8, dtype=torch.float64), 2)
    assert report.passed and [i.name for i in report.inputs] == ["input"]
    buggy = load(DATA / "backwards.py", "Double")
    assert not gradscope.check(buggy, torch.tensor([1.0, 2.0])).passed


def test_bad_input_raises_usage_error_not_exit():
    with pytest.raises(UsageError):
        gradscope.check("x *", x="1")
    with pytest.raises(UsageError, match="unknown `dtype` 'float8'"):  # in Python words
        gradscope.check("x * 2", x="1", dtype="float8")


def test_jacobian_has_no_grad():
    report = gradscope.jacobian("x * y", x="1,2", y="3,4")
    assert report.command == "jacobian" and report.inputs[0].jacobian_shape == [2, 2]


def test_builtins_torch_callables_varargs_and_keyword_only_parameters():
    import torch.nn.functional as F

    x = torch.randn(3, dtype=torch.float64)
    assert gradscope.check(torch.sigmoid, x).passed and gradscope.check(F.gelu, x).passed
    report = gradscope.check(lambda *a: a[0] * a[1], x, x + 1)
    assert report.passed and [i.name for i in report.inputs] == ["input0", "input1"]

    def scaled(x, *, scale=2.0, w):
        return x * scale * w

    report = gradscope.check(scaled, x, w=torch.ones(3, dtype=torch.float64))
    assert report.passed and [i.name for i in report.inputs] == ["x", "w"]


def test_options_and_inputs_are_kept_apart():
    x = torch.randn(3, dtype=torch.float64)
    with pytest.raises(gradscope.UsageError, match=r"inputs=\{'eps'"):
        gradscope.check("x*eps", x=x, eps=0.5)
    assert gradscope.check("x*eps", inputs={"x": x, "eps": 0.5}, eps=1e-3).passed
    with pytest.raises(gradscope.UsageError, match="did you mean `rtol`"):
        gradscope.check("x*2", x=x, rtoll=1e-3)
    with pytest.raises(gradscope.UsageError, match="given twice"):
        gradscope.check("x*2", x=x, inputs={"x": x})


def test_the_users_exception_is_chained_and_a_dtype_change_is_stated():
    def boom(x):
        raise ValueError("mine")

    with pytest.raises(gradscope.TargetError) as info:
        gradscope.check(boom, torch.randn(3))
    assert isinstance(info.value.__cause__, ValueError)
    report = gradscope.check("x*2", x=torch.randn(3))
    assert "a float32 tensor, checked in float64" in report.inputs[0].origin
    assert (ROOT / "gradscope" / "py.typed").exists()


# ------------------------------------------------------------------ at home in a notebook
def test_dir_and_help_show_the_api_and_its_options():
    import inspect

    assert {"check", "jvp", "vjp", "jacobian", "run_config"} <= set(dir(gradscope))
    assert "annotations" not in dir(gradscope) and "warnings" not in dir(gradscope)
    params = inspect.signature(gradscope.check).parameters
    assert params["dtype"].default == "float64" and params["seed"].default == 0
    assert params["eps"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "tangent" in inspect.signature(gradscope.jvp).parameters
    assert "tangent" not in params
    assert "rtol: Relative tolerance." in gradscope.check.__doc__


def test_integer_and_bool_tensors_given_are_data_not_inputs():
    import torch.nn.functional as F

    def loss(x, y):
        return F.cross_entropy(x, y)

    x = torch.randn(4, 3, dtype=torch.float64)
    report = gradscope.check(loss, x, torch.tensor([0, 2, 1, 1]))
    assert report.passed and [i.name for i in report.inputs] == ["x"]
    assert report.constants["y"]["dtype"] == "int64"
    masked = gradscope.check("sum(x * m)", x=x[0], m=torch.tensor([True, False, True]))
    assert masked.passed and [i.name for i in masked.inputs] == ["x"]


def test_a_report_answers_by_name_with_tensors_and_displays_itself():
    from rich.console import Console

    report = gradscope.check("sum(x * y)", x="1,2", y="[[1,2],[3,4]]")
    assert report["x"] is report.inputs["x"] is report.inputs[0]
    assert torch.equal(report["x"].tensor(), torch.tensor([4.0, 6.0], dtype=torch.float64))
    assert report["y"].tensor("finite_difference").shape == (2, 2)
    with pytest.raises(KeyError, match="the names are: x, y"):
        report["z"]
    assert repr(report) == "<gradscope Report check 'sum(x * y)': passed; inputs x, y>"
    html = report._repr_html_()
    assert html.startswith("<pre") and "PASSED" in html and "<script" not in html
    console = Console(record=True, width=100, file=__import__("io").StringIO())
    console.print(report)
    assert "PASSED" in console.export_text()


def test_the_backward_graph_from_python_takes_what_check_takes():
    drawn = gradscope.graph("sum(round(x) * w)", x="0.2,1.7", w="1,2")
    assert drawn.schema == "gradscope.graph/1" and "graph" in dir(gradscope)
    assert [n.op for n in drawn.nodes][:3] == ["sum", "mul", "round"]
    assert drawn._repr_svg_().lstrip().startswith("<?xml")  # (a notebook's picture)
    assert drawn.to_dict()["schema"] == "gradscope.graph/1"
