"""Loading a Python target: file.py:NAME (its folder first on sys.path) or package.module:NAME,
what is missing said with what there is, import errors kept the user's."""

from __future__ import annotations

import sys

import pytest

import gradscope
from gradscope.errors import TargetError, UsageError
from gradscope.targets import resolve
from gradscope.targets.loading import is_python_target
from tests.paths import SEEDS


@pytest.mark.parametrize("text, yes", [("a.py:F", True), ("pkg.mod:F", True), ("mod:f", True),
                                       ("3*a + b", False), ("a.py:", False), (":F", False)])
def test_python_target_syntax(text, yes):
    assert is_python_target(text) is yes


def test_missing_name_lists_candidates():
    with pytest.raises(UsageError) as info:
        resolve(f"{SEEDS}:Nope")
    for name in ("AbsProd", "Clamp01", "KillHead", "MyLayer", "RoundSTE", "soft_threshold"):
        assert name in str(info.value)


def test_missing_file_and_module():
    with pytest.raises(UsageError, match="no such file"):
        resolve("no/such/file.py:F")
    with pytest.raises(UsageError, match="no module named"):
        resolve("no_such_pkg_xyz.mod:F")


def test_import_error_is_target_error_with_user_frames(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import torch\n\ndef helper():\n    raise ValueError('boom in user code')\n\n"
                    "helper()\n")
    with pytest.raises(TargetError) as info:
        resolve(f"{path}:f")
    message = str(info.value)
    assert "broken.py" in message and "ValueError: boom in user code" in message
    assert "gradscope/" not in message and "importlib" not in message


def test_package_module_target(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text("def square(x):\n    return x * x\n")
    monkeypatch.chdir(tmp_path)
    report = gradscope.vjp("mypkg.ops:square", x="1,2")
    assert report.inputs[0].autograd == [2.0, 4.0] and report.target_kind == "function"
    sys.modules.pop("mypkg.ops", None)
    sys.modules.pop("mypkg", None)


def test_a_file_the_process_imported_is_that_module_and_its_ops_stay_alive(tmp_path):
    # running the file again would register its custom ops a second time, which destroys the
    # first registration: the user's own `custom_ops.scaled` would then crash the process
    import torch

    from gradscope.targets.loading import load
    from tests.data import custom_ops
    from tests.paths import DATA

    assert load(f"{DATA}/custom_ops.py:scaled")[0] is custom_ops.scaled
    assert gradscope.check(f"{DATA}/custom_ops.py:sine").passed
    assert custom_ops.scaled(torch.ones(2), 2.0).tolist() == [2.0, 2.0]
    # a file nobody imported is run afresh each time (it may have changed in between)
    (tmp_path / "fresh.py").write_text("def f(x):\n    return x * 2\n")
    first = load(f"{tmp_path}/fresh.py:f")[0]
    assert load(f"{tmp_path}/fresh.py:f")[0] is not first
