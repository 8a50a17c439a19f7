"""The fifth attack's modern surfaces, the cheap cases kept as tests (benchmarks/attack.py runs
all 206 with its promises): custom ops that raise, alias, mutate undeclared or depend on the
call; --compile where the code senses it or refuses it, a backend that fails; --autocast where
float16 overflows or the output is no float. Never exit 4, never a pass of a wrong gradient."""

from __future__ import annotations

import pytest

from tests.command import run
from tests.paths import DATA

OPS = f"{DATA}/attack_ops.py"
COMPILED = f"{DATA}/attack_compiled.py"
AUTOCAST = f"{DATA}/attack_autocast.py"


@pytest.mark.parametrize("name, codes", [
    ("uses_ok", {0}), ("uses_raises", {3}), ("uses_backward_raises", {3}), ("uses_alias", {3}),
    ("uses_mutates", {1, 3}), ("uses_nan_backward", {1}), ("uses_stateful", {1}),
    ("uses_view", {0, 1, 2, 3}), ("uses_pair", {0, 1, 2, 3}), ("uses_listed", {0, 1, 2, 3})])
def test_custom_ops_that_misbehave_never_pass_wrong_and_never_crash(capsys, name, codes):
    code, _, err = run(capsys, "check", f"{OPS}:{name}", "--shape", "x=4")
    assert code in codes, err[-800:]


@pytest.mark.parametrize("name, code", [("smooth", 0), ("senses", 1), ("refuses", 1)])
def test_compiled_code_that_senses_or_refuses_compilation(capsys, name, code):
    # (code that raises while dynamo traces it is run eagerly by dynamo: nothing compiled,
    # compared nothing — inconclusive, exit 1)
    got, out, err = run(capsys, "check", f"{COMPILED}:{name}", "--shape", "x=4", "--compile",
                        "eager")
    assert got == code, err[-800:]
    if name == "refuses":
        assert "compiled inconclusive" in out


def test_a_failing_backend_is_the_targets_error_with_its_markup_shown_as_text(capsys):
    code, out, err = run(capsys, "check", f"{COMPILED}:smooth", "--shape", "x=4", "--compile",
                         "attack_t_failing")
    assert code == 3 and "\x1b" not in out + err and "[red]" in err


@pytest.mark.parametrize("name, codes", [("overflows", {0, 1}), ("ints", {2}),
                                         ("matmul", {0})])
def test_autocast_overflow_and_integer_outputs(capsys, name, codes):
    code, _, err = run(capsys, "check", f"{AUTOCAST}:{name}", "--shape", "x=3,4",
                       "--autocast", "float16")
    assert code in codes, err[-800:]
