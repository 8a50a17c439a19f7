"""The typed errors: exit codes, the data they carry, a hint added without losing either, and
pickling (worker processes send them back)."""

from __future__ import annotations

import pickle

from gradscope.errors import (
    EvaluationError,
    GradscopeError,
    Stopped,
    TargetError,
    UnknownName,
    UsageError,
    mentions_shapes,
)


def test_exit_codes():
    assert UsageError("x").exit_code == 2 and TargetError("x").exit_code == 3
    assert isinstance(UsageError("x"), ValueError) and isinstance(TargetError("x"), RuntimeError)
    assert issubclass(Stopped, SystemExit) and not issubclass(Stopped, GradscopeError)


def test_errors_carry_their_data():
    unknown = UnknownName("--at", "z", ("x", "y"), " (it is given by --arg too)")
    assert (unknown.option, unknown.name, unknown.known) == ("--at", "z", ("x", "y"))
    assert str(unknown) == ("--at names `z`, which is not an input of the target (it is given "
                            "by --arg too); inputs are: x, y")
    assert "none (every parameter is given by --arg)" in str(UnknownName("--at", "z", ()))
    evaluation = EvaluationError("x @ y", "(3,), (4,)", "size mismatch")
    assert evaluation.about_shapes and evaluation.where == "x @ y"
    target = TargetError("msg", during="forward", error="RuntimeError",
                         detail="The size of tensor a (2) must match", frames=["  File …"])
    assert target.about_shapes and target.during == "forward" and target.frames == ("  File …",)
    assert not TargetError("msg", detail="division by zero").about_shapes


def test_a_hint_keeps_the_class_and_the_data():
    hinted = UnknownName("--at", "z", ("x",)).with_hint("hint: try x")
    assert isinstance(hinted, UnknownName) and hinted.known == ("x",)
    assert str(hinted).endswith("inputs are: x\nhint: try x")


def test_errors_survive_pickling():
    for error in (EvaluationError("a", "(1,)", "bad").with_hint("h"),
                  TargetError("m", during="backward", frames=["f"]), UsageError("plain")):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
        assert vars(again) == vars(error)


def test_words_about_shapes():
    assert mentions_shapes("mat1 and mat2 shapes cannot be multiplied")
    assert mentions_shapes("Expected input batch_size (3)") and not mentions_shapes("nan")
