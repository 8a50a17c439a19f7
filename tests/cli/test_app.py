"""The typer application: commands, their help and version, options generated from the specs, flags
that stand alone."""

from __future__ import annotations

import json

import pytest

from tests.command import SEED_ARGS, run
from tests.paths import ROOT


def test_version_and_help(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == "gradscope 0.1.0"
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "Exit codes" in out


def test_vjp_is_jvp(capsys):
    _, a, _ = run(capsys, *SEED_ARGS, "--json")
    _, b, _ = run(capsys, "vjp", *SEED_ARGS[1:], "--json")
    ja, jb = json.loads(a), json.loads(b)
    ja.pop("timings"), jb.pop("timings")
    assert ja == jb


def test_surrogate_flag_alone_or_with_names(capsys):
    from gradscope.cli.main import with_bare_values

    assert with_bare_values(["check", "T", "--surrogate"]) == ["check", "T", "--surrogate=*"]
    assert with_bare_values(["check", "T", "--surrogate", "--seed", "1"]) == [
        "check", "T", "--surrogate=*", "--seed", "1"]
    assert with_bare_values(["check", "T", "--surrogate", "x,w"]) == [
        "check", "T", "--surrogate", "x,w"]
    assert with_bare_values(["check", "--", "--surrogate"]) == ["check", "--", "--surrogate"]
    assert with_bare_values(["check", "T", "--surrogate", "x=clamp(x, -1, 1)"]) == [
        "check", "T", "--surrogate", "x=clamp(x, -1, 1)"]
    assert with_bare_values(["check", "T", "--eval"]) == ["check", "T", "--mode=eval"]
    assert with_bare_values(["check", "T", "--train"]) == ["check", "T", "--mode=train"]
    target = f"{ROOT}/tests/data/corpus.py:grad_reverse"
    code, out, _ = run(capsys, "check", target)
    assert code == 1 and "−0.5 × the derivative" in out.replace("\n", " ")
    code, out, _ = run(capsys, "check", target, "--surrogate")
    assert code == 0 and "surrogate" in out
    code, out, _ = run(capsys, "check", target, "--surrogate", "x", "--json")
    assert code == 0 and json.loads(out)["inputs"][0]["status"] == "surrogate"
    code, _, err = run(capsys, "check", target, "--surrogate", "y")
    assert code == 2 and "--surrogate names `y`" in err and "inputs are: x" in err


def test_surrogate_with_its_intended_form(capsys):
    # gradient reversal is −0.5·g by design: its intended form says so, and only that passes
    target = f"{ROOT}/tests/data/corpus.py:grad_reverse"
    code, out, _ = run(capsys, "check", target, "--surrogate", "x=-0.5*x")
    assert code == 0 and "x against its intended surrogate (--surrogate x=-0.5*x)" in out
    code, out, _ = run(capsys, "check", target, "--surrogate", "x=-x")
    assert code == 1 and "against its intended surrogate" in out
    code, _, err = run(capsys, "check", target, "--surrogate", "x=-y")
    assert code == 2 and "uses `y`, which is not an input of the target" in err
    code, _, err = run(capsys, "check", target, "--surrogate", "x=sum(x)")
    assert code == 2 and "must have the target's output shape" in err
    code, _, err = run(capsys, "check", target, "--surrogate", "x=__import__('os')")
    assert code == 2 and err.count("\n") == 1


def test_no_private_typer_api():
    source = (ROOT / "gradscope" / "cli" / "main.py").read_text()
    assert "typer._click" not in source and "import click" not in source


def test_torch_spelled_dtype_is_read(capsys):
    from gradscope.cli.main import with_bare_values

    assert with_bare_values(["check", "T", "--dtype", "torch.float32"]) == [
        "check", "T", "--dtype", "float32"]
    assert with_bare_values(["check", "T", "--dtype=torch.float16"]) == [
        "check", "T", "--dtype=float16"]
    code, out, _ = run(capsys, "check", "x * 2", "--at", "x=1,2", "--dtype", "torch.float32",
                       "--json")
    assert code == 0 and json.loads(out)["dtype"] == "float32"


def _sections(text: str) -> dict[str, str]:
    """--help's sections by heading (a line ending in ':' at the left margin)."""
    out: dict[str, list[str]] = {}
    heading = ""
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            heading = line[:-1]
            out[heading] = []
        elif heading:
            out[heading].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


@pytest.mark.parametrize("command", ["check", "jvp", "jacobian"])
def test_help_groups_the_options_by_concern(capsys, command):
    from gradscope.cli.app import PANELS
    from gradscope.options import SPECS

    code, out, _ = run(capsys, command, "--help")
    sections = _sections(out)
    assert code == 0 and list(sections)[:1] == ["Arguments"]
    modes = sections["Run modes"]
    assert all(flag in modes for flag in ("--compile ", "--autocast", "--nproc"))
    assert "--rtol" in sections["Tolerances and verdict"] and "--rtol" not in modes
    assert "--format" in sections["Output"] and "--at " in sections["Inputs"]
    # every option of the command is in a panel; only --help is left in "Options"
    assert set(sections["Options"].split()) <= {"--help", "-h,", "Show", "this", "message",
                                                 "and", "exit."}
    assert {n for n in SPECS if command in SPECS[n].commands} <= {
        n for names in PANELS.values() for n in names}


def test_jvp_says_it_is_reverse_mode(capsys):
    _, out, _ = run(capsys, "jvp", "--help")
    assert "Same as vjp, despite its name: reverse mode unless --tangent" in out
    assert "torch.func.jvp" in out
