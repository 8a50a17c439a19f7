"""A target seen through a run mode: every capability is the wrapped target's, except those the
mode overrides. Run modes (targets/mode.py) — compiled, autocast, ordinary calls only, order
2 — are such wrappers, so that the stages ask the target what to call and never which mode
runs: a mode changes how the user's code is called by overriding a capability
(`autograd_forward`, `twin`, `for_values`, `alongside`, …), and nothing outside `targets/`
learns of it.

Delegation is generated from `Target` itself: a capability added to the interface is
forwarded by every wrapper without a line here. The data a target carries (its inputs,
parameters, notes) is the wrapped target's own, read and written through the wrapper."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gradscope.targets.base import Target

# what a target carries as data (set in Target.__init__): shared with the wrapped target
_DATA = ("text", "kind", "given", "parameters", "constants", "stated", "notes", "branch_sites")


class Wrapper(Target):
    """`base` as a run mode calls it. Subclasses override what the mode changes."""

    def __init__(self, base: Target) -> None:
        # (no Target.__init__: every attribute is the wrapped target's)
        object.__setattr__(self, "base", base)

    def ready(self) -> None:
        self.base.ready()
        object.__setattr__(self, "_ready", True)

    def __getattr__(self, name: str) -> Any:
        # (what a kind of target carries beyond the interface: a module, a Function's class)
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)


def _forwarded(name: str) -> Callable[..., Any]:
    def call(self: Wrapper, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.base, name)(*args, **kwargs)

    call.__name__ = name
    return call


def _read(name: str) -> property:
    def get(self: Wrapper) -> Any:
        return getattr(self.base, name)

    def put(self: Wrapper, value: Any) -> None:
        setattr(self.base, name, value)

    return property(get, put)


for _name, _member in list(vars(Target).items()):
    if _name.startswith("_") or _name in vars(Wrapper):
        continue
    setattr(Wrapper, _name, _forwarded(_name) if callable(_member)
            and not isinstance(_member, property) else _read(_name))
for _name in _DATA:
    setattr(Wrapper, _name, _read(_name))
