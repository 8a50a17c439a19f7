"""Options: one default per option, read the same from the CLI, a config and the API, and
validated with the name the user typed."""

from __future__ import annotations

import dataclasses
import re

import pytest

from gradscope.errors import UsageError
from gradscope.options import (
    ANY_INPUT,
    DEFAULTS,
    SPECS,
    Options,
    Request,
    from_values,
    read,
)


def test_every_option_has_a_spec_with_help_and_a_flag():
    from gradscope.features import every_spec

    # (`owned`: the values of the options features own, each with its spec there)
    assert set(SPECS) == {f.name for f in dataclasses.fields(Options)} - {"owned"}
    # (`import` is Python's keyword: the field, config key and API keyword are `imports`)
    renamed = {"imports": "--import"}
    for name, spec in every_spec().items():
        assert spec.flag == renamed.get(name, "--" + name.replace("_", "-")), name
        assert len(spec.help) > 15 and spec.expects


def test_defaults_are_the_documented_ones():
    assert (DEFAULTS.dtype, DEFAULTS.seed, DEFAULTS.fail_on) == ("float64", 0, "mismatch")
    assert (DEFAULTS.max_elements, DEFAULTS.max_elements_total) == (10_000, 20_000_000)
    assert (DEFAULTS.max_fd, DEFAULTS.sample, DEFAULTS.eps) == (100_000, 1_000, None)


@pytest.mark.parametrize("raw", [["x=1,2", "y=3"], {"x": "1,2", "y": "3"}])
def test_assignments_read_the_same_from_cli_and_config(raw):
    assert read("at", raw) == {"x": "1,2", "y": "3"}


@pytest.mark.parametrize("raw, expected", [
    (["x=2,3", "4"], {"x": (2, 3), ANY_INPUT: (4,)}),  # CLI
    ("2,3", {ANY_INPUT: (2, 3)}),  # config text
    ([2, 3], {ANY_INPUT: (2, 3)}),  # config array
    ({"x": [2], "y": "3,1"}, {"x": (2,), "y": (3, 1)}),  # config table / API dict
    (5, {ANY_INPUT: (5,)}),  # API int
    ((), {ANY_INPUT: ()}),  # API scalar
])
def test_shapes_in_every_form(raw, expected):
    assert read("shape", raw) == expected


def test_tangent_without_a_name_is_for_the_only_input():
    assert read("tangent", ["1,2"]) == {ANY_INPUT: "1,2"}
    assert read("tangent", ["x=1,2", "y=3"]) == {"x": "1,2", "y": "3"}
    assert read("tangent", [1.0, 2.0]) == {ANY_INPUT: [1.0, 2.0]}


def test_literals_are_read_not_evaluated():
    assert read("arg", ["n=2", "name='a'"]) == {"n": 2, "name": "a"}
    with pytest.raises(UsageError, match="is not a Python literal"):
        read("arg", ["n=os.system"])


@pytest.mark.parametrize("values, message", [
    ({"dtype": "float8"}, "unknown --dtype 'float8'"),
    ({"fail_on": "sometimes"}, "unknown --fail-on"),
    ({"eps": 0.5}, r"--eps must be in \[1e-12, 0.1\]"),
    ({"eps": 1e-300}, "drown in round-off"),
    ({"atol": "0.1"}, "--atol must be a number, got '0.1'"),
    ({"seed": 1.5}, "--seed must be a whole number"),
    ({"full": 1}, "--full must be true or false"),
    ({"repeat": 10_000}, "--repeat must be 1 to 1000"),
    ({"atol": -1.0}, "--atol must be a finite number >= 0"),
    ({"sample": 0}, "--sample must be at least 1"),
    ({"order": 3}, "--order must be 1 to 2"),
    ({"rtoll": 1e-3}, "unknown option 'rtoll'"),
])
def test_validation_names_the_flag(values, message):
    with pytest.raises(UsageError, match=message):
        from_values(values)


def test_a_config_is_told_in_its_own_keys():
    with pytest.raises(UsageError, match="unknown `fail_on` 'always'"):
        from_values({"fail_on": "always"}, where=lambda key: key)


def test_request_refuses_unknown_commands_and_options_stay_with_it():
    with pytest.raises(UsageError, match="unknown command 'hessian'"):
        Request("hessian", "x")
    request = Request("jvp", "x*2", Options(seed=4))
    assert request.options.seed == 4 and request.options.updated(seed=5).seed == 5
    assert request.options.seed == 4


@pytest.mark.parametrize("raw, expected", [
    (None, ()), (False, ()), (True, (ANY_INPUT,)), ("x", ("x",)), ("x,w", ("x", "w")),
    (["x", "w,b", "x"], ("x", "w", "b")), ([ANY_INPUT], (ANY_INPUT,)),
    # an intended form is kept whole (its commas are the expression's), and replaces a name
    ("x=clamp(x, -1, 1)", ("x=clamp(x, -1, 1)",)), (["x", "x = hardtanh(x)"], ("x=hardtanh(x)",)),
    ({"x": "hardtanh(x)", "w": "w"}, ("x=hardtanh(x)", "w=w")),
])
def test_surrogate_reads_true_names_and_lists(raw, expected):
    assert read("surrogate", raw) == expected


def test_surrogate_names_and_intended_forms():
    from gradscope.options import SurrogateDeclaration

    declared = SurrogateDeclaration.of(read("surrogate", ["w", "x=hardtanh(x)"]))
    assert declared.names == ("w", "x") and declared.forms == {"x": "hardtanh(x)"}
    assert Options(surrogate=("y = y ** 2",)).surrogates == SurrogateDeclaration(
        ("y",), {"y": "y ** 2"})


@pytest.mark.parametrize("raw", [3, ["x", 2], "x-y", {"x": 1}, "x=", "=x", "2x=x"])
def test_surrogate_refuses_anything_else(raw):
    with pytest.raises(UsageError, match="--surrogate"):
        read("surrogate", raw)


def test_torch_spelled_dtypes_are_read():
    import torch

    assert from_values({"dtype": "torch.float32"}).validate().dtype == "float32"
    assert from_values({"dtype": torch.bfloat16}).validate().dtype == "bfloat16"
    with pytest.raises(UsageError, match="unknown --dtype 'float8'"):
        from_values({"dtype": "torch.float8"}).validate()


def test_every_flag_is_documented():
    # a feature's option is no option until a user can read about it: its flag in README.md
    # or docs/ (beside its help text, tested above)
    from tests.paths import ROOT

    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md")) \
        + (ROOT / "README.md").read_text()
    from gradscope.features import every_spec

    missing = [spec.flag for spec in every_spec().values()
               if not re.search(rf"{re.escape(spec.flag)}(?![\w-])", docs)]
    assert not missing, f"flags no document names: {', '.join(missing)}"
