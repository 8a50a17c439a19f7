"""The gradient-flow picture: mean and max |grad| per tensor in forward order, failing tensors
marked; a terminal bar chart, and PNG/SVG where matplotlib is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

import gradscope
from gradscope.errors import UsageError
from gradscope.render import flow
from gradscope.render.console import record
from tests.command import run
from tests.paths import DATA


def test_the_chart_has_a_bar_per_tensor_in_forward_order_and_none_for_zeros():
    report = gradscope.check(f"{DATA}/models.py:dead_loss")  # a dead ReLU: zero gradients
    rows = flow.flowing(report)
    assert [r.name for r in rows][:2] == ["x", "dead.0.weight"]
    assert rows[-1].grad_max_abs > 0 and rows[0].grad_max_abs == 0
    text = record(lambda console: console.print(flow.flow_chart(report)), 120)
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()
             and line.split()[0] in ("x", "dead.2.bias")}
    assert "▇" not in lines["x"] and "▇" in lines["dead.2.bias"]


def test_bar_lengths_follow_the_log_of_the_gradient():
    assert flow._length(1.0, 1.0) == flow.BAR
    assert flow._length(10.0 ** -flow.DECADES, 1.0) == 0
    assert flow._length(10.0 ** (-flow.DECADES / 2), 1.0) == flow.BAR // 2
    assert flow._length(0.0, 1.0) == 0


def test_a_failing_tensor_is_marked():
    report = gradscope.check(f"{DATA}/backwards.py:Double", x="1,2,3", grad="1,2,3")
    assert not report.passed
    (row,) = flow.flowing(report)
    assert row.status.fails


def test_the_plot_file_is_checked_before_the_check_runs(capsys, tmp_path):
    code, out, err = run(capsys, "check", f"{DATA}/models.py:loss", "--plot",
                         str(tmp_path / "flow.txt"))
    assert code == 2 and out == "" and "must end in .png or .svg" in err
    with pytest.raises(UsageError, match=r"must end in \.png or \.svg"):
        flow.plotter(Path("flow.pdf"))


def test_plot_dash_draws_the_chart_in_the_terminal(capsys):
    code, out, _ = run(capsys, "check", f"{DATA}/models.py:loss", "--plot", "-")
    assert code == 0 and "gradient flow · mean ▇ and max ░ |grad|" in out
    assert out.index("PASSED") < out.index("gradient flow")


def test_plot_file_svg_always_png_where_matplotlib_is_installed(capsys, tmp_path):
    target = tmp_path / "flow.svg"
    code, _, err = run(capsys, "check", f"{DATA}/models.py:dead_loss", "--plot", str(target))
    assert code == 0 and target.read_text().lstrip().startswith("<?xml")  # gradscope's own
    assert "all zero" in target.read_text()
    png = tmp_path / "flow.png"
    code, _, err = run(capsys, "check", f"{DATA}/models.py:dead_loss", "--plot", str(png))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert code == 2 and "pip install matplotlib" in err and not png.exists()
    else:
        assert code == 0 and png.read_bytes().startswith(b"\x89PNG")
