"""The culprit for an input whose gradient is one Function's answer alone: named where the
target's comparison finds that input wrong, never where it agrees."""

from __future__ import annotations

from gradscope.explain.relations import Relation
from gradscope.features.inplace.culprits import ClassCheck
from gradscope.features.inplace.sole import culprits


class Implicit:
    pass


CHECK = ClassCheck(Implicit, 1, 4, (), unread=("params",), sole=(("params", "fn.a"),))


def test_an_input_that_is_one_functions_answer_alone_names_it_where_it_is_wrong():
    flipped = Relation("factor", "autograd = −1 × the derivative", "", 1, -1.0)
    (found,) = culprits([CHECK], {"fn.a": 1}, {"fn.a": flipped})
    assert found.kind == "culprit" and found.inputs == ["fn.a"] and found.factor == -1.0
    assert "Implicit.backward is wrong for its argument params" in found.message
    assert culprits([CHECK], {"theta": 2}, {}) == []  # (another input wrong: not its alone)
    assert culprits([CHECK], {}, {}) == []
