"""The fourth attack's findings, reproduced with the real command line: nothing compared is
never a pass, user code cannot choose gradscope's exit status, a target cannot keep
gradscope from stopping."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.command import run
from tests.paths import ROOT

DATA = ROOT / "tests" / "data"


def _cli(*args: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": ""}
    return subprocess.run([sys.executable, "-m", "gradscope", *args], cwd=cwd, env=env,
                          text=True, capture_output=True, timeout=timeout)


# ---------------------------------------------------------------- nothing compared (high 1)
def test_a_wrong_gradient_padded_with_inf_fails_on_the_compared_elements(capsys):
    code, out, _ = run(capsys, "check", f"{DATA}/padded_inf.py:padded_wrong",
                       "--shape", "x=100", "--json")
    report = json.loads(out)
    assert code == 1 and not report["passed"]
    statuses = report["inputs"][0]["element_status"]
    assert statuses.count("mismatch") == 100  # compared where defined, not `undefined`
    assert report["upstream_undefined"] == 3


def test_a_right_gradient_padded_with_inf_passes_where_defined(capsys):
    code, out, _ = run(capsys, "check", f"{DATA}/padded_inf.py:padded_right", "--shape", "x=10")
    assert code == 0 and "ones where the output is defined, 0 at its 3 NaN or" in out


@pytest.mark.parametrize("args", [
    ["ldexp(x, 100000)"],
    ["x * 1e308 * 1e308"],
    ["torch.masked.mean(x, mask=m)", "--shape", "x=5", "--const", "m=0,0,0,0,0"],
    ["F.cross_entropy(x, t, ignore_index=0)", "--shape", "x=3,4", "--const", "t=0,0,0"],
    ["F.scaled_dot_product_attention(q, k, v, scale=inf)", "--shape", "q=2,3",
     "--shape", "k=2,3", "--shape", "v=2,3"],
])
def test_an_output_undefined_everywhere_is_never_a_pass(capsys, args):
    code, out, _ = run(capsys, "check", *args)
    assert code == 1 and "PASSED" not in out and "nothing was compared" in out


def test_elements_that_only_move_undefined_outputs_are_undefined(capsys):
    code, out, _ = run(capsys, "check", "log(x - 3)", "--json")
    statuses = json.loads(out)["inputs"][0]["element_status"]
    assert code == 0 and statuses.count("undefined") == 18 and statuses.count("ok") == 7


# --------------------------------------------------------- the exit status (high 2, M5)
@pytest.mark.parametrize("command, target, expected", [
    ("check", "wrong", 1), ("jvp", "wrong", 1), ("jacobian", "wrong", 1),
    ("graph", "raises", 3), ("check", "raises", 3),
])
@pytest.mark.slow
def test_a_replaced_sys_exit_cannot_make_a_failure_exit_0(tmp_path, command, target, expected):
    result = _cli(command, f"{DATA}/replaces_exit.py:{target}", "--shape", "x=3", cwd=tmp_path)
    assert result.returncode == expected, result.stderr


@pytest.mark.slow
def test_a_target_that_ignores_sigterm_still_stops(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": ""}
    proc = subprocess.Popen([sys.executable, "-m", "gradscope", "check",
                             f"{DATA}/ignores_sigterm.py:slow", "--shape", "x=3"],
                            cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    time.sleep(5)  # imported, and inside the target's call
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and time.monotonic() - sent < 2.0, err
    assert "stopped by SIGTERM" in err


# ------------------------------------------------- work bounded by what an expression makes
@pytest.mark.parametrize("args, says", [
    (["masked_select(x, m).repeat(10000000)", "--shape", "x=3", "--const", "m=1,1,1"],
     "would make 30,000,000 elements"),
    (["combinations(x, r=3)", "--shape", "x=400"], "would make 31,760,400 elements"),
    (["tensor_split(x, 100000000)[0]", "--shape", "x=3"], "from -4096 to 4096"),
    (["chunk(x, 100000)[0]", "--shape", "x=3"], "from -4096 to 4096"),
    (["round(x, decimals=100000000)"], "from -400 to 400"),
    (["round(x, decimals=2147483648)"], "from -400 to 400"),
    (["F.one_hot(t).sum() * x", "--const", "t=0,100000000", "--shape", "x=3"],
     "give num_classes"),
    (["group_norm(x, 0)", "--shape", "x=2,4"], "integer division or modulo by zero"),
])
def test_what_an_expression_would_make_is_refused_before_it_is_made(capsys, args, says):
    code, _, err = run(capsys, "check", *args)
    assert code == 2 and says in err and "internal error" not in err


def test_a_data_dependent_op_is_bounded_not_refused(capsys):
    code, out, _ = run(capsys, "check", "F.one_hot(t) * x", "--const", "t=0,1,2",
                       "--shape", "x=3,3")
    assert code == 0 and "PASSED" in out
    code, out, _ = run(capsys, "check", "masked_select(x, m)", "--shape", "x=3",
                       "--const", "m=1,0,1")
    assert code == 0 and "PASSED" in out


def test_a_long_decomposition_sets_the_symbolic_engine_aside(capsys):
    code, out, _ = run(capsys, "check", "torch.linalg.vander(x, N=1000000)", "--shape", "x=1")
    assert code == 0 and "more than 2000 operations" in " ".join(out.split())


# --------------------------------------------------------------- grad mode and hooks (M2, M3)
@pytest.mark.parametrize("command", ["check", "jvp", "graph"])
def test_a_target_that_leaves_grad_mode_off_is_its_error_not_ours(capsys, command):
    code, _, err = run(capsys, command, f"{DATA}/grad_mode.py:leaves_off", "--shape", "x=3")
    assert code == 3 and "switched grad mode off" in err and "internal" not in err


@pytest.mark.parametrize("command", ["check", "jvp", "jacobian", "graph"])
def test_a_hook_registered_in_the_forward_runs(capsys, command):
    code, _, err = run(capsys, command, f"{DATA}/grad_mode.py:hooked_always", "--shape", "x=3")
    assert code == 0, err


@pytest.mark.parametrize("args", [
    ["torch.masked.norm(x, -inf, mask=m)", "--at", "x=1,2,3", "--const", "m=1,1,0"],
    ["torch.masked.norm(x, -inf, mask=m)", "--at", "x=3,2,1", "--const", "m=0,1,1"],
    ["torch.masked.norm(x, -2.0, mask=m)", "--at", "x=1,2,3", "--const", "m=1,1,0"],
    ["torch.masked.normalize(x, 2.0, 0, mask=m)", "--at", "x=1,2,3", "--const", "m=1,1,0"],
])
def test_masked_norms_fill_as_torch_does(capsys, args):
    code, out, _ = run(capsys, "check", *args)
    assert code == 0 and "mismatch" not in out.split("PASSED")[-1]


@pytest.mark.parametrize("args", [
    ["torch.linalg.eigh(x).eigenvalues", "--at", "x=[[1,0],[0,1]]"],
    ["torch.linalg.eigh(x)[0]", "--at", "x=[[1,0,0],[0,1,0],[0,0,2]]"],
    ["torch.linalg.lstsq(a, b).solution", "--at", "a=[[1,1],[1,1],[1,1]]",
     "--at", "b=[[1],[2],[3]]"],
    ["pinv(x)", "--at", "x=[[1,1],[1,1]]"],
])
def test_ties_and_rank_changes_are_kinks_not_mismatches(capsys, args):
    code, out, _ = run(capsys, "check", *args)
    assert code == 0 and "nondifferentiable" in out.split("PASSED")[-1]
    assert "mismatch" not in out.split("PASSED")[-1]


# ------------------------------------------------------------ odd user objects (third attack)
def test_a_key_whose_str_raises_is_shown_by_its_type(capsys):
    code, _, err = run(capsys, "check", f"{DATA}/odd_objects.py:dict_out", "--shape", "x=3")
    assert code == 2 and "<Key object>" in err


def test_a_module_whose_getattr_raises_is_checked(capsys):
    code, out, _ = run(capsys, "check", f"{DATA}/odd_objects.py:Weird", "--shape", "x=3")
    assert code == 0 and "PASSED" in out


def test_an_error_raised_in_the_users_frames_is_the_users():
    from gradscope.errors import TargetError
    from gradscope.usercode import contained
    from tests.data.odd_objects import K

    with pytest.raises(TargetError, match="the target's own code raised"), contained():
        str(K)  # gradscope reading a user's object whose __str__ raises
    from gradscope import escape

    # an error of gradscope's own frames (or the standard library's) keeps its meaning
    with pytest.raises(TypeError), contained():
        escape.fence(None)


@pytest.mark.slow
def test_a_step_summary_that_is_a_folder_changes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "summary").mkdir()
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary"))
    config = tmp_path / "gradscope.toml"
    config.write_text('[tool.gradscope]\n[[tool.gradscope.checks]]\nname = "sq"\n'
                      'target = "x**2"\n')
    code, _, err = run(capsys, "run", str(config))
    assert code == 0 and "the step summary was not written" in err


# ------------------------------------------------------------------------------ low ones
@pytest.mark.parametrize("args", [
    ["linalg.eigh(x).eigenvalues", "--at", "x=[[2,1],[1,3]]"],
    ["special.entr(x)", "--at", "x=0.5,2"],
])
def test_module_paths_without_torch_are_functions(capsys, args):
    code, out, _ = run(capsys, "check", *args)
    assert code == 0 and "PASSED" in out


def test_a_float_mask_is_named_as_the_user_wrote_it(capsys):
    code, _, err = run(capsys, "check", "torch.masked.sum(x, mask=x)", "--shape", "x=3")
    assert code == 2 and "`mask` is a mask" in err


def test_the_config_schema_goes_to_output(tmp_path, capsys):
    code, out, _ = run(capsys, "run", "--config-schema", "--output", str(tmp_path / "s.json"))
    assert code == 0 and out == ""
    assert json.loads((tmp_path / "s.json").read_text())["$schema"].startswith("http")


def test_a_memory_limit_no_system_can_set_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "gradscope.toml"
    config.write_text('[tool.gradscope]\nmemory_limit = 99999999999999999999\n'
                      '[[tool.gradscope.checks]]\nname = "a"\ntarget = "x*2"\n')
    code, _, err = run(capsys, "run", str(config))
    assert code == 2 and "from 1024 to" in err and "worker" not in err


@pytest.mark.parametrize("kw, error", [
    ({"check_backward_ad": False}, AssertionError), ({"atol": float("nan")}, RuntimeError),
    ({"rtol": float("nan")}, RuntimeError), ({"atol": -1.0}, RuntimeError),
])
def test_the_drop_in_refuses_what_torch_refuses(kw, error):
    import torch

    from gradscope.testing.gradcheck import gradcheck

    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(error):
        torch.autograd.gradcheck(torch.sin, (x,), **kw)
    with pytest.raises(error):
        gradcheck(torch.sin, (x,), **kw)


def test_a_projection_undefined_along_its_direction_is_not_a_mismatch():
    # (vander(x) at 600 chosen values: powers overflow along every direction tried; the
    # sampled elements judge, and a projection NaN along its direction compared nothing)
    import math

    from gradscope.features.projections import Projection, _projection
    from gradscope.report.status import Status

    check = _projection(Projection(("x",), 0, math.nan, 1e-9, elements=600), surrogate=False)
    assert check.passed and check.result == Status.UNDEFINED and "undefined" in check.label
    wrong = _projection(Projection(("x",), 1, 2.0, 1e-9, elements=600), surrogate=False)
    assert not wrong.passed and wrong.result == Status.MISMATCH


def test_a_zero_dimensional_transpose_is_itself(capsys):
    code, out, _ = run(capsys, "check", "x.sum(0).T", "--at", "x=1.0")
    assert code == 0 and "PASSED" in out


def test_torch_refusing_the_code_itself_is_not_blamed_on_the_chosen_values(capsys):
    code, _, err = run(capsys, "check", f"{DATA}/custom_op_alias.py:f", "--shape", "x=3")
    assert code == 3 and "must not also be an input" in err and "chosen by gradscope" not in err
    code, _, err = run(capsys, "check", f"{DATA}/custom_op_alias.py:g", "--shape", "x=3")
    assert code == 3 and "chosen by gradscope" in err


def test_cholesky_ex_of_a_matrix_that_is_not_positive_definite_is_undefined(capsys):
    code, out, _ = run(capsys, "check", "torch.linalg.cholesky_ex(x).L",
                       "--at", "x=[[1,2],[2,1]]", "--json")
    report = json.loads(out)
    statuses = [s for row in report["inputs"][0]["element_status"] for s in row]
    assert code == 1 and set(statuses) == {"undefined"}


def test_torch_warnings_are_one_note_not_gradscopes_source_line(capsys):
    _, _, err = run(capsys, "check", "F.mse_loss(x, y)", "--shape", "x=2,1",
                    "--shape", "y=1,3")
    assert err.count("gradscope: note: torch warned: UserWarning: Using a target size") == 1
    assert "gradscope/expr" not in err
