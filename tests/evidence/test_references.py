"""The reference engines behind their adapters: each one's answers, or the reason it has none."""

from __future__ import annotations

import torch

from gradscope.evidence import gather as ev
from gradscope.evidence.references import REFERENCES, Finite, Setup, Symbolic, finite, symbolic
from gradscope.options import Options, Request
from gradscope.runner import prepare
from tests.paths import DATA


def _setup(target: str, **options) -> Setup:
    prepared = prepare(Request("check", target, Options(**options)))
    back = ev.backward(prepared)
    traced, _ = prepared.target.for_values(back.engine.output)
    return Setup(prepared, back.engine.output, back.upstream, traced,
                 ev.computed_in(prepared, back.engine.output))


def test_every_engine_is_registered_once_symbolic_first():
    assert [r.__name__ for r in REFERENCES] == ["symbolic", "finite"]


def test_expressions_get_both_references():
    setup = _setup("sin(x) * y", at={"x": "1,2", "y": "3,4"})
    sym = symbolic(setup)
    assert isinstance(sym, Symbolic) and sym.ran and sym.exact and not sym.skipped
    answers = sym.vjp(torch.ones(2, dtype=torch.float64))
    assert torch.allclose(answers["x"].values, torch.cos(torch.tensor([1.0, 2.0])) * torch.tensor(
        [3.0, 4.0], dtype=torch.float64).float().double(), atol=1e-6)
    assert answers["x"].error is None
    fd = finite(setup)
    assert isinstance(fd, Finite) and set(fd.estimates) == {"x", "y"} and not fd.skipped
    got = fd.vjp(torch.ones(2, dtype=torch.float64))["x"]
    assert got.error is not None and torch.allclose(got.values, answers["x"].values, atol=1e-8)


def test_python_code_and_order_two_say_why_there_is_no_symbolic_column():
    sym = symbolic(_setup(f"{DATA}/functions.py:floor_plus"))
    assert not sym.ran and "Python code has no symbolic form" in sym.skipped["x"]
    assert sym.closing == ()  # said in the report, not in a note on every Python check
    second = symbolic(_setup("x ** 3", order=2))
    assert second.skipped["x"].startswith("--order 2")
    assert second.closing == ()


def test_sampled_inputs_get_a_note_and_a_checked_mask():
    fd = finite(_setup("sum(sin(x))", shape={"*": (300,)}, max_fd=100, sample=20))
    assert fd.estimates["x"].mode == "sampled" and fd.mode("x") == "sampled"
    assert any("20 of 300 elements of x" in n for n in fd.said())
    answer = fd.vjp(torch.ones((), dtype=torch.float64))["x"]
    assert int(answer.checked.sum()) == 20


def test_refining_makes_a_new_reference_and_leaves_the_old_one_alone():
    fd = finite(_setup("sum(sin(x) * 3)", shape={"*": (5,)}))
    before = fd.estimates["x"]
    assert before.points is not None and bool((before.points == 2).all())
    mask = torch.tensor([True, False, False, False, True])
    new, count = fd.refined({"x": mask})
    assert count == 2 and new is not fd and fd.estimates["x"] is before
    assert new.estimates["x"].points.tolist() == [4, 2, 2, 2, 4]
    assert before.points.tolist() == [2, 2, 2, 2, 2]  # frozen: the old estimate is untouched


def test_a_target_failing_at_a_perturbed_point_is_skipped_with_its_reason():
    fd = finite(_setup(f"{DATA}/targets.py:forward_raises_when_perturbed", at={"x": "1,2"}))
    assert fd.estimates["x"] is None and "perturbed point" in fd.skipped["x"]
    assert fd.closing and fd.closing[0].startswith("finite differences skipped for x")
