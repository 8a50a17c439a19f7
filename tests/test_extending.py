"""The recipes of docs/architecture.md, carried out: a new engine, a new target kind, a new
run mode, a new output format and a new feature (an analysis with its facts, checks and
diagnoses), each added
with one piece of code and one registration line, and nothing else of gradscope changed — the
comparison, the verdict, the JSON report and the tables follow."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
import torch

import gradscope
from gradscope import features, render, targets
from gradscope.api import graph
from gradscope.engines.base import Answer
from gradscope.evidence import references
from gradscope.evidence.references import Reference, Setup
from gradscope.features import Diagnosis, Feature
from gradscope.options import Option, Options, Request, Spec
from gradscope.report.kinds import CHECK
from gradscope.report.model import Diagnostic, NamedCheck
from gradscope.report.status import Status
from gradscope.targets.base import Target, Twin
from gradscope.targets.mode import Mode
from gradscope.targets.wrapper import Wrapper
from tests.command import run


# ------------------------------------------------------------------ a new engine
@dataclass(frozen=True)
class Functorch(Reference):
    """A reference from torch.func.vjp (functional autograd, another path than y.backward);
    `scale` lets the test plant a wrong one."""

    forward: object = None
    values: Mapping[str, torch.Tensor] | None = None
    scale: float = 1.0

    @property
    def ran(self) -> bool:
        return True

    def vjp(self, v: torch.Tensor, ones: bool = False) -> dict[str, Answer]:
        assert self.values is not None
        names = list(self.values)

        def f(*xs: torch.Tensor) -> torch.Tensor:
            return self.forward(dict(zip(names, xs, strict=True)))  # type: ignore[operator]

        _, pull = torch.func.vjp(f, *self.values.values())
        return {n: Answer(g * self.scale) for n, g in zip(names, pull(v), strict=True)}


def _registered(monkeypatch: pytest.MonkeyPatch, scale: float) -> None:
    def functorch(setup: Setup) -> Functorch:
        prepared = setup.prepared
        return Functorch("functorch", "torch.func", exact=True, forward=prepared.target.forward,
                         values=prepared.bound.exact, scale=scale)

    monkeypatch.setattr(references, "REFERENCES", (*references.REFERENCES, functorch))


def test_a_new_engine_is_one_adapter_and_one_registration(monkeypatch):
    _registered(monkeypatch, 1.0)
    report = gradscope.jvp("sin(x) * y", x="0.5,1", y="2,3")
    assert report.passed and list(report.inputs[0].columns) == [
        "autograd", "symbolic", "finite_difference", "functorch"]
    data = json.loads(report.to_json())["inputs"][0]
    assert data["functorch"] == data["symbolic"] and data["functorch_skipped"] is None
    assert "torch.func" in report.to_text()  # the table has its column


def test_a_new_engine_takes_part_in_the_verdict(monkeypatch):
    _registered(monkeypatch, 2.0)  # a wrong reference: its disagreement alone fails the run
    report = gradscope.jvp("sin(x) * y", x="0.5,1", y="2,3")
    assert not report.passed and report.inputs[0].status == "mismatch"


# ------------------------------------------------------------------ a new target kind
@dataclass
class Quadratic:
    """xᵀAx with a matrix A: not callable, not a module — no kind of gradscope's takes it."""

    a: torch.Tensor


class QuadraticTarget(Target):
    def __init__(self, obj: Quadratic, text: str) -> None:
        super().__init__(text, "quadratic")
        self.parameters = {"a": obj.a.detach()}

    @property
    def names(self) -> tuple[str, ...]:
        return ("x", "a")

    def forward(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        x, a = values["x"], values["a"]
        return x @ a @ x


def build_quadratic(obj: object, text: str, args: Mapping, init: Mapping) -> Target | None:
    return QuadraticTarget(obj, text) if isinstance(obj, Quadratic) else None


def test_a_new_target_kind_is_one_module_and_one_registration(monkeypatch):
    with pytest.raises(gradscope.UsageError, match="got Quadratic"):
        gradscope.check(Quadratic(torch.eye(3)), torch.ones(3))
    monkeypatch.setattr(targets, "KINDS", [build_quadratic, *targets.KINDS])
    report = gradscope.check(Quadratic(torch.randn(3, 3, dtype=torch.float64)),
                             torch.randn(3, dtype=torch.float64))
    assert report.passed and report.target_kind == "quadratic"
    assert {i.name: i.role for i in report.inputs} == {"x": "input", "a": "parameter"}
    assert report.model  # a parameter: a model's summary


# ------------------------------------------------------------------ a new run mode
class Reordered(Wrapper):
    """autograd's evaluation through another path (the inputs' values re-made before the
    call, as a mode that converts them would), `scale` planting a wrong one; the target's own
    forward is its twin."""

    def __init__(self, base: Target, scale: float) -> None:
        super().__init__(base)
        object.__setattr__(self, "scale", scale)

    @property
    def autograd_forward(self):
        forward = self.base.autograd_forward
        return lambda values: forward({n: v * 1.0 for n, v in values.items()}) * self.scale

    @property
    def twin(self) -> Twin:
        return Twin(self.base.forward, lambda: None)


class Reordering(Mode):
    """A mode asked for by --seed 4242 (the test's stand-in for an option of its own)."""

    option = "seed"

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def asked(self, options: Options) -> bool:
        return options.seed == 4242

    def wrap(self, target: Target, options: Options) -> Target:
        return Reordered(target, self.scale)


@pytest.mark.parametrize("scale, passes", [(1.0, True), (1.5, False)])
def test_a_new_run_mode_is_one_module_and_one_registration(monkeypatch, scale, passes):
    monkeypatch.setattr(targets, "MODES", [*targets.MODES, Reordering(scale)])
    report = gradscope.check("sin(x) * y", x="0.5,1.5", y="2,3", seed=4242)
    assert report.passed is passes, report.to_text()
    # (not asked: the plain check, whatever the mode would do)
    assert gradscope.check("sin(x) * y", x="0.5,1.5", y="2,3", seed=1).passed


# ------------------------------------------------------------------ a new output format
def test_a_new_output_format_is_one_writer_and_one_registration(monkeypatch):
    def csv(report, width: int) -> str:
        return "".join(f"{i.name},{i.status},{i.max_abs_error}\n" for i in report.inputs)

    monkeypatch.setitem(render.FORMATS, "csv", render.Format(csv, kinds=frozenset({CHECK})))
    report = gradscope.check("x * y", x="1,2", y="3,4")
    assert render.text(report, "csv").splitlines()[0].startswith("x,ok,")
    assert not render.is_rich(report, "csv")
    # a kind of report the format does not write is refused (exit 2), never a crash
    with pytest.raises(gradscope.UsageError, match="writes check reports, not a graph report"):
        render.text(graph(Request("check", "x * y", Options())), "csv")


# ------------------------------------------------------------------ a new feature
@dataclass(frozen=True)
class Largest:
    """The new feature's facts: the largest gradient element."""

    value: float


LIMIT = Option("max_gradient", 10.0, Spec(
    "--max-gradient", "The largest gradient element the house rule allows.", float,
    (int, float), "a number", commands=("check", "jvp")))


class SmallGradients(Feature["Largest"]):
    """A house rule as a feature: every gradient below a limit in size — its own option
    (`--max-gradient`, `max_gradient=`, `max_gradient = …` in a run config), its facts, a named
    check on the target (evidence about it: it may fail the run), a diagnosis and its own
    report field (`largest_gradient`)."""

    name = "small gradients"
    options = (LIMIT,)
    fields: ClassVar[Mapping[str, Any]] = {"largest_gradient": None}

    def facts(self, ctx) -> Largest:
        grads = ctx.evidence.backward.grads or {}
        return Largest(max(float(g.abs().max()) for g in grads.values()))

    def checks(self, ctx, decided) -> list[NamedCheck]:
        worst, limit = ctx.of(self).value, LIMIT.value(ctx.prepared.options)
        word = Status.OK if worst < limit else Status.MISMATCH
        return [NamedCheck(f"gradients below {limit:g}", word, worst, int(worst >= limit))]

    def diagnose(self, ctx, verdict, said) -> Diagnosis:
        worst, limit = ctx.of(self).value, LIMIT.value(ctx.prepared.options)
        return Diagnosis((Diagnostic(kind="large_gradient", op="backward", where="", inputs=[],
                                count=1, message=f"the largest gradient is {worst:g}", hint=""),)
                    if worst >= limit else ())

    def reported(self, ctx, inputs) -> dict[str, Any]:
        return {"largest_gradient": ctx.of(self).value}


def test_a_new_feature_is_one_module_and_one_registration(monkeypatch):
    monkeypatch.setattr(features, "FEATURES", (*features.FEATURES, SmallGradients()))
    assert gradscope.check("x * 2", x="1,2").passed
    failing = gradscope.check("x * 20", x="1,2")
    assert not failing.passed and failing.failures[-1].subject == "gradients below 10"
    assert "gradients below 10" in failing.to_text()
    assert [d.kind for d in failing.diagnostics] == ["large_gradient"]
    assert "small gradients" in failing.timings  # its gathering timed like the others


@pytest.mark.slow
def test_a_new_features_option_and_report_field_come_with_its_registration(
        monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(features, "FEATURES", (*features.FEATURES, SmallGradients()))
    # its option, by keyword (the Python API), by flag (the command line), by key (a config)
    allowed = gradscope.check("x * 20", x="1,2", max_gradient=100)
    assert allowed.passed and allowed.upstream_checks[-1].label == "gradients below 100"
    code, out, _ = run(capsys, "check", "x * 20", "--at", "x=1,2", "--max-gradient", "100",
                       "--json")
    assert code == 0 and json.loads(out)["largest_gradient"] == 20.0
    code, _, err = run(capsys, "check", "x * 20", "--at", "x=1,2", "--max-gradient", "big")
    assert code == 2 and "--max-gradient" in err
    code, out, _ = run(capsys, "check", "--help")
    assert code == 0 and "--max-gradient" in out and "house rule" in out
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.gradscope]\nmax_gradient = 100\n[[tool.gradscope.checks]]\n'
                      'target = "x * 20"\nat = {x = "1,2"}\n')
    code, out, _ = run(capsys, "run", str(config), "--show-config")
    assert code == 0 and "max_gradient" in out and "100" in out
    config.write_text(config.read_text().replace("100", '"big"'))
    code, _, err = run(capsys, "run", str(config))
    assert code == 2 and "max_gradient" in err  # (refused before any check runs)
    # its report field: in the JSON at the top level, an attribute, read back from the JSON
    assert allowed.largest_gradient == 20.0 and allowed.to_dict()["largest_gradient"] == 20.0
    again = gradscope.Report.from_json(allowed.to_json())
    assert again.largest_gradient == 20.0 and again.to_text() == allowed.to_text()
