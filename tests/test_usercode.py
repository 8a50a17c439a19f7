"""The sandbox around user code: its errors with the user's frames only, a known hint where
there is one, leaving through sys.exit a failure — and gradscope's own stop left alone."""

from __future__ import annotations

import sys

import pytest

from gradscope.errors import Stopped, TargetError, UsageError
from gradscope.usercode import LEFT_HINT, contained, known_hint, user_code, user_error


def _users_code():
    raise ValueError("bad value\nsecond line")


def test_a_users_error_shows_their_frames_and_the_first_line_only():
    with pytest.raises(TargetError) as info, user_code("forward"):
        _users_code()
    error = info.value
    assert error.during == "forward" and error.error == "ValueError"
    assert error.detail == "bad value\nsecond line"
    assert str(error).startswith("the target's own code raised during forward:")
    assert str(error).endswith("ValueError: bad value")  # the first line of the message
    assert any("_users_code" in f for f in error.frames)  # tests/ is the user's here
    assert "gradscope/usercode.py" not in str(error)


def test_leaving_through_sys_exit_is_a_failure_never_an_exit():
    for guard in (user_code("forward"), contained()):
        with pytest.raises(TargetError) as info, guard:
            sys.exit(0)
        assert LEFT_HINT in str(info.value)


def test_our_own_errors_and_stop_pass_through():
    for error in (UsageError("ours"), Stopped(143)):
        with pytest.raises(type(error)), user_code("forward"):
            raise error
    with pytest.raises(Stopped), contained():
        raise Stopped(143)


def test_known_hints():
    assert "super().__init__()" in known_hint(AttributeError(
        "'M' object has no attribute '_parameters'"))
    assert "clone it" in known_hint(RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace"
        " operation"))
    assert known_hint(RuntimeError("anything else")) is None
    assert "hint: mine" in str(user_error(RuntimeError("x"), "backward", "mine"))


# ------------------------------------------------------------------ notebook cells
class _Compiler:
    def __init__(self, cells):
        self.cells = cells

    def format_code_name(self, name):  # IPython's CachingCompiler, as its tracebacks use it
        number = self.cells.get(name)
        return None if number is None else ("Cell", f"In[{number}]")


class _IPython:
    def __init__(self, cells):
        self.shell = type("Shell", (), {"compile": _Compiler(cells)})()

    def get_ipython(self):
        return self.shell


def test_code_in_a_notebook_cell_is_named_as_ipython_names_it(monkeypatch, tmp_path):
    import sys

    from gradscope.usercode import backward_location, place

    cell = tmp_path / "1459987837.py"  # the kernel's file for a cell's code
    cell.write_text("import torch\n\nclass F(torch.autograd.Function):\n    @staticmethod\n"
                    "    def forward(ctx, x):\n        return x\n\n    @staticmethod\n"
                    "    def backward(ctx, g):\n        return g\n")
    namespace: dict = {}
    exec(compile(cell.read_text(), str(cell), "exec"), namespace)
    assert backward_location(namespace["F"]) == "1459987837.py:9"
    monkeypatch.setitem(sys.modules, "IPython", _IPython({str(cell): 5}))
    assert backward_location(namespace["F"]) == "Cell In[5], line 9"
    assert place("/somewhere/else.py", 3) == "else.py:3"  # a file of its own stays a file
    monkeypatch.setitem(sys.modules, "IPython", object())  # an IPython of another shape
    assert place(str(cell), 9) == "1459987837.py:9"


def test_code_that_needs_a_process_group_is_pointed_at_nproc():
    from gradscope.usercode import known_hint

    error = ValueError("Default process group has not been initialized, please make sure to "
                       "call init_process_group.")
    assert "--nproc N" in known_hint(error)


def test_a_functions_backward_that_raises_is_named_with_its_class():
    # torch's traceback says `in backward`; which Function's backward raised is the question
    import gradscope

    report_error = None
    try:
        gradscope.check("tests/data/backwards.py:RaisesInBackward", x="1,2")
    except TargetError as exc:
        report_error = exc
    assert report_error is not None and report_error.during == "backward"
    assert any("in RaisesInBackward.backward" in f for f in report_error.frames), \
        report_error.frames
