"""The corpus of custom gradients modelled on public code (tests/data/corpus.py): every correct
function passes with elements actually compared, every flat-forward surrogate passes and is named
`surrogate`, every bug fails with the relation that says how, and deliberate gradients on a
forward that moves fail with their relation unless declared."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

import gradscope
from gradscope.report.headline import headline
from tests.paths import DATA

CORPUS = f"{DATA}/corpus.py"
WIDE = "linspace(-3,3,20)"  # covers both sides of every window and step


@dataclass
class Case:
    target: str
    passed: bool
    statuses: dict[str, str]  # input → status
    inputs: dict[str, str] = field(default_factory=dict)  # --at / --shape values
    relation: tuple[str, str] | None = None  # (input, words the relation must contain)
    options: dict = field(default_factory=dict)


LINEAR = {"x": "randn(4,3)", "w": "randn(2,3)", "b": "randn(2)"}
CASES = [
    # correct and smooth: pass, every element compared
    Case("MemoryEfficientSwish", True, {"x": "ok"}),
    Case("MishFunction", True, {"x": "ok"}),
    Case("SoftmaxFunction", True, {"x": "ok"}, {"x": "randn(3,4)"}),
    Case("LayerNormFunction", True, {"x": "ok"}, {"x": "randn(3,5)"}),
    Case("linear", True, {"x": "ok", "w": "ok", "b": "ok"}, LINEAR),
    Case("tanh_in_float32", True, {"x": "ok"}, {"x": "randn(50)"}),
    Case("scaled", True, {"x": "ok"}),
    # surrogates on a flat forward: pass, named surrogate
    Case("RoundSTE", True, {"x": "surrogate"}, {"x": WIDE}),
    Case("BinarizeSTE", True, {"x": "surrogate"}, {"x": WIDE}),
    Case("spike", True, {"mem": "surrogate"}, {"mem": WIDE}),
    Case("round_detach", True, {"x": "surrogate"}, {"x": WIDE}),
    Case("ClampPassThrough", True, {"x": "surrogate"}, {"x": WIDE}),
    Case("clamp_detach", True, {"x": "surrogate"}, {"x": WIDE}),
    Case("hard_gumbel", True, {"logits": "ok"}, {"logits": "randn(2,4)"}),
    # (a top-k's mask keeps its sum: only a random upstream's lines see it move)
    Case("topk_mask", True, {"scores": "surrogate"}, {"scores": "randn(4,4)"}),
    # deliberate gradients where the forward moves: fail with the relation, pass if declared
    Case("grad_reverse", False, {"x": "mismatch"}, {}, ("x", "−0.5 ×")),
    Case("grad_reverse", True, {"x": "surrogate"}, {}, None, {"surrogate": True}),
    Case("pact", False, {"x": "surrogate", "alpha": "mismatch"},
         {"x": WIDE, "alpha": "1.5"}, ("alpha", "× the derivative")),
    Case("pact", True, {"x": "surrogate", "alpha": "surrogate"}, {"x": WIDE, "alpha": "1.5"},
         None, {"surrogate": "alpha"}),
    Case("lsq", False, {"x": "surrogate", "s": "mismatch"}, {"x": WIDE, "s": "0.3"},
         ("s", "× the derivative")),
    Case("lsq", True, {"x": "surrogate", "s": "surrogate"}, {"x": WIDE, "s": "0.3"}, None,
         {"surrogate": True}),
    Case("marked_reverse", True, {"x": "surrogate"}),
    # bugs: fail, and say how
    Case("SwishMissingTerm", False, {"x": "mismatch"}),
    Case("linear_batch_mean", False, {"x": "ok", "w": "mismatch", "b": "mismatch"}, LINEAR,
         ("w", "0.25 × the derivative")),
    Case("SignFlip", False, {"x": "mismatch"}, {}, ("x", "−1 × the derivative")),
    Case("MatmulTransposed", False, {"x": "ok", "w": "mismatch"},
         {"x": "randn(3,3)", "w": "randn(3,3)"}, ("w", "transposed")),
    Case("MulSwapped", False, {"a": "mismatch", "b": "mismatch"}, {},
         ("a", "autograd for a is the derivative for b")),
    Case("DetachedPath", False, {"x": "ok", "y": "mismatch"}, {}, ("y", "autograd is 0")),
    Case("HeadBug", False, {"x": "mismatch"}, {"x": "randn(3,4)"}, ("x", "index 2 of dim 0")),
    Case("ExpPlusOne", False, {"x": "mismatch"}, {}, ("x", "the derivative + 1")),
    # (its 0.5 on 1 < |x| < 2, where clamp is flat, is no surrogate: clamp is no step)
    Case("GatedSTEWrongWindow", False, {"x": "mismatch"}, {"x": WIDE},
         ("x", "wrong exactly where |x| < 2")),
    Case("topk_mask_doubled", False, {"scores": "mismatch"}, {"scores": "randn(4,4)"},
         ("scores", "integrates to")),
    Case("marked_reverse_and_bug", False, {"x": "surrogate", "y": "mismatch"}, {},
         ("y", "−1 × the derivative")),
]


def _id(case: Case) -> str:
    return case.target + ("-declared" if case.options.get("surrogate") else "")


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_corpus(case: Case):
    report = gradscope.check(f"{CORPUS}:{case.target}", **case.inputs, **case.options)
    assert {i.name: i.status for i in report.inputs} == case.statuses, report.to_text()
    assert report.passed is case.passed, report.to_text()
    for item in report.inputs:  # elements were compared: no hollow verdict
        assert set(item.status_counts) & {"ok", "mismatch", "surrogate", "vanishing"}
    if case.relation is not None:
        name, words = case.relation
        pattern = [d for d in report.diagnostics
                   if d.kind == "mismatch_pattern" and d.inputs == [name]]
        assert pattern and words in pattern[0].message, report.to_text()
        assert words in headline(report)
    if any(s == "surrogate" for s in case.statuses.values()):
        assert any(d.kind == "surrogate_gradient" for d in report.diagnostics)


def test_batch_mean_names_the_factor_and_its_likely_reading():
    report = gradscope.check(f"{CORPUS}:linear_batch_mean", **LINEAR)
    (w, b) = [d for d in report.diagnostics if d.kind == "mismatch_pattern"]
    assert (w.relation, w.factor, b.factor) == ("factor", 0.25, 0.25)
    assert "1/4" in w.message and "mean where a sum belonged" in w.message


def test_surrogate_shapes_are_described():
    def shape(target: str, **inputs: str) -> str:
        report = gradscope.check(f"{CORPUS}:{target}", **inputs)
        (diagnostic,) = [d for d in report.diagnostics if d.kind == "surrogate_gradient"]
        return diagnostic.message

    assert "identity: straight-through" in shape("RoundSTE", x=WIDE)
    assert "gated" in shape("BinarizeSTE", x=WIDE)
    assert "smooth bump" in shape("spike", mem=WIDE)
    assert "custom backward" not in shape("round_detach", x=WIDE)  # there is none
    # hard Gumbel-softmax: the ones upstream sees nothing (rows of a softmax sum to 1), the
    # random upstreams and the Jacobian see the relaxation's gradient on a one-hot forward
    assert "under the random upstreams" in shape("hard_gumbel", logits="randn(2,4)")


def test_a_forward_that_ignores_elements_makes_a_passed_gradient_a_bug():
    # the seeds' KillHead whose backward forgets the zeroed head: flat forward, but flat at
    # every value, so the gradient there is not a surrogate of anything
    report = gradscope.check(f"{DATA}/../../examples/buggy_functions.py:KillHeadForgetful",
                             input="randn(3,4)", arg={"n": 2})
    assert not report.passed
    (pattern,) = [d for d in report.diagnostics if d.kind == "mismatch_pattern"]
    assert pattern.relation == "ignored"


def test_float_annotation_and_defaults_are_honoured():
    assert [i.name for i in gradscope.check(f"{CORPUS}:scaled").inputs] == ["x"]
    with pytest.raises(gradscope.UsageError, match=r"annotated float.*--arg alpha"):
        gradscope.check(f"{CORPUS}:scaled_annotated")
    report = gradscope.check(f"{CORPUS}:scaled_annotated", arg={"alpha": 2.0})
    assert report.passed and [i.name for i in report.inputs] == ["x"]


def test_mixed_precision_forward_is_checked_with_its_own_tolerances():
    report = gradscope.check(f"{CORPUS}:tanh_in_float32", x="randn(50)")
    assert report.passed and report.inputs[0].status_counts == {"ok": 50}
    assert report.tolerances["rtol"] == 5e-4  # float32's, not float64's
    assert any("computes in float32" in n for n in report.notes)
    assert not any("nonlinear" in d.kind for d in report.diagnostics)


def test_the_constructions_gradscope_recommends_pass_its_own_check():
    from gradscope.expr.ops import OPS

    assert "x + (x.clamp(lo, hi) - x).detach()" in OPS["clamp"].hint
    assert OPS["round"].hint == "x + (x.round() - x).detach()"
    for target in ("clamp_detach", "round_detach"):  # those constructions, as users write them
        report = gradscope.check(f"{CORPUS}:{target}", x=WIDE)
        assert report.passed and report.inputs[0].status == "surrogate"
