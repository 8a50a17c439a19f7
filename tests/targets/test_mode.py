"""The run-mode protocol: which modes the options ask for, what they refuse to be combined
with, what needs a mode not asked (each said in one line that names the flags), and the options
a mode adjusts."""

from __future__ import annotations

import pytest

import gradscope
from gradscope.errors import UsageError
from gradscope.options import Options
from gradscope.targets import MODES
from gradscope.targets import mode as modes


def _names(on):
    return [m.option for m in on]


def test_the_options_ask_for_their_modes_in_registry_order():
    assert _names(modes.asked(MODES, Options())) == []
    assert _names(modes.asked(MODES, Options(plain=True, compile="eager"))) == ["plain",
                                                                               "compile"]
    assert _names(modes.asked(MODES, Options(nproc=2))) == ["nproc"]


@pytest.mark.parametrize("options, said", [
    ({"compile": "eager", "nproc": 2}, "--compile is not combined with --nproc"),
    ({"autocast": "bfloat16", "compile": "eager"}, "--compile is not combined with --autocast"),
    ({"autocast": "bfloat16", "nproc": 2}, "--autocast is not combined with --nproc"),
    ({"context": "loss_parallel"}, "--context is for distributed code: give --nproc N too"),
    ({"compile_fallback": True}, "--compile-fallback is for a torch.compile'd run: give "
                                 "--compile BACKEND too")])
def test_what_a_mode_refuses_is_said_in_one_line_naming_the_flags(options, said):
    with pytest.raises(UsageError) as info:
        modes.asked(MODES, Options(**options))
    assert said in str(info.value)


def test_each_mode_adjusts_the_options_it_runs():
    on = modes.asked(MODES, Options(autocast="bfloat16"))
    assert modes.adjusted(on, Options(autocast="bfloat16")).dtype == "float32"
    on = modes.asked(MODES, Options(nproc=2))
    assert modes.adjusted(on, Options(nproc=2)).plain  # the ranks: ordinary calls
    with pytest.raises(UsageError, match="--order 2"):
        modes.adjusted(modes.asked(MODES, Options(compile="eager", order=2)),
                       Options(compile="eager", order=2))


def test_a_mode_the_target_asks_for_itself_is_said_in_a_note():
    report = gradscope.check(f"{_compiled()}:precompiled", shape={"x": (3,)})
    assert report.passed
    assert any("already compiled" in n for n in report.notes)


def _compiled() -> str:
    from tests.paths import DATA

    return str(DATA / "compiled.py")
