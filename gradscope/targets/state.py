"""A module's own state between calls: what its forward keeps on itself beyond parameters and
buffers (a spiking neuron's membrane, a step counter, a cache). gradscope calls a module many
times — autograd once, finite differences at every perturbed point, often batched — and each
of those evaluations must start from the same state, or finite differences measure the state's
drift (and a batched evaluation would leave a batched tensor on the module). So the state is
saved before gradscope's first call and put back after every call: every evaluation starts from
the state the module had, and the user's module is left as it was found.

Only attributes are state here: parameters and buffers are what the check varies or what torch
itself manages (running statistics, handled by closures.batch_statistics_only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

# what every Module holds, and what torch.compile marks a module with (--compile compiles
# gradscope's copy): not state of its own
_MODULE = frozenset(vars(nn.Module())) | {"_is_torch_compile", "_compiled_call_impl"}


@dataclass
class _Kept:
    """One attribute as it was: the object, and for a tensor its contents and the version it
    has when it holds them (a forward may write into it in place; putting them back moves the
    version on, so it is kept anew)."""

    value: Any
    version: int = -1
    contents: torch.Tensor | None = None


@dataclass(frozen=True)
class State:
    """Every submodule's own attributes as they were, by module."""

    saved: tuple[tuple[str, nn.Module, dict[str, _Kept]], ...]  # (path, module, attributes)

    def restore(self) -> list[str]:
        """Put every attribute back (those a call added removed); the names of the modules'
        attributes that had changed ("blocks.0.mem")."""
        changed = []
        for path, module, kept in self.saved:
            own = vars(module)
            for name in [k for k in own if k not in _MODULE and k not in kept]:
                del own[name]
                changed.append(_joined(path, name))
            for name, was in kept.items():
                if _put_back(own, name, was):
                    changed.append(_joined(path, name))
        return changed


def state_of(module: nn.Module) -> State:
    """The state of `module` and its submodules now."""
    return State(tuple((path, m, {k: _kept(v) for k, v in vars(m).items() if k not in _MODULE})
                       for path, m in module.named_modules()))


def _kept(value: Any) -> _Kept:
    if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
        return _Kept(value, value._version, value.detach().clone())
    return _Kept(value)


def _put_back(own: dict[str, Any], name: str, was: _Kept) -> bool:
    """Whether the attribute had changed (it is as it was again)."""
    now = own.get(name, _MODULE)
    if now is was.value and (was.contents is None or was.value._version == was.version):
        return False
    own[name] = was.value
    if was.contents is not None and was.value._version != was.version:
        with torch.no_grad():
            was.value.copy_(was.contents)
        was.version = was.value._version
    return True


def _joined(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
