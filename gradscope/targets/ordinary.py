"""--plain: the run mode that calls the user's code only the ordinary way — grad mode, its
inputs leaves that require grad, one evaluation at a time: no vmap batches, no stand-ins on
Function classes, no watched or no-grad forwards. Asked for by the user, by another mode that
needs it (the ranks' evaluations), or by the target itself (`Target.ordinary_only`: code that
is already torch.compile'd, which every other mode of calling would make dynamo compile
again). Slower; the verdict is the same, and the explanations that need a watched forward (the
gradient-flow trace) are left out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from gradscope.options import Options
from gradscope.targets.base import Target, TracedFn
from gradscope.targets.mode import Mode
from gradscope.targets.wrapper import Wrapper
from gradscope.tensors import plain_value

NOTE = ("--plain: every evaluation is an ordinary call of the target in grad mode, one at a "
        "time (no batching, stand-ins or watched forwards)")


class Ordinarily(Mode):
    option = "plain"

    def wanted_by(self, target: Target) -> str | None:
        return target.ordinary_only

    def wrap(self, target: Target, options: Options) -> Target:
        return Ordinary(target)


class Ordinary(Wrapper):
    """The target, every evaluation of it an ordinary call."""

    def for_values(self, output: torch.Tensor) -> tuple[TracedFn, list[str]]:
        forward = self.base.forward

        def traced(values: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, list[Any]]:
            return plain_value(forward, values), []

        return traced, ([NOTE] if self.base.runs_user_code and not self.base.ordinary_only
                        else [])

    @property
    def watchable(self) -> bool:
        return False  # (a watched forward is no ordinary call)

    def again(self, values: Mapping[str, torch.Tensor],
              forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor] | None = None
              ) -> torch.Tensor:
        return plain_value(forward or self.base.autograd_forward, values)

    @property
    def batchable(self) -> bool:
        return False


MODE = Ordinarily()
