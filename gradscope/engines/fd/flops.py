"""Counting the floating-point operations of one evaluation (matmuls, convolutions, attention:
torch's own formulas, torch.utils.flop_counter's registry) without importing torch._dynamo.

torch's FlopCounterMode is a dispatch mode, and torch wraps the handler of every dispatch mode
class in dynamo's `disable`, whose first call imports torch._dynamo: 0.7–1 s, more than a small
model's whole check costs. The same count is made here by a mode whose handler is set after
the class is made (TorchDispatchMode wraps only what a class body defines), which is safe while
dynamo is not loaded: nothing can be compiled through a frame dynamo does not know. Where
dynamo is already loaded (a `--compile` check, a target that compiles), or where this count
fails (a higher-order op), torch's FlopCounterMode counts instead, as before."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry


class _Counter(TorchDispatchMode):
    """Adds torch's flop formula of every op dispatched to `total` (the handler below)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0


def _dispatch(self: _Counter, func: Any, types: Any, args: Any = (), kwargs: Any = None
              ) -> Any:
    kwargs = kwargs or {}
    # as FlopCounterMode does: an op that decomposes is counted by its parts
    with self:
        out = func.decompose(*args, **kwargs)
    if out is not NotImplemented:
        return out
    out = func(*args, **kwargs)
    formula = flop_registry.get(func._overloadpacket)
    if formula is not None:
        self.total += int(formula(*args, **kwargs, out_val=out))
    return out


# (assigned after the class body on purpose: see the module's docstring)
_Counter.__torch_dispatch__ = _dispatch  # type: ignore[method-assign]


def count(run: Callable[[], Any]) -> int:
    """The flops `run()` performs (its result dropped), counted as torch's FlopCounterMode
    counts them; dynamo is imported only where it already was."""
    if "torch._dynamo" not in sys.modules:
        counter = _Counter()
        try:
            with counter:
                run()
            if "torch._dynamo" not in sys.modules:  # (nothing compiled through this mode)
                return counter.total
        except Exception:  # an op this count cannot follow: torch's mode decides
            pass
    with FlopCounterMode(display=False) as torch_counter:
        run()
    return int(torch_counter.get_total_flops())
