"""--autocast DTYPE: autograd's evaluation of the target under `torch.autocast(device, DTYPE)`,
the way mixed-precision training runs it; finite differences and every other evaluation run
the target without autocast (a difference quotient through a bfloat16 forward is noise).

Autocast runs the ops on its lower-precision list (matmul, linear, convolutions) in DTYPE and
keeps the rest in float32; a Function decorated with `torch.amp.custom_fwd/custom_bwd` runs
its forward and backward in the autocast state it chose. The first autocast forward is watched
(a TorchFunctionMode: each torch function's result dtype) so the report can say which ops ran
in low precision, and so tolerances follow the lowest precision computed even where the output
itself is float32."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

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
        return (f"--autocast {self.name}: autograd's forward ran under torch.autocast("
                f"{self.device_type!r}, {self.name}) with float32 inputs; in {self.name}: "
                f"{low}{full}. Finite differences evaluate it without autocast, and tolerances "
                f"follow {self.name if self.low else 'float32'}")


class _Precisions(TorchFunctionMode):
    """Each torch function's floating result dtype, by the function's name."""

    def __init__(self, seen: Autocast) -> None:
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            name = getattr(func, "__name__", str(func))
            if out.dtype == self.seen.dtype:
                self.seen.low[name] = self.seen.low.get(name, 0) + 1
            elif out.dtype == torch.float32 and not name.startswith("__"):
                self.seen.full[name] = self.seen.full.get(name, 0) + 1
        return out
