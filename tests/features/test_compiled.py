"""--compile: correct code passes under every backend; the torch.compile silent-correctness
reports that still reproduce on torch 2.13 CPU fail with `compiled_differs` (tests named after
the pytorch issue), the fixed ones pass; nothing of dynamo's is blamed on the user."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import gradscope
from gradscope.report.status import FAILING_KINDS
from tests.paths import DATA, ROOT

COMPILED = str(DATA / "compiled.py")


def _check(name: str, backend: str = "aot_eager", **options):
    return gradscope.check(f"{COMPILED}:{name}", compile=backend, **options)


def _differs(report) -> list[str]:
    return [d.message for d in report.diagnostics if d.kind == "compiled_differs"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_correct_code_passes_under_each_backend(backend):
    report = _check("smooth", backend, shape={"x": (5,)})
    assert report.passed, report.to_text()
    assert report.compile["backend"] == backend and report.compile["graphs"] == 1
    column = report["x"].columns["compiled"]
    assert list(report["x"].columns)[:2] == ["autograd", "compiled"]
    assert column.values == pytest.approx(report["x"].columns["autograd"].values)


def test_a_module_and_graph_breaks_pass_with_the_breaks_said():
    assert _check("Block", shape={"x": (4, 3)}).passed
    report = _check("chatty", shape={"x": (3,)})
    assert report.passed and report.compile["graph_breaks"] == 1
    assert any(n.startswith("graph break:") for n in report.notes)


def test_185464_multilabel_margin_loss_with_minus_one_targets():
    report = _check("multilabel_margin", at={"x": [[1.0, -1.0, 0.5, 0.3, -0.2]]})
    assert not report.passed
    found = _differs(report)
    assert any("compiled output differs" in m for m in found)
    assert any("gradient of x" in m and "references agree with eager" in m for m in found)
    assert "compiled_differs" in FAILING_KINDS


def test_198119_avg_pool_ceil_mode_overhanging_window_under_inductor():
    report = _check("avg_pool_ceil", "inductor", shape={"x": (1, 1, 6)})
    (found,) = _differs(report)
    assert "at 2 of 6 element(s) ((0, 0, 4), (0, 0, 5))" in found
    assert "− 0.1667 there" in found and "compiled gradient is wrong" in found
    assert _check("avg_pool_ceil", "aot_eager", shape={"x": (1, 1, 6)}).passed


def test_197888_adaptive_max_pool3d_channels_last_under_inductor():
    torch.manual_seed(0)
    t = torch.randperm(960).double().reshape(1, 4, 4, 6, 10)
    report = _check("adaptive_max_pool3d", "inductor",
                    at={"t": t.contiguous(memory_format=torch.channels_last_3d)})
    (found,) = _differs(report)
    assert "gradient of t" in found and "the compiled gradient is wrong" in found


def test_193279_func_grad_of_a_function_inside_compile_drops_its_backward():
    assert gradscope.check(f"{COMPILED}:grad_of_sin_loss", shape={"x": (4,)}).passed
    report = _check("grad_of_sin_loss", shape={"x": (4,)})
    found = _differs(report)
    assert any("compiled output differs" in m and "is 0 there" in m for m in found)
    assert any("no grad_fn" in m for m in found)


@pytest.mark.parametrize("name,shape", [("same_tensor_twice", (5,)),  # pytorch #183604
                                        ("inplace_in_forward", (5,)),  # pytorch #180642
                                        ("grad_of_accumulated", (2, 3))])  # pytorch #136662
def test_reports_fixed_in_2_13_pass(name, shape):
    report = _check(name, shape={"x": shape})
    assert report.passed, report.to_text()


def test_183604_same_tensor_twice_passes_under_inductor():
    assert _check("same_tensor_twice", "inductor", shape={"x": (5,)}).passed


def test_a_forward_dynamo_leaves_eager_compared_nothing_compiled_so_is_inconclusive():
    report = _check("refuses_compile", shape={"x": (3,)})
    assert not report.passed and report.compile["fell_back"]
    (found,) = [d for d in report.diagnostics if d.kind == "compiled_inconclusive"]
    assert "skipped every frame" in found.message and "--compile-fallback" in found.hint
    assert "compiled_inconclusive" in FAILING_KINDS


def test_a_fallback_the_user_accepts_passes_and_is_said():
    report = _check("refuses_compile", shape={"x": (3,)}, compile_fallback=True)
    assert report.passed and report.compile["fell_back"]
    assert any("compiled no graph" in n and "accepted: --compile-fallback" in n
               for n in report.notes)
    with pytest.raises(gradscope.UsageError, match=r"--compile-fallback is for .*--compile"):
        gradscope.check("x * 2", compile_fallback=True)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_dynamo_disabled_by_the_environment_never_passes_a_compiled_gradient(backend):
    # avg_pool_ceil's compiled gradient is wrong under inductor (pytorch #198119); with dynamo
    # switched off nothing is compiled, so nothing compiled may pass
    code = (f"import gradscope; r = gradscope.check({COMPILED + ':avg_pool_ceil'!r}, "
            f"compile={backend!r}, shape={{'x': (1, 2, 6)}}); "
            "print(r.passed, [d.kind for d in r.diagnostics if d.kind.startswith('compiled')])")
    env = {**os.environ, "TORCHDYNAMO_DISABLE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().startswith("False") and "compiled_inconclusive" in out.stdout


def test_the_compile_field_is_in_the_json_report_only_with_compile():
    data = _check("smooth", shape={"x": (3,)}).to_dict()
    assert set(data["compile"]) >= {"backend", "graphs", "graph_breaks", "recompiles",
                                    "fell_back"}
    assert "compile" not in gradscope.check("x * 2").to_dict()


def test_the_jacobian_command_gets_a_compiled_column_of_the_whole_jacobian():
    report = gradscope.jacobian(f"{COMPILED}:smooth", shape={"x": (3,)}, compile="aot_eager")
    assert report.passed
    compiled, eager = (torch.tensor(report["x"].columns[k].values)
                       for k in ("compiled", "autograd"))
    assert compiled.shape == (3, 3) and torch.allclose(compiled, eager)


def test_an_already_compiled_target_is_called_the_plain_way_so_compiled_once():
    from torch._dynamo.utils import counters  # (torch's troubleshooting guide reads it)

    torch.compiler.reset()
    counters.clear()
    report = gradscope.check(f"{COMPILED}:precompiled", shape={"x": (6,)})
    assert report.passed
    assert any("already compiled (torch.compile)" in n for n in report.notes)
    assert counters["stats"]["unique_graphs"] == 1  # one mode: no recompiles
    assert gradscope.check(f"{COMPILED}:precompiled_block", shape={"x": (4, 3)}).passed


def test_an_already_compiled_inductor_block_passes_its_round_off_no_nondeterminism():
    report = gradscope.check(f"{COMPILED}:precompiled_inductor",
                             shape={"x": (8, 4), "w1": (4, 8), "w2": (8, 2)})
    assert report.passed, report.to_text()
    assert not [d for d in report.diagnostics if d.kind == "nondeterministic_backward"]


def test_code_that_calls_compiled_code_is_differenced_the_plain_way():
    # (compiled.py is one module object for the whole session, as a user's own imported file
    # is: other tests have compiled its functions in other modes and reset dynamo; fresh
    # caches make the first call here the one that compiles, as in a new process)
    torch.compiler.reset()
    report = gradscope.check(f"{COMPILED}:calls_compiled",
                             shape={"x": (4, 4), "w1": (4, 8), "w2": (8, 2)})
    assert report.passed, report.to_text()
    assert any("calls torch.compile'd code" in n for n in report.notes)
    assert not any("calls torch.compile'd code" in n
                   for n in gradscope.check(f"{COMPILED}:smooth", shape={"x": (3,)}).notes)


def test_a_function_over_a_global_module_is_compiled_its_parameters_compared():
    # (compiled itself, the module copies' parameters swapped in outside the compiled frame:
    # through a compiled holder module dynamo's guards read the user's original module)
    report = _check("block_loss", shape={"x": (4, 3)})
    assert report.passed, report.to_text()
    weight = report["BLOCK.lin.weight"]
    compiled, eager = (torch.tensor(weight.columns[k].values) for k in ("compiled", "autograd"))
    assert compiled.shape == (2, 3) and torch.allclose(compiled, eager)
