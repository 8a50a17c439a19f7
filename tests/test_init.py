"""The package root: `import gradscope` stays cheap (torch on first use), every public name
resolves, an unknown one says so."""

from __future__ import annotations

import pytest

import gradscope
from tests.paths import python_prints


def test_importing_the_package_imports_no_torch():
    out = python_prints("import sys, gradscope; print('torch' in sys.modules, 'sympy' in "
                        "sys.modules, gradscope.__version__)")
    assert out[:2] == ["False", "False"] and out[2] == gradscope.__version__


def test_every_public_name_resolves():
    for name in gradscope.__all__:
        assert getattr(gradscope, name) is not None, name
    assert gradscope.check is gradscope.api.check and gradscope.jvp is gradscope.vjp
    assert issubclass(gradscope.UsageError, gradscope.GradscopeError)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'chek'"):
        gradscope.chek  # noqa: B018
