"""--autocast DTYPE: the run mode where autograd's evaluation of the target runs under
`torch.autocast(device, DTYPE)`, the way mixed-precision training runs it; finite differences
and every other evaluation run the target without autocast (a difference quotient through a
bfloat16 forward is noise): the wrapper's `autograd_forward` is under autocast, its `twin` the
target's own forward.

Autocast runs the ops on its lower-precision list (matmul, linear, convolutions) in DTYPE and
keeps the rest in float32; a Function decorated with `torch.amp.custom_fwd/custom_bwd` runs
its forward and backward in the autocast state it chose. The first autocast forward is watched
(a TorchFunctionMode: each torch function's result dtype) so the report can say which ops ran
in low precision. Tolerances are float32's (the inputs'), not the lowest precision anywhere in
the run: each element's bound is widened by what autocast measurably changed in autograd's
answer there — autograd against the twin's autograd, capped (evidence/roundoff.py) — so a
float32 backward behind one bfloat16 matmul is judged at float32's tolerance where its error
arises in float32, and a wrong backward (wrong in both runs) is never excused."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from gradscope.errors import UsageError
from gradscope.inputs.bind import device_of
from gradscope.options import Options
from gradscope.targets.base import Target, Twin
from gradscope.targets.mode import Mode
from gradscope.targets.wrapper import Wrapper
from gradscope.tensors import own_work

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
LISTED = 6  # ops named per precision in the note


class Autocast:
    """One check's autocast: the device type and dtype, and what its first forward ran in
    low precision (op name → calls) and in float32."""

    def __init__(self, device_type: str, dtype: str) -> None:
        self.device_type, self.name, self.dtype = device_type, dtype, DTYPES[dtype]
        self.low: dict[str, int] = {}
        self.full: dict[str, int] = {}
        self._watched = False

    def wrap(self, forward: Callable[[Mapping[str, torch.Tensor]], Any]
             ) -> Callable[[Mapping[str, torch.Tensor]], Any]:
        """`forward` under autocast (its first call watched)."""
        def run(values: Mapping[str, torch.Tensor]) -> Any:
            with torch.autocast(self.device_type, dtype=self.dtype):
                if self._watched:
                    return forward(values)
                self._watched = True
                with _Precisions(self):
                    return forward(values)

        return run

    @property
    def lowest(self) -> torch.dtype | None:
        """The autocast dtype where any op ran in it, else None."""
        return self.dtype if self.low else None

    def note(self) -> str:
        def listed(ops: dict[str, int]) -> str:
            names = [f"{n} ×{c}" if c > 1 else n for n, c in list(ops.items())[:LISTED]]
            return ", ".join(names) + (" …" if len(ops) > LISTED else "")

        low = listed(self.low) if self.low else "nothing (no op on autocast's list ran)"
        full = f"; in float32: {listed(self.full)}" if self.full else ""
        widened = (f", widened element by element by what {self.name} changed in autograd's "
                   "answer (measured against the same forward without autocast)"
                   if self.low else "")
        return (f"--autocast {self.name}: autograd's forward ran under torch.autocast("
                f"{self.device_type!r}, {self.name}) with float32 inputs; in {self.name}: "
                f"{low}{full}. Finite differences evaluate it without autocast, and tolerances "
                f"are float32's{widened}")


class Autocasting(Mode):
    option = "autocast"
    excludes = ("nproc", "compile")
    alone = "check the mixed-precision forward's first-order gradients on its own"
    first_order = "the mixed-precision forward's, as training takes them"
    fits = False

    def adjusted(self, options: Options) -> Options:
        """float32 inputs (float64 is not autocast-eligible)."""
        if options.dtype not in ("float64", "float32"):
            raise UsageError(f"--autocast runs float32 inputs (autocast lowers them itself); "
                             f"leave out --dtype {options.dtype}")
        return options.updated(dtype="float32")

    def wrap(self, target: Target, options: Options) -> Target:
        return Autocasted(target, Autocast(device_of(options.device).type,
                                           options.autocast or ""))


class Autocasted(Wrapper):
    """The target whose autograd evaluation runs under autocast; its `twin`, the target's own
    forward, is what the references evaluate and what autocast's change is measured against."""

    def __init__(self, base: Target, autocast: Autocast) -> None:
        super().__init__(base)
        object.__setattr__(self, "autocast", autocast)

    @property
    def autograd_forward(self) -> Callable[[Mapping[str, torch.Tensor]], torch.Tensor]:
        return self.autocast.wrap(self.base.autograd_forward)

    @property
    def twin(self) -> Twin:
        return Twin(self.base.forward, lambda: self.autocast.lowest)

    def again(self, values: Mapping[str, torch.Tensor],
              forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor] | None = None
              ) -> torch.Tensor:
        return self.base.again(values, forward or self.autograd_forward)

    def observed(self) -> list[str]:
        return [*self.base.observed(), self.autocast.note()]


MODE = Autocasting()


class _Precisions(TorchFunctionMode):
    """Each torch function's floating result dtype, by the function's name."""

    def __init__(self, seen: Autocast) -> None:
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.is_floating_point() and not own_work():
            name = getattr(func, "__name__", str(func))
            if out.dtype == self.seen.dtype:
                self.seen.low[name] = self.seen.low.get(name, 0) + 1
            elif out.dtype == torch.float32 and not name.startswith("__"):
                self.seen.full[name] = self.seen.full.get(name, 0) + 1
        return out
