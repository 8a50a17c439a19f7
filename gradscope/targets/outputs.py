"""Which output of Python code a check differentiates: the output itself, or the one the user
picks from a tuple, a dict or a model-output object (--output-index, --output-key)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.usercode import shown


def picked(out: Any, text: str, choice: int | str | None) -> torch.Tensor:
    """The one tensor output a check differentiates: the output itself, or the element of a
    tuple/list (--output-index) or the entry of a dict or attribute of a model-output object
    (--output-key) the user picked."""
    if isinstance(choice, int) and isinstance(out, tuple | list):
        if not -len(out) <= choice < len(out):
            raise UsageError(f"--output-index {choice}: {text} returned {len(out)} outputs")
        out = out[choice]
    elif isinstance(choice, str) and isinstance(out, Mapping) and choice in out:
        out = out[choice]
    elif isinstance(choice, str) and not isinstance(out, torch.Tensor | Mapping) \
            and hasattr(out, choice):
        out = getattr(out, choice)
    elif choice is not None and not isinstance(out, torch.Tensor):
        keys = list(out) if isinstance(out, Mapping) else None
        raise UsageError(f"{text} returned a {type(out).__name__}"
                         + (f" with keys {', '.join(map(shown, keys))}" if keys is not None else "")
                         + f"; --output-{'key' if isinstance(choice, str) else 'index'} "
                         f"{choice} picks none of them")
    if isinstance(out, tuple | list):
        raise UsageError(f"{text} returned a {type(out).__name__} of {len(out)}; pick the output "
                         "to check with --output-index N (0 for the first)")
    if isinstance(out, Mapping):
        raise UsageError(f"{text} returned a {type(out).__name__} with keys "
                         f"{', '.join(map(shown, out))}; pick one with --output-key KEY")
    if not isinstance(out, torch.Tensor):
        raise UsageError(f"{text} returned {type(out).__name__}, not a tensor"
                         + ("; pick a field with --output-key NAME" if hasattr(out, "__dict__")
                            else ""))
    return _comparable(out, text)


def _comparable(out: torch.Tensor, text: str) -> torch.Tensor:
    """A dense tensor with values: a sparse or meta output leaves nothing to compare element
    by element (one without elements is refused where every target's output is seen:
    runner.backward)."""
    if out.layout != torch.strided:
        raise UsageError(f"{text} returned a tensor of layout {out.layout}; gradscope compares "
                         "dense (strided) outputs: return .to_dense()")
    if out.device.type == "meta":
        raise UsageError(f"{text} returned a tensor on the meta device, which has no values to "
                         "compare; build it on cpu (or cuda)")
    return out
