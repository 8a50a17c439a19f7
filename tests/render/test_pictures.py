"""Pictures from Python: the sweep's panels and a check's gradient flow as SVG a notebook shows
by itself (scaled to the cell) and that saves to a file; user text escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
import torch

import gradscope
from gradscope.errors import UsageError
from gradscope.render.pictures import Picture, document, sweep_svg
from tests.paths import DATA

NS = "{http://www.w3.org/2000/svg}"


def _texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{NS}text")]


def _model_report():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    return gradscope.check(net, torch.randn(2, 3, dtype=torch.float64))


def test_report_plot_draws_every_tensor_in_forward_order(tmp_path):
    report = _model_report()
    picture = report.plot()
    texts = _texts(picture._repr_svg_())
    names = ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert [t for t in texts if t in names] == names
    assert picture.save(tmp_path / "flow.svg").read_text() == picture.svg
    with pytest.raises(UsageError, match=r"\.svg or \.png"):
        picture.save(tmp_path / "flow.txt")


def test_a_models_notebook_display_carries_its_flow_picture():
    html = _model_report()._repr_html_()
    assert html.count("<svg") == 1 and "gradient flow" in html
    plain = gradscope.check("x * y")
    assert "<svg" not in plain._repr_html_()  # one tensor: no picture to add


def test_the_sweep_picture_says_what_its_words_say():
    report = gradscope.sweep(f"{DATA}/seed_layers.py:ClampGradient", var="x", range=(-1, 2),
                             points=61)
    root = ET.fromstring(sweep_svg(report))
    lines = list(root.iter(f"{NS}polyline"))
    assert len(lines) == 4  # f, autograd, finite differences, their difference
    texts = _texts(sweep_svg(report))
    assert any("part on x ∈ [1, 2]" in t for t in texts)
    assert any("x is the target's only input" in t for t in texts)
    shaded = [r for r in root.iter(f"{NS}rect") if r.get("fill") == "#d62728"]
    assert len(shaded) == 2  # the stretch they part on, beside both derivatives and apart
    assert "max-width:100%" in root.get("style")


def test_the_sweep_draws_both_derivatives_on_one_scale():
    # where autograd and finite differences agree (x < 0: both 0; the ramp: both 1) their
    # points are the same pixels: one axis, not two panels each with its own scale
    report = gradscope.sweep(f"{DATA}/seed_layers.py:ClampGradient", var="x", range=(-1, 2),
                             points=61)
    root = ET.fromstring(sweep_svg(report))
    _, autograd, fd, apart = ([tuple(p.split(",")) for p in line.get("points").split()]
                              for line in root.iter(f"{NS}polyline"))
    pairs = zip(report.autograd, report.finite_difference, strict=True)
    agree = [k for k, (a, d) in enumerate(pairs) if abs(a - d) < 1e-9]
    assert len(agree) > 30 and all(autograd[k] == fd[k] for k in agree)
    assert fd[-1] != autograd[-1]  # where they part, apart on the same scale
    assert {p[1] for p in apart[:10]} == {apart[0][1]}  # the difference: flat at 0 there


def test_the_sweep_says_where_the_other_inputs_were_held():
    given = gradscope.sweep("a*b + sin(c*a)", var="a", range=(-3, 3), points=41, b="0.5",
                            c="2")
    words = " ".join(_texts(sweep_svg(given)))
    assert "held at b = 0.5, c = 2 while a moves" in words and "drawn" not in words
    drawn = gradscope.sweep("a*b", var="a", range=(-3, 3), points=11, seed=3)
    words = " ".join(_texts(sweep_svg(drawn)))
    assert f"held at b = {drawn.fixed['b']:.4g} while a moves (b drawn by gradscope" in words
    assert drawn.drawn == ["b"] and given.drawn == []
    band = [r for r in ET.fromstring(sweep_svg(given)).iter(f"{NS}rect")
            if r.get("fill") == "#888888"]
    assert len(band) == 1  # ± the finite differences' own error, about the difference


def test_user_text_is_escaped_in_pictures():
    hostile = "<script>alert(1)</script> & \x1b[31m"
    svg = document(100, 50, [], hostile)
    root = ET.fromstring(svg)  # well-formed
    assert "<script>" not in svg and "\x1b" not in svg
    assert root.find(f"{NS}title").text.startswith("<script>")  # as text, not markup
    fake = SimpleNamespace(var="x", target=hostile, eps=0.1, x=[0.0, 1.0], f=[0.0, 1.0],
                           autograd=[1.0, 1.0], finite_difference=[1.0, 1.0], jumps=[],
                           vanishing=0, parted=[], zero={}, fd_error=0.0, scale=1.0)
    ET.fromstring(sweep_svg(fake))


def test_a_picture_without_png_says_what_it_saves_to(tmp_path):
    with pytest.raises(UsageError, match=r"ending in \.svg, not 'g.png'"):
        Picture("<svg/>", "backward graph").save(tmp_path / "g.png")
