"""`gradscope graph` and `gradscope sweep` on the command line."""

from __future__ import annotations

import json

import pytest

from tests.command import run


def test_graph_tree_and_dot(capsys, tmp_path):
    dot = tmp_path / "g.dot"
    code, out, _ = run(capsys, "graph", "sum(round(x) * 2 + clamp(x, 0, 1))", "--at",
                       "x=-0.5,0.3,1.5", "--dot", str(dot))
    assert code == 0
    assert "RoundBackward0" in out and "[VANISHING]" in out
    assert "ClampBackward0" in out and "[SATURATING 2/3]" in out
    text = dot.read_text()
    assert text.startswith("digraph")
    assert 'label="x\\n(input)"' in text  # DOT's newline escaped once, not "x\\\\n"
    again = tmp_path / "again.dot"
    run(capsys, "graph", "sum(round(x) * 2 + clamp(x, 0, 1))", "--at", "x=-0.5,0.3,1.5",
        "--dot", str(again))
    assert again.read_text() == text  # node ids in walk order: the same graph, the same file


def test_graph_svg_picture(capsys, tmp_path):
    picture = tmp_path / "g.svg"
    code, _, _ = run(capsys, "graph", "sum(round(x) * 2)", "--at", "x=0.2,1.7", "--svg",
                     str(picture))
    text = picture.read_text()
    assert code == 0 and text.startswith("<?xml") and "RoundBackward0" in text
    assert "VANISHING" in text


def test_graph_json(capsys):
    code, out, _ = run(capsys, "graph", "relu(x)", "--at", "x=-1,2", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "gradscope.graph/1"
    assert {n["name"] for n in data["nodes"]} == {"ReluBackward0", "AccumulateGrad"}


def test_sweep_terminal_plot(capsys):
    code, out, _ = run(capsys, "sweep", "round(x)", "--var", "x", "--range", "-2,2")
    assert code == 0
    assert "autograd's derivative is 0" in out and "spike" in out


@pytest.mark.parametrize("args, fragment", [
    (["sweep", "x*x", "--var", "y", "--range", "0,1"], "not an input"),
    (["sweep", "x*x", "--var", "x", "--range", "1,0"], "LO < HI"),
    (["sweep", "x*x", "--var", "x", "--range", "a,b"], "LO,HI"),
    (["sweep", "x*x", "--var", "x", "--range", "0,1", "--plot", "out.gif"], ".png or .svg"),
    (["graph", "x*2", "--at", "z=1"], "not an input"),
    (["graph", "x*2", "--at", "x=1", "--svg", "graph.gif"], "must end in .svg"),
])
def test_bad_usage(capsys, args, fragment):
    code, out, err = run(capsys, *args)
    assert code == 2 and out == "" and fragment in err and len(err.strip().splitlines()) == 1


def test_sweep_plot_file_or_clear_message(capsys, tmp_path):
    target = tmp_path / "sweep.svg"
    code, _, err = run(capsys, "sweep", "round(x)", "--var", "x", "--range", "-2,2",
                       "--plot", str(target))
    assert code == 0 and target.read_text().lstrip().startswith("<?xml")  # drawn by gradscope
    png = tmp_path / "sweep.png"
    code, _, err = run(capsys, "sweep", "round(x)", "--var", "x", "--range", "-2,2",
                       "--plot", str(png))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert code == 2 and "pip install matplotlib" in err
    else:
        assert code == 0 and png.read_bytes().startswith(b"\x89PNG")
