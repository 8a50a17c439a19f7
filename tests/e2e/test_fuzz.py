"""The atheris harness's input function runs (without atheris) and catches evaluation."""

from __future__ import annotations

import importlib.util
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.paths import ROOT

SPEC = importlib.util.spec_from_file_location(
    "fuzz_parse", ROOT / "fuzz" / "fuzz_parse.py")
fuzz = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(fuzz)


@pytest.fixture(autouse=True)
def no_canary():
    if os.path.exists(fuzz.CANARY):
        os.remove(fuzz.CANARY)
    yield
    assert not os.path.exists(fuzz.CANARY)


@pytest.mark.parametrize("text", [
    f"open({fuzz.CANARY!r}, 'w')", f"__import__('builtins').open({fuzz.CANARY!r}, 'w')",
    "x.__class__.__bases__[0].__subclasses__()", "randn(2,3)", "[[1,2],[3,4]]", "\x00\xff",
    "sum(round(x) * w)", "9**9**9", "(" * 300,
])
def test_harness_inputs(text):
    fuzz.one_input(text.encode("utf-8", "surrogateescape"))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120))
def test_random_bytes(data):
    fuzz.one_input(data)


CONFIG_SPEC = importlib.util.spec_from_file_location(
    "fuzz_config", ROOT / "fuzz" / "fuzz_config.py")
fuzz_config = importlib.util.module_from_spec(CONFIG_SPEC)
CONFIG_SPEC.loader.exec_module(fuzz_config)

_CANARY_TARGET = f"__import__('builtins').open({fuzz_config.CANARY!r}, 'w')"


@pytest.mark.parametrize("text", [
    f'[[tool.gradscope.checks]]\ntarget = "{_CANARY_TARGET}"\n',
    '[[tool.gradscope.checks]]\ntarget = "x"\nat = {x = [1, nan]}\n',
    '[[tool.gradscope.checks]]\ntarget = "x"\ngrad = 1979-05-27T07:32:00Z\n',
    '[[tool.gradscope.checks]]\nname = "\\u001b[2J<b>]]>&"\ntarget = "x"\n',
    "[tool.gradscope]\ncheck = [[[]]]\n", "\x00\x1b[31m<script>", "]]>&lt;",
])
def test_config_harness_inputs(text):
    fuzz_config.one_input(text.encode("utf-8", "surrogateescape"))
    assert not os.path.exists(fuzz_config.CANARY)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(st.text(max_size=80))
def test_random_configs_and_names(text):
    fuzz_config.one_input(("[[tool.gradscope.checks]]\n" + text).encode("utf-8",
                                                                         "surrogatepass"))
