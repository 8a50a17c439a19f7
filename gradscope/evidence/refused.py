"""The target refused the first call gradscope made with inputs it chose: which of the inputs
to give instead and how — the shapes where torch says shapes do not fit (given with --shape,
or gradscope's default), else the values."""

from __future__ import annotations

import re

from gradscope.errors import TargetError
from gradscope.evidence.prepare import Prepared
from gradscope.usercode import raised_by_user


def at_chosen(exc: TargetError, prepared: Prepared) -> TargetError:
    """The target refused its first call: where gradscope chose values, say so and how to
    give values it accepts (the default spread reaches past 0 and 1, say)."""
    chosen = prepared.bound.chosen
    if not chosen or exc.during != "forward":
        return exc
    cause = exc.__cause__
    if cause is not None and not raised_by_user(cause) and not re.search(_SHAPES, str(cause)):
        return exc  # torch refused the code itself (a custom op returning its input): other
    # values would change nothing (other shapes may: a layer's in_features)
    hint = _chosen_hint(str(cause if cause is not None else exc), chosen, prepared)
    return TargetError(f"{exc}\n{hint}", during=exc.during, error=exc.error, detail=exc.detail,
                       frames=exc.frames)


# what torch says when shapes do not fit (matmul, broadcasting, a layer's in_features, view)
_SHAPES = r"(?i)shape|size|dimension|\bdims?\b|cannot be multiplied|broadcast"


def _chosen_hint(message: str, chosen: list[str], prepared: Prepared) -> str:
    """What to change where the target refused gradscope's inputs: the shapes where torch
    says shapes do not fit (given with --shape, or gradscope's default), else the values."""
    given = prepared.options.shape
    values = prepared.bound.cast
    if re.search(_SHAPES, message):
        shown = ", ".join(f"{n} {tuple(values[n].shape)}" for n in chosen if n in values)
        if all(n in given for n in chosen):
            return (f"hint: the shapes given with --shape ({shown}) do not fit the target: "
                    f"give shapes it takes (--shape {chosen[0]}=…)")
        drawn = [n for n in chosen if n not in given]
        return (f"hint: the shapes of {', '.join(drawn)} were gradscope's default, not given "
                f"({shown}): give the shapes the target takes with --shape {drawn[0]}=… "
                f"or values with --at {drawn[0]}=…")
    return (f"hint: the values of {', '.join(chosen)} were chosen by gradscope, not given; "
            f"give values the target accepts: --at {chosen[0]}=… or --at "
            f"{chosen[0]}=\"uniform(0.1,0.9,N)\"")
